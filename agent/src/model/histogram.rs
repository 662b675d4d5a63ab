//! A log-linear histogram of queue waits in microseconds: four sub-buckets
//! per power of two (at most 25% relative bucket width), fixed memory, O(1)
//! record. Percentiles are read from bucket midpoints, so "agree within one
//! bucket" is a meaningful test between two wait sources.

use serde::{Deserialize, Serialize};

const SUB_BITS: u32 = 2;
const SUB: u64 = 1 << SUB_BITS;
/// Values up to 2^32 µs (about 71 minutes); larger ones land in the last bucket.
const MAX_POW: u32 = 32;
pub const BUCKETS: usize = (SUB + (MAX_POW as u64 - SUB_BITS as u64) * SUB) as usize;

/// Sparse on the wire (index, count), and in memory while few buckets are
/// used (a peer's waits usually fall in a handful): 100k peers must not
/// cost a kilobyte each. Past `SPARSE_MAX` buckets it turns dense.
#[derive(Clone, Debug, Default)]
pub struct WaitHistogram {
    counts: Counts,
    total: u64,
    /// Dense from the start and through `clear` (the few server-wide
    /// histograms, updated on every dispatch: O(1) with no search).
    dense_always: bool,
}

const SPARSE_MAX: usize = 8;

#[derive(Clone, Debug, Default)]
enum Counts {
    #[default]
    Empty,
    /// Sorted by bucket index.
    Sparse(Vec<(u8, u64)>),
    Dense(Vec<u64>),
}

impl PartialEq for WaitHistogram {
    fn eq(&self, other: &Self) -> bool {
        self.total == other.total && self.nonzero().eq(other.nonzero())
    }
}

impl Eq for WaitHistogram {}

pub fn bucket_of(us: u64) -> usize {
    if us < SUB {
        return us as usize;
    }
    let pow = 63 - us.leading_zeros();
    if pow >= MAX_POW {
        return BUCKETS - 1;
    }
    let sub = (us >> (pow - SUB_BITS)) & (SUB - 1);
    (SUB + (pow as u64 - SUB_BITS as u64) * SUB + sub) as usize
}

/// Inclusive lower and exclusive upper bound of a bucket, in µs.
pub fn bucket_bounds(idx: usize) -> (u64, u64) {
    let idx = idx as u64;
    if idx < SUB {
        return (idx, idx + 1);
    }
    let pow = (idx - SUB) / SUB + SUB_BITS as u64;
    let sub = (idx - SUB) % SUB;
    let width = 1u64 << (pow - SUB_BITS as u64);
    let lo = (1u64 << pow) + sub * width;
    (lo, lo + width)
}

impl WaitHistogram {
    /// A histogram that is dense from the start (1 KB) and stays so.
    pub fn dense() -> WaitHistogram {
        WaitHistogram {
            counts: Counts::Dense(vec![0; BUCKETS]),
            total: 0,
            dense_always: true,
        }
    }

    #[inline]
    pub fn record_us(&mut self, us: u64) {
        self.add(bucket_of(us), 1);
    }

    /// One sample in bucket `idx` (from [`bucket_of`]): a wait counted in
    /// several histograms finds its bucket once.
    #[inline]
    pub fn record_bucket(&mut self, idx: usize) {
        self.add(idx.min(BUCKETS - 1), 1);
    }

    #[inline(always)]
    fn add(&mut self, idx: usize, n: u64) {
        if n == 0 {
            return;
        }
        self.total += n;
        match &mut self.counts {
            Counts::Empty => self.counts = Counts::Sparse(vec![(idx as u8, n)]),
            // At most SPARSE_MAX entries: a linear scan is the cheapest
            // search, and a peer's waits mostly hit its first buckets.
            Counts::Sparse(v) => match v.iter().position(|e| e.0 >= idx as u8) {
                Some(i) if v[i].0 == idx as u8 => v[i].1 += n,
                pos if v.len() < SPARSE_MAX => v.insert(pos.unwrap_or(v.len()), (idx as u8, n)),
                _ => {
                    let mut dense = vec![0; BUCKETS];
                    for (i, c) in v.iter() {
                        dense[*i as usize] = *c;
                    }
                    dense[idx] += n;
                    self.counts = Counts::Dense(dense);
                }
            },
            Counts::Dense(d) => d[idx] += n,
        }
    }

    /// Non-empty buckets as (index, count), in index order.
    fn nonzero(&self) -> Box<dyn Iterator<Item = (usize, u64)> + '_> {
        match &self.counts {
            Counts::Empty => Box::new(std::iter::empty()),
            Counts::Sparse(v) => Box::new(v.iter().map(|(i, c)| (*i as usize, *c))),
            Counts::Dense(d) => Box::new(
                d.iter()
                    .enumerate()
                    .filter(|(_, c)| **c > 0)
                    .map(|(i, c)| (i, *c)),
            ),
        }
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// Empty the histogram and give its memory back: interval histograms
    /// of 100k mostly idle peers must not keep memory each.
    pub fn clear(&mut self) {
        match &mut self.counts {
            Counts::Dense(d) if self.dense_always => d.fill(0),
            _ => self.counts = Counts::Empty,
        }
        self.total = 0;
    }

