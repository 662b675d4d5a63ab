//! Scenario "main": doctor, the default (raw) and the classic run beside
//! it against one ftrace, the wait source per kernel, and fairness by
//! nconnect.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde_json::Value;

use super::batch::{run_detail, Line};
use super::fairshare;
use super::measure::{check_measurement, check_nfsdtop_run, Measured};
use super::report::Report;
use super::{clients, expected_wait_source, kernel_version};
use crate::guest::fio_iops;

pub fn check(results: &Path, summary: &BTreeMap<String, String>, rep: &mut Report) {
    let kernel = summary.get("kernel").cloned().unwrap_or_default();
    // nfsdtop doctor.
    if summary.get("nfsdtop").map(String::as_str) != Some("missing") {
        let doctor_text = fs::read_to_string(results.join("doctor.json")).unwrap_or_default();
        let doctor_err = fs::read_to_string(results.join("doctor.err")).unwrap_or_default();
        match serde_json::from_str::<Value>(doctor_text.trim()) {
            Ok(d) => {
                rep.check(
                    d["tracefs"] == true && d["sunrpc_loaded"] == true,
                    format!(
                        "doctor: tracefs {} sunrpc_loaded {}",
                        d["tracefs"], d["sunrpc_loaded"]
                    ),
                );
                rep.check(
                    d["generation"].is_string(),
                    format!("doctor: generation {}", d["generation"]),
                );
                rep.check(
                    d["bpf_programs_verified"] == true,
                    format!(
                        "doctor: bpf_programs_verified {}",
                        d["bpf_programs_verified"]
                    ),
                );
            }
            Err(e) => rep.check(
                false,
                format!(
                    "doctor --format json gave no JSON ({e}; exit {}): {}",
                    summary
                        .get("doctor_exit")
                        .map(String::as_str)
                        .unwrap_or("?"),
                    doctor_err.trim()
                ),
            ),
        }
    }
    // Where the kernel preempts tracepoint programs (7.x), a raw program
    // can miss hits; nfsdtop then counts them as lost and hands the event
    // to its classic tracepoint, and that run's counts are checked as
    // delivered + lost == ftrace instead of exactly.
    fn handed_over(rep: &mut Report, run: &str, detail: &str) -> bool {
        let h = detail.contains("moved to classic tracepoints");
        if h {
            rep.note(format!(
                "{run}: a raw tracepoint missed hits and was handed over to its classic one"
            ));
        }
        h
    }
    // The default: raw tracepoints for every event (every Debian kernel
    // here has BTF for vmlinux and its modules).
    let detail = run_detail(results, "main");
    let exact = !handed_over(rep, "main", &detail);
    let Some(m) = check_measurement(results, "main", summary, rep, exact) else {
        return;
    };
    // Debian's 7.x (preemption lazy, SRCU-fast tracepoints) can preempt
    // raw tracepoint programs: there the dispatch and request events get
    // twin programs, the second doing the hits the kernel skipped for the
    // first, and the run is exact all the same.
    let want: &[&str] = if kernel_version(&kernel).is_some_and(|v| v >= (7, 0)) {
        rep.note(format!(
            "main: {}",
            detail
                .split("; ")
                .find(|p| p.starts_with("hits rescued"))
                .unwrap_or("no rescue count in the detail")
        ));
        &[
            "raw tracepoints (BTF offsets) for svc_xprt_free, svc_xprt_accept, \
             svc_xprt_dequeue, svc_stats_latency (the default)",
            "a second program on svc_xprt_free, svc_xprt_accept, svc_xprt_dequeue, \
             svc_stats_latency does the hits the kernel skips for the first",
        ]
    } else {
        &[
            "raw tracepoints (BTF offsets) for svc_xprt_free, svc_xprt_accept, \
           svc_xprt_enqueue, svc_xprt_dequeue, svc_stats_latency (the default)",
        ]
    };
    rep.check(
        want.iter().all(|w| detail.contains(w)),
        format!("main: {} ({detail})", want.join(" ... ")),
    );
    // Beside it, every event classic (--classic-tracepoints), and with
    // the enqueue hooks (--enqueue-hooks) where the default does without.
    let classic_detail = run_detail(results, "main-classic");
    let classic = check_nfsdtop_run(results, "main-classic", "main", summary, rep, true);
    rep.check(
        classic_detail.contains("classic tracepoints") && !classic_detail.contains("raw"),
        format!("main-classic: classic tracepoints only ({classic_detail})"),
    );
    check_server_threads(&m.lines, summary.get("nfsd_threads.main"), rep);
    let last = m.last();
    let ws = last.source.wait_source.as_str();
    let want_ws = expected_wait_source(&kernel);
    rep.check(
        ws == want_ws,
        format!("wait_source {ws:?} (expected {want_ws:?} on {kernel})"),
    );
    rep.note(format!("generation {}", last.source.generation));
    let rebuilt = "ready queue rebuilt from dequeues";
    rep.check(
        detail.contains(rebuilt) == (ws == "qtime") && !classic_detail.contains(rebuilt),
        format!(
            "main: the ready queue rebuilt from dequeues exactly where they carry qtime ({ws}), main-classic with the enqueue hooks"
        ),
    );
    if let (true, Some(c)) = (ws == "qtime", &classic) {
        check_paths_agree(results, &m, c, rep);
    }
    // With qtime (6.16+), the agent's own enqueue→dequeue waits must tell
    // the same story: whole-run p50s within one histogram bucket (in the
    // run with enqueue hooks: without them the agent's enqueue times come
    // from qtime).
    if ws == "qtime" {
        let t = &classic.as_ref().unwrap_or(&m).last().totals;
        let (kq, own) = (t.run_wait_p50_bucket, t.own_wait_p50_bucket);
        rep.check(
            matches!((kq, own), (Some(a), Some(b)) if a.abs_diff(b) <= 1),
            format!(
                "qtime p50 {} us (bucket {kq:?}) and own enqueue-dequeue p50 {} us (bucket {own:?}) within one bucket",
                t.run_wait_p50_us, t.own_wait_p50_us
            ),
        );
    }
    // Fairness: cumulative dispatches / cumulative entitled over the whole
    // run (the last line). Per-interval ratios swing with the 1 s windows
    // (a few hundred dispatches each under TCG) and are undefined in idle
    // ones; the cumulative ratio is what the run as a whole says about each
    // client, and the load keeps every client backlogged throughout.
    let ran = clients::from_summary(summary);
    let ratio = |i: usize| {
        let ip = ran[i].ip;
        let (d, ent, _) = m.peers.get(&ip).copied().unwrap_or_default();
        (
            ip,
            d,
            ent,
            if ent > 0.0 { d as f64 / ent } else { f64::NAN },
        )
    };
    for (i, c) in ran.iter().enumerate() {
        let (name, nc) = (&c.name, c.nconnect);
        let (ip, d, ent, r) = ratio(i);
        let iops = fio_iops(&results.join(format!("fio-main-{name}.json")));
        rep.note(format!(
            "{name} {ip:<10} nconnect={nc}: dispatches {d}, entitled {ent:.1}, ratio {r:.3}, fio {} IOPS",
            iops.map(|x| format!("{x:.0}")).unwrap_or("?".into())
        ));
    }
    if ran.is_empty() {
        rep.check(false, "main: the run's summary names no client");
        return;
    }
    let fewest = (0..ran.len()).min_by_key(|&i| ran[i].nconnect).unwrap_or(0);
    let most = (0..ran.len()).max_by_key(|&i| ran[i].nconnect).unwrap_or(0);
    // Every ratio is checked against ftrace's records by the definition
    // (measure.rs). Which way the kernel leans is the kernel's: 6.1 and
    // 6.12 dispatch ready connections first in, first out, so the client
    // with one connection gets less than its fair share and the one with
    // eight more, in every run. Debian's 7.2 leans so in some loads and
    // not in others: in one run its main measurement gave c1 1.000, c2
    // 0.979, c3 1.022 (ftrace's records said the same), while the whatif
    // recording of the same boot gave c1 0.419. There the direction is
    // only reported.
    let flat_favours_connections = kernel_version(&kernel).is_some_and(|v| v < (7, 0));
    let (ip, _, _, r) = ratio(fewest);
    let fewest_line = format!(
        "fewest connections ({ip}, nconnect={}): fairness {r:.3} < 1",
        ran[fewest].nconnect
    );
    let (ip, _, _, r_most) = ratio(most);
    let most_line = format!(
        "most connections ({ip}, nconnect={}): fairness {r_most:.3} > 1",
        ran[most].nconnect
    );
    if flat_favours_connections {
        rep.check(r < 1.0, fewest_line);
        rep.check(r_most > 1.0, most_line);
    } else {
        rep.note(format!("{fewest_line}: {}", r < 1.0));
        rep.note(format!("{most_line}: {}", r_most > 1.0));
    }
}

