//! Calibration of the fitted demand against the recording: each client's
//! think times are scaled until the model, run under the recorded
//! policy, gives every client the share it was measured with.
//!
//! Why: what a transport's recording shows of its demand is partial. Its
//! visible arrivals (enqueues from idle) are the few moments all its
//! requests were with the client; how long the requests it kept waiting
//! in its socket (invisible to the kernel's tracepoints) took to return
//! is not recorded at all, and clients that share CPUs or a network with
//! each other go quiet together. The fitted shapes (backlogged, closed
//! loop, bursts) and service times stand; only the think times, the part
//! the recording tells least well, are scaled, per client, by how far its
//! simulated share is from its measured one. Policies are compared on the
//! calibrated model, so what differs between their columns is the
//! dispatch policy alone.
//!
//! What this leaves as a check: a client whose share the model cannot
//! reach by thinking more or less still misses after the last round, and
//! the fit check says so. Calibration can also reach a share for the
//! wrong reason (a thread count or a service time the model gets wrong,
//! made up for by other clients' think times): the fit check therefore
//! also compares what calibration does not aim at, the model's total
//! rate and each backlogged client's fairness ratio (see
//! [`super::FitCheck`]). The miss before calibration and each client's
//! scale are reported beside it.

use std::collections::{HashMap, HashSet};

use super::fit::{Fit, FittedDemand};
use super::run::{self, RunParams};
use crate::enrich::classify::ClassMap;
use crate::model::Snapshot;

/// Below this worst miss (points of share) the fitted model is kept as it
/// is: no calibration.
pub const CALIBRATE_ABOVE_POINTS: f64 = 1.0;
/// Most rounds of scaling (each one simulation under the recorded policy).
pub const MAX_ROUNDS: u32 = 12;
/// Rounds in a row without a better worst miss after which the search
/// stops: a client it cannot help (its share does not answer to think
/// times, its own or the others'). Think times short of a client's turn
/// in the queue change nothing either, so a search starting there needs
/// a few rounds of growing steps before the shares move.
const STALL_ROUNDS: u32 = 6;
/// Most a round scales a client's think times, either way.
const MAX_STEP: f64 = 4.0;
/// Most calibration scales a client's think times in all, either way: a
/// client whose share does not answer to them is not driven to absurd
/// ones (a transport the model gives no more than it gets, say).
pub const MAX_SCALE: f64 = 256.0;

/// What calibration did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Calibration {
    /// The worst miss (points) of the model as fitted, over the clients it
    /// models.
    pub fitted_miss_points: f64,
    /// The round kept (0: the fitted model is used as it is).
    pub rounds: u32,
    /// Rounds simulated (each one run under the recorded policy).
    pub rounds_run: u32,
    /// Each peer's think-time scale in the round kept (netns, name).
    pub scales: HashMap<(u32, String), f64>,
}

/// The worst |simulated − measured| share over the measured peers the
/// model has (`modelled`: a peer beyond the fit's transport bound has no
/// think times to scale, and its miss is the fit check's), in points,
/// and each peer's simulated over measured share.
fn misses(
    measured: &Snapshot,
    simulated: &Snapshot,
    modelled: &HashSet<(u32, String)>,
) -> (f64, HashMap<(u32, String), f64>) {
    let sim: HashMap<(u32, &str), f64> = simulated
        .peers
        .iter()
        .map(|e| ((e.netns, e.name.as_str()), e.share))
        .collect();
    let mut worst = 0.0f64;
    let mut ratios = HashMap::new();
    for m in measured
        .peers
        .iter()
        .filter(|m| m.dispatches > 0 && m.share > 0.0)
    {
        let key = (m.netns, m.name.clone());
        if !modelled.contains(&key) {
            continue;
        }
        let s = sim.get(&(m.netns, m.name.as_str())).copied().unwrap_or(0.0);
        worst = worst.max((s - m.share).abs() * 100.0);
        ratios.insert(key, s / m.share);
    }
    (worst, ratios)
}

/// One peer's search for the scale of its think times, in ln: where it
/// stands, and the point observed before (ln-scale, ln(simulated /
/// measured share)).
#[derive(Clone, Copy, Default)]
struct Search {
    at: f64,
    last: Option<(f64, f64)>,
}

