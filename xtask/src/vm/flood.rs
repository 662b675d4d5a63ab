//! Fault "flood" (scripts/vm/fault-flood.sh): thousands of short-lived
//! connections from many addresses against small peer and transport
//! bounds: bounded tables, counted evictions, exact real clients, bounded
//! memory.

use std::collections::BTreeMap;
use std::fs;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use super::batch;
use super::ftrace::{field, ftrace_losses, parse_trace};
use super::report::Report;
use super::{clients, num};

/// this much over the flood. With `--max-peers 64 --max-transports 256`
/// its tables hold at most ~72 entities and ~288 transports (well under
/// 1 MiB); the rest is allocator slack. VmRSS itself also grows as the
/// 16 MiB ring's pages are touched (RssFile), so it is bounded by
/// FLOOD_HWM_KB instead.
const FLOOD_RSS_GROWTH_KB: u64 = 4 << 10;
/// Peak RSS bound of the agent in the flood (its whole life): the 16 MiB
/// ring, the binary, BPF object and maps' user-side copies, and the bounded
/// tables; measured ~42 MiB on trixie (see scripts/vm/README.md).
const FLOOD_HWM_KB: u64 = 64 << 10;

/// A flood of short-lived connections from many addresses
/// (fault-flood.sh), nfsdtop with small limits: it keeps running, the
/// peers it holds stay within the bound plus one eviction batch in every
/// line, evictions are counted, the real clients' counts stay exact, and
/// its memory stays bounded.
pub fn check(results: &Path, summary: &BTreeMap<String, String>, rep: &mut Report) {
    rep.note("-- fault \"flood\"");
    if let Some(e) = summary.get("flood.error") {
        rep.check(false, format!("flood: {e}"));
        return;
    }
    let max_peers = num(summary, "flood.max_peers").unwrap_or(0);
    let conns = num(summary, "flood.connections").unwrap_or(0);
    let sources = num(summary, "flood.sources").unwrap_or(0);
    rep.note(format!(
        "flood: {conns} connections ({} failed) from {sources} addresses in {} s (guest t {}..{}), limits: peers {max_peers}, transports {}",
        summary.get("flood.failed").map(String::as_str).unwrap_or("?"),
        summary.get("flood.seconds").map(String::as_str).unwrap_or("?"),
        summary.get("flood.t_start").map(String::as_str).unwrap_or("?"),
        summary.get("flood.t_end").map(String::as_str).unwrap_or("?"),
        summary.get("flood.max_transports").map(String::as_str).unwrap_or("?"),
    ));
    rep.check(
        max_peers > 0 && sources > 2 * max_peers && conns >= 1000,
        format!("flood: thousands of connections ({conns} >= 1000) from more distinct client addresses ({sources}) than twice the peer bound ({max_peers})"),
    );
    let trace = fs::read_to_string(results.join("trace-flood.txt")).unwrap_or_default();
    let ft = parse_trace(&trace);
    let stats = fs::read_to_string(results.join("ftrace-stats-flood.txt")).unwrap_or_default();
    let lost = ftrace_losses(&stats);
    rep.check(
        lost == Some(0),
        format!("flood: ftrace lost no records ({lost:?})"),
    );
    let flood_net: std::net::Ipv6Addr = "fd99:99::".parse().expect("valid address");
    let in_flood = |ip: &IpAddr| match ip {
        IpAddr::V6(a) => a.segments()[..4] == flood_net.segments()[..4],
        IpAddr::V4(_) => false,
    };
    let flood_peers = ft.per_client.keys().filter(|ip| in_flood(ip)).count() as u64;
    let flood_dispatches: u64 = ft
        .per_client
        .iter()
        .filter(|(ip, _)| in_flood(ip))
        .map(|(_, n)| n)
        .sum();
    rep.check(
        flood_peers > 2 * max_peers,
        format!("flood: ftrace saw dispatches from {flood_peers} flood addresses ({flood_dispatches} dispatches, {} listener)", ft.listener),
    );
    // The flood ran while fio did: every real client was dispatched
    // between the flood's first and last dispatch (ftrace timestamps).
    let (window, during) = flood_overlap(&trace, &in_flood);
    for c in clients::from_summary(summary) {
        let (name, ip) = (&c.name, c.ip);
        let n = during.get(&ip).copied().unwrap_or(0);
        rep.check(
            n > 0,
            format!("flood: {name} ({ip}) was dispatched {n} times during the flood (ftrace {window:?} s)"),
        );
    }
    let err = fs::read_to_string(results.join("nfsdtop-flood.err")).unwrap_or_default();
    let lines = batch::read(&results.join("nfsdtop-flood.jsonl"));
    let exit = summary
        .get("nfsdtop_exit.nfsdtop-flood")
        .map(String::as_str);
    rep.check(
        summary.get("flood.alive_after").map(String::as_str) == Some("yes") && exit == Some("0"),
        format!(
            "flood: nfsdtop kept running through the flood ({:?}) and exited 0 when stopped ({exit:?})",
            summary.get("flood.alive_after")
        ),
    );
    let lines = match lines {
        Ok(lines) => lines,
        Err(e) => {
            rep.check(false, format!("flood: {e}"));
            return;
        }
    };
    let Some(last) = lines.last() else {
        rep.check(
            false,
            format!("flood: nfsdtop printed no line: {}", err.trim()),
        );
        return;
    };
    let kind = last.source.kind.as_str();
    if kind != "live" {
        rep.check(
            false,
            format!("flood: nfsdtop used the {kind:?} source: {}", err.trim()),
        );
        return;
    }
    let bound = max_peers + max_peers / 8;
    // Every line has `totals.peers` (the typed record requires it).
    let most = lines
        .iter()
        .map(|l| l.totals.peers)
        .max()
        .unwrap_or(u64::MAX);
    rep.check(
        most <= bound,
        format!(
            "flood: peers held never above {max_peers} + one eviction batch = {bound} (at most {most} in {} lines)",
            lines.len()
        ),
    );
    let t = &last.totals;
    let evicted = t.peers_evicted;
    rep.check(
        evicted > 0,
        format!(
            "flood: evictions counted: peers_evicted {evicted} (transports {}, transports_evicted {})",
            t.transports, t.transports_evicted
        ),
    );
    let events_lost = t.events_lost;
    rep.check(
        events_lost == 0,
        format!("flood: nfsdtop events_lost {events_lost} == 0"),
    );
    if events_lost == 0 {
        let mut listener = 0;
        let mut peers = BTreeMap::new();
        for e in &last.entities {
            let d = e.dispatches;
            match e.name.parse::<IpAddr>() {
                Ok(ip) => {
                    peers.insert(ip, d);
                }
                Err(_) if e.name == "(listener)" => listener += d,
                Err(_) => {}
            }
        }
        for c in clients::from_summary(summary) {
            let (name, ip) = (&c.name, c.ip);
            let n = peers.get(&ip).copied().unwrap_or(0);
            let f = ft.per_client.get(&ip).copied().unwrap_or(0);
            rep.check(
                n == f && f > 0,
                format!("flood: {name} {ip}: nfsdtop {n} dispatches == ftrace {f}"),
            );
        }
        let total = t.dispatches;
        rep.check(
            total == ft.total,
            format!(
                "flood: all dispatches, evicted peers' included: nfsdtop {total} == ftrace {}",
                ft.total
            ),
        );
        rep.check(
            listener == ft.listener,
            format!(
                "flood: listener/UDP dispatches: nfsdtop {listener} == ftrace {}",
                ft.listener
            ),
        );
    }
    let backlogged = t.backlogged;
    rep.check(
        backlogged == 0,
        format!("flood: nothing backlogged once the server is idle ({backlogged})"),
    );
    // Sampled by the flood client itself (guest /proc/PID/status) when
    // it starts and ends flooding.
    let rss0 = num(summary, "flood.vmrss_start_kb");
    let rss1 = num(summary, "flood.vmrss_end_kb");
    let anon0 = num(summary, "flood.rssanon_start_kb");
    let anon1 = num(summary, "flood.rssanon_end_kb");
    let hwm = num(summary, "flood.vmhwm_end_kb");
    rep.check(
        matches!((anon0, anon1), (Some(a), Some(b)) if b <= a + FLOOD_RSS_GROWTH_KB),
        format!(
            "flood: agent RssAnon {anon0:?} kB at the start, {anon1:?} kB at the end of the flood (growth <= {FLOOD_RSS_GROWTH_KB} kB); VmRSS {rss0:?} -> {rss1:?} kB"
        ),
    );
    rep.check(
        hwm.is_some_and(|h| h <= FLOOD_HWM_KB),
        format!("flood: agent peak RSS (VmHWM) {hwm:?} kB <= {FLOOD_HWM_KB} kB"),
    );
}

/// The ftrace time window of the flood's dispatches (first, last) and
/// every other client's dispatches inside it.
fn flood_overlap(
    trace: &str,
    in_flood: &dyn Fn(&IpAddr) -> bool,
) -> (Option<(f64, f64)>, BTreeMap<IpAddr, u64>) {
    let dequeues: Vec<(f64, IpAddr)> = trace
        .lines()
        .filter_map(|line| {
            let (head, rest) = line.split_once(" svc_xprt_dequeue: ")?;
            let ts = head.split_whitespace().last()?.trim_end_matches(':');
            let client = field(rest, "client")?.parse::<SocketAddr>().ok()?;
            Some((ts.parse().ok()?, client.ip()))
        })
        .collect();
    let flood_ts = dequeues.iter().filter(|(_, ip)| in_flood(ip)).map(|d| d.0);
    let window = flood_ts
        .clone()
        .reduce(f64::min)
        .zip(flood_ts.reduce(f64::max));
    let mut during = BTreeMap::new();
    if let Some((a, b)) = window {
        for (ts, ip) in &dequeues {
            if (a..=b).contains(ts) && !in_flood(ip) {
                *during.entry(*ip).or_default() += 1;
            }
        }
    }
    (window, during)
}
