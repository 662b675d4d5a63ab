//! Fair share from dequeues alone (`source::live::rebuild`) against fair
//! share from enqueues and dequeues, on the simulator's own stream: each
//! dequeue is given the `qtime` the kernel would give it (the time since
//! its transport's real enqueue), the enqueues are dropped, and the
//! rebuilt stream must give every peer the dispatches and the entitled
//! dispatches the full stream gives. The simulator makes events at the
//! very same nanosecond (a transport re-queued as another is
//! dispatched), which no qtime can order: such events are first moved
//! apart by a nanosecond each, in their order; then the two streams must
//! agree exactly, as order is all fair share depends on.

use std::collections::HashMap;

use nfsdtop_agent::aggregate::{Aggregator, Limits};
use nfsdtop_agent::model::{Event, EventKind, Snapshot};
use nfsdtop_agent::source::demo::{Policy, Scenario, Simulator};
use nfsdtop_agent::source::live::rebuild::{Rebuild, WINDOW_NS};

/// `name` under `policy` for `secs` of simulated time: the full stream,
/// with each dequeue carrying its qtime.
fn stream(name: &str, policy: Policy, secs: u64) -> (Vec<Event>, Scenario) {
    let mut scenario = Scenario::builtin(name).unwrap();
    scenario.policy = policy;
    let mut sim = Simulator::new(scenario.clone());
    let mut events = Vec::new();
    sim.run_until(secs * 1_000_000_000, &mut events);
    let mut last = 0;
    for e in &mut events {
        e.ts_ns = e.ts_ns.max(last + 1);
        last = e.ts_ns;
    }
    let mut queued_at = HashMap::new();
    for e in &mut events {
        match &mut e.kind {
            EventKind::Enqueue => {
                queued_at.entry(e.xprt).or_insert(e.ts_ns);
            }
            EventKind::Dequeue { qtime_ns, .. } => {
                let at = queued_at
                    .remove(&e.xprt)
                    .expect("a dequeue after its enqueue");
                *qtime_ns = Some(e.ts_ns - at);
            }
            _ => {}
        }
    }
    (events, scenario)
}

/// Relative difference allowed in a peer's entitled dispatches: the
/// rounding of sums of 1/n in two orders of addition.
const ENTITLED_TOLERANCE: f64 = 1e-9;

fn measure(events: &[Event], scenario: &Scenario, end_ns: u64) -> Snapshot {
    let mut agg = Aggregator::new(scenario.class_map().unwrap(), Limits::default());
    agg.ingest_all(events);
    agg.snapshot(end_ns, 0.0, &Default::default())
}

#[test]
fn dequeues_alone_give_every_peer_the_same_fair_share() {
    for (name, policy) in [
        ("seed-k16", Policy::Flat),
        ("movers", Policy::Flat),
        ("burst", Policy::RrPeer),
    ] {
        let secs = 20;
        let (full, scenario) = stream(name, policy, secs);
        let end = full.last().unwrap().ts_ns;
        let mut rebuild = Rebuild::default();
        let mut rebuilt = Vec::new();
        // Fed in arrival order, a simulated 100 ms at a time, as a ring
        // would hand them over.
        for chunk in full.chunk_by(|a, b| a.ts_ns / 100_000_000 == b.ts_ns / 100_000_000) {
            for e in chunk
                .iter()
                .filter(|e| !matches!(e.kind, EventKind::Enqueue))
            {
                rebuild.push(*e);
            }
            rebuild.release(chunk[chunk.len() - 1].ts_ns, &mut rebuilt);
        }
        rebuild.release(end + WINDOW_NS, &mut rebuilt);
        assert_eq!(rebuild.held(), 0);
        // Compared up to a window before the end: a transport queued
        // later may not be dequeued (so known from dequeues) by the end.
        assert_eq!(
            rebuild.late, 0,
            "{name}: every queue wait within the window"
        );
        let cut = end - WINDOW_NS;
        let upto =
            |v: &[Event]| -> Vec<Event> { v.iter().filter(|e| e.ts_ns <= cut).copied().collect() };
        let a = measure(&upto(&full), &scenario, cut);
        let b = measure(&upto(&rebuilt), &scenario, cut);
        assert_eq!(a.peers.len(), b.peers.len(), "{name}");
        let mut worst = 0.0f64;
        for p in &a.peers {
            let q = b.peers.iter().find(|q| q.name == p.name).unwrap();
            assert_eq!(p.dispatches, q.dispatches, "{name} {}", p.name);
            let d = (p.entitled - q.entitled).abs();
            worst = worst.max(d / p.entitled.max(1.0));
            assert!(
                d <= ENTITLED_TOLERANCE * p.entitled.max(1.0),
                "{name} {}: entitled {} with enqueues, {} from dequeues alone",
                p.name,
                p.entitled,
                q.entitled
            );
        }
        println!(
            "{name}: {} peers, worst relative entitled difference {worst:e}, late {}",
            a.peers.len(),
            rebuild.late
        );
    }
}
