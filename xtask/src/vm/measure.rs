//! The checks common to every measurement: one nfsdtop run's batch JSON
//! lines against the ftrace of the same load (counts exact, or loss
//! counted), execution times, the workload (requests and bytes, vm/workload.rs),
//! and an idle server at the end.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::net::IpAddr;
use std::path::Path;

use super::batch::{self, Line};
use super::clients;
use super::fairshare;
use super::ftrace::{ftrace_losses, parse_trace};
use super::report::Report;
use super::tolerance;
use super::{procedures, workload};

/// What one measurement (nfsdtop and ftrace over the same load) gave.
pub struct Measured {
    pub lines: Vec<Line>,
    /// Per peer in the last line: (dispatches, entitled, connections).
    pub peers: BTreeMap<IpAddr, (u64, f64, u64)>,
}

impl Measured {
    pub fn last(&self) -> &Line {
        self.lines.last().expect("at least one line")
    }
}

/// Checks common to every measurement TAG: ftrace complete, nfsdtop live,
/// and (when `exact`) no loss and per-peer dispatches equal to ftrace's.
pub fn check_measurement(
    results: &Path,
    tag: &str,
    summary: &BTreeMap<String, String>,
    rep: &mut Report,
    exact: bool,
) -> Option<Measured> {
    check_nfsdtop_run(results, tag, tag, summary, rep, exact)
}

