//! The comparison report of `cargo xtask compare`: per client, what
//! nfsdtop measured on each kernel (read from that run's own batch JSON,
//! its last line for the counts, every line for the waits), fio's own
//! IOPS and latency, the difference, and what `nfsdtop whatif` predicted
//! from the first kernel's recording; as text, JSON and an SVG plot.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::net::IpAddr;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::vm::batch;
use crate::vm::clients::{self, Client};

/// One kernel's run.
#[derive(Clone, Debug, Serialize)]
pub struct KernelRun {
    pub label: String,
    pub kernel: String,
    pub results: String,
    /// Every check against ftrace passed.
    pub checked: bool,
    pub failures: Vec<String>,
    pub dispatches: u64,
}

/// A client's numbers on one kernel.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Numbers {
    pub dispatches: u64,
    /// Of all dispatches of the run.
    pub share: f64,
    /// Entitled dispatches over all dispatches.
    pub fair_share: f64,
    /// Dispatches over entitled dispatches.
    pub ratio: Option<f64>,
    /// The per-second p50s, weighted by each second's dispatches.
    pub wait_p50_us: f64,
    /// The highest per-second p99.
    pub wait_p99_us: f64,
    pub requests_per_s: Option<f64>,
    pub fio_iops: Option<f64>,
    pub fio_lat_p50_us: Option<f64>,
    pub fio_lat_p99_us: Option<f64>,
}

/// What whatif predicted for a client under one policy.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Prediction {
    pub policy: String,
    pub share: f64,
    pub ratio: Option<f64>,
    pub wait_p50_us: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ClientRow {
    pub name: String,
    pub ip: IpAddr,
    pub nfs: String,
    pub nconnect: u32,
    /// On the first and the second kernel (None: the client has no
    /// dispatch there).
    pub on: [Option<Numbers>; 2],
    /// Second minus first: share in points, ratio, fio IOPS in percent.
    pub share_points: Option<f64>,
    pub ratio_change: Option<f64>,
    pub iops_percent: Option<f64>,
    pub predicted_from_first: Vec<Prediction>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub load: String,
    pub kernels: [KernelRun; 2],
    pub clients: Vec<ClientRow>,
}

fn fio(results: &Path, name: &str) -> (Option<f64>, Option<f64>, Option<f64>, Option<f64>) {
    let text =
        fs::read_to_string(results.join(format!("fio-main-{name}.json"))).unwrap_or_default();
    let Ok(v) = serde_json::from_str::<Value>(&text) else {
        return (None, None, None, None);
    };
    let job = &v["jobs"][0];
    let iops = ["read", "write"]
        .iter()
        .filter_map(|d| job[d]["iops"].as_f64())
        .sum::<f64>();
    let busy = if job["read"]["iops"].as_f64().unwrap_or(0.0) > 0.0 {
        "read"
    } else {
        "write"
    };
    let pct = |p: &str| {
        job[busy]["clat_ns"]["percentile"][p]
            .as_f64()
            .map(|ns| ns / 1e3)
    };
    let runtime_s = job["job_runtime"].as_f64().map(|ms| ms / 1e3);
    (Some(iops), pct("50.000000"), pct("99.000000"), runtime_s)
}

/// A client's numbers from one run's results directory.
pub fn numbers(results: &Path, client: &Client) -> Result<Option<Numbers>, String> {
    let lines = batch::read(&results.join("nfsdtop-main.jsonl"))?;
    let Some(last) = lines.last() else {
        return Err(format!("{}: no nfsdtop line", results.display()));
    };
    let of = |l: &batch::Line| {
        l.entities
            .iter()
            .find(|e| e.name.parse::<IpAddr>().ok() == Some(client.ip))
            .cloned()
    };
    let Some(e) = of(last) else {
        return Ok(None);
    };
    let total = last.totals.dispatches.max(1) as f64;
    let (mut weighted, mut weight, mut p99) = (0.0, 0.0, 0.0f64);
    for l in &lines {
        if let Some(x) = of(l).filter(|x| x.dispatch_rate > 0.0) {
            weighted += x.wait_p50_us * x.dispatch_rate;
            weight += x.dispatch_rate;
            p99 = p99.max(x.wait_p99_us);
        }
    }
    let (iops, lat50, lat99, runtime) = fio(results, &client.name);
    Ok(Some(Numbers {
        dispatches: e.dispatches,
        share: e.dispatches as f64 / total,
        fair_share: e.entitled / total,
        ratio: (e.entitled > 0.0).then(|| e.dispatches as f64 / e.entitled),
        wait_p50_us: if weight > 0.0 { weighted / weight } else { 0.0 },
        wait_p99_us: p99,
        requests_per_s: (e.has("requests").then_some(e.requests))
            .zip(runtime)
            .map(|(r, s)| r as f64 / s.max(1e-9)),
        fio_iops: iops,
        fio_lat_p50_us: lat50,
        fio_lat_p99_us: lat99,
    }))
}

