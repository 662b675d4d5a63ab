//! Scenario "whatif" (scripts/vm/scenario-whatif.sh, issue 23): a
//! recording of steady load from clients with different nconnect under
//! the kernel's flat queue, fed to `nfsdtop whatif --policy flat,rr-peer
//! --format json` on the host. Under `flat` the model must reproduce
//! every client's measured share within [`SHARE_POINTS`]; under `rr-peer`
//! it must predict a ratio within [`RATIO_TOLERANCE`] of 1 for every
//! backlogged client; the recording's thread count must be the one
//! /proc/fs/nfsd/threads showed.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nfsdtop_agent::whatif::{Numbers, Report as Whatif, Row};

use super::clients;
use super::report::Report;

/// Points of share (percent of all dispatches) by which `flat` may miss a
/// client's measured share (issue 23).
const SHARE_POINTS: f64 = 3.0;
/// How far the model as fitted, before its think times are calibrated,
/// may miss a client's share: a guard against a broken fitter (one that
/// shared the dispatches evenly would miss this load's clients by some
/// 25 points), not a target. The steady-load recordings kept miss by 1.5
/// to 5.4 points as fitted; a live recording in CI on a busy 2-core host
/// missed by 8.3 and calibrated to 0.55.
const FITTED_POINTS: f64 = 12.0;
/// How far from 1 a backlogged client's predicted rr-peer ratio may be.
/// Round-robin by peer gives every backlogged peer one turn per round, so
/// the ratio is 1 up to the granularity of whole requests and the spread
/// of service times between clients (all do the same 4k reads here): a
/// tenth allows that and still fails a prediction that leaves any of the
/// flat queue's per-connection skew (0.3 against 1.8 measured).
const RATIO_TOLERANCE: f64 = 0.1;
/// `nfsdtop whatif` of a short recording takes seconds; this bounds a hang.
const WHATIF_TIMEOUT: Duration = Duration::from_secs(300);

fn predicted<'a>(row: &'a Row, policy: &str) -> Option<&'a Numbers> {
    row.predicted
        .iter()
        .find(|p| p.policy == policy)
        .map(|p| &p.numbers)
}

/// Runs `nfsdtop whatif` on the recording; its stdout, or why not.
fn run_whatif(nfsdtop: &Path, rec: &Path, results: &Path) -> Result<String, String> {
    let out_path = results.join("whatif.json");
    let err_path = results.join("whatif.err");
    let out = fs::File::create(&out_path).map_err(|e| e.to_string())?;
    let err = fs::File::create(&err_path).map_err(|e| e.to_string())?;
    let mut child = Command::new(nfsdtop)
        .arg("whatif")
        .arg(rec)
        .args(["--policy", "flat,rr-peer", "--format", "json"])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", nfsdtop.display()))?;
    let deadline = Instant::now() + WHATIF_TIMEOUT;
    let status = loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(s) => break s,
            None if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "nfsdtop whatif ran over {WHATIF_TIMEOUT:?}: killed"
                ));
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let stderr = fs::read_to_string(&err_path).unwrap_or_default();
    if !status.success() {
        return Err(format!(
            "nfsdtop whatif failed ({status}): {}",
            stderr.trim()
        ));
    }
    fs::read_to_string(&out_path).map_err(|e| e.to_string())
}

