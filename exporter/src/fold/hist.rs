//! The queue-wait histogram of one exported series: the agent's buckets
//! at full resolution, accumulated from deltas, and their classic
//! (power-of-two) buckets for the text formats; the native buckets are
//! [`crate::metrics::native`]'s.

use nfsdtop_agent::aggregate::histogram::{bucket_bounds, bucket_of, WaitHistogram, BUCKETS};

/// Upper bounds of the exported queue-wait buckets, in µs: powers of two
/// from 16 µs to 2^22 µs (4.19 s). Every power of two is a bucket boundary
/// of the agent's wait histogram, so the exported cumulative counts are
/// exact.
pub const WAIT_BOUNDS_POW: std::ops::RangeInclusive<u32> = 4..=22;

/// A full-resolution cumulative histogram, accumulated from deltas.
#[derive(Clone, Debug, Default)]
pub struct HistAcc {
    pub(super) counts: Vec<u64>,
}

pub fn dense(h: &WaitHistogram) -> Vec<u64> {
    let mut v = vec![0u64; BUCKETS];
    for (lo, _, c) in h.buckets() {
        v[bucket_of(lo)] += c;
    }
    v
}

impl HistAcc {
    pub(super) fn add(&mut self, delta: &[u64]) {
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS];
        }
        for (a, d) in self.counts.iter_mut().zip(delta) {
            *a += d;
        }
    }

    /// The counts per agent bucket (empty before the first).
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// (sum in seconds, count, per-bucket counts at the exported bounds).
    pub fn export(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let bounds: Vec<u64> = WAIT_BOUNDS_POW.map(|p| 1u64 << p).collect();
        let mut per = vec![0u64; bounds.len() + 1];
        let mut sum_us = 0.0;
        let mut count = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let (lo, hi) = bucket_bounds(i);
            // The bucket's midpoint: _sum is an estimate within the
            // histogram's resolution (25% relative bucket width).
            sum_us += c as f64 * (lo + hi - 1) as f64 / 2.0;
            count += c;
            let slot = bounds.iter().position(|&b| hi <= b).unwrap_or(bounds.len());
            per[slot] += c;
        }
        let mut buckets: Vec<(f64, u64)> = bounds
            .iter()
            .zip(&per)
            .map(|(&b, &c)| (b as f64 / 1e6, c))
            .collect();
        buckets.push((f64::INFINITY, per[bounds.len()]));
        (sum_us / 1e6, count, buckets)
    }
}
