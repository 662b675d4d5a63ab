//! The simulator's sparse-flow policy, rule by rule, from its own event
//! stream: one thread, so the order of dispatches is the policy's order.
//! A bursty client of one connection against a backlogged one of four:
//! each burst's first 64 requests go ahead of the flat queue, the rest
//! wait their turn there; the budget is re-armed only by the next burst
//! (an enqueue with nothing in flight), not while the transport waits on
//! the queue with nothing in flight; a backlogged client spends its
//! budget once.

use nfsdtop_agent::model::{Event, EventKind};
use nfsdtop_agent::source::demo::scenario::SPARSE_FLOW_CREDIT;
use nfsdtop_agent::source::demo::{Policy, Scenario, Simulator};

const BURSTY: &str = "10.0.0.9";

/// 3 s of the scenario under `policy`: which peer each dispatch served,
/// in order, after the first 300 ms (the backlogged client's own first
/// budgets, 4 × 64 dispatches at a millisecond, are spent by then).
fn dispatch_order(policy: &str, burst: u32) -> Vec<String> {
    let toml = format!(
        "name = \"sparse\"\nthreads = 1\nservice_ms = 1.0\npolicy = \"{policy}\"\n\
         [[client]]\naddress = \"10.0.0.3\"\nconnections = 4\ninflight = 16\n\
         [[client]]\naddress = \"{BURSTY}\"\nconnections = 1\nburst = {burst}\nthink_ms = 500.0\n"
    );
    let scenario = Scenario::parse(&toml, "sparse.toml").unwrap();
    assert_eq!(scenario.policy.to_string(), policy);
    let mut sim = Simulator::new(scenario);
    let mut events: Vec<Event> = Vec::new();
    sim.run_until(3_000_000_000, &mut events);
    events
        .iter()
        .filter(|e| e.ts_ns > 300_000_000 && matches!(e.kind, EventKind::Dequeue { .. }))
        .map(|e| e.xprt.peer().to_string())
        .collect()
}

/// The lengths of the runs of consecutive dispatches of the bursty client.
fn bursty_runs(order: &[String]) -> Vec<usize> {
    let mut runs = Vec::new();
    let mut n = 0;
    for p in order {
        if p == BURSTY {
            n += 1;
        } else if n > 0 {
            runs.push(n);
            n = 0;
        }
    }
    runs
}

#[test]
fn a_burst_within_the_budget_is_served_ahead_whole() {
    let order = dispatch_order("sparse-flow", 32);
    let runs = bursty_runs(&order);
    // One run of 32 per burst (about six in 3 s), and nothing else.
    assert!(runs.len() >= 4, "{runs:?}");
    assert!(runs.iter().all(|&n| n == 32), "{runs:?}");
    // Under flat the same bursts take turns with the four connections.
    let flat = bursty_runs(&dispatch_order("flat", 32));
    assert!(flat.iter().all(|&n| n == 1), "{flat:?}");
}

#[test]
fn past_the_budget_a_burst_joins_the_flat_queue_until_it_idles() {
    let order = dispatch_order("sparse-flow", 96);
    let runs = bursty_runs(&order);
    let credit = SPARSE_FLOW_CREDIT as usize;
    // Each burst: 64 ahead (the budget is not refilled while the
    // transport waits on the queue with its last request done, as it
    // does between one-thread dispatches), then its other 32 one turn in
    // five; the next burst is granted 64 again.
    let firsts: Vec<usize> = runs.iter().copied().filter(|&n| n > 1).collect();
    assert!(firsts.len() >= 3, "{runs:?}");
    assert!(firsts.iter().all(|&n| n == credit), "{runs:?}");
    let singles = runs.iter().filter(|&&n| n == 1).count();
    assert!(singles >= 3 * (96 - credit) - 3, "{runs:?}");
    assert_eq!(Policy::SparseFlow.to_string(), "sparse-flow");
}

/// For each request of the bursty client enqueued after `from_ns`, the
/// dispatches of others between its enqueue and its own dispatch.
fn overtaken_by(events: &[Event], from_ns: u64) -> Vec<usize> {
    let mut out = Vec::new();
    let mut waiting: Option<usize> = None;
    for e in events {
        let bursty = e.xprt.peer().to_string() == BURSTY;
        match e.kind {
            EventKind::Enqueue { .. } if bursty && e.ts_ns > from_ns => waiting = Some(0),
            EventKind::Dequeue { .. } if bursty => out.extend(waiting.take()),
            EventKind::Dequeue { .. } => {
                if let Some(n) = waiting.as_mut() {
                    *n += 1;
                }
            }
            _ => {}
        }
    }
    out
}

#[test]
fn backlogged_clients_spend_their_budget_once() {
    // Single requests every 500 ms against four backlogged connections,
    // which never idle: after their first 64 dispatches each (256 ms at
    // one thread), they are on the flat queue for good, and every single
    // request goes ahead of them all.
    let events = |policy: &str| {
        let toml = format!(
            "name = \"sparse\"\nthreads = 1\nservice_ms = 1.0\npolicy = \"{policy}\"\n\
             [[client]]\naddress = \"10.0.0.3\"\nconnections = 4\ninflight = 16\n\
             [[client]]\naddress = \"{BURSTY}\"\nconnections = 1\nburst = 1\nthink_ms = 500.0\n"
        );
        let mut sim = Simulator::new(Scenario::parse(&toml, "sparse.toml").unwrap());
        let mut out = Vec::new();
        sim.run_until(3_000_000_000, &mut out);
        out
    };
    let sparse = overtaken_by(&events("sparse-flow"), 300_000_000);
    assert!(sparse.len() >= 4, "{sparse:?}");
    assert!(sparse.iter().all(|&n| n == 0), "{sparse:?}");
    // Under flat each waits behind the four connections' turns.
    let flat = overtaken_by(&events("flat"), 300_000_000);
    assert!(flat.iter().all(|&n| n >= 3), "{flat:?}");
}
