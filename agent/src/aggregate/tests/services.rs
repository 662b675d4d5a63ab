//! The services other than nfsd (`aggregate::services`) as the aggregator
//! sees them: kept out of nfsd's numbers, each with its own fair shares,
//! name and limits, redacted alike, and a port learnt to be nfsd's.

use super::*;

#[test]
fn other_services_stay_out_of_nfsds_numbers() {
    // lockd: a UDP transport (no client address) on its own port, and a
    // TCP connection from the NFS client 10.0.0.2 on another; nfsd: one
    // connection from each of two clients, both backlogged throughout.
    let lockd = |client: Option<&str>, port: u16, kind: EventKind, ts: u64| Event {
        ts_ns: ts,
        xprt: XprtKey {
            netns: 1,
            server: ep(&format!("10.0.0.1:{port}")),
            client: client.map_or(Endpoint::None, ep),
        },
        kind,
    };
    let deq = EventKind::Dequeue {
        qtime_ns: None,
        class: None,
    };
    let mut s = Script::new();
    s.enq("10.0.0.2:1").enq("10.0.0.3:1");
    for ts in [10_000, 11_000] {
        s.agg.ingest(&lockd(
            None,
            53601,
            EventKind::Enqueue { inflight: None },
            ts,
        ));
        s.agg.ingest(&lockd(None, 53601, deq, ts + 1));
        s.agg.ingest(&lockd(
            Some("10.0.0.2:900"),
            4045,
            EventKind::Enqueue { inflight: None },
            ts + 2,
        ));
        s.agg
            .ingest(&lockd(Some("10.0.0.2:900"), 4045, deq, ts + 3));
    }
    // A lockd connection left queued: nothing of nfsd's may stay
    // backlogged for it.
    s.agg.ingest(&lockd(
        Some("10.0.0.3:901"),
        4045,
        EventKind::Enqueue { inflight: None },
        12_000,
    ));
    s.agg.ingest(&lockd(
        Some("10.0.0.2:900"),
        4045,
        EventKind::Executed {
            exec_ns: 5_000,
            requests: 2,
            bytes: None,
            procedure: None,
        },
        12_001,
    ));
    s.ts = 20_000;
    // Each nfsd dispatch: two peers backlogged, V += 1/2.
    s.deq("10.0.0.2:1").enq("10.0.0.2:1");
    s.deq("10.0.0.3:1");
    let snap = s.snap();
    let a = peer(&snap, "10.0.0.2");
    let b = peer(&snap, "10.0.0.3");
    assert_eq!((a.dispatches, b.dispatches), (1, 1));
    assert!(
        close(a.entitled, 1.0) && close(b.entitled, 1.0),
        "{a:?} {b:?}"
    );
    assert_eq!((a.connections, a.executions), (1, 0));
    assert_eq!(snap.totals.dispatches, 2);
    assert!(!snap.peers.iter().any(|p| p.name == "(listener)"));
    // Only 10.0.0.2's nfsd connection is still queued.
    assert_eq!(snap.totals.backlogged, 1);
    let services = s.agg.services();
    let row = |port: u16| services.iter().find(|r| r.ports == [port]).unwrap();
    assert_eq!(
        (services[0].service.as_str(), services[0].dispatches),
        ("nfsd", 2)
    );
    assert_eq!(
        (row(53601).dispatches, row(53601).listener_dispatches),
        (2, 2)
    );
    assert_eq!((row(4045).dispatches, row(4045).requests), (2, 2));
    // No request named a procedure: told apart by port only.
    assert_eq!(row(4045).service, "other");
    // lockd's own peers: 10.0.0.2 alone backlogged at each of its two
    // dispatches (entitled 2); 10.0.0.3 queued since, never dispatched.
    let lp = &row(4045).peers;
    assert_eq!(row(4045).peer_count, Some(2));
    assert_eq!(
        (lp[0].peer.as_str(), lp[0].dispatches, lp[0].entitled),
        ("10.0.0.2", 2, 2.0)
    );
    assert_eq!((lp[1].peer.as_str(), lp[1].dispatches), ("10.0.0.3", 0));
    assert!(lp[1].backlogged && !lp[0].backlogged);
    assert_eq!(row(53601).peers[0].peer, "(listener)");
    // nfsd on another port, learnt from its portlist: its transports count.
    // (Before any other event there: a port learnt later only adds.)
    let mut s = Script::new();
    s.agg
        .add_nfsd_ports(&crate::aggregate::services::NfsdPorts::from_ports(&[4045]));
    s.agg.ingest(&lockd(Some("10.0.0.2:900"), 4045, deq, 1));
    assert_eq!(s.snap().totals.dispatches, 1);
}

