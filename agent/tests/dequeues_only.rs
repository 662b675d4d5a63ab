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
//!
//! And the same stream read late: an agent held back for several windows
//! (or kept busy by the server it watches) must give the very snapshots
//! one that kept up gives.

use std::collections::HashMap;
use std::ops::Range;
use std::time::Duration;

use nfsdtop_agent::aggregate::{Aggregator, Limits};
use nfsdtop_agent::model::{Event, EventKind, Snapshot, SourceInfo, SourceKind};
use nfsdtop_agent::pipeline::{Flow, Pipeline};
use nfsdtop_agent::source::demo::{Policy, Scenario, Simulator};
use nfsdtop_agent::source::live::intake::Intake;
use nfsdtop_agent::source::live::rebuild::{Rebuild, WINDOW_NS};
use nfsdtop_agent::source::{Poll, Source};

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
            EventKind::Enqueue { .. } => {
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
                .filter(|e| !matches!(e.kind, EventKind::Enqueue { .. }))
            {
                rebuild.push(*e);
            }
            rebuild.release(chunk[chunk.len() - 1].ts_ns, u64::MAX, &mut rebuilt);
        }
        rebuild.release(end + WINDOW_NS, u64::MAX, &mut rebuilt);
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

const MS: u64 = 1_000_000;

/// The live source without enqueue hooks, on a kernel clock of its own:
/// the stream's records are read through the live source's own
/// [`Intake`], at most `per_read` a poll (a reader that keeps up reads
/// them all), nothing while the kernel clock is inside a stall; each
/// `wait` moves the kernel clock 10 ms on.
struct LateReader {
    stream: Vec<Event>,
    next: usize,
    now: u64,
    stalls: Vec<Range<u64>>,
    per_read: usize,
    intake: Intake,
}

impl Source for LateReader {
    fn info(&self) -> SourceInfo {
        let r = self.intake.rebuild().expect("reordering");
        SourceInfo {
            kind: SourceKind::Live,
            detail: format!("late {} early {}", r.late, r.early),
            ..Default::default()
        }
    }

    fn poll(&mut self, until_ns: u64, out: &mut Vec<Event>) -> anyhow::Result<Poll> {
        let mut read = Vec::new();
        let mut caught_up = 0;
        if !self.stalls.iter().any(|s| s.contains(&self.now)) {
            let rest = &self.stream[self.next..];
            let written = rest.partition_point(|e| e.ts_ns < self.now);
            let n = written.min(self.per_read);
            read.extend_from_slice(&rest[..n]);
            self.next += n;
            if n == written {
                caught_up = self.now;
            }
        }
        self.intake.read(&read, caught_up, self.now);
        self.intake.release(&mut read, until_ns, out);
        Ok(Poll::Pending)
    }

    fn now_ns(&self) -> u64 {
        self.intake.clock_ns(self.now)
    }

    fn wait(&mut self, _timeout: Duration) {
        self.now += 10 * MS;
    }

    fn is_virtual(&self) -> bool {
        false
    }

    fn releases_in_order(&self) -> bool {
        self.intake.reorders()
    }

    fn lag_ns(&self, at_ns: u64) -> Option<u64> {
        Some(self.intake.lag_ns(at_ns, self.now))
    }

    fn recorded_wall_clock(&self, now_ns: u64) -> Option<f64> {
        Some(now_ns as f64 / 1e9)
    }
}

/// The first `n` one-second snapshots of `stream` read by `reader`.
fn snapshots(scenario: &Scenario, reader: LateReader, n: usize) -> Vec<Snapshot> {
    let agg = Aggregator::new(scenario.class_map().unwrap(), Limits::default());
    let pipeline = Pipeline::new(Box::new(reader), agg, Duration::from_secs(1));
    let mut out = Vec::new();
    pipeline
        .run(None, |s| {
            out.push(s);
            if out.len() == n {
                Flow::Stop
            } else {
                Flow::Continue
            }
        })
        .unwrap();
    out
}

#[test]
fn an_agent_that_falls_behind_gives_the_snapshots_of_one_that_kept_up() {
    let (full, scenario) = stream("seed-k16", Policy::Flat, 32);
    let records: Vec<Event> = full
        .into_iter()
        .filter(|e| !matches!(e.kind, EventKind::Enqueue { .. }))
        .collect();
    let reader = |stalls: Vec<Range<u64>>| LateReader {
        stream: records.clone(),
        next: 0,
        now: 0,
        stalls,
        per_read: 400,
        intake: Intake::new(true, 0),
    };
    let n = 25;
    let on_time = snapshots(&scenario, reader(Vec::new()), n);
    // Held back twice: seven windows, then three.
    let late = snapshots(
        &scenario,
        reader(vec![5_000 * MS..12_000 * MS, 16_000 * MS..19_000 * MS]),
        n,
    );
    assert_eq!(late.len(), n);
    let behind = |v: &[Snapshot]| v.iter().filter(|s| s.behind_s().is_some()).count();
    assert_eq!(
        behind(&on_time),
        0,
        "an agent that keeps up is never behind"
    );
    assert!(behind(&late) >= 3, "the held-back agent says it is behind");
    // The 2-connection client against the 16-connection one: listed as
    // unfair in every snapshot once both are loaded, in both runs.
    let starved = |s: &Snapshot| -> Vec<String> {
        s.peers
            .iter()
            .filter(|p| p.fairness.is_some_and(|f| f < 0.5))
            .map(|p| p.name.clone())
            .collect()
    };
    for (a, b) in on_time.iter().zip(&late) {
        assert_eq!(a.source.detail, "late 0 early 0", "nothing late on time");
        assert_eq!(
            b.source.detail, "late 0 early 0",
            "nothing counted late that was not"
        );
        assert_eq!(starved(a), starved(b), "the unfair list at {}", a.time);
        let mut a = serde_json::to_value(a).unwrap();
        let mut b = serde_json::to_value(b).unwrap();
        for v in [&mut a, &mut b] {
            v["totals"]["lag_s"] = serde_json::Value::Null;
        }
        assert_eq!(a, b, "the snapshot at {}", a["time"]);
    }
    assert!(
        on_time[3..].iter().all(|s| starved(s).len() == 1),
        "one client starved"
    );
}
