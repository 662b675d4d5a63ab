//! Requests per procedure in the drill-down (ratatui's TestBackend at
//! 100x30) and in the batch JSON, from a demo stream whose requests are
//! given procedures here: 10.0.0.2's requests alternate READ, READ, READ,
//! GETATTR, so READ is 75% of its requests and GETATTR 25%.

mod common;

use std::time::Duration;

use common::screen::{lines, open_detail};
use nfsdtop::state::{Screen, State};
use nfsdtop_agent::aggregate::{Aggregator, Limits};
use nfsdtop_agent::model::{Event, EventKind, ProcName, Snapshot, SourceInfo};
use nfsdtop_agent::source::demo::{Scenario, Simulator};

const PEER: &str = "10.0.0.2";

fn snapshots() -> Vec<Snapshot> {
    let mut agg = Aggregator::new(Default::default(), Limits::default());
    let mut sim = Simulator::new(Scenario::builtin("seed-k4").unwrap());
    let info = SourceInfo::default();
    let (mut buf, mut with_procs) = (Vec::new(), Vec::new());
    let mut n = 0u64;
    (1..=3u64)
        .map(|i| {
            buf.clear();
            with_procs.clear();
            sim.run_until(i * 2_000_000_000, &mut buf);
            for e in &buf {
                with_procs.push(*e);
                if let EventKind::Executed {
                    exec_ns, requests, ..
                } = e.kind
                {
                    if e.xprt.peer().to_string() == PEER {
                        n += 1;
                        let name = if n.is_multiple_of(4) {
                            "GETATTR"
                        } else {
                            "READ"
                        };
                        with_procs.push(Event {
                            kind: EventKind::Procedure {
                                name: ProcName::new(name),
                                requests,
                                exec_ns,
                            },
                            ..*e
                        });
                    }
                }
            }
            agg.ingest_all(&with_procs);
            agg.snapshot(sim.now_ns(), i as f64, &info)
        })
        .collect()
}

#[test]
fn the_drill_down_lists_the_peers_procedures_and_json_has_them() {
    let snaps = snapshots();
    let last = snaps.last().unwrap();
    let peer = last.peers.iter().find(|e| e.name == PEER).unwrap();
    let read = peer.procedures[&ProcName::new("READ")];
    let getattr = peer.procedures[&ProcName::new("GETATTR")];
    assert_eq!(
        read.requests + getattr.requests,
        peer.requests,
        "every request once"
    );
    assert!(read.requests > 2 * getattr.requests && getattr.requests > 0);
    let other = last.peers.iter().find(|e| e.name != PEER).unwrap();
    assert!(other.procedures.is_empty(), "none where none were counted");
    // JSON: name -> counts, absent where empty.
    let json = serde_json::to_value(peer).unwrap();
    assert_eq!(json["procedures"]["READ"]["requests"], read.requests);
    assert!(
        json["procedures"]["GETATTR"]["exec_seconds"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert!(serde_json::to_value(other)
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
    assert!(text.contains("procedures (2)"), "{text}");
    assert!(text.contains("PROC") && text.contains("REQ/S"), "{text}");
    // READ first (most requests), its share of this interval's requests
    // about 75% (the sequence of 4 restarts at interval edges).
    let read_line = text
        .lines()
        .find(|l| l.contains(" READ "))
        .unwrap_or_else(|| panic!("{text}"));
    let (_, after) = read_line.split_once(" READ ").unwrap();
    let share: f64 = after
        .split_whitespace()
        .find_map(|t| t.strip_suffix('%')?.parse().ok())
        .unwrap_or_else(|| panic!("{read_line}"));
    assert!((70.0..=80.0).contains(&share), "{read_line}");
    let at = |p: &str| text.lines().position(|l| l.contains(p)).unwrap();
    assert!(at(" READ ") < at(" GETATTR "), "{text}");
}