/// whatif's predictions per client (by address) from a run's whatif.json.
fn predictions(results: &Path) -> BTreeMap<String, Vec<Prediction>> {
    let text = fs::read_to_string(results.join("whatif.json")).unwrap_or_default();
    let Ok(v) = serde_json::from_str::<Value>(&text) else {
        return BTreeMap::new();
    };
    let rows = v["peers"].as_array().cloned().unwrap_or_default();
    rows.iter()
        .filter_map(|r| {
            let name = r["name"].as_str()?.to_string();
            let p = r["predicted"]
                .as_array()?
                .iter()
                .filter_map(|p| {
                    Some(Prediction {
                        policy: p["policy"].as_str()?.to_string(),
                        share: p["share"].as_f64()?,
                        ratio: p["fairness"].as_f64(),
                        wait_p50_us: p["wait_p50_us"].as_f64().unwrap_or(0.0),
                    })
                })
                .collect();
            Some((name, p))
        })
        .collect()
}

pub fn build(load: &str, runs: [KernelRun; 2]) -> Result<Comparison, String> {
    let dirs = [Path::new(&runs[0].results), Path::new(&runs[1].results)];
    let summaries: Vec<_> = dirs
        .iter()
        .map(|d| crate::guest::read_kv(&d.join("summary.txt")).map_err(|e| format!("{e:#}")))
        .collect::<Result<_, _>>()?;
    let ran = clients::from_summary(&summaries[0]);
    let predicted = predictions(dirs[0]);
    let mut rows = vec![];
    for c in ran {
        let on = [numbers(dirs[0], &c)?, numbers(dirs[1], &c)?];
        let both = on[0].as_ref().zip(on[1].as_ref());
        rows.push(ClientRow {
            share_points: both.map(|(a, b)| (b.share - a.share) * 100.0),
            ratio_change: both.and_then(|(a, b)| Some(b.ratio? - a.ratio?)),
            iops_percent: both
                .and_then(|(a, b)| Some((b.fio_iops? / a.fio_iops?.max(1e-9) - 1.0) * 100.0)),
            predicted_from_first: predicted
                .get(&c.ip.to_string())
                .cloned()
                .unwrap_or_default(),
            name: c.name,
            ip: c.ip,
            nfs: c.vers,
            nconnect: c.nconnect,
            on,
        });
    }
    Ok(Comparison {
        load: load.to_string(),
        kernels: runs,
        clients: rows,
    })
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("–".into(), |x| format!("{x:.prec$}"))
}

