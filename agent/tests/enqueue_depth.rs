//! In-flight depth at enqueue on the simulator, checked two ways: each
//! peer's histogram as the aggregator keeps it (from the depth the
//! simulator puts on its enqueues) against the depth this test derives
//! from the events alone (a transport's dispatches less its finished
//! requests), bucket by bucket; and a client that sends one request at a
//! time, which by construction is always enqueued with nothing in flight.

use std::collections::HashMap;

use nfsdtop_agent::aggregate::{Aggregator, Limits};
use nfsdtop_agent::model::{DepthHistogram, Event, EventKind, Snapshot, XprtKey};
use nfsdtop_agent::source::demo::{Policy, Scenario, Simulator, BUILTIN};

/// Runs `scenario` for `seconds` of simulated time: the last snapshot and
/// the events.
fn run(scenario: Scenario, seconds: u64) -> (Snapshot, Vec<Event>) {
    let classes = scenario.class_map().unwrap();
    let mut sim = Simulator::new(scenario);
    let mut agg = Aggregator::new(classes, Limits::default());
    let mut events = Vec::new();
    sim.run_until(seconds * 1_000_000_000, &mut events);
    agg.ingest_all(&events);
    (agg.snapshot(sim.now_ns(), 0.0, &Default::default()), events)
}

/// Per peer, the depth at each enqueue as the events themselves say it.
fn derived(events: &[Event]) -> HashMap<String, DepthHistogram> {
    let mut inflight = HashMap::<XprtKey, u64>::new();
    let mut peers = HashMap::<String, DepthHistogram>::new();
    for e in events {
        let n = inflight.entry(e.xprt).or_default();
        match e.kind {
            EventKind::Enqueue { .. } => peers
                .entry(e.xprt.peer().to_string())
                .or_default()
                .record(*n as u32),
            EventKind::Dequeue { .. } => *n += 1,
            EventKind::Executed { requests, .. } => *n -= requests,
            _ => {}
        }
    }
    peers
}

#[test]
fn each_peers_depths_are_the_ones_its_events_imply() {
    for name in BUILTIN {
        for policy in [Policy::Flat, Policy::SparseFlow] {
            let mut scenario = Scenario::builtin(name).unwrap();
            scenario.policy = policy;
            let (snap, events) = run(scenario, 20);
            let want = derived(&events);
            assert!(!want.is_empty(), "{name}: no enqueue");
            assert_eq!(snap.peers.len(), want.len(), "{name}");
            for p in &snap.peers {
                let got = p.enqueue_depth.expect("the demo measures depths");
                assert_eq!(got, want[&p.name], "{name} {policy:?}: peer {}", p.name);
            }
        }
    }
}

#[test]
fn one_request_at_a_time_is_always_enqueued_at_depth_zero() {
    let scenario = Scenario::parse(
        "name = \"t\"\nthreads = 1\nservice_ms = 10.0\npolicy = \"flat\"\n\
         [[client]]\naddress = \"10.0.0.2\"\nconnections = 1\ninflight = 1\n\
         [[client]]\naddress = \"10.0.0.3\"\nconnections = 1\ninflight = 8\n",
        "t.toml",
    )
    .unwrap();
    let (snap, _) = run(scenario, 10);
    let peer = |n: &str| snap.peers.iter().find(|p| p.name == n).unwrap();
    let one = peer("10.0.0.2");
    let d = one.enqueue_depth.unwrap();
    assert!(d.count() > 100, "{d:?}");
    assert_eq!((d.counts[0], d.sum), (d.count(), 0));
    assert_eq!(
        (one.depth0_share, one.enqueue_depth_mean),
        (Some(1.0), Some(0.0))
    );
    // Eight at a time on one connection and one thread: re-enqueued right
    // after each dispatch, with that request in flight, so at depth 1 but
    // for its first enqueue; one thread never has two of its requests.
    let eight = peer("10.0.0.3").enqueue_depth.unwrap();
    assert_eq!(eight.counts[0], 1, "{eight:?}");
    assert_eq!(eight.counts[2..], [0; 6], "{eight:?}");
    assert_eq!(eight.sum, eight.counts[1]);
}

/// Each interval's deepest enqueue of each peer is the most its events
/// imply among that interval's enqueues (one-second snapshots of a
/// sparse-flow seed scenario, whose backlogged clients keep several in
/// flight); `null` for a peer with no enqueue in the interval.
#[test]
fn each_intervals_deepest_enqueue_is_the_one_its_events_imply() {
    let mut scenario = Scenario::builtin("seed-k4").unwrap();
    scenario.policy = Policy::SparseFlow;
    let classes = scenario.class_map().unwrap();
    let mut sim = Simulator::new(scenario);
    let mut agg = Aggregator::new(classes, Limits::default());
    let mut inflight = HashMap::<XprtKey, u64>::new();
    let mut deepest_seen = 0;
    for second in 1..=10u64 {
        let mut events = Vec::new();
        sim.run_until(second * 1_000_000_000, &mut events);
        let mut want = HashMap::<String, u32>::new();
        for e in &events {
            let n = inflight.entry(e.xprt).or_default();
            match e.kind {
                EventKind::Enqueue { .. } => {
                    let m = want.entry(e.xprt.peer().to_string()).or_default();
                    *m = (*m).max(*n as u32);
                }
                EventKind::Dequeue { .. } => *n += 1,
                EventKind::Executed { requests, .. } => *n -= requests,
                _ => {}
            }
        }
        agg.ingest_all(&events);
        let snap = agg.snapshot(sim.now_ns(), 0.0, &Default::default());
        for p in &snap.peers {
            assert_eq!(
                p.enqueue_depth_max,
                want.get(&p.name).copied(),
                "second {second}: peer {}",
                p.name
            );
            deepest_seen = deepest_seen.max(p.enqueue_depth_max.unwrap_or(0));
        }
    }
    assert!(
        deepest_seen > 1,
        "the scenario never had two in flight: {deepest_seen}"
    );
}
