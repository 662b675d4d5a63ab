//! Unit tests of the host-side parsers (ftrace text, loss counters,
//! kernel versions, client addresses).

use std::net::IpAddr;

use super::clients;
use super::expected_wait_source;
use super::ftrace::{ftrace_losses, parse_trace};

const TRACE: &str = "\
# tracer: nop
#
        nfsd-412     [001] ..... 101.000001: svc_xprt_dequeue: server=10.99.1.1:2049 client=10.99.1.2:812 flags=BUSY|DATA|TEMP|CONG_CTRL wakeup-us=12
        nfsd-413     [000] ..... 101.000002: svc_xprt_dequeue: server=[fd99:3::1]:2049 client=[fd99:3::2]:700 flags=BUSY|DATA|TEMP wakeup-us=3
        nfsd-413     [000] ..... 101.000003: svc_xprt_dequeue: server=[fd99:3::1]:2049 client=[fd99:3::2]:701 flags=BUSY|DATA|TEMP wakeup-us=3
        nfsd-412     [001] ..... 101.000004: svc_xprt_dequeue: server=0.0.0.0:2049 client=\u{1}junk flags=BUSY|CONN|LISTENER wakeup-us=1
      <idle>-0       [001] ..s.. 101.000005: svc_xprt_enqueue: server=10.99.1.1:2049 client=10.99.1.2:812 flags=DATA|TEMP
        nfsd-221     [000] .....    32.825232: svc_xprt_dequeue: server=0.0.0.0:2049 client=(einval) flags=XPT_BUSY|XPT_CONN|XPT_CHNGBUF|XPT_LISTENER|XPT_CACHE_AUTH wakeup-us=5688
        nfsd-221     [000] .....    32.827532: svc_xprt_dequeue: server=0.0.0.0:2049 client=10.99.2.2 flags=XPT_BUSY|XPT_CONN|XPT_LISTENER wakeup-us=7952
        nfsd-412     [001] ..... 98.167204: svc_xprt_dequeue: server=0.0.0.0:43815 client=(einval) flags=BUSY|DATA|CHNGBUF|0x40000 wakeup-us=4
       lockd-486     [000] .....    61.564030: svc_xprt_dequeue: server=0.0.0.0:53601 client=10.99.2.2:686 flags=XPT_BUSY|XPT_DATA|XPT_CHNGBUF wakeup-us=61620382
        nfsd-412     [001] ..... 101.000006: svc_xprt_dequeue: server=10.99.1.1:4045 client=10.99.1.2:900 flags=BUSY|DATA wakeup-us=2
        nfsd-412     [001] ..... 101.000007: svc_stats_latency: xid=0x5d1c2a01 server=10.99.1.1:2049 client=10.99.1.2:812 proc=READ execute-us=120
        nfsd-413     [000] ..... 101.000008: svc_stats_latency: xid=0x5d1c2a02 server=10.99.1.1:2049 client=10.99.1.2:812 proc=GETATTR execute-us=31
       lockd-486     [000] ..... 101.000009: svc_stats_latency: xid=0x5d1c2a03 server=10.99.1.1:4045 client=10.99.1.2:900 proc=TEST execute-us=9
";

#[test]
fn trace_counts_per_client() {
    let f = parse_trace(TRACE);
    assert_eq!(f.total, 9);
    // nfsd's: the LISTENER ones and the empty client on 2049.
    assert_eq!(f.listener, 3);
    assert_eq!(f.enqueue, 1);
    assert_eq!(f.unparsed, 0);
    assert_eq!(f.per_client[&"10.99.1.2".parse::<IpAddr>().unwrap()], 1);
    assert_eq!(f.per_client[&"fd99:3::2".parse::<IpAddr>().unwrap()], 2);
    // lockd's, by port: TCP with a client, UDP without one or with a
    // stale one printed.
    assert_eq!(f.other_services[&4045], 1);
    assert_eq!(f.other_services[&43815], 1);
    assert_eq!(f.other_services[&53601], 1);
    // Per client: the TCP one only (53601's printed client is stale).
    let lockd_client = (4045, "10.99.1.2".parse::<IpAddr>().unwrap());
    assert_eq!(f.other_per_client.len(), 1);
    assert_eq!(f.other_per_client[&lockd_client], 1);
    assert_eq!(f.other_procs[&4045]["TEST"], 1);
    assert!(!f.other_procs.contains_key(&2049));
    let c1: IpAddr = "10.99.1.2".parse().unwrap();
    assert_eq!(f.exec_per_client[&c1], (2, 151), "nfsd's only");
}