/// Entitled dispatches agree within this fraction between the ready queue
/// rebuilt from dequeues and the one the enqueue hooks track (issue 22),
/// beyond what the kernel's own two stamps of an enqueue already move
/// them (see [`check_paths_agree`])...
const PATHS_AGREE: f64 = 0.005;
/// ...or within this many: nfsdtop's two runs read the clock in their own
/// programs, one after the other, so in a short run one or two dispatches
/// fall between the two runs' instants of the same enqueue (seen on sid:
/// 322.2 against 323.8 entitled of 115 dispatches).
const PATHS_AGREE_DISPATCHES: f64 = 2.0;

/// The default run (no enqueue hooks) and the classic one (with them),
/// attached side by side over the same load: each peer's entitled
/// dispatches agree within [`PATHS_AGREE`] (or
/// [`PATHS_AGREE_DISPATCHES`]) beyond the kernel's own difference.
///
/// The two paths stamp an enqueue at different instants: the enqueue
/// tracepoint fires before svc_xprt_enqueue sets `xpt_qtime`, tens of µs
/// before it under TCG, and a dispatch in between is shared among a
/// different set of backlogged peers. How much that moves each peer's
/// entitlement on this run's load is measured from ftrace alone: the
/// definition applied to ftrace's records once with its enqueue records
/// and once with its dequeues' `qtime-us`. That difference is the
/// kernel's, not nfsdtop's, and is allowed on top (and printed).
fn check_paths_agree(results: &Path, rebuilt: &Measured, hooked: &Measured, rep: &mut Report) {
    let trace = fs::read_to_string(results.join("trace-main.txt")).unwrap_or_default();
    let by_enqueue = fairshare::entitled(&trace, fairshare::EnqueueRule::Attempts);
    let by_qtime = fairshare::entitled(&trace, fairshare::EnqueueRule::Qtime);
    for (ip, (d, ent, _)) in &rebuilt.peers {
        let Some((hd, hent, _)) = hooked.peers.get(ip) else {
            rep.check(
                false,
                format!("main: {ip} in the run without enqueue hooks only"),
            );
            continue;
        };
        let peer = fairshare::Peer::Client(*ip);
        let (Some((_, e)), Some((_, q))) = (by_enqueue.get(&peer), by_qtime.get(&peer)) else {
            rep.check(false, format!("main: {ip} not in ftrace's records"));
            continue;
        };
        let kernel_gap = (e - q).abs();
        let apart = (ent - hent).abs();
        let allowed = (PATHS_AGREE * hent).max(PATHS_AGREE_DISPATCHES) + kernel_gap;
        rep.check(
            apart <= allowed,
            format!(
                "main: {ip} entitled {ent:.1} from dequeues alone, {hent:.1} with enqueue hooks \
                 ({apart:.1} apart, {:.2}%; at most {:.1}% or {PATHS_AGREE_DISPATCHES} dispatches \
                 beyond ftrace's own {kernel_gap:.1}: {e:.1} by its enqueues, {q:.1} by its \
                 dequeues' qtime; dispatches {d} and {hd})",
                apart / hent.max(1.0) * 100.0,
                PATHS_AGREE * 100.0
            ),
        );
    }
}

