//! The what-if model end to end on files, against the simulator's own
//! truth: here for recordings whose executions arrive in batches, as the
//! live source's do.

use std::collections::HashMap;

use super::{run_file, Options};
use crate::aggregate::{Aggregator, Limits};
use crate::classify::ClassMap;
use crate::model::{Event, EventKind, SourceInfo, SourceKind, WaitSource, XprtKey};
use crate::record::{Header, NfsdConfig, Writer};
use crate::source::demo::{Policy, Scenario, Simulator};

const LOOP: &str = "name = \"loop\"\nthreads = 8\nservice_ms = 5.0\njitter = 0.5\n\
                    rtt_us = 20000.0\n[[client]]\naddress = \"10.0.0.2\"\nconnections = 1\n\
                    inflight = 4\n[[client]]\naddress = \"10.0.0.3\"\nconnections = 8\n\
                    inflight = 64\n";

fn events(policy: Policy, secs: u64) -> Vec<Event> {
    let mut s = Scenario::parse(LOOP, "loop.toml").unwrap();
    s.policy = policy;
    let mut sim = Simulator::new(s);
    let mut out = Vec::new();
    sim.run_until(secs * 1_000_000_000, &mut out);
    out
}

/// Executions as the live source reports them: per transport, what was
/// added up since the last sweep, every 100 ms.
fn batched(events: &[Event]) -> Vec<Event> {
    const SWEEP: u64 = 100_000_000;
    let mut out = Vec::new();
    let mut sums: HashMap<XprtKey, (u64, u64)> = HashMap::new();
    let mut next = SWEEP;
    let flush = |at: u64, sums: &mut HashMap<XprtKey, (u64, u64)>, out: &mut Vec<Event>| {
        let mut keys: Vec<_> = sums.keys().copied().collect();
        keys.sort();
        for k in keys {
            let (ns, n) = sums.remove(&k).unwrap();
            out.push(Event {
                ts_ns: at,
                xprt: k,
                kind: EventKind::Executed {
                    exec_ns: ns,
                    requests: n,
                    bytes: None,
                },
            });
        }
    };
    for e in events {
        while e.ts_ns >= next {
            flush(next, &mut sums, &mut out);
            next += SWEEP;
        }
        match e.kind {
            EventKind::Executed {
                exec_ns, requests, ..
            } => {
                let s = sums.entry(e.xprt).or_default();
                s.0 += exec_ns;
                s.1 += requests;
            }
            _ => out.push(*e),
        }
    }
    out
}

fn truth_share(policy: Policy, peer: &str) -> f64 {
    let ev = events(policy, 40);
    let (warm, rest): (Vec<Event>, Vec<Event>) =
        ev.into_iter().partition(|e| e.ts_ns < 10_000_000_000);
    let mut agg = Aggregator::new(ClassMap::default(), Limits::default());
    let info = SourceInfo {
        kind: SourceKind::Demo,
        wait_source: WaitSource::EnqueueDequeue,
        ..SourceInfo::default()
    };
    agg.ingest_all(&warm);
    agg.snapshot(10_000_000_000, 0.0, &info);
    agg.ingest_all(&rest);
    let s = agg.snapshot(40_000_000_000, 0.0, &info);
    s.peers.iter().find(|e| e.name == peer).unwrap().share
}

#[test]
fn a_live_recording_with_batched_executions_still_predicts_the_closed_loop() {
    let path = std::env::temp_dir().join(format!(
        "nfsdtop-whatif-live-{}.nfsdrec",
        std::process::id()
    ));
    let header = Header {
        host: "test".into(),
        kernel: "6.12".into(),
        generation: "6.6+".into(),
        wait_source: WaitSource::EnqueueDequeue,
        source_kind: SourceKind::Live,
        file_id: 3,
        nfsd: NfsdConfig {
            threads: Some(8),
            pools: Some(1),
        },
        ..Header::default()
    };
    let mut w = Writer::create(&path, &header).unwrap();
    w.write_all(&batched(&events(Policy::Flat, 40))).unwrap();
    w.finish_file().unwrap();
    let opts = Options {
        policies: vec![Policy::RrPeer],
        ..Options::default()
    };
    let r = run_file(&path, &opts).unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(r.fit.ok, "{:?}", r.fit);
    assert!(
        r.notes.iter().any(|n| n.contains("in batches")),
        "{:?}",
        r.notes
    );
    let small = r.peers.iter().find(|p| p.name == "10.0.0.2").unwrap();
    let got = small.predicted[0].numbers.share;
    let want = truth_share(Policy::RrPeer, "10.0.0.2");
    assert!(
        (got - want).abs() <= 0.02,
        "batched executions: whatif predicts {got:.3}, the demo measures {want:.3} ({:?})",
        r.model
    );
}
