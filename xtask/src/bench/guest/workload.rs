//! Part A's paired section: what the workload view (procedures and bytes)
//! adds to nfsdtop's cost in one guest (`--suite`: 6.12 by default, 6.16+
//! on sid), from rounds of only nothing / nfsdtop / noworkload /
//! rawnoworkload (nfsdtop before the view: no view, the raw
//! svc_stats_latency program), so a run of the same length has more of them, and
//! from each round's own difference (a confidence interval, not the range
//! of the ratios, which only grows with more rounds).

use std::path::Path;

use anyhow::ensure;

use super::{procedures_named, run_guest};
use crate::bench::rounds::{rounds, Rounds};
use crate::bench::text::{self, fill};
use crate::bench::util::mean;
use crate::bench::BenchArgs;

const MODES: [&str; 3] = ["nfsdtop", "noworkload", "rawnoworkload"];
/// The workload view's budget, in IOPS.
const BUDGET: f64 = 0.003;

/// Student's t at 97.5% for `df` degrees of freedom (two-sided 95%).
fn t975(df: usize) -> f64 {
    const T: [f64; 10] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    ];
    match df {
        0 => f64::INFINITY,
        1..=10 => T[df - 1],
        11..=20 => 2.2,
        21..=30 => 2.08,
        _ => 2.0,
    }
}

/// Mean of `d` and the half-width of its 95% confidence interval.
pub(in crate::bench) fn mean_ci(d: &[f64]) -> (f64, f64) {
    let n = d.len();
    let m = mean(d);
    if n < 2 {
        return (m, f64::INFINITY);
    }
    let var = d.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64;
    (m, t975(n - 1) * (var / n as f64).sqrt())
}

/// Which budget verdict an interval `(m ± h)` supports.
pub(super) fn verdict(m: f64, h: f64) -> &'static str {
    if m + h <= BUDGET {
        "paired-met"
    } else if m - h > BUDGET {
        "paired-missed"
    } else {
        "paired-noise"
    }
}

/// The stages did what they say: the default's last line names
/// procedures, noworkload's none (else the comparison weighs nothing),
/// and, where `modes` ran it, rawnoworkload's none and not through the
/// typed program.
pub(super) fn check_stages(results: &Path, modes: &[&str]) -> anyhow::Result<()> {
    let raw = modes.contains(&"rawnoworkload");
    let checked = [
        ("nfsdtop", true),
        ("noworkload", false),
        ("rawnoworkload", false),
    ];
    for (mode, want) in checked
        .into_iter()
        .filter(|(m, _)| raw || *m != "rawnoworkload")
    {
        let named = procedures_named(&results.join(format!("nfsdtop-{mode}-1.jsonl")))?;
        ensure!(
            named == want,
            "bench: the {mode} run's nfsdtop {} procedures ({})",
            if named { "named" } else { "named no" },
            results.display()
        );
    }
    if !raw {
        return Ok(());
    }
    // Which program read svc_stats_latency, as each run's source says.
    let rawnoworkload = results.join("nfsdtop-rawnoworkload-1.jsonl");
    ensure!(
        !source_detail(&rawnoworkload)?.contains(TYPED),
        "bench: the rawnoworkload run used the typed program ({})",
        results.display()
    );
    Ok(())
}

/// What `source.detail` says where typed programs read the raw slots
/// that have one.
const TYPED: &str = "typed programs (tp_btf) for";

/// `source.detail` of a run's last line.
fn source_detail(jsonl: &Path) -> anyhow::Result<String> {
    let v = super::last_json_line(jsonl)?;
    Ok(v["source"]["detail"].as_str().unwrap_or("").to_string())
}

/// Each round's cost of the view: its noworkload ratio less its nfsdtop
/// ratio (both against that round's baselines).
pub(super) fn round_costs(nfsdtop: &[f64], noworkload: &[f64]) -> Vec<f64> {
    noworkload.iter().zip(nfsdtop).map(|(w, n)| w - n).collect()
}

