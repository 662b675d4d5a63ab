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
pub(super) fn closed_loop(arrivals: &[Arrival]) -> Option<FittedDemand> {
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
    let mut best: Option<(f64, usize, Vec<u64>)> = None;
    for n in lo..=lo + GAPS {
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
    best.map(|(_, n, thinks_ns)| FittedDemand::Closed {
        inflight: n as u32,
        thinks_ns,
    })
}