#[test]
fn each_other_service_has_its_own_fair_shares_and_its_name() {
    // lockd on 4045: A and B both queued, A dispatched (each earns 1/2),
    // then B alone backlogged at its dispatch (earns 1): entitled A 0.5,
    // B 1.5 of 2 dispatches. nfsd meanwhile has its own two peers, each
    // dispatched once with both backlogged: 1 and 1, untouched by lockd.
    let proc = |name: &str| EventKind::Procedure {
        name: crate::model::ProcName::new(name),
        requests: 1,
        exec_ns: 1_000,
    };
    let mut s = Script::new();
    s.enq("10.0.0.2:1").enq("10.0.0.3:1");
    // Rows made before lockd appeared: its first interval starts there
    // (its rates' denominator), not at its first event.
    let t0 = s.ts;
    s.agg.snapshot(t0, 0.0, &SourceInfo::default());
    assert_eq!(s.agg.services().len(), 1);
    s.agg.ingest(&on_port(
        4045,
        "10.0.0.5:700",
        EventKind::Enqueue { inflight: None },
        1_000,
    ));
    s.agg.ingest(&on_port(
        4045,
        "10.0.0.6:700",
        EventKind::Enqueue { inflight: None },
        1_001,
    ));
    s.agg.ingest(&on_port(4045, "10.0.0.5:700", DEQ, 1_002));
    s.agg
        .ingest(&on_port(4045, "10.0.0.5:700", proc("NULL"), 1_003));
    s.agg.ingest(&on_port(4045, "10.0.0.6:700", DEQ, 1_004));
    s.agg
        .ingest(&on_port(4045, "10.0.0.6:700", proc("LOCK"), 1_005));
    // The callback service on a client's port: named by COMPOUND.
    s.agg.ingest(&on_port(40_000, "10.0.0.9:2049", DEQ, 1_006));
    s.agg
        .ingest(&on_port(40_000, "10.0.0.9:2049", proc("COMPOUND"), 1_007));
    // A port whose requests named only NULL: no name.
    s.agg
        .ingest(&on_port(5_000, "10.0.0.9:800", proc("NULL"), 1_008));
    s.ts = 2_000;
    s.deq("10.0.0.2:1").enq("10.0.0.2:1");
    s.deq("10.0.0.3:1");
    let snap = s.snap();
    assert_eq!(snap.totals.dispatches, 2);
    assert!(close(peer(&snap, "10.0.0.2").entitled, 1.0));
    assert!(snap.peers.iter().all(|p| !p.name.starts_with("10.0.0.5")));
    let services = s.agg.services();
    let row = |port: u16| services.iter().find(|r| r.ports == [port]).unwrap();
    let lockd = row(4045);
    assert_eq!((lockd.service.as_str(), lockd.dispatches), ("lockd", 2));
    let p = |name: &str| lockd.peers.iter().find(|p| p.peer == name).unwrap();
    assert!(close(p("10.0.0.5").entitled, 0.5), "{lockd:?}");
    assert!(close(p("10.0.0.6").entitled, 1.5), "{lockd:?}");
    assert!(close(p("10.0.0.5").fairness.unwrap(), 2.0));
    assert!(close(p("10.0.0.6").share, 0.5));
    assert!(
        (p("10.0.0.6").dispatch_rate - 1e9 / (s.ts - t0) as f64).abs() < 1e-3,
        "{lockd:?}"
    );
    assert_eq!(row(40_000).service, "nfs_callback");
    assert_eq!(row(5_000).service, "other");
    assert_eq!(crate::aggregate::services::service_named_by("NULL"), None);
    assert_eq!(
        crate::aggregate::services::service_named_by("GETATTR"),
        None
    );
}