/// Real enqueues per client, by each kernel generation's rule: on 6.6+
/// an attempt with BUSY, or without a reason to queue, is not one;
/// listeners and other services are not clients of nfsd.
#[test]
fn real_enqueues_per_client() {
    use super::fairshare::{real_enqueues, EnqueueRule};
    let trace = "\
 x-1 [000] ..... 1.000001: svc_xprt_enqueue: server=10.99.1.1:2049 client=10.99.1.2:812 flags=DATA|TEMP
 x-1 [000] ..... 1.000002: svc_xprt_enqueue: server=10.99.1.1:2049 client=10.99.1.2:812 flags=BUSY|DATA|TEMP
 x-1 [000] ..... 1.000003: svc_xprt_enqueue: server=10.99.1.1:2049 client=10.99.1.2:813 flags=TEMP
 x-1 [000] ..... 1.000004: svc_xprt_enqueue: server=[fd99:3::1]:2049 client=[fd99:3::2]:700 flags=CLOSE
 x-1 [000] ..... 1.000005: svc_xprt_enqueue: server=0.0.0.0:2049 client=(einval) flags=CONN|LISTENER
 x-1 [000] ..... 1.000006: svc_xprt_enqueue: server=10.99.1.1:4045 client=10.99.1.2:900 flags=DATA
";
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let n = real_enqueues(trace, EnqueueRule::Attempts);
    assert_eq!(n.len(), 2, "{n:?}");
    assert_eq!((n[&ip("10.99.1.2")], n[&ip("fd99:3::2")]), (1, 1));
    let every = real_enqueues(trace, EnqueueRule::EveryRecord);
    assert_eq!(every[&ip("10.99.1.2")], 3);
}

#[test]
fn ftrace_stats_losses() {
    let ok = "== cpu0\nentries: 5\noverrun: 0\ncommit overrun: 0\nbytes: 9\ndropped events: 0\n== cpu1\noverrun: 0\n";
    assert_eq!(ftrace_losses(ok), Some(0));
    let bad = "== cpu0\noverrun: 3\ncommit overrun: 0\n== cpu1\noverrun: 0\ndropped events: 2\n";
    assert_eq!(ftrace_losses(bad), Some(5));
    assert_eq!(ftrace_losses(""), None);
}

#[test]
fn wait_source_by_kernel() {
    assert_eq!(expected_wait_source("6.1.0-50-amd64"), "enqueue-dequeue");
    assert_eq!(
        expected_wait_source("6.12.57+deb13-amd64"),
        "enqueue-dequeue"
    );
    assert_eq!(expected_wait_source("6.16.3+deb14-amd64"), "qtime");
    assert_eq!(expected_wait_source("7.2.13+deb14-amd64"), "qtime");
}

#[test]
fn client_addresses_and_their_way_back_from_the_summary() {
    let three = clients::for_count(3);
    let ips: Vec<String> = three.iter().map(|c| c.ip.to_string()).collect();
    assert_eq!(ips, ["10.99.1.2", "10.99.2.2", "fd99:3::2"]);
    assert_eq!(
        clients::guest_config(&three),
        "c1:4:1:3:randread:4k:16 c2:4:4:3:randread:4k:16 c3:6:8:3:randread:4k:16"
    );
    let many = clients::for_count(16);
    assert_eq!(many.len(), 16);
    assert!(many.iter().any(|c| c.vers == "4.2") && many.iter().any(|c| c.nconnect == 16));
    // As the guest writes them (scripts/vm/guest-init.sh), in an order
    // that is not the clients' (c10 sorts before c2).
    let summary: std::collections::BTreeMap<String, String> = many
        .iter()
        .map(|c| {
            (
                format!("client.{}", c.name),
                format!(
                    "{} nconnect={} vers={} fio={}/{}/{}",
                    c.ip, c.nconnect, c.vers, c.fio.rw, c.fio.bs, c.fio.iodepth
                ),
            )
        })
        .collect();
    assert_eq!(clients::from_summary(&summary), many);
}
