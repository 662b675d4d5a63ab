//! Part A's NFSv4 section: what counting NFSv4 operations (`--nfs4-ops`)
//! adds to nfsdtop's cost, on the 6.12 guest with the loopback mount in
//! NFSv4.2 (every request a COMPOUND of SEQUENCE, PUTFH, READ): rounds of
//! nothing / nfsdtop / nfsdtop --nfs4-ops, alternated as part A's are.

use std::path::Path;

use anyhow::ensure;

use super::{last_json_line, run_guest};
use crate::bench::rounds::{rounds, spread, Rounds};
use crate::bench::text::{self, fill};
use crate::bench::util::mean;
use crate::bench::BenchArgs;
use crate::guest::image::Suite;

const MODES: [&str; 2] = ["nfsdtop", "nfs4ops"];

/// NFSv4 operations the last line of an nfsdtop run says it counted
/// (`server.nfs4_operations.counted`; None where absent).
fn operations_counted(jsonl: &Path) -> anyhow::Result<Option<u64>> {
    let v = last_json_line(jsonl)?;
    Ok(v["server"]["nfs4_operations"]["counted"].as_u64())
}

pub fn section(args: &BenchArgs, nfsdtop: &Path) -> anyhow::Result<String> {
    let (results, kernel) = run_guest(
        args,
        Suite::Trixie,
        nfsdtop,
        &MODES,
        &[],
        "NFS_VERS=4.2\n",
        &[],
    )?;
    let mut s = fill(text::GUEST, "nfs4ops-intro", &[("kernel", &kernel)])?;
    let Rounds { corr, .. } = rounds(&mut s, &results, &MODES, args.reps)?;
    // The stage did what it says: operations counted with the flag only.
    for (mode, want) in [("nfsdtop", false), ("nfs4ops", true)] {
        let counted = operations_counted(&results.join(format!("nfsdtop-{mode}-1.jsonl")))?;
        ensure!(
            counted.is_some_and(|n| n > 0) == want,
            "bench: the {mode} run's nfsdtop counted NFSv4 operations {counted:?} ({})",
            results.display()
        );
    }
    let cost_n = 1.0 - mean(&corr[0]);
    let cost_o = 1.0 - mean(&corr[1]);
    let added = cost_o - cost_n;
    let ratio_spread = corr.iter().map(|c| spread(c)).fold(0.0, f64::max);
    let verdict = if (added - 0.003).abs() < ratio_spread {
        "nfs4ops-noise"
    } else if added <= 0.003 {
        "nfs4ops-met"
    } else {
        "nfs4ops-missed"
    };
    let verdict = fill(text::GUEST, verdict, &[])?;
    let pts = |x: f64| format!("{:+.1}", x * 100.0);
    s.push_str(&fill(
        text::GUEST,
        "nfs4ops-verdict",
        &[
            ("n", &pts(cost_n)),
            ("o", &pts(cost_o)),
            ("added", &pts(added)),
            ("spread", &format!("{:.1}", ratio_spread * 100.0)),
            ("verdict", &verdict.trim_end()),
        ],
    )?);
    Ok(s)
}
