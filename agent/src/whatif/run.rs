//! A fitted model → the demo simulator under one policy → the
//! aggregator's numbers, exactly as nfsdtop would have shown them.

use crate::aggregate::{Aggregator, Limits};
use crate::classify::ClassMap;
use crate::model::{Snapshot, SourceInfo, SourceKind, WaitSource};
use crate::source::demo::sim::{Demand, SimClient, Simulator};
use crate::source::demo::{Policy, Scenario};

use super::fit::{Fit, FittedDemand};

/// How one policy is simulated.
#[derive(Clone, Debug)]
pub struct RunParams {
    pub threads: u32,
    pub policy: Policy,
    /// Simulated time measured, after `warmup_ns`.
    pub horizon_ns: u64,
    pub warmup_ns: u64,
    pub seed: u64,
}

/// The simulator's clients for `fit`: one per transport, so that each
/// keeps its own demand and service times.
pub fn clients(fit: &Fit, threads: u32) -> Vec<SimClient> {
    fit.transports
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let (demand, first_at_ns) = match &t.demand {
                // Enough in flight that one is always waiting, even with
                // every thread on it.
                FittedDemand::Backlogged => (Demand::Inflight(threads.saturating_add(2)), 0),
                FittedDemand::Bursts { sizes, thinks_ns } => {
                    // Spread the first bursts over a think time, so that
                    // the clients do not all start in step.
                    let think = thinks_ns.first().copied().unwrap_or(0);
                    let phase = (i as u64).wrapping_mul(0x9E37_79B9) % 1024;
                    (
                        Demand::Bursts {
                            sizes: sizes.clone(),
                            thinks_ns: thinks_ns.clone(),
                        },
                        think / 1024 * phase,
                    )
                }
            };
            SimClient {
                transports: vec![t.key],
                demand,
                first_at_ns,
                service_ns: if t.service_ns.is_empty() {
                    fit.pooled_service_ns.clone()
                } else {
                    t.service_ns.clone()
                },
            }
        })
        .collect()
}

/// Simulate `clients` under `p` and return one snapshot over the
/// measured part (after the warm-up).
pub fn simulate(clients: Vec<SimClient>, classmap: &ClassMap, p: &RunParams) -> Snapshot {
    let scenario = Scenario {
        name: "whatif".into(),
        description: String::new(),
        threads: p.threads.max(1),
        // Only for clients without service samples, which `clients`
        // never makes unless the recording had no executions at all.
        service_ms: 1.0,
        jitter: 0.0,
        policy: p.policy,
        // Think times are measured from a completion to the next arrival:
        // they include the round trip.
        rtt_us: 0.0,
        seed: p.seed,
        clients: Vec::new(),
        classes: Vec::new(),
    };
    let mut sim = Simulator::from_parts(scenario, classmap, clients);
    let mut agg = Aggregator::new(classmap.clone(), Limits::default());
    agg.start_clock(0);
    let info = SourceInfo {
        kind: SourceKind::Demo,
        kernel: "simulated".into(),
        generation: "whatif".into(),
        wait_source: WaitSource::EnqueueDequeue,
        detail: format!("whatif policy={} threads={}", p.policy, p.threads),
        host: String::new(),
    };
    let mut buf = Vec::with_capacity(64 * 1024);
    let step = 250_000_000u64;
    let end = p.warmup_ns + p.horizon_ns;
    let mut t = 0;
    let mut warmed = p.warmup_ns == 0;
    while t < end {
        t = (t + step).min(end);
        if !warmed && t >= p.warmup_ns {
            t = p.warmup_ns;
        }
        buf.clear();
        sim.run_until(t, &mut buf);
        agg.ingest_all(&buf);
        if !warmed && t >= p.warmup_ns {
            // Everything before is the start-up transient: not measured.
            let _ = agg.snapshot(t, 0.0, &info);
            warmed = true;
        }
    }
    agg.snapshot(end, p.horizon_ns as f64 / 1e9, &info)
}
