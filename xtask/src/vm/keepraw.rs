//! Scenario "keepraw" (scripts/vm/scenario-keepraw.sh): on a 7.x kernel,
//! which can preempt raw tracepoint programs, `--keep-raw-tracepoints`
//! keeps them raw instead of starting classic. The run says so, and
//! against the same load's ftrace it is exact where no hit was skipped;
//! where some were, each is counted as lost: delivered and lost
//! dispatches add up to ftrace's, and nothing is counted that did not
//! happen (vm/measure.rs's loss checks).

use std::collections::BTreeMap;
use std::path::Path;

use super::batch::{self, run_detail};
use super::kernel_version;
use super::measure::check_measurement;
use super::report::Report;

/// What the run's source detail says of raw tracepoints kept.
const KEPT: &str = "kept although this kernel can preempt their programs";

pub fn check(results: &Path, summary: &BTreeMap<String, String>, rep: &mut Report) {
    let kernel = summary.get("kernel").cloned().unwrap_or_default();
    let run = summary.get("keepraw.run").map(String::as_str);
    if kernel_version(&kernel).is_some_and(|v| v < (7, 0)) {
        rep.check(
            run.is_some_and(|r| r.starts_with("no")),
            format!("keepraw: not run on {kernel}, which does not preempt raw programs ({run:?})"),
        );
        return;
    }
    rep.check(
        run == Some("yes"),
        format!("keepraw: run on {kernel} ({run:?})"),
    );
    let detail = run_detail(results, "keepraw");
    rep.check(
        detail.contains(KEPT) && !detail.contains("moved to classic"),
        format!("keepraw: raw tracepoints kept, none moved to classic ({detail})"),
    );
    let lost = batch::read(&results.join("nfsdtop-keepraw.jsonl"))
        .ok()
        .and_then(|l| l.last().map(|l| l.totals.events_lost))
        .unwrap_or(0);
    rep.note(format!(
        "keepraw: events_lost {lost} (hits skipped while preempted, and any other loss)"
    ));
    check_measurement(results, "keepraw", summary, rep, lost == 0);
}
