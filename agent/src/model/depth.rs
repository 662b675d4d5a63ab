//! In-flight depth at enqueue: how many requests a transport had in flight
//! (received and not yet replied to: the kernel's `xpt_nr_rqsts`) each
//! time it was put on a ready queue, counted in power-of-two buckets. The
//! sparse-flow dispatch design gives a transport enqueued at depth 0 a
//! place ahead of the rest; a flow keeps that place only while enough of
//! its enqueues (about 1 in 64) find it at depth 0.

use serde::{Deserialize, Serialize};

/// Buckets: 0, 1, 2–3, 4–7, 8–15, 16–31, 32–63, 64 and more.
pub const DEPTH_BUCKETS: usize = 8;

/// The smallest depth of each bucket.
pub const DEPTH_LOWER: [u32; DEPTH_BUCKETS] = [0, 1, 2, 4, 8, 16, 32, 64];

/// Enqueues by their depth. In JSON: `{"counts": [8 counts], "sum": n}`
/// (docs/json.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DepthHistogram {
    /// Enqueues per bucket ([`DEPTH_LOWER`]).
    pub counts: [u64; DEPTH_BUCKETS],
    /// Their depths added up: the mean's numerator, exact where the
    /// buckets are not.
    pub sum: u64,
}

/// An entity's depths at enqueue as the aggregator keeps them: since the
/// start (now and at the last snapshot, whose difference is the
/// interval's) and the deepest of the interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DepthTally {
    pub now: DepthHistogram,
    pub then: DepthHistogram,
    /// The most in flight at one enqueue since the last snapshot.
    pub deepest: Option<u32>,
}

impl DepthTally {
    pub fn record(&mut self, depth: u32) {
        self.now.record(depth);
        self.deepest = Some(self.deepest.map_or(depth, |d| d.max(depth)));
    }

    /// At a snapshot: since the start, the interval's, and its deepest;
    /// the next interval starts from here.
    pub fn take(&mut self) -> (DepthHistogram, DepthHistogram, Option<u32>) {
        let interval = self.now.since(&self.then);
        self.then = self.now;
        (self.now, interval, self.deepest.take())
    }
}

/// The bucket of `depth`.
pub fn bucket_of(depth: u32) -> usize {
    ((u32::BITS - depth.leading_zeros()) as usize).min(DEPTH_BUCKETS - 1)
}

impl DepthHistogram {
    pub fn record(&mut self, depth: u32) {
        let b = &mut self.counts[bucket_of(depth)];
        *b = b.saturating_add(1);
        self.sum = self.sum.saturating_add(u64::from(depth));
    }

    /// Enqueues counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// What was counted since `earlier` (a copy of this one taken then).
    pub fn since(&self, earlier: &DepthHistogram) -> DepthHistogram {
        let mut d = DepthHistogram {
            sum: self.sum.saturating_sub(earlier.sum),
            ..DepthHistogram::default()
        };
        for (out, (now, then)) in d
            .counts
            .iter_mut()
            .zip(self.counts.iter().zip(earlier.counts))
        {
            *out = now.saturating_sub(then);
        }
        d
    }

    pub fn merge(&mut self, other: &DepthHistogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts) {
            *a = a.saturating_add(b);
        }
        self.sum = self.sum.saturating_add(other.sum);
    }

    /// The share of enqueues at depth 0; `None` where none was counted.
    pub fn depth0_share(&self) -> Option<f64> {
        let n = self.count();
        (n > 0).then(|| self.counts[0] as f64 / n as f64)
    }

    /// The mean depth; `None` where none was counted.
    pub fn mean(&self) -> Option<f64> {
        let n = self.count();
        (n > 0).then(|| self.sum as f64 / n as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two_from_zero() {
        let at = |d| bucket_of(d);
        assert_eq!(
            [0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 63, 64, 65, u32::MAX].map(at),
            [0, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 7]
        );
        for (b, &lo) in DEPTH_LOWER.iter().enumerate() {
            assert_eq!(bucket_of(lo), b);
        }
    }

    /// Hand-computed: depths 0, 0, 1, 3, 70 → two of five at 0, mean 74/5.
    #[test]
    fn share_at_zero_and_mean() {
        let mut h = DepthHistogram::default();
        assert_eq!((h.depth0_share(), h.mean()), (None, None));
        for d in [0, 0, 1, 3, 70] {
            h.record(d);
        }
        assert_eq!(h.counts, [2, 1, 1, 0, 0, 0, 0, 1]);
        assert_eq!((h.count(), h.sum), (5, 74));
        assert_eq!(h.depth0_share(), Some(0.4));
        assert_eq!(h.mean(), Some(14.8));
        let earlier = h;
        h.record(0);
        let d = h.since(&earlier);
        assert_eq!(
            (d.count(), d.depth0_share(), d.mean()),
            (1, Some(1.0), Some(0.0))
        );
        let mut m = earlier;
        m.merge(&d);
        assert_eq!(m, h);
    }

    #[test]
    fn json_is_counts_and_sum() {
        let mut h = DepthHistogram::default();
        h.record(2);
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(json, r#"{"counts":[0,0,1,0,0,0,0,0],"sum":2}"#);
        assert_eq!(serde_json::from_str::<DepthHistogram>(&json).unwrap(), h);
    }
}
