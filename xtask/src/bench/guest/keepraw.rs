//! Part A's keepraw mode, in the 6.16+ guest only: nfsdtop with
//! `--keep-raw-tracepoints` on a kernel that can preempt raw tracepoint
//! programs, where the default gives the dispatch and request events twin
//! programs. What it costs beside the default and ftrace in the same
//! rounds, and what each run lost to the hits the kernel skipped, beside
//! what the default's runs lost and rescued.

use std::path::Path;

use anyhow::ensure;

use super::last_json_line;
use crate::bench::text::{self, fill};
use crate::bench::util::mean;

/// The mode's name in the rounds (scripts/vm/bench-guest.sh runs it).
pub(super) const MODE: &str = "keepraw";

/// What the run's source detail says of raw tracepoints kept.
const KEPT: &str = "kept although this kernel can preempt their programs";

/// The targets the mode is held to, and what the same rounds measured.
pub(super) struct Against {
    pub target_cost: f64,
    pub target_of_ftrace: f64,
    /// nfsdtop's default and ftrace, as costs (1 - ratio to baseline).
    pub nfsdtop: f64,
    pub ftrace: f64,
}

/// The paragraph on the keepraw rounds (`corr`: their ratios to the
/// baseline), from the runs' last JSON lines under `results`.
pub(super) fn paragraph(
    results: &Path,
    corr: &[f64],
    reps: u32,
    a: &Against,
) -> anyhow::Result<String> {
    let cost = 1.0 - mean(corr);
    let mut lost = vec![];
    let mut default_runs = vec![];
    for r in 1..=reps {
        let line = last_json_line(&results.join(format!("nfsdtop-nfsdtop-{r}.jsonl")))?;
        let detail = line["source"]["detail"].as_str().unwrap_or_default();
        let rescued = detail
            .split("; ")
            .find_map(|p| p.strip_prefix("hits rescued: "))
            .unwrap_or("none counted");
        let totals = &line["totals"];
        default_runs.push(format!(
            "{} of {} (rescued: {rescued})",
            totals["events_lost"].as_u64().unwrap_or(0),
            totals["dispatches"].as_u64().unwrap_or(0)
        ));
    }
    for r in 1..=reps {
        let line = last_json_line(&results.join(format!("nfsdtop-{MODE}-{r}.jsonl")))?;
        let detail = line["source"]["detail"].as_str().unwrap_or_default();
        ensure!(
            detail.contains(KEPT) && !detail.contains("moved to classic"),
            "bench: the {MODE} run of round {r} did not keep raw tracepoints ({detail})"
        );
        let totals = &line["totals"];
        lost.push(format!(
            "{} of {}",
            totals["events_lost"].as_u64().unwrap_or(0),
            totals["dispatches"].as_u64().unwrap_or(0)
        ));
    }
    let met = cost <= a.target_cost && cost <= a.target_of_ftrace * a.ftrace;
    fill(
        text::GUEST,
        "keepraw",
        &[
            ("k", &format!("{:+.1}%", cost * 100.0)),
            ("n", &format!("{:+.1}%", a.nfsdtop * 100.0)),
            ("f", &format!("{:+.1}%", a.ftrace * 100.0)),
            ("lost", &lost.join(", ")),
            ("default_lost", &default_runs.join("; ")),
            ("target", &format!("{:.1}%", a.target_cost * 100.0)),
            ("of_ftrace", &format!("{:.0}", a.target_of_ftrace * 100.0)),
            ("met", &if met { "met" } else { "NOT met" }),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_run(dir: &Path, r: u32, detail: &str, lost: u64) {
        write_mode(dir, MODE, r, detail, lost);
    }

    fn write_mode(dir: &Path, mode: &str, r: u32, detail: &str, lost: u64) {
        let line = serde_json::json!({
            "source": {"detail": detail},
            "totals": {"events_lost": lost, "dispatches": 1000 + u64::from(r)},
        });
        std::fs::write(
            dir.join(format!("nfsdtop-{mode}-{r}.jsonl")),
            format!("{line}\n"),
        )
        .unwrap();
    }

    /// The paragraph's numbers, by hand: costs from the ratios, each run's
    /// loss, the verdict against both targets; a run that did not keep
    /// its raw tracepoints fails the bench.
    #[test]
    fn paragraph_by_hand() {
        let dir = std::env::temp_dir().join(format!("nfsdtop-keepraw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kept = format!("raw tracepoints (BTF offsets) for svc_xprt_dequeue, {KEPT} (...)");
        write_run(&dir, 1, &kept, 3);
        write_run(&dir, 2, &kept, 0);
        let twins = "raw tracepoints (...); hits rescued: svc_xprt_dequeue 4, svc_stats_latency 2";
        write_mode(&dir, "nfsdtop", 1, twins, 0);
        write_mode(&dir, "nfsdtop", 2, "classic tracepoints", 1);
        let a = Against {
            target_cost: 0.025,
            target_of_ftrace: 0.5,
            nfsdtop: 0.06,
            ftrace: 0.023,
        };
        let text = paragraph(&dir, &[0.97, 0.96], 2, &a).unwrap();
        assert!(text.contains("costs **+3.5%** of IOPS"), "{text}");
        assert!(
            text.contains("default's +6.0% and ftrace's +2.3%"),
            "{text}"
        );
        assert!(text.contains("3 of 1001, 0 of 1002 dispatches"), "{text}");
        assert!(
            text.contains(
                "the default's runs lost 0 of 1001 (rescued: svc_xprt_dequeue 4, \
                 svc_stats_latency 2); 1 of 1002 (rescued: none counted)"
            ),
            "{text}"
        );
        assert!(text.contains("): NOT met."), "{text}");
        let cheap = Against { ftrace: 0.08, ..a };
        let text = paragraph(&dir, &[0.98, 0.98], 2, &cheap).unwrap();
        assert!(text.contains("): met."), "{text}");
        write_run(
            &dir,
            2,
            "classic tracepoints (raw ones not possible here)",
            0,
        );
        let e = paragraph(&dir, &[0.97, 0.96], 2, &a)
            .unwrap_err()
            .to_string();
        assert!(e.contains("round 2 did not keep raw"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