pub fn section(args: &BenchArgs, nfsdtop: &Path) -> anyhow::Result<String> {
    let suite = args.suite;
    let (results, kernel) = run_guest(args, suite, nfsdtop, &MODES, &[], "", &[])?;
    let mut s = fill(
        text::GUEST,
        "paired-intro",
        &[("kernel", &kernel), ("suite", &suite.name())],
    )?;
    let Rounds { corr, .. } = rounds(&mut s, &results, &MODES, args.reps)?;
    check_stages(&results, &MODES)?;
    let typed = source_detail(&results.join("nfsdtop-nfsdtop-1.jsonl"))?.contains(TYPED);
    let d = round_costs(&corr[0], &corr[1]);
    ensure!(d.len() >= 2, "bench: fewer than two complete rounds");
    let (m, h) = mean_ci(&d);
    let pts = |x: f64| format!("{:+.2}", x * 100.0);
    let verdict = fill(text::GUEST, verdict(m, h), &[])?;
    s.push_str(&fill(
        text::GUEST,
        "paired-verdict",
        &[
            ("n", &pts(1.0 - mean(&corr[0]))),
            ("w", &pts(1.0 - mean(&corr[1]))),
            (
                "rounds",
                &d.iter().map(|x| pts(*x)).collect::<Vec<_>>().join(", "),
            ),
            ("added", &pts(m)),
            ("lo", &pts(m - h)),
            ("hi", &pts(m + h)),
            ("count", &d.len().to_string()),
            ("verdict", &verdict.trim_end()),
        ],
    )?);
    // Against nfsdtop before the view (its raw program, no view): what
    // the view and the typed program together change.
    let before = round_costs(&corr[0], &corr[2]);
    let (bm, bh) = mean_ci(&before);
    s.push_str(&fill(
        text::GUEST,
        "paired-before",
        &[
            ("b", &pts(1.0 - mean(&corr[2]))),
            (
                "program",
                &if typed {
                    "typed programs"
                } else {
                    "raw programs (the typed ones were not used)"
                },
            ),
            (
                "rounds",
                &before
                    .iter()
                    .map(|x| pts(*x))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            ("added", &pts(bm)),
            ("lo", &pts(bm - bh)),
            ("hi", &pts(bm + bh)),
            (
                "verdict",
                &fill(text::GUEST, self::verdict(bm, bh), &[])?.trim_end(),
            ),
        ],
    )?);
    Ok(s)
}

/// What the workload view costs, from part A's rounds: nfsdtop's and
/// noworkload's ratios to their baselines, round by round; each round's
/// difference judged on its 95% interval as the paired section does.
pub(super) fn paragraph(nfsdtop: &[f64], noworkload: &[f64]) -> anyhow::Result<String> {
    let d = round_costs(nfsdtop, noworkload);
    let (added, half) = mean_ci(&d);
    let verdict = fill(text::GUEST, verdict(added, half), &[])?;
    fill(
        text::GUEST,
        "workload",
        &[
            ("no_workload", &super::signed1(1.0 - mean(noworkload))),
            ("n", &super::signed1(1.0 - mean(nfsdtop))),
            ("added", &format!("{:+.1}", added * 100.0)),
            ("lo", &format!("{:+.1}", (added - half) * 100.0)),
            ("hi", &format!("{:+.1}", (added + half) * 100.0)),
            ("count", &d.len()),
            ("verdict", &verdict.trim_end()),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paragraph_by_hand() {
        let p = paragraph(&[0.950, 0.948, 0.946], &[0.955, 0.951, 0.953]).unwrap();
        assert!(
            p.contains("adds **+0.5 points**, 95% interval [+0.0, +1.0] over\n3 rounds"),
            "{p}"
        );
        assert!(p.contains("cannot tell"), "{p}");
    }

    /// Part A runs no rawnoworkload mode: its stages are checked without
    /// it; the paired section's are checked with it.
    #[test]
    fn stages_checked_for_the_modes_that_ran() {
        let dir = std::env::temp_dir().join(format!("nfsdtop-stages-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let line = |procs: &str| {
            format!(r#"{{"source":{{"detail":"raw"}},"entities":[{{"procedures":{procs}}}]}}"#)
        };
        std::fs::write(dir.join("nfsdtop-nfsdtop-1.jsonl"), line(r#"{"READ":{}}"#)).unwrap();
        std::fs::write(dir.join("nfsdtop-noworkload-1.jsonl"), line("{}")).unwrap();
        let part_a = ["nfsdtop", "classic", "noworkload"];
        assert!(check_stages(&dir, &part_a).is_ok());
        assert!(check_stages(&dir, &MODES).is_err(), "no rawnoworkload run");
        std::fs::write(dir.join("nfsdtop-rawnoworkload-1.jsonl"), line("{}")).unwrap();
        assert!(check_stages(&dir, &MODES).is_ok());
        // A noworkload run that named procedures weighed nothing.
        std::fs::write(
            dir.join("nfsdtop-noworkload-1.jsonl"),
            line(r#"{"READ":{}}"#),
        )
        .unwrap();
        assert!(check_stages(&dir, &part_a).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// By hand: differences 0.1, 0.3, 0.5 points: mean 0.3, sd 0.2,
    /// standard error 0.2/√3 = 0.11547, t(2) = 4.303, half-width 0.4969.
    #[test]
    fn interval_by_hand() {
        let (m, h) = mean_ci(&[0.001, 0.003, 0.005]);
        assert!((m - 0.003).abs() < 1e-12);
        assert!((h - 0.004969).abs() < 1e-6, "{h}");
        assert_eq!(verdict(m, h), "paired-noise");
    }

    #[test]
    fn verdicts_follow_the_interval() {
        assert_eq!(verdict(0.001, 0.0015), "paired-met");
        assert_eq!(verdict(0.006, 0.002), "paired-missed");
        assert_eq!(verdict(0.002, 0.002), "paired-noise");
        assert_eq!(mean_ci(&[0.01]).1, f64::INFINITY);
    }
}
