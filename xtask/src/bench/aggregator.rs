//! Part C: the aggregator's throughput (agent/benches/aggregate.rs), the
//! agent's work per ring record (agent/benches/decode.rs, with callgrind's
//! instruction counts), the ring's delivery rate on this host
//! (agent/benches/ring.rs), and the aggregator set against both rings.

use std::path::Path;
use std::process::Command;

use anyhow::ensure;

use super::text::{self, fill};
use super::util::{agent_bench, bench_exe, first_num, fmt_rate, md_table, table_rows};
use super::Results;

pub fn part(quick: bool, res: &mut Results) -> anyhow::Result<String> {
    let text = agent_bench("aggregate", "aggregator bench", quick)?;
    let rows = table_rows(&text);
    ensure!(rows.len() >= 2, "aggregate bench printed no table:\n{text}");
    let mut s = fill(text::AGGREGATOR, "intro", &[])?;
    s.push_str(&md_table(&rows));
    s.push_str(&part_decode(quick)?);
    res.host_ring = part_ring(quick)?;
    for r in rows.iter().skip(1) {
        // Columns: peers, transports, depth at enqueue, events, rate...
        let rate = r.get(4).and_then(|c| first_num(c)).unwrap_or(0.0) * 1e6;
        ensure!(rate > 0.0, "aggregator rate not parsed from {r:?}");
        let depth = if r[2] == "yes" {
            ", depth at enqueue"
        } else {
            ""
        };
        res.agg_rates
            .push((format!("{} peers, {} transports{depth}", r[0], r[1]), rate));
    }
    Ok(s)
}

/// The agent's work per ring record (decode and aggregate) from
/// agent/benches/decode.rs: time on this host, and instructions counted by
/// callgrind where valgrind is installed (the benchmark guest's clock
/// counts instructions, so those are what the agent costs there).
fn part_decode(quick: bool) -> anyhow::Result<String> {
    let text = agent_bench("decode", "decode bench", quick)?;
    let rows = table_rows(&text);
    ensure!(rows.len() >= 3, "decode bench printed no table:\n{text}");
    let mut s = fill(text::AGGREGATOR, "decode", &[])?;
    let exe = Command::new("valgrind")
        .arg("--version")
        .output()
        .ok()
        .and_then(|_| bench_exe("nfsdtop-agent", "decode"));
    for r in rows.iter().skip(1) {
        let case = r[0].split(':').next().unwrap_or("").trim().to_string();
        let instr = match (&exe, quick) {
            (Some(exe), false) => {
                callgrind_per_record(exe, &case).map_or("–".into(), |i| format!("{i:.0}"))
            }
            (None, false) => "valgrind not installed".into(),
            (_, true) => "(not in quick mode)".into(),
        };
        s.push_str(&format!("| {} | {} | {instr} |\n", r[0], r[1]));
    }
    Ok(s)
}

/// Instructions per record for one case: two callgrind runs of different
/// lengths, so the set-up cancels out; each run's records are the count
/// its table row prints.
fn callgrind_per_record(exe: &Path, case: &str) -> Option<f64> {
    let count = |passes: u32| -> Option<(f64, f64)> {
        let out = Command::new("valgrind")
            .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
            .arg(exe)
            .env("DECODE_ONLY", case)
            .env("DECODE_PASSES", passes.to_string())
            .output()
            .ok()?;
        let err = String::from_utf8_lossy(&out.stderr);
        let refs = err.lines().find(|l| l.contains("refs:"))?;
        let instructions = refs
            .rsplit(':')
            .next()?
            .trim()
            .replace(',', "")
            .parse()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let records = table_rows(&text).iter().skip(1).find_map(|r| {
            r[0].strip_prefix(case)?
                .strip_prefix(':')?
                .trim()
                .parse()
                .ok()
        })?;
        Some((instructions, records))
    };
    let ((ia, ra), (ib, rb)) = (count(10)?, count(60)?);
    Some((ib - ia) / (rb - ra))
}