pub fn text(c: &Comparison) -> String {
    let mut s = String::new();
    let [a, b] = &c.kernels;
    let _ = writeln!(s, "nfsdtop compare: {}", c.load);
    for (tag, k) in [("A", a), ("B", b)] {
        let _ = writeln!(
            s,
            "  {tag}: {} (kernel {}), {} dispatches, checks against ftrace: {}",
            k.label,
            k.kernel,
            k.dispatches,
            if k.checked {
                "passed".to_string()
            } else {
                format!("FAILED ({})", k.failures.len())
            }
        );
    }
    let _ = writeln!(
        s,
        "\n{:<4} {:<16} {:>4} {:>3} | {:>6} {:>6} {:>5} {:>8} {:>7} {:>7} | {:>6} {:>6} {:>5} {:>8} {:>7} {:>7} | {:>6} {:>6} {:>6} | whatif from A",
        "", "client", "nfs", "nc", "A shr%", "fair%", "ratio", "p50 us", "req/s", "fioIOPS",
        "B shr%", "fair%", "ratio", "p50 us", "req/s", "fioIOPS", "Δshr", "Δratio", "ΔIOPS%"
    );
    for r in &c.clients {
        let side = |n: &Option<Numbers>| match n {
            None => format!(
                "{:>6} {:>6} {:>5} {:>8} {:>7} {:>7}",
                "–", "–", "–", "–", "–", "–"
            ),
            Some(n) => format!(
                "{:>6.1} {:>6.1} {:>5} {:>8.0} {:>7} {:>7}",
                n.share * 100.0,
                n.fair_share * 100.0,
                opt(n.ratio, 2),
                n.wait_p50_us,
                opt(n.requests_per_s, 0),
                opt(n.fio_iops, 0)
            ),
        };
        let pred = r
            .predicted_from_first
            .iter()
            .map(|p| {
                format!(
                    "{} {:.1}% ratio {}",
                    p.policy,
                    p.share * 100.0,
                    opt(p.ratio, 2)
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let _ = writeln!(
            s,
            "{:<4} {:<16} {:>4} {:>3} | {} | {} | {:>6} {:>6} {:>6} | {}",
            r.name,
            r.ip.to_string(),
            r.nfs,
            r.nconnect,
            side(&r.on[0]),
            side(&r.on[1]),
            opt(r.share_points, 1),
            opt(r.ratio_change, 2),
            opt(r.iops_percent, 1),
            if pred.is_empty() { "–".into() } else { pred }
        );
    }
    s.push_str(
        "\nshr%: the client's share of all dispatches over the run; fair%: its fair share \
         (entitled dispatches); ratio: dispatches over entitled dispatches; p50 us: its \
         queue wait, the per-second p50s weighted by dispatches; req/s: its requests over \
         fio's run time; fioIOPS: fio's own. Δ: B less A. whatif from A: what nfsdtop whatif \
         predicted from A's recording under each policy.\n",
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A results directory as a run leaves it: nfsdtop's own batch lines
    /// (testdata/nfsdtop-main.jsonl, three seconds of `nfsdtop -b
    /// --format json --demo seed-k4`), the guest's summary, fio's JSON
    /// and whatif's report.
    fn results(dir: &Path) {
        fs::create_dir_all(dir).unwrap();
        fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("src/compare/testdata/nfsdtop-main.jsonl"),
            dir.join("nfsdtop-main.jsonl"),
        )
        .unwrap();
        fs::write(
            dir.join("summary.txt"),
            "kernel=9.9\nclient.c1=10.0.0.3 nconnect=4 vers=3 fio=randread/4k/16\nclient.c2=10.0.0.9 nconnect=1 vers=3 fio=randread/4k/16\n",
        )
        .unwrap();
        fs::write(
            dir.join("fio-main-c1.json"),
            r#"{"jobs":[{"job_runtime":8000,"read":{"iops":1234.5,"clat_ns":{"percentile":{"50.000000":100000,"99.000000":900000}}},"write":{"iops":0}}]}"#,
        )
        .unwrap();
        fs::write(
            dir.join("whatif.json"),
            r#"{"peers":[{"name":"10.0.0.3","predicted":[{"policy":"rr-peer","share":0.5,"fairness":1.0,"wait_p50_us":7.0}]}]}"#,
        )
        .unwrap();
    }

    #[test]
    fn the_report_holds_each_runs_own_numbers() {
        let base = std::env::temp_dir().join(format!("nfsdtop-compare-{}", std::process::id()));
        let (a, b) = (base.join("a"), base.join("b"));
        results(&a);
        results(&b);
        let run = |d: &Path| KernelRun {
            label: "k".into(),
            kernel: "9.9".into(),
            results: d.display().to_string(),
            checked: true,
            failures: vec![],
            dispatches: 4800,
        };
        let c = build("load.toml", [run(&a), run(&b)]).unwrap();
        let text = text(&c);
        let svg = super::super::plot::svg(&c);
        fs::remove_dir_all(&base).unwrap();
        assert_eq!(c.clients.len(), 2);
        // By hand from the fixture's lines for 10.0.0.3: cumulative 3193
        // dispatches and 2396 entitled of 4800 in the last; per-second
        // p50s 5, 5, 6 at 1060, 1066, 1067 dispatches a second.
        let n = c.clients[0].on[0].clone().unwrap();
        assert_eq!(n.dispatches, 3193);
        assert!((n.share - 3193.0 / 4800.0).abs() < 1e-12);
        assert!((n.fair_share - 2396.0 / 4800.0).abs() < 1e-12);
        assert!((n.ratio.unwrap() - 3193.0 / 2396.0).abs() < 1e-12);
        let p50 = (5.0 * 1060.0 + 5.0 * 1066.0 + 6.0 * 1067.0) / (1060.0 + 1066.0 + 1067.0);
        assert!((n.wait_p50_us - p50).abs() < 1e-9, "{}", n.wait_p50_us);
        assert_eq!(n.wait_p99_us, 9215.5);
        assert_eq!(n.requests_per_s, Some(3182.0 / 8.0));
        assert_eq!(
            (n.fio_iops, n.fio_lat_p50_us, n.fio_lat_p99_us),
            (Some(1234.5), Some(100.0), Some(900.0))
        );
        assert_eq!(c.clients[0].share_points, Some(0.0));
        assert_eq!(c.clients[0].predicted_from_first[0].policy, "rr-peer");
        // A client with no dispatch on a kernel is shown as such.
        assert!(c.clients[1].on[0].is_none() && c.clients[1].share_points.is_none());
        assert!(
            text.contains("10.0.0.3") && text.contains("rr-peer 50.0% ratio 1.00"),
            "{text}"
        );
        assert!(svg.starts_with("<svg") && svg.contains("c1 nc=4"), "{svg}");
    }
}
