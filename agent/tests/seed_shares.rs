//! The seeds' experiments on the simulator, checked two ways: the
//! aggregator's counts against the simulator's own, and the shares against
//! the arithmetic of each dispatch policy.

use std::time::Duration;

use nfsdtop_agent::aggregate::{Aggregator, Limits};
use nfsdtop_agent::model::{EntityKind, Snapshot};
use nfsdtop_agent::pipeline::{Flow, Pace, Pipeline};
use nfsdtop_agent::source::demo::{DemoSource, Policy, Scenario, Simulator};
use nfsdtop_agent::source::Source;

/// Run `scenario` for `warmup + measure` seconds of simulated time and
/// return the snapshot of the measured window.
fn measure(name: &str, policy: Policy, warmup_s: u64, measure_s: u64) -> Snapshot {
    let mut scenario = Scenario::builtin(name).unwrap();
    scenario.policy = policy;
    let classmap = scenario.class_map().unwrap();
    let mut sim = Simulator::new(scenario);
    let mut agg = Aggregator::new(classmap, Limits::default());
    let mut buf = Vec::new();
    sim.run_until(warmup_s * 1_000_000_000, &mut buf);
    agg.ingest_all(&buf);
    agg.snapshot(sim.now_ns(), 0.0, &Default::default());
    buf.clear();
    sim.run_until((warmup_s + measure_s) * 1_000_000_000, &mut buf);
    agg.ingest_all(&buf);
    agg.snapshot(sim.now_ns(), 0.0, &Default::default())
}

fn share(s: &Snapshot, kind: EntityKind, name: &str) -> f64 {
    s.entities(kind)
        .iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("no {name}"))
        .share
}

fn fairness(s: &Snapshot, name: &str) -> f64 {
    s.peers
        .iter()
        .find(|e| e.name == name)
        .unwrap()
        .fairness
        .unwrap()
}

#[test]
fn flat_queue_shares_by_connection_count() {
    for k in [4u32, 8, 16, 32] {
        let s = measure(&format!("seed-k{k}"), Policy::Flat, 2, 20);
        let want = 2.0 / (2.0 + k as f64);
        let got = share(&s, EntityKind::Peer, "10.0.0.2");
        assert!(
            (got - want).abs() < 0.03,
            "K={k}: flat share {got:.4} not within 3 points of {want:.4}"
        );
        let ratio = fairness(&s, "10.0.0.2");
        // Both are backlogged throughout, so the fair share is 1/2 and the
        // ratio is share / 0.5.
        assert!((ratio - want / 0.5).abs() < 0.08, "K={k}: ratio {ratio}");
        assert!(ratio < 0.7, "K={k}: ratio {ratio} not well below 1");
        assert!(fairness(&s, "10.0.0.3") > 1.0);
    }
}

#[test]
fn round_robin_across_peers_halves_the_pool() {
    for k in [4u32, 8, 16, 32] {
        let s = measure(&format!("seed-k{k}"), Policy::RrPeer, 2, 20);
        let got = share(&s, EntityKind::Peer, "10.0.0.2");
        assert!((got - 0.5).abs() < 0.03, "K={k}: rr-peer share {got:.4}");
        let ratio = fairness(&s, "10.0.0.2");
        assert!((ratio - 1.0).abs() < 0.06, "K={k}: ratio {ratio}");
        assert!(s.totals.jain > 0.99, "K={k}: jain {}", s.totals.jain);
    }
}

#[test]
fn movers_against_customers_under_each_policy() {
    // Six movers and four customers, 4 connections each.
    let customers = |s: &Snapshot| -> f64 {
        (1..=4)
            .map(|i| share(s, EntityKind::Peer, &format!("10.2.0.{i}")))
            .sum()
    };
    // flat: 16 of 40 connections.
    let s = measure("movers", Policy::Flat, 2, 20);
    assert!((customers(&s) - 0.40).abs() < 0.03, "{}", customers(&s));
    // rr-peer: 4 of 10 peers.
    let s = measure("movers", Policy::RrPeer, 2, 20);
    assert!((customers(&s) - 0.40).abs() < 0.03, "{}", customers(&s));
    // rr-class, movers one class, customers per peer: 4 of 5 entities.
    let s = measure("movers", Policy::RrClass, 2, 20);
    assert!((customers(&s) - 0.80).abs() < 0.03, "{}", customers(&s));
    let movers = share(&s, EntityKind::Class, "movers");
    assert!((movers - 0.20).abs() < 0.03, "{movers}");
    let c1 = s
        .classes
        .iter()
        .find(|c| c.name == "customers/10.2.0.1")
        .unwrap();
    assert!((c1.fairness.unwrap() - 1.0).abs() < 0.06);
}