/// The ring's delivery rate on this host: nfsdtop's program on
/// sys_enter_fcntl driven by busy threads, and the whole agent at steady
/// rates (agent/benches/ring.rs).
fn part_ring(quick: bool) -> anyhow::Result<Option<(f64, f64, String)>> {
    let all = agent_bench("ring", "ring delivery bench", quick)?;
    // Two tables: the saturation cases, then the whole agent at steady rates.
    let (text, steady) = match all.find("| records/s (paced)") {
        Some(i) => (&all[..i], Some(all[i..].trim().to_string())),
        None => (all.as_str(), None),
    };
    let rows = table_rows(text);
    if rows.len() < 2 {
        ensure!(
            std::env::var(crate::REQUIRE_BPF).as_deref() != Ok("1"),
            "ring bench skipped where {} demands BPF: {}",
            crate::REQUIRE_BPF,
            text.trim()
        );
        eprintln!("bench: ring bench skipped: {}", text.trim());
        return Ok(None);
    }
    let mut table = md_table(&rows);
    let mut best = (0.0f64, 0.0f64);
    for r in rows.iter().skip(1) {
        let delivered = r.get(5).and_then(|c| first_num(c)).unwrap_or(0.0) * 1e6;
        let lost = r.get(6).and_then(|c| first_num(c)).unwrap_or(0.0) * 1e6;
        if delivered > best.0 {
            best = (delivered, lost);
        }
    }
    ensure!(best.0 > 0.0, "ring bench: no delivery rate parsed:\n{text}");
    if let Some(st) = steady {
        table.push_str(&fill(text::AGGREGATOR, "steady", &[("table", &st)])?);
    }
    Ok(Some((best.0, best.1, table)))
}

/// The aggregator against its target and against both rings' rates.
pub fn ring_vs_aggregator(res: &Results) -> anyhow::Result<String> {
    let min_agg = res
        .agg_rates
        .iter()
        .map(|(_, r)| *r)
        .fold(f64::INFINITY, f64::min);
    let max_agg = res.agg_rates.iter().map(|(_, r)| *r).fold(0.0, f64::max);
    let slowest = res
        .agg_rates
        .iter()
        .find(|(_, r)| *r == min_agg)
        .map_or("", |(n, _)| n.as_str());
    let mut s = fill(
        text::AGGREGATOR,
        "target",
        &[
            ("min", &fmt_rate(min_agg)),
            ("max", &fmt_rate(max_agg)),
            ("met", &if min_agg >= 10e6 { "met" } else { "NOT met" }),
            ("slowest", &slowest),
        ],
    )?;
    if let Some((delivered, lost, table)) = &res.host_ring {
        let verdict = fill(
            text::AGGREGATOR,
            if *lost == 0.0 { "no-loss" } else { "loss" },
            &[],
        )?;
        let met = if min_agg / delivered >= 5.0 {
            "met in every case"
        } else if max_agg / delivered >= 5.0 {
            "met except for the cache-hostile case"
        } else {
            "NOT met"
        };
        s.push_str(&fill(
            text::AGGREGATOR,
            "host-ring",
            &[
                ("table", table),
                ("delivered", &fmt_rate(*delivered)),
                ("lost", &fmt_rate(*lost)),
                ("lost_verdict", &verdict.trim_end()),
                ("slow_x", &format!("{:.1}", min_agg / delivered)),
                ("fast_x", &format!("{:.1}", max_agg / delivered)),
                ("met", &met),
            ],
        )?);
    }
    match res.ring_rate {
        Some(ring) => s.push_str(&fill(
            text::AGGREGATOR,
            "guest-ring",
            &[
                ("rate", &fmt_rate(ring)),
                ("x", &format!("{:.0}", min_agg / ring)),
                (
                    "met",
                    &if min_agg / ring >= 5.0 {
                        "met"
                    } else {
                        "NOT met"
                    },
                ),
            ],
        )?),
        None => s.push_str(&fill(text::AGGREGATOR, "no-guest-ring", &[])?),
    }
    Ok(s)
}
