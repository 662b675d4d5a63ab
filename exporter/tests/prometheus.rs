//! End to end with a real Prometheus: two `nfsdtopd --demo seed-k16`
//! daemons (policies flat and rr-peer) scraped every second, then PromQL
//! through Prometheus's HTTP API must agree with the agents' own JSON.
//!
//! Timing: the demos run 4x faster than real time (`--speed 4`) with a
//! snapshot every 0.25 s (one simulated second), and rates use a 15 s
//! window (60 simulated seconds). Tolerance for rate vs the agent's
//! dispatch_rate: 5%, made of (a) counters moving in steps of one snapshot
//! (0.25 s of a ~14 s sample span: <= 1.8%), (b) the agent's rate being
//! measured over one simulated second, where a class's ~178 (or ~1422)
//! dispatches quantise by one request (<= 0.6%), averaged over 5
//! snapshots, and (c) Prometheus's extrapolation at the window edges with
//! scrape jitter (~1-2%). The demo is deterministic (no service jitter),
//! so the true rates are steady: 1600/s in all, 2/18 of it to 10.0.0.2
//! under flat (fairness 0.111/0.5 = 0.222) and 1/2 under rr-peer (1.0).

mod common;

use std::time::{Duration, Instant};

use common::prometheus::{wait_until, Prometheus};
use common::Daemon;

const SPEED: f64 = 4.0;

/// The agent's per-class dispatch_rate, averaged over 5 distinct snapshots.
fn agent_rates(d: &Daemon) -> Vec<(String, f64)> {
    let mut sums: Vec<(String, f64)> = Vec::new();
    let mut last_time = 0.0;
    let mut n = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while n < 5 {
        let s = d.snapshot("?group=class");
        let t = s["time"].as_f64().unwrap();
        if t != last_time {
            last_time = t;
            n += 1;
            for c in s["classes"].as_array().unwrap() {
                let name = c["name"].as_str().unwrap().to_string();
                let r = c["dispatch_rate"].as_f64().unwrap();
                match sums.iter_mut().find(|(k, _)| *k == name) {
                    Some((_, v)) => *v += r,
                    None => sums.push((name, r)),
                }
            }
        }
        assert!(Instant::now() < deadline, "agent snapshots stalled");
        std::thread::sleep(Duration::from_millis(50));
    }
    sums.into_iter().map(|(k, v)| (k, v / 5.0)).collect()
}