#[test]
fn aggregator_counts_equal_the_simulators_exactly() {
    for (name, policy) in [
        ("seed-k16", Policy::Flat),
        ("movers", Policy::RrClass),
        ("burst", Policy::RrPeer),
    ] {
        let mut scenario = Scenario::builtin(name).unwrap();
        scenario.policy = policy;
        scenario.jitter = 0.5;
        let classmap = scenario.class_map().unwrap();
        let mut sim = Simulator::new(scenario);
        let mut agg = Aggregator::new(classmap, Limits::default());
        let mut buf = Vec::new();
        // Uneven steps so batch boundaries fall mid-flight.
        let mut t = 0;
        for step in [1, 333_333_333, 7_000_001, 2_500_000_000, 1_234_567_890] {
            t += step;
            buf.clear();
            sim.run_until(t, &mut buf);
            agg.ingest_all(&buf);
        }
        let snap = agg.snapshot(sim.now_ns(), 0.0, &Default::default());
        let truth = sim.dispatches_by_peer();
        assert!(!truth.is_empty());
        for (peer, n) in &truth {
            let got = snap.peers.iter().find(|p| &p.name == peer).unwrap();
            assert_eq!(got.dispatches, *n, "{name}/{policy}: {peer}");
        }
        assert_eq!(snap.totals.dispatches, sim.total_dispatches());
        let class_sum: u64 = snap.classes.iter().map(|c| c.dispatches).sum();
        assert_eq!(class_sum, sim.total_dispatches());
        let entitled: f64 = snap.peers.iter().map(|p| p.entitled).sum();
        assert!((entitled - sim.total_dispatches() as f64).abs() < 1e-6 * entitled);
    }
}

#[test]
fn pipeline_as_fast_as_possible_delivers_every_interval() {
    let source = DemoSource::new(Scenario::builtin("seed-k8").unwrap());
    let info = source.info();
    assert_eq!(info.generation, "demo");
    let p = Pipeline {
        pace: Pace::AsFastAsPossible,
        ..Pipeline::new(
            Box::new(source),
            Aggregator::default(),
            Duration::from_secs(1),
        )
    };
    let mut snaps = Vec::new();
    p.run(None, |s| {
        snaps.push(s);
        if snaps.len() == 5 {
            Flow::Stop
        } else {
            Flow::Continue
        }
    })
    .unwrap();
    assert_eq!(snaps.len(), 5);
    for s in &snaps[1..] {
        assert!((s.interval_s - 1.0).abs() < 1e-9);
        // 16 threads / 10 ms = 1600 dispatches a second when saturated.
        assert!(
            (s.totals.dispatch_rate - 1600.0).abs() < 20.0,
            "{}",
            s.totals.dispatch_rate
        );
    }
}

/// Requests in flight on average: with every one of seed-k16's 16
/// threads busy throughout, the peers' means add up to 16, each its
/// execution share of them; a class's is its peers' (one peer a class).
#[test]
fn mean_in_flight_is_execution_time_over_the_interval() {
    let s = measure("seed-k16", Policy::Flat, 2, 20);
    let total: f64 = s.peers.iter().map(|e| e.inflight_mean).sum();
    assert!((total - 16.0).abs() < 0.1, "{total}");
    for e in &s.peers {
        let want = 16.0 * e.exec_share;
        assert!(
            (e.inflight_mean - want).abs() < 0.1,
            "{}: {} vs {want}",
            e.name,
            e.inflight_mean
        );
        let class = s.classes.iter().find(|c| c.name == e.class).unwrap();
        assert!((class.inflight_mean - e.inflight_mean).abs() < 1e-9);
    }
    let small = s.peers.iter().find(|e| e.name == "10.0.0.2").unwrap();
    assert!(
        (small.inflight_mean - 16.0 * 2.0 / 18.0).abs() < 0.3,
        "{}",
        small.inflight_mean
    );
}

/// Mean execution time a request: each peer's equals the simulator's own
/// completions of the measured second added up (thread time over
/// requests), and is seed-k16's service time (10 ms, jitter symmetric
/// about it); a class's is its peer's, the CSV's server figure all
/// requests'.
#[test]
fn mean_execution_time_is_thread_time_over_requests() {
    use nfsdtop_agent::model::EventKind;
    use std::collections::HashMap;
    let scenario = Scenario::builtin("seed-k16").unwrap();
    let classmap = scenario.class_map().unwrap();
    let mut sim = Simulator::new(scenario);
    let mut agg = Aggregator::new(classmap, Limits::default());
    let mut buf = Vec::new();
    sim.run_until(2_000_000_000, &mut buf);
    agg.ingest_all(&buf);
    agg.snapshot(sim.now_ns(), 0.0, &Default::default());
    buf.clear();
    sim.run_until(12_000_000_000, &mut buf);
    agg.ingest_all(&buf);
    let s = agg.snapshot(sim.now_ns(), 0.0, &Default::default());
    let mut truth: HashMap<String, (u64, u64)> = HashMap::new();
    for ev in &buf {
        if let EventKind::Executed {
            exec_ns, requests, ..
        } = ev.kind
        {
            let ip = ev.xprt.client.ip().unwrap().to_string();
            let t = truth.entry(ip).or_default();
            t.0 += exec_ns;
            t.1 += requests;
        }
    }
    assert_eq!(truth.len(), s.peers.len());
    for e in &s.peers {
        let (ns, n) = truth[&e.name];
        let want = ns as f64 / n as f64 / 1e3;
        let got = e.exec_mean_us.unwrap();
        assert!(
            (got - want).abs() < 1e-6 * want,
            "{}: {got} vs {want}",
            e.name
        );
        assert!((got - 10_000.0).abs() < 500.0, "{}: {got}", e.name);
        let class = s.classes.iter().find(|c| c.name == e.class).unwrap();
        assert_eq!(class.exec_mean_us, e.exec_mean_us);
    }
    let (ns, n) = truth.values().fold((0, 0), |a, t| (a.0 + t.0, a.1 + t.1));
    let field = nfsdtop_agent::present::fields::EXEC_MEAN;
    let total = field.csv_total(&s);
    let want = ns as f64 / n as f64 / 1e3;
    assert!(
        (total.parse::<f64>().unwrap() - want).abs() < 0.1,
        "{total} vs {want}"
    );
}
