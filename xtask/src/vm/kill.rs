//! Fault "kill" (scripts/vm/fault-kill.sh): nfsdtop SIGKILLed leaves no
//! BPF program, attachment or pin behind.

use std::collections::BTreeMap;

use super::num;
use super::report::Report;

pub fn check(summary: &BTreeMap<String, String>, rep: &mut Report) {
    rep.note("-- fault \"kill\"");
    if let Some(e) = summary.get("kill.error") {
        rep.check(false, format!("kill: {e}"));
        return;
    }
    let base = num(summary, "kill.progs_baseline");
    let running = num(summary, "kill.progs_running");
    let after = num(summary, "kill.progs_after");
    rep.check(
        matches!((base, running), (Some(b), Some(r)) if r > b),
        format!("kill: nfsdtop had BPF programs loaded (baseline {base:?}, running {running:?})"),
    );
    rep.check(
        base.is_some() && after == base,
        format!("kill: after SIGKILL the programs are gone (after {after:?}, baseline {base:?})"),
    );
    let perf = num(summary, "kill.perf_after");
    rep.check(
        perf == Some(0),
        format!("kill: no perf-event attachment left ({perf:?})"),
    );
    let pinned = num(summary, "kill.bpffs_after");
    rep.check(
        pinned == Some(0),
        format!("kill: nothing pinned in bpffs ({pinned:?})"),
    );
}