#[test]
fn other_services_peers_are_redacted_like_nfsds() {
    let mut agg = Aggregator::default().with_redactor(Redactor::with_key("k"));
    let ev = |port: u16, ts: u64| Event {
        ts_ns: ts,
        xprt: XprtKey {
            netns: 1,
            server: ep(&format!("10.0.0.1:{port}")),
            client: ep("10.0.0.5:700"),
        },
        kind: EventKind::Dequeue {
            qtime_ns: None,
            class: None,
        },
    };
    agg.ingest(&ev(2049, 1));
    agg.ingest(&ev(4045, 2));
    let snap = agg.snapshot(10, 0.0, &SourceInfo::default());
    let services = agg.services();
    let lockd = &services[1].peers[0].peer;
    assert!(!lockd.contains("10.0.0.5"), "{lockd}");
    assert_eq!(lockd, &snap.peers[0].name, "the same pseudonym as nfsd's");
}

/// An event of a transport on server port `port` from `client`.
fn on_port(port: u16, client: &str, kind: EventKind, ts: u64) -> Event {
    Event {
        ts_ns: ts,
        xprt: XprtKey {
            netns: 1,
            server: ep(&format!("10.0.0.1:{port}")),
            client: ep(client),
        },
        kind,
    }
}

const DEQ: EventKind = EventKind::Dequeue {
    qtime_ns: None,
    class: None,
};

fn procedure(name: &str, requests: u64) -> EventKind {
    EventKind::Procedure {
        name: crate::model::ProcName::new(name),
        requests,
        exec_ns: 1,
    }
}

#[test]
fn a_port_is_named_by_most_of_its_requests_and_the_rest_row_never() {
    let mut agg = Aggregator::default();
    // One forged COMPOUND first, then lockd's own traffic.
    agg.ingest(&on_port(4045, "10.0.0.5:700", procedure("COMPOUND", 1), 1));
    agg.ingest(&on_port(4045, "10.0.0.5:700", procedure("LOCK", 5), 2));
    // Ports beyond the 64 kept apart share one row: never named.
    for port in 0..crate::aggregate::services::MAX_OTHER_PORTS as u16 {
        agg.ingest(&on_port(30_000 + port, "10.0.0.6:700", DEQ, 3));
    }
    agg.ingest(&on_port(40_000, "10.0.0.6:700", procedure("LOCK", 9), 4));
    agg.snapshot(10, 0.0, &SourceInfo::default());
    let rows = agg.services();
    let lockd = rows.iter().find(|r| r.ports == [4045]).unwrap();
    assert_eq!(lockd.service, "lockd");
    let rest = rows.last().unwrap();
    assert!(rest.ports.is_empty());
    assert_eq!(rest.service, "other");
}

#[test]
fn a_starved_peer_of_another_service_is_listed_before_the_busy_ones() {
    let mut agg = Aggregator::default();
    // 40 clients dispatched in turn while 10.9.9.9 stays queued, never
    // dispatched: the worst off, listed first although it has the fewest.
    agg.ingest(&on_port(
        4045,
        "10.9.9.9:700",
        EventKind::Enqueue { inflight: None },
        1,
    ));
    for i in 0..40u64 {
        let c = format!("10.0.1.{}:700", i + 1);
        agg.ingest(&on_port(
            4045,
            &c,
            EventKind::Enqueue { inflight: None },
            10 + 2 * i,
        ));
        agg.ingest(&on_port(4045, &c, DEQ, 11 + 2 * i));
    }
    agg.snapshot(1_000, 0.0, &SourceInfo::default());
    let rows = agg.services();
    let peers = &rows[1].peers;
    assert_eq!(peers.len(), crate::aggregate::services::MAX_SERVICE_PEERS);
    assert_eq!(rows[1].peer_count, Some(41));
    assert_eq!(
        (
            peers[0].peer.as_str(),
            peers[0].dispatches,
            peers[0].backlogged
        ),
        ("10.9.9.9", 0, true)
    );
    assert_eq!(peers[0].fairness, Some(0.0));
}