#[test]
fn prometheus_scrapes_agree_with_the_agent_and_show_fairness() {
    let t0 = Instant::now();
    let args = |policy: &'static str| {
        vec![
            "--demo",
            "seed-k16",
            "--policy",
            policy,
            "--listen",
            "127.0.0.1:0",
            "--speed",
            "4",
            "--interval",
            "0.25",
        ]
    };
    let flat = Daemon::start(&args("flat"));
    let rr = Daemon::start(&args("rr-peer"));

    let prom = Prometheus::start_scraping(
        &[
            "  - job_name: nfsdtopd".into(),
            "    scrape_interval: 1s".into(),
            "    scrape_timeout: 900ms".into(),
            "    static_configs:".into(),
            format!("      - targets: ['{}']", flat.addr),
            "        labels: {policy: flat}".into(),
            format!("      - targets: ['{}']", rr.addr),
            "        labels: {policy: rr-peer}".into(),
        ],
        &[],
    );
    // Both targets up, and samples covering more than the 15 s rate
    // window: a series younger than its window makes rate() extrapolate
    // only half a scrape interval at the start, i.e. read low.
    let deadline = Instant::now() + Duration::from_secs(45);
    wait_until("18 s of scrapes from both agents", deadline, || {
        let up = prom.query("up == 1");
        let n = prom.query("count_over_time(nfsdtop_dispatches_total[18s])");
        (up.len() == 2 && n.len() == 2 && n.iter().all(|(_, v)| *v >= 17.0)).then_some(())
    });

    // 1. Prometheus's rate per class = the agents' own dispatch_rate.
    let prom_rates = prom.query("rate(nfsdtop_class_dispatches_total{class!=\"other\"}[15s])");
    assert_eq!(prom_rates.len(), 4, "2 classes x 2 agents: {prom_rates:?}");
    for (policy, d) in [("flat", &flat), ("rr-peer", &rr)] {
        let agent = agent_rates(d);
        assert_eq!(agent.len(), 2, "{agent:?}");
        for (class, want) in agent {
            let got = prom_rates
                .iter()
                .find(|(m, _)| m["policy"] == policy && m["class"] == class.as_str())
                .map(|(_, v)| v / SPEED)
                .unwrap_or_else(|| panic!("no Prometheus rate for {policy}/{class}"));
            let err = (got - want).abs() / want;
            eprintln!(
                "{policy}/{class}: Prometheus {got:.1}/s, agent {want:.1}/s ({:.2}% apart)",
                err * 100.0
            );
            assert!(
                err <= 0.05,
                "{policy}/{class}: Prometheus rate/speed {got:.1}/s vs agent {want:.1}/s ({:.1}% off)",
                err * 100.0
            );
        }
    }
    // The totals add up too: 16 threads x 100 requests/s.
    let total = prom.query("sum by (policy) (rate(nfsdtop_dispatches_total[15s]))");
    for (m, v) in &total {
        let per_sim_s = v / SPEED;
        assert!(
            (per_sim_s - 1600.0).abs() / 1600.0 < 0.05,
            "{m}: {per_sim_s}"
        );
    }

    // Requests executed, by class and by peer: each dispatch of the demo
    // is one request, so the same 1600/s in both families.
    for family in [
        "nfsdtop_class_requests_total",
        "nfsdtop_peer_requests_total",
    ] {
        let requests = prom.query(&format!("sum by (policy) (rate({family}[15s]))"));
        assert_eq!(requests.len(), 2, "{family}: {requests:?}");
        for (m, v) in &requests {
            let per_sim_s = v / SPEED;
            assert!(
                (per_sim_s - 1600.0).abs() / 1600.0 < 0.05,
                "{family} {m}: {per_sim_s} requests/s, want 1600"
            );
        }
    }

    // Bytes: the demo's default sizes (200 B a request received, 4296 B
    // a reply sent) times the same 1600 requests/s.
    for (family, size) in [
        ("nfsdtop_peer_received_bytes_total", 200.0),
        ("nfsdtop_peer_sent_bytes_total", 4296.0),
        ("nfsdtop_class_sent_bytes_total", 4296.0),
    ] {
        let bytes = prom.query(&format!("sum by (policy) (rate({family}[15s]))"));
        assert_eq!(bytes.len(), 2, "{family}: {bytes:?}");
        for (m, v) in &bytes {
            let per_sim_s = v / SPEED;
            let want = 1600.0 * size;
            assert!(
                (per_sim_s - want).abs() / want < 0.05,
                "{family} {m}: {per_sim_s} B/s, want {want}"
            );
        }
    }

    // 2. The fairness ratio in PromQL.
    let fairness = prom.query(
        "rate(nfsdtop_class_dispatches_total{class=\"10.0.0.2\"}[15s]) \
         / rate(nfsdtop_class_entitled_dispatches_total{class=\"10.0.0.2\"}[15s])",
    );
    let ratio = |policy: &str| {
        fairness
            .iter()
            .find(|(m, _)| m["policy"] == policy)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("no fairness for {policy}: {fairness:?}"))
    };
    let (f_flat, f_rr) = (ratio("flat"), ratio("rr-peer"));
    assert!(
        (0.19..=0.26).contains(&f_flat),
        "flat: 10.0.0.2 should get ~0.22 of its fair share, got {f_flat:.3}"
    );
    assert!(
        (0.95..=1.05).contains(&f_rr),
        "rr-peer: 10.0.0.2 should get its fair share, got {f_rr:.3}"
    );

    // 3. The histogram and the fold metrics made it through OpenMetrics.
    let p99 = prom.query(
        "histogram_quantile(0.99, rate(nfsdtop_class_queue_wait_seconds_bucket{policy=\"flat\",class!=\"other\"}[15s]))",
    );
    assert_eq!(p99.len(), 2, "{p99:?}");
    for (m, v) in &p99 {
        // 16 threads, 10 ms per request, every transport backlogged: waits
        // are tens of milliseconds (simulated), within the 4.2 s range.
        assert!(*v > 0.001 && *v < 4.2, "{m}: p99 {v}");
    }
    assert_eq!(prom.query("nfsdtop_peers_folded").len(), 2);
    assert_eq!(prom.query("nfsdtop_peer_folds_total").len(), 2);
    assert_eq!(
        prom.query("nfsdtop_unfair_entities").len(),
        4,
        "peer and class, two daemons"
    );
    assert_eq!(prom.query("nfsdtop_build_info").len(), 2);
    eprintln!(
        "flat fairness {f_flat:.3}, rr-peer fairness {f_rr:.3}; test took {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}
