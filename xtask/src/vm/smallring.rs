//! Fault "smallring" (scripts/vm/fault-smallring.sh): a ring too small
//! for the load: the loss is counted, nothing is invented.

use std::collections::BTreeMap;
use std::path::Path;

use super::measure::check_measurement;
use super::report::Report;

pub fn check(results: &Path, summary: &BTreeMap<String, String>, rep: &mut Report) {
    if let Some(e) = summary.get("smallring.error") {
        rep.note("-- fault \"smallring\"");
        rep.check(
            false,
            format!("smallring: {e} (needed to make the ring too small)"),
        );
        return;
    }
    check_measurement(results, "smallring", summary, rep, false);
}