pub fn check(results: &Path, summary: &BTreeMap<String, String>, rep: &mut Report, nfsdtop: &Path) {
    rep.note("-- scenario \"whatif\"");
    if let Some(e) = summary.get("whatif.error") {
        rep.check(false, format!("whatif: {e}"));
        return;
    }
    rep.check(
        summary.get("whatif.steady").map(String::as_str) != Some("no"),
        "whatif: every client was reading before the recording began",
    );
    let exit = summary.get("whatif.record_exit").map(String::as_str);
    rep.check(
        exit == Some("0"),
        format!("whatif: nfsdtop record exited 0 when stopped ({exit:?})"),
    );
    let rec = results.join("whatif.rec");
    let text = match run_whatif(nfsdtop, &rec, results) {
        Ok(t) => t,
        Err(e) => {
            rep.check(false, format!("whatif: {}: {e}", rec.display()));
            return;
        }
    };
    let w: Whatif = match serde_json::from_str(&text) {
        Ok(w) => w,
        Err(e) => {
            rep.check(
                false,
                format!(
                    "whatif: {}: not nfsdtop whatif's JSON report ({e})",
                    results.join("whatif.json").display()
                ),
            );
            return;
        }
    };
    let r = &w.recording;
    rep.note(format!(
        "whatif: recording of {:.1} s, {} dispatches, {} transports, policy {}; model: {} backlogged, {} closed loops, {} bursty, {:.0} s simulated",
        r.seconds, r.dispatches, r.transports, r.policy, w.model.backlogged, w.model.closed_loops,
        w.model.bursty, w.model.simulated_seconds
    ));
    let proc_threads = summary.get("whatif.nfsd_threads");
    rep.check(
        proc_threads.and_then(|t| t.parse::<u32>().ok()) == Some(r.threads)
            && r.threads_from == "recorded",
        format!(
            "whatif: the header's thread count {} ({}) == /proc/fs/nfsd/threads {proc_threads:?}",
            r.threads, r.threads_from
        ),
    );
    rep.check(
        r.policy == "flat",
        format!(
            "whatif: the recorded server's policy is flat ({})",
            r.policy
        ),
    );
    rep.check(
        w.fit.fitted_error_points <= FITTED_POINTS,
        format!(
            "whatif: the model as fitted misses by {:.2} points at most (bound {FITTED_POINTS}); calibrated in {} rounds (round {} kept) to {:.2}; its total rate {:.2} of the recording's",
            w.fit.fitted_error_points,
            w.fit.calibration_rounds_run,
            w.fit.calibration_rounds,
            w.fit.max_error_points,
            w.fit.rate_ratio
        ),
    );
    for n in &w.notes {
        rep.note(format!("whatif: note: {n}"));
    }
    for c in clients::from_summary(summary) {
        let (name, nc, ip) = (&c.name, c.nconnect, c.ip.to_string());
        let Some(row) = w.peers.iter().find(|p| p.name == ip) else {
            rep.check(false, format!("whatif: {name} {ip}: no row in the report"));
            continue;
        };
        let m = &row.measured;
        let flat = predicted(row, "flat");
        let rr = predicted(row, "rr-peer");
        rep.note(format!(
            "whatif: {name} {ip} nconnect={nc} ({}): measured share {:.1}% ratio {}, fit {:.1}% ({:+.2} points), flat {}, rr-peer {}",
            row.demand,
            m.share * 100.0,
            fmt_ratio(m.fairness),
            row.fit.share * 100.0,
            row.fit_error_points,
            flat.map_or("?".into(), |f| format!("{:.1}% ratio {}", f.share * 100.0, fmt_ratio(f.fairness))),
            rr.map_or("?".into(), |f| format!("{:.1}% ratio {}", f.share * 100.0, fmt_ratio(f.fairness))),
        ));
        // Backlogged while recorded: the measured ratio is defined.
        let backlogged = m.fairness.is_some();
        rep.check(
            backlogged,
            format!(
                "whatif: {name} {ip} was backlogged in the recording (ratio {})",
                fmt_ratio(m.fairness)
            ),
        );
        // The share is what the model is fitted to, and must come out. Its
        // total rate and fairness ratios are checked by nfsdtop whatif
        // itself, which tells its user where they miss (`fit.reason`); on
        // a loaded emulated guest they can, so a miss it flags is a note
        // here, and one it does not flag fails.
        let err = flat.map(|f| (f.share - m.share) * 100.0);
        let flagged = (!row.fit_ok).then(|| w.fit.reason.clone()).flatten();
        rep.check(
            err.is_some_and(|e| e.abs() <= SHARE_POINTS) && (row.fit_ok || flagged.is_some()),
            format!(
                "whatif: {name} {ip}: flat reproduces the measured share {:.1}% within {SHARE_POINTS} points ({:+.2}; fit {:+.2})",
                m.share * 100.0,
                err.unwrap_or(f64::NAN),
                row.fit_error_points,
            ),
        );
        if let Some(why) = flagged {
            rep.note(format!(
                "whatif: {name} {ip}: KNOWN MISS, flagged by nfsdtop whatif itself: {why}"
            ));
        }
        if backlogged {
            let ratio = rr.and_then(|f| f.fairness);
            rep.check(
                ratio.is_some_and(|x| (x - 1.0).abs() <= RATIO_TOLERANCE),
                format!(
                    "whatif: {name} {ip}: rr-peer predicts ratio {} within {RATIO_TOLERANCE} of 1",
                    fmt_ratio(ratio)
                ),
            );
        }
    }
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or("-".into(), |r| format!("{r:.3}"))
}
