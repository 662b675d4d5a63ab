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

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// An arrival at 1 s with `in_service` requests in service, its last
    /// completion `first_ns` before it and the earlier ones `spacing_ns`
    /// apart.
    fn arrival(in_service: u64, first_ns: u64, spacing_ns: u64) -> Arrival {
        let ts = 1_000 * MS;
        let recent: VecDeque<u64> = (0..GAPS as u64)
            .rev()
            .map(|j| ts - first_ns - j * spacing_ns)
            .collect();
        Arrival::new(ts, in_service, &recent)
    }

    fn mean(v: &[u64]) -> f64 {
        v.iter().sum::<u64>() as f64 / v.len() as f64
    }

    /// A client whose own turnaround spreads widely (2 to 23 ms) behind a
    /// deep loop: the spread shrinks up to the deepest N looked at. The
    /// arrivals sampled came after completions 25 ms apart while the
    /// transport was dispatched every 20 ms over the recording: the think
    /// times are its turnaround plus 20 ms spacings, so that its cycle is
    /// N × 20 ms and the loop keeps the rate it had.
    #[test]
    fn a_loop_deeper_than_remembered_keeps_the_recorded_rate() {
        let arrivals: Vec<Arrival> = (0..32)
            .map(|i| arrival(0, (2 + (i % 8) * 3) * MS, 25 * MS))
            .collect();
        let Some(FittedDemand::Closed {
            inflight,
            thinks_ns,
        }) = closed_loop(&arrivals, Some(20.0 * MS as f64))
        else {
            panic!("not a closed loop");
        };
        assert_eq!(inflight as usize, GAPS);
        let turnaround = 12.5 * MS as f64;
        let want = turnaround + (GAPS - 1) as f64 * 20.0 * MS as f64;
        let got = mean(&thinks_ns);
        assert!(
            (got / want - 1.0).abs() < 0.01,
            "mean think {:.1} ms, want {:.1} ms",
            got / 1e6,
            want / 1e6
        );
        // The spread is kept: the longest over the shortest as sampled.
        let (lo, hi) = (
            thinks_ns.iter().min().unwrap(),
            thinks_ns.iter().max().unwrap(),
        );
        let sampled = (23.0 + 23.0 * 25.0) / (2.0 + 23.0 * 25.0);
        assert!(((*hi as f64 / *lo as f64) / sampled - 1.0).abs() < 0.01);
    }

    /// Half the arrivals found a request in service and their think times
    /// are alike; the other half spread. One N beyond what the completions
    /// remembered explain would count only the first half, whose spread
    /// is least: it is not compared.
    #[test]
    fn every_n_compared_explains_the_same_arrivals() {
        let arrivals: Vec<Arrival> = (0..32)
            .map(|i| match i % 2 {
                0 => arrival(1, 10 * MS, 20 * MS),
                _ => arrival(0, (1 + (i % 16) * 4) * MS, 20 * MS),
            })
            .collect();
        let Some(FittedDemand::Closed { inflight, .. }) = closed_loop(&arrivals, None) else {
            panic!("not a closed loop");
        };
        assert!(inflight as usize <= GAPS, "{inflight}");
    }

    /// A loop whose think times are alike is told by their spread, short of
    /// the bound, and its think times are what was sampled.
    #[test]
    fn a_loop_told_by_its_spread_keeps_its_sampled_think_times() {
        // 4 in flight, 20 ms think; completions 5 or 7 ms apart, so that
        // no other N lines the arrivals up.
        let arrivals: Vec<Arrival> = (0..32u64)
            .map(|i| {
                let jitter = (i % 3) * 10_000;
                match i % 2 {
                    0 => arrival(0, 5 * MS + jitter, 5 * MS),
                    _ => arrival(1, 6 * MS + jitter, 7 * MS),
                }
            })
            .collect();
        let Some(FittedDemand::Closed {
            inflight,
            thinks_ns,
        }) = closed_loop(&arrivals, Some(50.0 * MS as f64))
        else {
            panic!("not a closed loop");
        };
        assert_eq!(inflight, 4);
        assert!(
            thinks_ns
                .iter()
                .all(|&t| (20 * MS..20 * MS + 30_000).contains(&t)),
            "{thinks_ns:?}"
        );
    }
}
