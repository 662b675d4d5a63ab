//! Scenario "wait": `nfsdtop --wait` started before sunrpc/nfsd is loaded
//! attaches once nfsd is up (a boot of its own).

use std::collections::BTreeMap;
use std::path::Path;

use super::measure::check_measurement;
use super::report::Report;

pub fn check(results: &Path, summary: &BTreeMap<String, String>, rep: &mut Report) {
    rep.check(
        summary.get("wait.sunrpc_loaded_before").map(String::as_str) == Some("0"),
        format!(
            "wait: sunrpc was not loaded when nfsdtop started ({:?})",
            summary.get("wait.sunrpc_loaded_before")
        ),
    );
    rep.check(
        summary.get("wait.alive_before_nfsd").map(String::as_str) == Some("yes"),
        format!(
            "wait: nfsdtop --wait was still running when nfsd started ({:?})",
            summary.get("wait.alive_before_nfsd")
        ),
    );
    check_measurement(results, "wait", summary, rep, true);
}