impl Search {
    /// Moves on from the error `err` observed at `self.at`: a secant step
    /// where two points show how the share answers (longer thinks, less
    /// share), else [`FIRST_GAIN`] × the error (a share answers weakly to
    /// its own think times where the queue, not the client, paces it).
    fn step(&mut self, err: f64) {
        let guess = self.at + FIRST_GAIN * err;
        let next = match self.last {
            Some((at0, err0)) if (self.at - at0).abs() > 1e-9 => {
                let slope = (err - err0) / (self.at - at0);
                if slope < -0.05 {
                    self.at - err / slope
                } else {
                    guess
                }
            }
            _ => guess,
        };
        self.last = Some((self.at, err));
        let cap = MAX_SCALE.ln();
        self.at =
            (self.at + (next - self.at).clamp(-MAX_STEP.ln(), MAX_STEP.ln())).clamp(-cap, cap);
    }
}

/// First step's gain: ln-scale per ln-error.
const FIRST_GAIN: f64 = 4.0;

/// Runs the model of `fit` under the recorded policy (`p`) and, while some
/// peer's share misses the measured one by more than `above_points`
/// (normally [`CALIBRATE_ABOVE_POINTS`]), scales each peer's think times (a
/// peer served too much thinks longer) by a secant search on
/// ln(simulated / measured share), for at most [`MAX_ROUNDS`] and no more
/// than [`STALL_ROUNDS`] in a row without a better worst miss. `fit` is
/// left with the think times of the round whose worst miss was least (as
/// fitted if none did better), and that round's run is returned. A model
/// without think times (every transport backlogged) is not calibrated.
pub fn calibrate(
    fit: &mut Fit,
    measured: &Snapshot,
    classmap: &ClassMap,
    p: &RunParams,
    above_points: f64,
) -> (run::Run, Calibration) {
    let fitted = fit.clone();
    // Each transport's peer as the snapshots name it, once.
    let peer_of: Vec<(u32, String)> = fit
        .transports
        .iter()
        .map(|t| (t.key.netns, t.key.peer().to_string()))
        .collect();
    let modelled: HashSet<(u32, String)> = peer_of.iter().cloned().collect();
    let snap = run::simulate_run(run::clients(fit), classmap, p);
    let (fitted_miss, mut ratios) = misses(measured, &snap.snapshot, &modelled);
    let mut cal = Calibration {
        fitted_miss_points: fitted_miss,
        ..Calibration::default()
    };
    let thinks = fit
        .transports
        .iter()
        .any(|t| !matches!(t.demand, FittedDemand::Backlogged));
    let mut best = (fitted_miss, snap);
    let mut searches: HashMap<(u32, String), Search> = HashMap::new();
    let mut stalled = 0;
    for round in 1..=MAX_ROUNDS {
        if best.0 <= above_points || !thinks || stalled >= STALL_ROUNDS {
            break;
        }
        for (peer, r) in &ratios {
            searches
                .entry(peer.clone())
                .or_default()
                .step(r.max(1e-3).ln());
        }
        let mut trial = fitted.clone();
        for (t, peer) in trial.transports.iter_mut().zip(&peer_of) {
            if let Some(s) = searches.get(peer) {
                t.demand.scale_thinks(s.at.exp());
            }
        }
        let snap = run::simulate_run(run::clients(&trial), classmap, p);
        cal.rounds_run = round;
        let (miss, r) = misses(measured, &snap.snapshot, &modelled);
        ratios = r;
        if miss < best.0 {
            best = (miss, snap);
            *fit = trial;
            cal.rounds = round;
            cal.scales = searches
                .iter()
                .map(|(k, s)| (k.clone(), s.at.exp()))
                .collect();
            stalled = 0;
        } else {
            stalled += 1;
        }
    }
    (best.1, cal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Endpoint, XprtKey};
    use crate::source::demo::Policy;
    use crate::whatif::fit::{FittedDemand, TransportFit};

    const MS: u64 = 1_000_000;

    fn key(ip: &str, port: u16) -> XprtKey {
        XprtKey {
            netns: 1,
            server: Endpoint::None,
            client: Endpoint::from_socket_addr(format!("{ip}:{port}").parse().unwrap()),
        }
    }

    /// One client of 16 requests on one connection and one of 2 requests
    /// on each of 8 connections, thinking `think_ms` between requests:
    /// the QEMU test's nconnect=1 and nconnect=8 clients.
    fn model(think_ms: u64) -> Fit {
        let closed = |key, inflight, think| TransportFit {
            key,
            dispatches: 1,
            demand: FittedDemand::Closed {
                inflight,
                thinks_ns: vec![think * MS / 2, think * MS, think * MS * 3 / 2],
            },
            service_ns: vec![MS],
        };
        let mut transports = vec![closed(key("10.0.0.1", 700), 16, 1)];
        transports.extend((0..8).map(|i| closed(key("10.0.0.8", 700 + i), 2, think_ms)));
        Fit {
            transports,
            ..Fit::default()
        }
    }

    fn params() -> RunParams {
        RunParams {
            threads: 2,
            policy: Policy::Flat,
            horizon_ns: 30_000_000_000,
            warmup_ns: 1_000_000_000,
            seed: 1,
            max_dispatches: run::MAX_SIM_DISPATCHES,
            nfsd_ports: None,
        }
    }

    fn share(s: &Snapshot, name: &str) -> f64 {
        s.peers.iter().find(|e| e.name == name).unwrap().share
    }

    fn measured(map: &ClassMap) -> Snapshot {
        run::simulate(run::clients(&model(8)), map, &params())
    }

    /// The recording's truth: the 8-connection client thinks 8 ms. Fitted
    /// with a quarter of that, it takes a larger share than it had; the
    /// calibrated model gives both clients their measured shares back.
    #[test]
    fn think_times_fitted_too_short_are_calibrated_to_the_measured_shares() {
        let map = ClassMap::default();
        let measured = measured(&map);
        let mut fit = model(2);
        let (run, cal) = calibrate(&mut fit, &measured, &map, &params(), CALIBRATE_ABOVE_POINTS);
        let snap = run.snapshot;
        assert!(cal.fitted_miss_points > 3.0, "{cal:?}");
        assert!(cal.rounds >= 1, "{cal:?}");
        for name in ["10.0.0.1", "10.0.0.8"] {
            let err = (share(&snap, name) - share(&measured, name)) * 100.0;
            assert!(
                err.abs() <= CALIBRATE_ABOVE_POINTS,
                "{name}: {err:+.2} points ({cal:?})"
            );
        }
        // The wide client's think times grew; the shapes stayed.
        let FittedDemand::Closed {
            inflight,
            thinks_ns,
        } = &fit.transports[1].demand
        else {
            panic!("not a closed loop");
        };
        assert_eq!(*inflight, 2);
        assert!(thinks_ns[1] > 4 * MS, "{thinks_ns:?}");
    }

    /// Kept as fitted: no rounds when asked for none, or when no client
    /// has think times to scale (the miss is the model's, and stays).
    #[test]
    fn a_model_without_think_times_or_asked_not_to_is_kept_as_fitted() {
        let map = ClassMap::default();
        let measured = measured(&map);
        let mut fit = model(2);
        let (run, cal) = calibrate(&mut fit, &measured, &map, &params(), f64::INFINITY);
        let snap = run.snapshot;
        assert_eq!(cal.rounds, 0);
        let miss = (share(&snap, "10.0.0.8") - share(&measured, "10.0.0.8")) * 100.0;
        assert!((miss.abs() - cal.fitted_miss_points).abs() < 1e-9);
        assert_eq!(
            format!("{:?}", fit.transports),
            format!("{:?}", model(2).transports)
        );

        let mut backlogged = model(2);
        for t in &mut backlogged.transports {
            t.demand = FittedDemand::Backlogged;
        }
        let (_, cal) = calibrate(
            &mut backlogged,
            &measured,
            &map,
            &params(),
            CALIBRATE_ABOVE_POINTS,
        );
        assert_eq!(cal.rounds, 0, "{cal:?}");
        assert!(cal.fitted_miss_points > 3.0, "{cal:?}");
    }

    /// A model whose think times came out 0 (every arrival answered its
    /// completion at once) is still given think times where it takes too
    /// much; from far off (a model six times too slow to think) too.
    #[test]
    fn zero_and_far_off_think_times_are_calibrated_too() {
        let map = ClassMap::default();
        let measured = measured(&map);
        for think_ms in [0, 64] {
            let mut fit = model(think_ms);
            let (run, cal) =
                calibrate(&mut fit, &measured, &map, &params(), CALIBRATE_ABOVE_POINTS);
            let snap = run.snapshot;
            assert!(cal.fitted_miss_points > 10.0, "{think_ms} ms: {cal:?}");
            let err = (share(&snap, "10.0.0.8") - share(&measured, "10.0.0.8")) * 100.0;
            assert!(
                err.abs() <= CALIBRATE_ABOVE_POINTS,
                "{think_ms} ms: {err:+.2} points ({cal:?})"
            );
        }
    }
}
