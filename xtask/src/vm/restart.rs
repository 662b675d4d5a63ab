//! Fault "restart" (scripts/vm/fault-restart.sh): nfsd stopped and
//! restarted under load.

use std::collections::BTreeMap;
use std::path::Path;

use super::measure::check_measurement;
use super::num;
use super::report::Report;

/// nfsd stopped and restarted under load: counts exact over the whole run,
/// dispatches continued after the restart, nothing stale left over.
pub fn check(results: &Path, summary: &BTreeMap<String, String>, rep: &mut Report) {
    let Some(m) = check_measurement(results, "restart", summary, rep, true) else {
        return;
    };
    rep.check(
        summary.get("restart.threads_stopped").map(String::as_str) == Some("0"),
        format!(
            "restart: nfsd had 0 threads while stopped ({:?})",
            summary.get("restart.threads_stopped")
        ),
    );
    let at_restart = num(summary, "restart.lines_at_restart").unwrap_or(0) as usize;
    let before = at_restart
        .checked_sub(1)
        .and_then(|i| m.lines.get(i))
        .map(|l| l.totals.dispatches);
    let end = m.last().totals.dispatches;
    rep.check(
        before.is_some_and(|b| end > b),
        format!("restart: dispatches continued after the restart ({before:?} at the restart, {end} at the end)"),
    );
    let stale: Vec<String> = m
        .peers
        .iter()
        .filter(|(_, p)| p.2 != 0)
        .map(|(ip, p)| format!("{ip}={}", p.2))
        .collect();
    rep.check(
        stale.is_empty(),
        format!("restart: no connections left after unmounting ({stale:?})"),
    );
}