/// One nfsdtop run (`nfsdtop-RUN.jsonl`) against the ftrace of measurement
/// `tag` (`trace-TAG.txt`): a measurement can have two nfsdtop runs beside
/// each other (raw and classic tracepoints).
pub fn check_nfsdtop_run(
    results: &Path,
    run: &str,
    trace_tag: &str,
    summary: &BTreeMap<String, String>,
    rep: &mut Report,
    exact: bool,
) -> Option<Measured> {
    let tag = run;
    rep.note(format!("-- measurement {tag:?}"));
    let trace =
        fs::read_to_string(results.join(format!("trace-{trace_tag}.txt"))).unwrap_or_default();
    let ft = parse_trace(&trace);
    let stats = fs::read_to_string(results.join(format!("ftrace-stats-{trace_tag}.txt")))
        .unwrap_or_default();
    let lost = ftrace_losses(&stats);
    rep.check(
        lost == Some(0),
        format!("{tag}: ftrace lost no records (overrun + commit overrun + dropped = {lost:?})"),
    );
    rep.check(
        ft.total > 0 && ft.unparsed == 0,
        format!(
            "{tag}: ftrace {} svc_xprt_dequeue records ({} listener, {} unparsed, other services {:?}), {} enqueue records",
            ft.total, ft.listener, ft.unparsed, ft.other_services, ft.enqueue
        ),
    );
    for c in clients::from_summary(summary) {
        let (name, ip) = (&c.name, c.ip);
        let n = ft.per_client.get(&ip).copied().unwrap_or(0);
        rep.check(
            n > 0,
            format!("{tag}: ftrace saw dispatches from {name} ({ip}): {n}"),
        );
    }
    if summary.get("nfsdtop").map(String::as_str) == Some("missing") {
        rep.check(false, format!("{tag}: no nfsdtop binary in the guest"));
        return None;
    }
    let err = fs::read_to_string(results.join(format!("nfsdtop-{tag}.err"))).unwrap_or_default();
    let lines = match batch::read(&results.join(format!("nfsdtop-{tag}.jsonl"))) {
        Ok(lines) => lines,
        Err(e) => {
            rep.check(false, format!("{tag}: {e}"));
            return None;
        }
    };
    let Some(last) = lines.last() else {
        rep.check(
            false,
            format!(
                "{tag}: nfsdtop -b --format json printed no line (exit {}): {}",
                summary
                    .get(&format!("nfsdtop_exit.nfsdtop-{tag}"))
                    .map(String::as_str)
                    .unwrap_or("?"),
                err.trim()
            ),
        );
        return None;
    };
    rep.note(format!(
        "{tag}: nfsdtop printed {} JSON lines, exit {}",
        lines.len(),
        summary
            .get(&format!("nfsdtop_exit.nfsdtop-{tag}"))
            .map(String::as_str)
            .unwrap_or("?")
    ));
    let kind = last.source.kind.as_str();
    if kind != "live" {
        rep.check(
            false,
            format!(
                "{tag}: nfsdtop used the {kind:?} source, not the live one: the live source is \
                 missing or could not attach in the guest; nfsdtop said: {}",
                err.trim()
            ),
        );
        return None;
    }
    rep.check(true, format!("{tag}: nfsdtop source is live"));
    if summary
        .get(&format!("quiescent.{trace_tag}"))
        .map(String::as_str)
        == Some("no")
    {
        rep.note(format!(
            "{tag}: warning: the server still had connections when the load ended"
        ));
    }
    if let Some(w) = summary.get(&format!("ftrace_entries_while_stopping.{trace_tag}")) {
        if w != "0" {
            rep.note(format!(
                "{tag}: warning: ftrace recorded {w} records while nfsdtop was being stopped"
            ));
        }
    }
    let mut peers = BTreeMap::new();
    let mut executions = BTreeMap::new();
    let mut listener = 0;
    for e in &last.entities {
        let name = e.name.as_str();
        let d = e.dispatches;
        match name.parse::<IpAddr>() {
            Ok(ip) => {
                peers.insert(ip, (d, e.entitled, e.connections));
                executions.insert(ip, (e.executions, e.exec_seconds));
            }
            Err(_) if name == "(listener)" => listener += d,
            Err(_) => rep.check(
                false,
                format!("{tag}: nfsdtop entity with a non-address name {name:?}"),
            ),
        }
    }
    let lost = last.totals.events_lost;
    let all: BTreeSet<IpAddr> = peers.keys().chain(ft.per_client.keys()).copied().collect();
    let total = last.totals.dispatches;
    // Loss is tolerated (checked as delivered + lost == ftrace) only where
    // the caller says so: a run whose raw programs missed hits and were
    // handed over. On Debian's 7.x, whose preemption makes raw programs
    // miss, a second program does the hits skipped for the first: exact
    // there too.
    if exact {
        rep.check(lost == 0, format!("{tag}: nfsdtop events_lost {lost} == 0"));
        for ip in &all {
            let n = peers.get(ip).map(|p| p.0).unwrap_or(0);
            let f = ft.per_client.get(ip).copied().unwrap_or(0);
            rep.check(
                n == f,
                format!("{tag}: {ip}: nfsdtop {n} dispatches == ftrace {f}"),
            );
        }
        // Fair share: each peer's entitled dispatches against the same
        // definition applied to ftrace's records (fairshare.rs), within
        // tolerance::entitled_slack.
        let rule = fairshare::EnqueueRule::of_generation(&last.source.generation);
        let truth = fairshare::entitled(&trace, rule);
        for (ip, (d, ent, _)) in &peers {
            let (fd, fent) = truth
                .get(&fairshare::Peer::Client(*ip))
                .copied()
                .unwrap_or_default();
            let slack = tolerance::entitled_slack(fent);
            rep.check(
                fd == *d && (ent - fent).abs() <= slack,
                format!(
                    "{tag}: {ip}: nfsdtop entitled {ent:.1} == ftrace's by the definition {fent:.1} \
                     within {slack:.1} (ratio {:.3} vs {:.3})",
                    *d as f64 / ent.max(1e-9),
                    fd as f64 / fent.max(1e-9)
                ),
            );
        }
        // Depth at enqueue, where the run read it: one for each of
        // ftrace's real enqueues of the client.
        if last
            .source
            .detail
            .contains("depth at enqueue from xpt_nr_rqsts")
        {
            let enqueues = fairshare::real_enqueues(&trace, rule);
            for e in &last.entities {
                let Ok(ip) = e.name.parse::<IpAddr>() else {
                    continue;
                };
                let n = e.enqueue_depth.map_or(0, |d| d.count());
                let f = enqueues.get(&ip).copied().unwrap_or(0);
                rep.check(
                    n == f,
                    format!("{tag}: {ip}: depths at enqueue {n} == ftrace's real enqueues {f}"),
                );
            }
        }
        // Records with a client address: exact everywhere. Listener and
        // UDP records: exact too, except in the "wait" scenario, where
        // nfsdtop attaches while nfsd starts its listeners and ftrace can
        // only be switched on once sunrpc is loaded.
        let ft_other: u64 = ft.other_services.values().sum();
        let ft_real = ft.total - ft.listener - ft_other;
        let real = total.saturating_sub(listener);
        rep.check(
            real == ft_real,
            format!("{tag}: dispatches from clients: nfsdtop {real} == ftrace {ft_real}"),
        );
        // Other services (lockd: the main load makes NULL calls to it over
        // TCP and UDP): counted apart, by server port, exactly.
        let services = &last.server.services;
        let nfsd_row = services.iter().find(|r| r.service == "nfsd");
        rep.check(
            nfsd_row.is_some_and(|r| r.dispatches == total && r.ports.contains(&2049)),
            format!("{tag}: server.services' nfsd row has every dispatch ({total}) and port 2049: {nfsd_row:?}"),
        );
        let mut other: BTreeMap<u16, u64> = BTreeMap::new();
        for r in services.iter().filter(|r| r.service != "nfsd") {
            for p in &r.ports {
                *other.entry(*p).or_default() += r.dispatches;
            }
        }
        exact_unless_wait(
            rep,
            tag,
            other == ft.other_services,
            format!(
                "{tag}: other services' dispatches by server port (lockd's), kept out of nfsd's: nfsdtop {other:?} == ftrace {:?}",
                ft.other_services
            ),
        );
        if tag.starts_with("main") {
            let calls = summary.get("lockd_calls.main").map(String::as_str);
            rep.check(
                calls.is_some_and(|n| n != "0") && ft_other > 0,
                format!("{tag}: lockd answered NULL calls during the load ({calls:?} of 6) and ftrace saw {ft_other} dispatches of it"),
            );
        }
        super::services::check_other_services(tag, last, &ft, &trace, summary, tag != "wait", rep);
        // Execution: svc_stats_latency per client, the requests exactly
        // (the default adds most of them up in the kernel), their
        // `execute` summed within tolerance::exec_slack_s.
        for ip in ft.per_client.keys() {
            let (requests, us) = ft.exec_per_client.get(ip).copied().unwrap_or((0, 0));
            let f = us as f64 / 1e6;
            let (n_requests, n) = executions.get(ip).copied().unwrap_or((0, 0.0));
            rep.check(
                requests > 0 && n_requests == requests,
                format!("{tag}: {ip}: nfsdtop {n_requests} executions == ftrace {requests} svc_stats_latency"),
            );
            let slack = tolerance::exec_slack_s(f, requests);
            rep.check(
                (n - f).abs() <= slack,
                format!(
                    "{tag}: {ip}: nfsdtop {n:.6} s execution == ftrace {f:.6} s within {slack:.6} s ({:+.1} µs a request)",
                    (n - f) * 1e6 / requests.max(1) as f64
                ),
            );
        }
        // The workload: requests exact, bytes within fio's data and a KiB
        // of headers a request, or null where not measured.
        let ran = clients::from_summary(summary);
        let clients: Vec<workload::ClientLoad> = ran
            .iter()
            .map(|c| {
                let (name, ip) = (c.name.as_str(), c.ip);
                workload::ClientLoad {
                    name,
                    ip,
                    fio: workload::fio_bytes(&results.join(format!("fio-{trace_tag}-{name}.json"))),
                    ftrace_requests: ft.exec_per_client.get(&ip).map_or(0, |e| e.0),
                }
            })
            .collect();
        // Wherever a slot with a typed program is raw, every kernel of the
        // matrix takes the typed one (plain loads): a fallback to the raw
        // one's helper calls is a failure, with the reason it gives.
        let detail = &last.source.detail;
        let untyped = workload::untyped_raw_slots(detail);
        rep.check(
            untyped.is_empty(),
            format!("{tag}: typed programs read every raw slot that has one (not: {untyped:?}; source: {detail})"),
        );
        let measured = last.source.detail.contains(workload::BYTES_MEASURED);
        for (ok, what) in workload::check(&last.entities, measured, &clients) {
            rep.check(ok, format!("{tag}: {what}"));
        }
        // Procedures: per client exactly as ftrace's proc=, and summed as
        // the kernel's own counters grew.
        let counts = last.source.detail.contains(procedures::PROCEDURES_MEASURED);
        let named: Vec<(&str, std::net::IpAddr)> = clients.iter().map(|c| (c.name, c.ip)).collect();
        let rpc = |when: &str| {
            fs::read_to_string(results.join(format!("rpc-nfsd-{when}-{trace_tag}.txt"))).ok()
        };
        let (before, after) = (rpc("before"), rpc("after"));
        let rpc = before.as_deref().zip(after.as_deref());
        for (ok, what) in
            procedures::check(&last.entities, counts, &ft.procs_per_client, &named, rpc)
        {
            rep.check(ok, format!("{tag}: {what}"));
        }
        if counts {
            let every_timed = last.source.detail.contains(procedures::EVERY_REQUEST_TIMED);
            for (ok, what) in procedures::check_p99(
                &last.entities,
                &ft.exec_us_per_client_proc,
                &named,
                every_timed,
            ) {
                rep.check(ok, format!("{tag}: {what}"));
            }
        }
        exact_unless_wait(
            rep,
            tag,
            listener == ft.listener,
            format!(
                "{tag}: listener/UDP dispatches: nfsdtop {listener} == ftrace {}",
                ft.listener
            ),
        );
        // Every client has unmounted and the server has closed every
        // connection: nothing is on the ready queue, so no entity may be
        // backlogged (a stale queued transport would inflate every fair
        // share computed after it).
        let backlogged = last.totals.backlogged;
        // Who: the entities whose backlogged time still grew over the last
        // interval.
        let before: BTreeMap<&str, f64> = lines
            .len()
            .checked_sub(2)
            .into_iter()
            .flat_map(|i| &lines[i].entities)
            .map(|e| (e.name.as_ref(), e.backlogged_seconds))
            .collect();
        let stuck: Vec<String> = last
            .entities
            .iter()
            .filter_map(|e| {
                let name = e.name.as_str();
                let b = e.backlogged_seconds;
                (b > before.get(name).copied().unwrap_or(0.0) + 1e-6).then(|| {
                    format!(
                        "{name}: backlogged {b:.1} s in all, entitled {:.1} for {} dispatches",
                        e.entitled, e.dispatches
                    )
                })
            })
            .collect();
        rep.check(
            backlogged == 0,
            format!(
                "{tag}: nothing backlogged once the server is idle (backlogged {backlogged}; still backlogged: [{}])",
                stuck.join(", ")
            ),
        );
    } else {
        // Loss expected: counted, and nothing counted that did not happen.
        rep.check(
            lost > 0,
            format!("{tag}: nfsdtop counted the loss: events_lost {lost} > 0"),
        );
        for ip in &all {
            let n = peers.get(ip).map(|p| p.0).unwrap_or(0);
            let f = ft.per_client.get(ip).copied().unwrap_or(0);
            rep.check(
                n <= f,
                format!("{tag}: {ip}: nfsdtop {n} dispatches <= ftrace {f}"),
            );
            // Nothing counted twice, folded or not.
            let (requests, _) = ft.exec_per_client.get(ip).copied().unwrap_or((0, 0));
            let (n_requests, _) = executions.get(ip).copied().unwrap_or((0, 0.0));
            rep.check(
                n_requests <= requests,
                format!("{tag}: {ip}: nfsdtop {n_requests} executions <= ftrace {requests} svc_stats_latency"),
            );
        }
        // The per-CPU loss counters make the total whole again: every
        // dequeue record was either delivered or counted as lost.
        let (d, l) = (last.totals.dispatches, last.totals.lost_dispatches);
        if tag == "wait" {
            // Listener records are not comparable here (see above).
            let (real, ft_real) = (d.saturating_sub(listener), ft.total - ft.listener);
            rep.check(
                real <= ft_real && real + l >= ft_real,
                format!(
                    "{tag}: client dispatches delivered {real} <= ftrace {ft_real} <= delivered + lost {l}"
                ),
            );
        } else {
            let ftrace_total = ft.total;
            rep.check(
                d + l == ftrace_total,
                format!("{tag}: delivered {d} + lost {l} dispatches == ftrace {ftrace_total}"),
            );
        }
    }
    Some(Measured { lines, peers })
}

/// Listener, UDP and other services' dispatches are exact, except in the
/// "wait" scenario: there nfsdtop attaches while nfsd starts its
/// listeners, and ftrace can only be switched on once sunrpc is loaded.
fn exact_unless_wait(rep: &mut Report, tag: &str, ok: bool, what: String) {
    if tag == "wait" {
        rep.note(format!("{what} (not compared)"));
    } else {
        rep.check(ok, what);
    }
}
