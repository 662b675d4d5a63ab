//! The other RPC services against the kernel: lockd's transports, which
//! the main load calls (NULL over TCP and UDP, NLM4 TEST over TCP), are
//! nfsdtop's `server.services` rows by server port; each client's
//! dispatches there equal ftrace's for that port, its entitled
//! dispatches the definition applied to that port's records alone, and
//! the port that answered TEST is named lockd.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::batch::Line;
use super::fairshare::{self, EnqueueRule, Peer};
use super::ftrace::Ftrace;
use super::report::Report;
use super::tolerance;

/// Each other service's clients in the last line against ftrace `ft` of
/// the same load (`trace`, its text). `compare`: false where nfsdtop
/// attached after the records began (they are then only noted).
pub fn check_other_services(
    tag: &str,
    last: &Line,
    ft: &Ftrace,
    trace: &str,
    summary: &BTreeMap<String, String>,
    compare: bool,
    rep: &mut Report,
) {
    let mut check = |ok: bool, what: String| {
        if compare {
            rep.check(ok, what);
        } else {
            rep.note(format!("{what} (not compared)"));
        }
    };
    let rule = EnqueueRule::of_generation(&last.source.generation);
    let rows = last.server.services.iter().filter(|r| r.service != "nfsd");
    let mut seen: BTreeMap<(u16, IpAddr), u64> = BTreeMap::new();
    for row in rows {
        let [port] = row.ports[..] else { continue };
        let truth = fairshare::entitled_in(trace, rule, Some(port));
        for p in &row.peers {
            let Ok(ip) = p.peer.parse::<IpAddr>() else {
                continue;
            };
            seen.insert((port, ip), p.dispatches);
            let (fd, fent) = truth.get(&Peer::Client(ip)).copied().unwrap_or_default();
            let slack = tolerance::entitled_slack(fent);
            check(
                (p.entitled - fent).abs() <= slack,
                format!(
                    "{tag}: {} port {port}: {ip}: nfsdtop entitled {:.1} == ftrace's by the definition \
                     within that service {fent:.1} (dispatches {} and {fd}) within {slack:.1}",
                    row.service, p.entitled, p.dispatches
                ),
            );
        }
        let procs = ft.other_procs.get(&port);
        let nlm = procs.is_some_and(|p| p.contains_key("TEST"));
        if nlm {
            check(
                row.service == "lockd",
                format!(
                    "{tag}: port {port} answered NLM TEST (ftrace {procs:?}): nfsdtop names it {:?} == \"lockd\"",
                    row.service
                ),
            );
        }
    }
    check(
        seen == ft.other_per_client,
        format!(
            "{tag}: other services' dispatches per port and client: nfsdtop {seen:?} == ftrace {:?}",
            ft.other_per_client
        ),
    );
    if tag.starts_with("main") {
        let tests = summary.get("lockd_tests.main").map(String::as_str);
        let named = last.server.services.iter().any(|r| r.service == "lockd");
        let ft_tests: u64 = ft.other_procs.values().filter_map(|p| p.get("TEST")).sum();
        rep.check(
            tests.is_some_and(|n| n != "0") && ft_tests > 0 && named,
            format!(
                "{tag}: lockd answered TEST calls ({tests:?} of 4, TCP and UDP), ftrace saw {ft_tests} of them, \
                 and nfsdtop named a port lockd: {named}"
            ),
        );
    }
}