#[test]
fn another_services_rows_cover_the_interval_nfsds_do_even_unasked() {
    // Ten intervals of 10.0.0.5 with snapshots only (a replay's
    // fast-forward asks no rows), then one of 10.0.0.6 alone: the rows
    // are that last interval's.
    let mut agg = Aggregator::default();
    let s = 1_000_000_000u64;
    for i in 0..10 {
        agg.ingest(&on_port(4045, "10.0.0.5:700", DEQ, i * s + 1));
        agg.snapshot((i + 1) * s, 0.0, &SourceInfo::default());
    }
    agg.ingest(&on_port(4045, "10.0.0.6:700", DEQ, 10 * s + 1));
    agg.snapshot(11 * s, 0.0, &SourceInfo::default());
    let rows = agg.services();
    let p = |name: &str| rows[1].peers.iter().find(|p| p.peer == name).unwrap();
    assert!(close(p("10.0.0.6").share, 1.0), "{:?}", rows[1]);
    assert!(close(p("10.0.0.6").dispatch_rate, 1.0));
    assert!(close(p("10.0.0.5").share, 0.0));
    assert_eq!(p("10.0.0.5").dispatches, 10);
}

#[test]
fn a_port_learnt_to_be_nfsds_leaves_the_other_services() {
    let mut agg = Aggregator::default();
    agg.ingest(&on_port(2050, "10.0.0.5:700", DEQ, 1));
    agg.snapshot(10, 0.0, &SourceInfo::default());
    assert_eq!(agg.services().len(), 2);
    agg.add_nfsd_ports(&crate::aggregate::services::NfsdPorts::from_ports(&[2050]));
    agg.ingest(&on_port(2050, "10.0.0.5:700", DEQ, 11));
    let snap = agg.snapshot(20, 0.0, &SourceInfo::default());
    assert_eq!(agg.services().len(), 1, "{:?}", agg.services());
    assert_eq!(snap.totals.dispatches, 1);
}

#[test]
fn another_services_first_interval_starts_with_the_aggregators_clock() {
    let mut agg = Aggregator::default();
    agg.start_clock(0);
    agg.ingest(&on_port(4045, "10.0.0.5:700", DEQ, 900_000_000));
    agg.snapshot(1_000_000_000, 0.0, &SourceInfo::default());
    let rows = agg.services();
    assert!(close(rows[1].peers[0].dispatch_rate, 1.0), "{:?}", rows[1]);
}

#[test]
fn another_service_keeps_within_the_operators_lower_limits() {
    let limits = Limits {
        max_peers: 8,
        max_classes: 8,
        max_transports: 8,
    };
    let mut agg = Aggregator::new(ClassMap::default(), limits);
    // 100 clients, each dispatched once and closed: idle, forgettable.
    for i in 0..100u64 {
        let c = format!("10.0.{}.{}:700", i / 200, i % 200 + 1);
        agg.ingest(&on_port(4045, &c, DEQ, 10 * i + 1));
        agg.ingest(&on_port(4045, &c, EventKind::Closed, 10 * i + 2));
    }
    agg.snapshot(10_000, 0.0, &SourceInfo::default());
    let rows = agg.services();
    assert!(rows[1].peer_count.unwrap() <= 8, "{:?}", rows[1].peer_count);
    assert_eq!(rows[1].dispatches, 100, "counted all the same");
}

#[test]
fn a_port_is_named_by_its_named_executions_too() {
    let mut agg = Aggregator::default();
    let lock = EventKind::Executed {
        exec_ns: 1,
        requests: 4,
        bytes: None,
        procedure: Some(crate::model::ProcName::new("LOCK")),
    };
    agg.ingest(&on_port(4045, "10.0.0.5:700", procedure("COMPOUND", 3), 1));
    agg.ingest(&on_port(4045, "10.0.0.5:700", lock, 2));
    agg.snapshot(10, 0.0, &SourceInfo::default());
    let rows = agg.services();
    let port = rows.iter().find(|r| r.ports == [4045]).unwrap();
    assert_eq!(port.service, "lockd");
    assert_eq!(port.requests, 4);
}
