//! A fitted model → the demo simulator under one policy → the
//! aggregator's numbers, exactly as nfsdtop would have shown them.

use crate::aggregate::{Aggregator, Limits};
use crate::enrich::classify::ClassMap;
use crate::model::{EventKind, Snapshot, SourceInfo, SourceKind, WaitSource};
use crate::source::demo::sim::{Demand, SimClient, Simulator};
use crate::source::demo::{Policy, Scenario};

use super::bursts::Bursts;
use super::fit::{Fit, FittedDemand};

/// One simulated run: the aggregator's numbers and each peer's bursts,
/// over the measured part.
#[derive(Clone, Debug)]
pub struct Run {
    pub snapshot: Snapshot,
    pub bursts: Bursts,
}

/// Most dispatches simulated per policy after the warm-up: whatever the
/// recording (a fast server, sub-microsecond service times), a run stops
/// here, and its snapshot's interval says how far it got.
pub const MAX_SIM_DISPATCHES: u64 = 20_000_000;

/// Simulated time per policy for a recording of `span_ns` holding
/// `dispatches`: as long as the recording, from [`super::MIN_HORIZON_NS`] to
/// [`super::MAX_HORIZON_NS`], and short enough that the recorded rate (doubled,
/// for policies that serve more) stays within the simulator's dispatch
/// budget ([`MAX_SIM_DISPATCHES`]), down to a second. With a note
/// when the budget cuts it below the minute.
pub fn horizon(span_ns: u64, dispatches: u64) -> (u64, Option<String>) {
    let rate = dispatches as f64 / (span_ns.max(1) as f64 / 1e9);
    let budget_ns = (MAX_SIM_DISPATCHES as f64 / (2.0 * rate.max(1.0)) * 1e9) as u64;
    let wanted = span_ns.clamp(super::MIN_HORIZON_NS, super::MAX_HORIZON_NS);
    let horizon_ns = wanted.min(budget_ns.max(1_000_000_000));
    let note = (horizon_ns < super::MIN_HORIZON_NS).then(|| {
        format!(
            "{:.1} s simulated per policy, not the least {} s: at {rate:.0} dispatches/s \
             (doubled for policies that serve more) a longer run would pass the simulator's \
             {} dispatches; its shares move more from one seed to the next",
            horizon_ns as f64 / 1e9,
            super::MIN_HORIZON_NS / 1_000_000_000,
            MAX_SIM_DISPATCHES
        )
    });
    (horizon_ns, note)
}

/// How one policy is simulated.
#[derive(Clone, Debug)]
pub struct RunParams {
    pub threads: u32,
    pub policy: Policy,
    /// Simulated time measured, after `warmup_ns`.
    pub horizon_ns: u64,
    pub warmup_ns: u64,
    pub seed: u64,
    /// Stop after this many dispatches past the warm-up (normally
    /// [`MAX_SIM_DISPATCHES`]).
    pub max_dispatches: u64,
    /// The recorded server's nfsd ports (its header's): the simulated
    /// transports keep their server addresses, so the run's aggregator
    /// must count the same ports as nfsd's as the recording's did.
    pub nfsd_ports: Option<crate::aggregate::services::NfsdPorts>,
}

/// The simulator's clients for `fit`: one per transport, so that each
/// keeps its own demand and service times.
pub fn clients(fit: &Fit) -> Vec<SimClient> {
    fit.transports
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let (demand, first_at_ns) = match &t.demand {
                FittedDemand::Backlogged => (Demand::Unbounded, 0),
                FittedDemand::Closed {
                    inflight,
                    thinks_ns,
                } => (
                    Demand::Closed {
                        inflight: *inflight,
                        thinks_ns: thinks_ns.clone(),
                    },
                    0,
                ),
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
                // The fit has no request sizes: predictions are of turns.
                request_bytes: None,
            }
        })
        .collect()
}

/// Simulate `clients` under `p` and return one snapshot over the
/// measured part (after the warm-up).
pub fn simulate(clients: Vec<SimClient>, classmap: &ClassMap, p: &RunParams) -> Snapshot {
    simulate_run(clients, classmap, p).snapshot
}