    pub fn merge(&mut self, other: &WaitHistogram) {
        for (i, c) in other.nonzero() {
            self.add(i, c);
        }
    }

    /// The midpoint of the bucket holding quantile `q` (0..=1); 0 if empty.
    pub fn quantile_us(&self, q: f64) -> f64 {
        self.bucket_index_of_quantile(q)
            .map(Self::midpoint)
            .unwrap_or(0.0)
    }

    pub fn bucket_index_of_quantile(&self, q: f64) -> Option<usize> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.nonzero() {
            seen += c;
            if seen >= rank {
                return Some(i);
            }
        }
        Some(BUCKETS - 1)
    }

    fn midpoint(i: usize) -> f64 {
        let (lo, hi) = bucket_bounds(i);
        (lo + hi - 1) as f64 / 2.0
    }

    /// Non-empty buckets as (lower bound µs, upper bound µs, count).
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.nonzero().map(|(i, c)| {
            let (lo, hi) = bucket_bounds(i);
            (lo, hi, c)
        })
    }

    /// Cumulative count of samples strictly below `us` microseconds, exact
    /// when `us` is a bucket boundary (every power of two is).
    pub fn count_below_us(&self, us: u64) -> u64 {
        self.buckets()
            .take_while(|(_, hi, _)| *hi <= us)
            .map(|(_, _, c)| c)
            .sum()
    }
}

impl Serialize for WaitHistogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let sparse: Vec<(usize, u64)> = self.nonzero().collect();
        sparse.serialize(s)
    }
}

impl<'de> Deserialize<'de> for WaitHistogram {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let sparse: Vec<(usize, u64)> = Vec::deserialize(d)?;
        if sparse.len() > SPARSE_MAX {
            // Dense: 1 KiB in memory from as little as 50 bytes of JSON.
            crate::model::bounds::take::<D::Error>(crate::model::bounds::What::DenseHistogram)?;
        }
        let mut h = WaitHistogram::default();
        for (i, c) in sparse {
            if i >= BUCKETS {
                return Err(serde::de::Error::custom(format!(
                    "histogram bucket {i} out of range (max {})",
                    BUCKETS - 1
                )));
            }
            h.add(i, c);
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_contain_their_values() {
        let mut prev_hi = 0;
        for i in 0..BUCKETS {
            let (lo, hi) = bucket_bounds(i);
            assert_eq!(lo, prev_hi, "bucket {i} starts where the previous ended");
            assert!(hi > lo);
            assert_eq!(bucket_of(lo), i);
            assert_eq!(bucket_of(hi - 1), i);
            prev_hi = hi;
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn relative_width_is_at_most_a_quarter() {
        for i in 8..BUCKETS {
            let (lo, hi) = bucket_bounds(i);
            assert!((hi - lo) as f64 / lo as f64 <= 0.25 + 1e-9, "bucket {i}");
        }
    }

    #[test]
    fn quantiles_by_hand() {
        let mut h = WaitHistogram::default();
        // 99 samples of 10 µs (bucket [10,12)), one of 1000 µs ([896,1024)).
        for _ in 0..99 {
            h.record_us(10);
        }
        h.record_us(1000);
        assert_eq!(h.quantile_us(0.5), 10.5);
        assert_eq!(h.quantile_us(0.99), 10.5);
        assert_eq!(h.quantile_us(1.0), (896.0 + 1023.0) / 2.0);
        assert_eq!(h.count_below_us(16), 99);
        assert_eq!(h.count_below_us(1024), 100);
    }

    #[test]
    fn sparse_serde_round_trip_and_rejects_bad_index() {
        let mut h = WaitHistogram::default();
        h.record_us(3);
        h.record_us(70_000);
        let s = serde_json::to_string(&h).unwrap();
        let back: WaitHistogram = serde_json::from_str(&s).unwrap();
        assert_eq!(back, h);
        assert!(serde_json::from_str::<WaitHistogram>("[[9999,1]]").is_err());
    }
}

#[cfg(test)]
mod sparse_tests {
    use super::*;

    #[test]
    fn sparse_and_dense_agree() {
        let mut sparse = WaitHistogram::default();
        let mut dense = WaitHistogram::default();
        let values = [5u64, 5, 900, 17, 1 << 20, 3];
        for v in values {
            sparse.record_us(v);
        }
        // Force the dense form with many distinct buckets, then compare
        // the same samples' quantiles by merging into a dense one.
        for v in 0..200u64 {
            dense.record_us(v * 37);
        }
        assert!(matches!(sparse.counts, Counts::Sparse(_)));
        assert!(matches!(dense.counts, Counts::Dense(_)));
        let mut both = dense.clone();
        both.merge(&sparse);
        assert_eq!(both.count(), 206);
        let mut again = WaitHistogram::default();
        for v in values {
            again.record_us(v);
        }
        for v in 0..200u64 {
            again.record_us(v * 37);
        }
        assert_eq!(both, again);
        for q in [0.1, 0.5, 0.9, 0.99, 1.0] {
            assert_eq!(both.quantile_us(q), again.quantile_us(q));
        }
    }
}
