//! Requests per procedure in the drill-down (ratatui's TestBackend at
//! 100x30) and in the JSON, from the demo: a client's requests are READs
//! but every 8th a GETATTR and every 32nd an ACCESS, so READ is 28/32 of
//! them (87.5%), GETATTR 3/32 and ACCESS 1/32.

mod common;

use std::time::Duration;

use common::screen::{demo_snapshots, lines, open_detail};
use nfsdtop::state::{Screen, State};
use nfsdtop_agent::aggregate::{Aggregator, Limits};
use nfsdtop_agent::model::{ProcName, Snapshot, SourceInfo};

const PEER: &str = "10.0.0.2";

fn snapshots() -> Vec<Snapshot> {
    let agg = Aggregator::new(Default::default(), Limits::default());
    let info = SourceInfo::default();
    demo_snapshots("seed-k4", agg, |a, now, t| a.snapshot(now, t, &info))
}

#[test]
fn the_drill_down_lists_the_peers_procedures_and_json_has_them() {
    let snaps = snapshots();
    let last = snaps.last().unwrap();
    let peer = last.peers.iter().find(|e| e.name == PEER).unwrap();
    let n = |p: &str| peer.procedures[&ProcName::new(p)].requests;
    let (read, getattr, access) = (n("READ"), n("GETATTR"), n("ACCESS"));
    assert_eq!(read + getattr + access, peer.requests, "every request once");
    assert_eq!(peer.procedures.len(), 3);
    assert!(
        access > 0 && getattr.abs_diff(3 * access) <= 3,
        "{getattr} {access}"
    );
    assert!(read.abs_diff(28 * access) <= 28, "{read} {access}");
    // JSON: name -> counts; absent where there are none.
    let json = serde_json::to_value(peer).unwrap();
    assert_eq!(json["procedures"]["READ"]["requests"], read);
    assert!(
        json["procedures"]["GETATTR"]["exec_seconds"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    // Each demo request runs exactly 10 ms (seed-k4: no jitter) and is
    // timed alone: the 99th percentile is the middle of 10 ms's bucket,
    // [8192, 12288) µs, over every request.
    let read_stats = &peer.procedures[&ProcName::new("READ")];
    assert_eq!(read_stats.timed, read);
    assert_eq!(read_stats.exec_p99_us, Some(10240.0));
    assert_eq!(json["procedures"]["READ"]["exec_p99_us"], 10240.0);
    let mut none = peer.clone();
    none.procedures.clear();
    assert!(serde_json::to_value(none)
        .unwrap()
        .get("procedures")
        .is_none());

    let mut st = State::new(Duration::from_secs(2), None);
    for s in snaps {
        st.on_snapshot(Box::new(s));
    }
    open_detail(&mut st, PEER);
    assert!(matches!(st.screen, Screen::Detail { .. }));
    let text = lines(&mut st, 100, 30).join("\n");
    assert!(text.contains("procedures (3)"), "{text}");
    assert!(
        text.contains("PROC") && text.contains("REQ/S") && text.contains("P99"),
        "{text}"
    );
    // READ first (most requests), its share of this interval's requests
    // about 87.5%.
    let read_line = text
        .lines()
        .find(|l| l.contains(" READ "))
        .unwrap_or_else(|| panic!("{text}"));
    let (_, after) = read_line.split_once(" READ ").unwrap();
    let share: f64 = after
        .split_whitespace()
        .find_map(|t| t.strip_suffix('%')?.parse().ok())
        .unwrap_or_else(|| panic!("{read_line}"));
    assert!((82.0..=93.0).contains(&share), "{read_line}");
    // Mean 10 ms, and p99 10.24 ms (the bucket's middle), both shown so.
    let cells: Vec<&str> = after.split_whitespace().collect();
    assert_eq!(cells[cells.len() - 2..], ["10ms", "10ms"], "{read_line}");
    let at = |p: &str| text.lines().position(|l| l.contains(p)).unwrap();
    assert!(at(" READ ") < at(" GETATTR "), "{text}");
}

/// NFSv4 operations (`--nfs4-ops`) in the drill-down, below the
/// procedures: most this interval first, with their share and count.
#[test]
fn the_drill_down_lists_the_peers_nfs4_operations() {
    use nfsdtop_agent::model::{OperationStats, Operations};
    let mut snaps = snapshots();
    let last = snaps.last_mut().unwrap();
    let peer = last.peers.iter_mut().find(|e| e.name == PEER).unwrap();
    let stats = |count, rate| OperationStats { count, rate };
    peer.nfs4_operations = Operations::from_iter([
        (53, stats(300, 30.0)),
        (22, stats(300, 30.0)),
        (25, stats(240, 24.0)),
        (9, stats(60, 6.0)),
        (41, stats(1, 0.0)),
    ]);
    let json = serde_json::to_value(&*peer).unwrap();
    assert_eq!(json["nfs4_operations"]["READ"]["count"], 240);
    assert_eq!(json["nfs4_operations"]["BIND_CONN_TO_SESSION"]["count"], 1);
    let mut st = State::new(Duration::from_secs(2), None);
    for s in snaps {
        st.on_snapshot(Box::new(s));
    }
    open_detail(&mut st, PEER);
    let text = lines(&mut st, 100, 40).join("\n");
    assert!(text.contains("NFSv4 operations (5)"), "{text}");
    assert!(text.contains("OPS/S") && text.contains("TOTAL"), "{text}");
    let at = |p: &str| {
        text.lines()
            .position(|l| l.contains(p))
            .unwrap_or_else(|| panic!("{p} not in {text}"))
    };
    // The procedures stay above; the operations below them, by rate, ties
    // by count then name.
    let ops_at = at("NFSv4 operations");
    assert!(at("procedures (3)") < ops_at, "{text}");
    let ops: Vec<&str> = text.lines().skip(ops_at + 2).take(5).collect();
    let order: Vec<usize> = ["PUTFH", "SEQUENCE", "READ", "GETATTR", "BIND_CONN_TO_SES"]
        .iter()
        .map(|n| {
            ops.iter()
                .position(|l| l.contains(&format!(" {n} ")))
                .unwrap_or_else(|| panic!("{n} not in {ops:?}"))
        })
        .collect();
    assert_eq!(order, [0, 1, 2, 3, 4], "{text}");
    // READ: 24 of 90 per second this interval, 240 in all.
    let read_line = ops[2].rsplit_once(" READ ").unwrap().1;
    assert!(
        read_line.contains("26.7%") && read_line.contains("240"),
        "{read_line}"
    );
}

/// The demo's NFSv4.2 client (`burst`'s fd00::9): every request one
/// COMPOUND of SEQUENCE, PUTFH and a READ, GETATTR or ACCESS, as the
/// simulator served them; the NFSv3 host has no operations.
#[test]
fn the_demos_nfs4_client_has_one_sequence_and_putfh_per_request() {
    let agg = Aggregator::new(Default::default(), Limits::default());
    let info = SourceInfo::default();
    let snaps = demo_snapshots("burst", agg, |a, now, t| a.snapshot(now, t, &info));
    let last = snaps.last().unwrap();
    let laptop = last.peers.iter().find(|e| e.name == "fd00::9").unwrap();
    let n = |op: &str| laptop.nfs4_operations.get(op).map_or(0, |s| s.count);
    let requests = laptop.requests;
    assert!(requests >= 32, "{requests}");
    assert_eq!((n("SEQUENCE"), n("PUTFH")), (requests, requests));
    assert_eq!(n("READ") + n("GETATTR") + n("ACCESS"), requests);
    assert_eq!(n("GETATTR") + n("ACCESS"), requests / 8);
    let compounds = laptop.procedures[&ProcName::new("COMPOUND")].requests;
    assert_eq!((laptop.procedures.len(), compounds), (1, requests));
    let host = last.peers.iter().find(|e| e.name == "10.0.0.3").unwrap();
    assert!(host.nfs4_operations.is_empty() && host.requests > 0);
}