/// As [`simulate`], with each peer's bursts ([`Bursts`]) beside.
pub fn simulate_run(clients: Vec<SimClient>, classmap: &ClassMap, p: &RunParams) -> Run {
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
    if let Some(ports) = &p.nfsd_ports {
        agg.add_nfsd_ports(ports);
    }
    agg.start_clock(0);
    let info = SourceInfo {
        kind: SourceKind::Demo,
        kernel: "simulated".into(),
        generation: "whatif".into(),
        wait_source: WaitSource::EnqueueDequeue,
        detail: format!("whatif policy={} threads={}", p.policy, p.threads),
        host: String::new(),
    };
    let mut bursts = Bursts::default();
    let mut buf = Vec::with_capacity(64 * 1024);
    let step = 20_000_000u64;
    let end = p.warmup_ns + p.horizon_ns;
    let mut t = 0;
    let mut warmed = p.warmup_ns == 0;
    let mut dispatched = 0u64;
    'run: while t < end {
        t = (t + step).min(end);
        if !warmed {
            t = t.min(p.warmup_ns);
        }
        // In bounded pieces, so that the buffer stays small and the
        // dispatch budget is checked at any rate.
        loop {
            buf.clear();
            let reached = sim.run_bounded(t, 1 << 16, &mut buf);
            agg.ingest_all(&buf);
            bursts.ingest_all(&buf);
            dispatched += buf
                .iter()
                .filter(|e| matches!(e.kind, EventKind::Dequeue { .. }))
                .count() as u64;
            if dispatched >= p.max_dispatches {
                break 'run;
            }
            if reached {
                break;
            }
        }
        if !warmed && t >= p.warmup_ns {
            // Everything before is the start-up transient: not measured.
            let _ = agg.snapshot(t, 0.0, &info);
            bursts.reset_counts();
            warmed = true;
            dispatched = 0;
        }
    }
    let now = sim.now_ns().min(end);
    let since = if warmed { p.warmup_ns } else { 0 };
    Run {
        snapshot: agg.snapshot(now, now.saturating_sub(since) as f64 / 1e9, &info),
        bursts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Endpoint, XprtKey};

    fn key(ip: &str, port: u16) -> XprtKey {
        XprtKey {
            netns: 1,
            server: Endpoint::None,
            client: Endpoint::from_socket_addr(format!("{ip}:{port}").parse().unwrap()),
        }
    }

    fn client(transports: Vec<XprtKey>, service_ns: Vec<u64>) -> SimClient {
        SimClient {
            transports,
            demand: Demand::Unbounded,
            first_at_ns: 0,
            service_ns,
            request_bytes: None,
        }
    }

    #[test]
    fn unbounded_clients_with_their_own_service_times_share_by_policy() {
        // One transport at 1 ms against three at 3 ms (two draws each).
        let clients = vec![
            client(vec![key("10.0.0.2", 700)], vec![1_000_000]),
            client(
                (0..3).map(|p| key("10.0.0.3", 700 + p)).collect(),
                vec![2_000_000, 4_000_000],
            ),
        ];
        let p = |policy| RunParams {
            threads: 4,
            policy,
            horizon_ns: 10_000_000_000,
            warmup_ns: 1_000_000_000,
            seed: 1,
            max_dispatches: MAX_SIM_DISPATCHES,
            nfsd_ports: None,
        };
        let share =
            |s: &Snapshot, name: &str| s.peers.iter().find(|e| e.name == name).unwrap().share;
        let flat = simulate(clients.clone(), &ClassMap::default(), &p(Policy::Flat));
        // The flat queue: a dispatch per ready transport per round.
        assert!((share(&flat, "10.0.0.2") - 0.25).abs() < 0.01, "{flat:?}");
        let rr = simulate(clients.clone(), &ClassMap::default(), &p(Policy::RrPeer));
        assert!((share(&rr, "10.0.0.2") - 0.5).abs() < 0.01);
        for e in &rr.peers {
            let f = e.fairness.unwrap();
            assert!((f - 1.0).abs() < 0.02, "{}: ratio {f}", e.name);
        }

        // Service times are the samples given, nothing else.
        let mut sim = Simulator::from_parts(
            Scenario::builtin("seed-k4").unwrap(),
            &ClassMap::default(),
            clients,
        );
        let mut out = Vec::new();
        sim.run_until(1_000_000_000, &mut out);
        let execs: std::collections::BTreeSet<u64> = out
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::Executed { exec_ns, .. } => Some(exec_ns),
                _ => None,
            })
            .collect();
        assert_eq!(
            execs.into_iter().collect::<Vec<_>>(),
            vec![1_000_000, 2_000_000, 4_000_000]
        );
    }

    #[test]
    fn a_run_stops_at_its_dispatch_budget() {
        // Nanosecond service times: two minutes would be 10^11 dispatches.
        let clients = vec![client(vec![key("10.0.0.2", 700)], vec![1])];
        let p = RunParams {
            threads: 16,
            policy: Policy::Flat,
            horizon_ns: 120_000_000_000,
            warmup_ns: 1_000_000,
            seed: 1,
            max_dispatches: 50_000,
            nfsd_ports: None,
        };
        let s = simulate(clients, &ClassMap::default(), &p);
        assert!(s.totals.dispatches >= 50_000, "{}", s.totals.dispatches);
        assert!(s.interval_s < 1.0, "{}", s.interval_s);
    }
}
