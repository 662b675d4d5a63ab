//! The report's rows: each measured entity beside the fitted model's and
//! every policy's prediction, what the model made of each peer's demand,
//! and, when the model misses the recording, why.

use std::collections::HashMap;

use super::{
    bursts, fit, run, Numbers, Predicted, Row, FIT_RATE_TOLERANCE, FIT_RATIO_ABSOLUTE,
    FIT_RATIO_RELATIVE, FIT_TOLERANCE_POINTS,
};
use crate::model::{EntityStats, Snapshot};
use crate::source::demo::Policy;

/// Why the model does not reproduce the recording, if it does not: the
/// total rate, the share of `worst` (the client missed most), or a
/// backlogged client's ratio.
pub(super) fn fit_failure(
    peers: &[Row],
    worst: Option<&Row>,
    rate_ratio: f64,
    rate_ok: bool,
) -> Option<String> {
    if !rate_ok {
        return Some(format!(
            "its total rate is {:.0}% of the recording's (tolerance {:.0}%): the thread count \
             or the service times do not match the recorded server's",
            rate_ratio * 100.0,
            FIT_RATE_TOLERANCE * 100.0
        ));
    }
    if let Some(w) = worst.filter(|w| w.fit_error_points.abs() > FIT_TOLERANCE_POINTS) {
        return Some(format!(
            "it misses {}'s share by {:.1} points (tolerance {FIT_TOLERANCE_POINTS:.0})",
            w.name,
            w.fit_error_points.abs()
        ));
    }
    let r = peers.iter().find(|r| !r.fit_ok)?;
    let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
    Some(format!(
        "it gives {} a fairness ratio of {} where the recording measured {} (tolerance {} + \
         {:.0}%): the shares are met for another reason than the recorded one (a server that \
         already dispatched round-robin, taken for flat?)",
        r.name,
        f(r.fit.fairness),
        f(r.measured.fairness),
        FIT_RATIO_ABSOLUTE,
        FIT_RATIO_RELATIVE * 100.0
    ))
}

fn key(e: &EntityStats) -> (u32, &str) {
    (e.netns, e.name.as_str())
}

/// What the model made of each peer's transports (by netns and name as
/// the aggregator shows it).
pub(super) fn demand_by_peer(
    fit: &fit::Fit,
    scales: &HashMap<(u32, String), f64>,
) -> HashMap<(u32, String), String> {
    use fit::FittedDemand as D;
    let p50 = |mut v: Vec<u64>| {
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    };
    let p50_ms = |v: Vec<u64>| p50(v) as f64 / 1e6;
    let mut by_peer: HashMap<(u32, String), Vec<&D>> = HashMap::new();
    for t in &fit.transports {
        by_peer
            .entry((t.key.netns, t.key.peer().to_string()))
            .or_default()
            .push(&t.demand);
    }
    by_peer
        .into_iter()
        .map(|(k, ds)| {
            let mut parts = Vec::new();
            let backlogged = ds.iter().filter(|d| ***d == D::Backlogged).count();
            if backlogged > 0 {
                parts.push(format!("{backlogged} backlogged"));
            }
            let (mut loops, mut inflight, mut thinks) = (0, 0u64, Vec::new());
            let (mut bursty, mut sizes, mut gaps) = (0, Vec::new(), Vec::new());
            for d in &ds {
                match d {
                    D::Closed {
                        inflight: n,
                        thinks_ns,
                    } => {
                        loops += 1;
                        inflight += u64::from(*n);
                        thinks.extend_from_slice(thinks_ns);
                    }
                    D::Bursts {
                        sizes: s,
                        thinks_ns,
                    } => {
                        bursty += 1;
                        sizes.extend(s.iter().map(|&n| u64::from(n)));
                        gaps.extend_from_slice(thinks_ns);
                    }
                    D::Backlogged => {}
                }
            }
            if loops > 0 {
                parts.push(format!(
                    "{loops} closed loop{}: {inflight} in flight, think p50 {:.1} ms",
                    if loops == 1 { "" } else { "s" },
                    p50_ms(thinks)
                ));
            }
            if bursty > 0 {
                parts.push(format!(
                    "{bursty} in bursts: p50 {} requests, think p50 {:.1} ms",
                    p50(sizes),
                    p50_ms(gaps)
                ));
            }
            if let Some(x) = scales.get(&k).filter(|x| (**x - 1.0).abs() > 0.005) {
                // A scale below a tenth as a fraction: "×0.00" would read as none.
                let scale = if *x < 0.1 {
                    format!("1/{:.0}", 1.0 / x)
                } else {
                    format!("{x:.2}")
                };
                parts.push(format!("think times calibrated ×{scale}"));
            }
            (k, parts.join("; "))
        })
        .collect()
}

/// A row per measured entity. Bursts are per peer: `peers` rows get them
/// from each run, and from `measured_bursts` where the recording gives
/// them exactly.
pub(super) fn per_entity(
    peers: bool,
    measured: &[EntityStats],
    measured_bursts: Option<&bursts::Bursts>,
    fitted: &run::Run,
    runs: &[(Policy, run::Run)],
    pick: impl Fn(&Snapshot) -> &Vec<EntityStats>,
    demand: impl Fn(&EntityStats) -> String,
) -> Vec<Row> {
    fn of<'b>(
        peers: bool,
        b: &'b bursts::Bursts,
        m: &EntityStats,
    ) -> Option<&'b bursts::PeerBursts> {
        b.peer(m.netns, &m.name).filter(|_| peers)
    }
    let find = |r: &run::Run, m: &EntityStats| {
        pick(&r.snapshot)
            .iter()
            .find(|e| key(e) == key(m))
            .map(Numbers::of)
            .unwrap_or_default()
            .with_bursts(of(peers, &r.bursts, m))
    };
    measured
        .iter()
        .filter(|m| m.dispatches > 0)
        .map(|m| {
            let fit = find(fitted, m);
            let measured =
                Numbers::of(m).with_bursts(measured_bursts.and_then(|b| of(peers, b, m)));
            let err = (fit.share - measured.share) * 100.0;
            let ratio_ok = match (measured.fairness, fit.fairness) {
                (Some(m), Some(f)) => (f - m).abs() <= FIT_RATIO_ABSOLUTE + FIT_RATIO_RELATIVE * m,
                _ => true,
            };
            Row {
                name: m.name.clone(),
                class: m.class.clone(),
                connections: m.connections,
                demand: demand(m),
                measured,
                fit,
                fit_error_points: err,
                fit_ok: err.abs() <= FIT_TOLERANCE_POINTS && ratio_ok,
                predicted: runs
                    .iter()
                    .map(|(p, r)| Predicted {
                        policy: p.to_string(),
                        numbers: find(r, m),
                    })
                    .collect(),
            }
        })
        .collect()
}
