//! A closed loop's outstanding requests N and its think times, from the
//! arrivals that found its transport off the queue.

use std::collections::VecDeque;

use super::FittedDemand;

/// Completions remembered per transport: the largest closed loop fitted.
pub(super) const GAPS: usize = 24;

/// A visible arrival: how many of the transport's requests were in
/// service, and how long ago (µs) each of its last completions was.
#[derive(Clone, Copy, Debug)]
pub(super) struct Arrival {
    in_service: u32,
    n: u8,
    gaps_us: [u32; GAPS],
}

impl Arrival {
    /// An arrival at `ts` with `in_service` requests of its transport in
    /// service; `recent` holds its last completions, newest last.
    pub(super) fn new(ts: u64, in_service: u64, recent: &VecDeque<u64>) -> Arrival {
        let mut a = Arrival {
            in_service: u32::try_from(in_service).unwrap_or(u32::MAX),
            n: recent.len().min(GAPS) as u8,
            gaps_us: [0; GAPS],
        };
        for (g, c) in a.gaps_us.iter_mut().zip(recent.iter().rev()) {
            *g = u32::try_from(ts.saturating_sub(*c) / 1_000).unwrap_or(u32::MAX);
        }
        a
    }
}

/// The closed loop that explains `arrivals` best: the N whose think
/// times (arrival − the completion N − in-service before it) spread
/// least, relative to their mean.
///
/// N is sought up to the completions remembered ([`GAPS`] before the
/// arrival that found the fewest requests in service), so that every N
/// compared explains the same arrivals: beyond, only those that found
/// more in service would count, a subset whose spread is no measure.
///
/// Where the spread keeps shrinking up to that bound (the think times
/// vary more than a few completions' spacing does, as a client's own
/// scheduling makes them), N is not told by the spread: the loop is at
/// least that deep, and its think times reach back across many
/// completions, each a sum of the spacings before the arrival. Their mean,
/// from a few dozen arrivals, would set the loop's rate (N over its cycle)
/// by chance, by a tenth either way. There the spacings are taken at their
/// mean over the whole recording, `spacing_ns` (the transport's time per
/// dispatch): each think time is its gap to the last completion plus
/// k − 1 mean spacings, so that the loop's cycle is N spacings, as Little's
/// law has it for the rate recorded. The sampled think times keep their
/// spread, scaled to that mean.
pub(super) fn closed_loop(arrivals: &[Arrival], spacing_ns: Option<f64>) -> Option<FittedDemand> {
    let thinks = |n: usize| -> Vec<u64> {
        arrivals
            .iter()
            .filter_map(|a| {
                let k = n.checked_sub(a.in_service as usize)?;
                (k >= 1 && k <= a.n as usize).then(|| u64::from(a.gaps_us[k - 1]) * 1_000)
            })
            .collect()
    };
    let lo = arrivals.iter().map(|a| a.in_service as usize + 1).min()?;
    let deepest = lo - 1 + GAPS;
    let mut best: Option<(f64, usize, Vec<u64>)> = None;
    for n in lo..=deepest {
        let t = thinks(n);
        // Most arrivals must be explained at this N.
        if t.is_empty() || t.len() * 2 < arrivals.len() {
            continue;
        }
        let mean = t.iter().sum::<u64>() as f64 / t.len() as f64;
        let var = t.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / t.len() as f64;
        let cv = if mean > 0.0 { var.sqrt() / mean } else { 0.0 };
        if best.as_ref().is_none_or(|(b, _, _)| cv < *b - 1e-9) {
            best = Some((cv, n, t));
        }
    }
    let (_, n, mut thinks_ns) = best?;
    if let (true, Some(spacing)) = (n == deepest, spacing_ns) {
        let (sum, count) = arrivals
            .iter()
            .filter_map(|a| {
                let k = n.checked_sub(a.in_service as usize)?;
                (k >= 1 && k <= a.n as usize)
                    .then(|| f64::from(a.gaps_us[0]) * 1e3 + (k - 1) as f64 * spacing)
            })
            .fold((0.0, 0u64), |(s, c), x| (s + x, c + 1));
        let mean = thinks_ns.iter().sum::<u64>() as f64 / thinks_ns.len() as f64;
        if count > 0 && mean > 0.0 {
            let scale = sum / count as f64 / mean;
            for t in &mut thinks_ns {
                *t = (*t as f64 * scale) as u64;
            }
        }
    }
    Some(FittedDemand::Closed {
        inflight: n as u32,
        thinks_ns,
    })
}