/// The server view against the kernel: every line's thread count is what
/// `/proc/fs/nfsd/threads` said under the load, and busy threads stay
/// between 0 and it on every line (execution time counted at completion
/// that exceeds the threads goes to the next interval: see
/// nfsdtop_agent::server), with a run mean above 0.
fn check_server_threads(lines: &[Line], proc_threads: Option<&String>, rep: &mut Report) {
    let Some(want) = proc_threads.and_then(|t| t.trim().parse::<u32>().ok()) else {
        rep.check(
            false,
            format!("main: /proc/fs/nfsd/threads under the load not recorded ({proc_threads:?})"),
        );
        return;
    };
    let seen: Vec<(Option<u32>, Option<f64>, f64)> = lines
        .iter()
        .map(|l| (l.server.threads, l.server.busy_threads, l.interval_s))
        .collect();
    let wrong: Vec<_> = seen.iter().filter(|(t, _, _)| *t != Some(want)).collect();
    rep.check(
        wrong.is_empty() && !seen.is_empty(),
        format!(
            "main: server.threads == /proc/fs/nfsd/threads {want} on all {} lines ({} differ, first {:?})",
            seen.len(),
            wrong.len(),
            wrong.first().map(|w| w.0)
        ),
    );
    let busy: Vec<(f64, f64)> = seen
        .iter()
        .filter_map(|(_, b, i)| b.map(|b| (b, *i)))
        .collect();
    let max = busy.iter().map(|b| b.0).fold(0.0, f64::max);
    let min = busy.iter().map(|b| b.0).fold(f64::INFINITY, f64::min);
    let (secs, span): (f64, f64) = busy
        .iter()
        .fold((0.0, 0.0), |(s, t), (b, i)| (s + b * i, t + i));
    let mean = if span > 0.0 { secs / span } else { f64::NAN };
    let threads = f64::from(want);
    rep.check(
        !busy.is_empty() && min >= 0.0 && max <= threads && mean <= threads && mean > 0.0,
        format!(
            "main: busy threads in [0, {want}] over {} lines: min {min:.2}, max {max:.2}, run mean {mean:.2}",
            busy.len()
        ),
    );
}
