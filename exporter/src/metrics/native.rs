//! The queue-wait histograms as Prometheus native histograms, for the
//! scrapers that negotiate the protobuf format: the schema, the zero
//! bucket, and where each of the agent's buckets lands among the native
//! ones. The text formats carry the classic buckets only
//! ([`crate::fold::HistAcc::export`]).

use std::sync::LazyLock;

use nfsdtop_agent::aggregate::histogram::{bucket_bounds, BUCKETS};
use prometheus_client::encoding::{NativeHistogram, NativeHistogramBuckets};

/// Schema 2: four buckets per power of two, bucket `i` holding waits in
/// (2^((i-1)/4), 2^(i/4)] seconds. The agent records four sub-buckets per
/// power of two of microseconds (at most 25% wide), so schema 2 is as fine
/// as the data is: a finer schema would split each agent bucket over two
/// native ones and suggest a precision nfsdtop does not measure; schema 1
/// would throw half of it away. 16 µs .. 4 s is 18 powers of two: at most
/// 72 buckets a class, of which a class fills the few its waits span.
pub const SCHEMA: i32 = 2;

/// The zero bucket holds the waits the agent measured as 0 µs (its first
/// bucket) and nothing else: 2^-20 s (0.95 µs) is under the agent's 1 µs
/// resolution. Being above 0, it also marks the histogram as native to
/// Prometheus before the first wait.
pub const ZERO_THRESHOLD: f64 = 1.0 / (1u64 << 20) as f64;

/// The native bucket index of each agent bucket (`None`: the zero
/// bucket). A bucket goes whole to the native bucket holding its midpoint,
/// the value `_sum` counts it at: counts stay whole and only grow, as a
/// counter's must (splitting a bucket's count over the native buckets it
/// overlaps would make rounded shares that can shrink). Agent and native
/// bounds do not coincide (microseconds are not a power of two of
/// seconds): the agent's four sub-buckets of a power of two land in three
/// of the four native ones, and a quantile may move by up to one native
/// bucket (19%) from the agent's own.
static NATIVE_INDEX: LazyLock<Vec<Option<i32>>> = LazyLock::new(|| {
    (0..BUCKETS)
        .map(|i| {
            let (lo, hi) = bucket_bounds(i);
            let mid_seconds = (lo + hi - 1) as f64 / 2.0 / 1e6;
            (mid_seconds > ZERO_THRESHOLD).then(|| native_index(mid_seconds))
        })
        .collect()
});

/// The index of the schema-[`SCHEMA`] bucket holding `seconds` (> 0).
pub fn native_index(seconds: f64) -> i32 {
    (seconds.log2() * f64::from(1u32 << SCHEMA)).ceil() as i32
}

/// Upper bound of native bucket `index`, in seconds.
pub fn native_upper_bound(index: i32) -> f64 {
    (f64::from(index) / f64::from(1u32 << SCHEMA)).exp2()
}

/// Runs of empty buckets up to this long stay inside a span (a zero
/// delta each); longer ones start a new span. Two costs about what a new
/// span does.
const MAX_GAP_IN_SPAN: i32 = 2;

/// One histogram's native buckets, as the protobuf format sends them.
#[derive(Debug, Default, PartialEq)]
pub struct Native {
    pub zero_count: u64,
    /// (offset, length): the first span's offset is its first index, each
    /// later one's the gap since the previous span.
    pub spans: Vec<(i32, u32)>,
    /// Each bucket's count minus the previous bucket's, across spans.
    pub deltas: Vec<i64>,
}

impl Native {
    /// From the agent's cumulative counts per bucket (`counts[i]` for
    /// agent bucket `i`; shorter or empty is fine).
    pub fn from_counts(counts: &[u64]) -> Native {
        let mut out = Native::default();
        // (native index, count), ascending: midpoints grow with i.
        let mut buckets: Vec<(i32, u64)> = Vec::new();
        for (&c, index) in counts.iter().zip(NATIVE_INDEX.iter()) {
            if c == 0 {
                continue;
            }
            match index {
                None => out.zero_count += c,
                Some(ix) => match buckets.last_mut() {
                    Some((last, n)) if last == ix => *n += c,
                    _ => buckets.push((*ix, c)),
                },
            }
        }
        let mut prev_index: Option<i32> = None;
        let mut prev_count = 0i64;
        for (ix, c) in buckets {
            match prev_index {
                Some(p) if ix - p - 1 <= MAX_GAP_IN_SPAN => {
                    for _ in p + 1..ix {
                        out.deltas.push(-prev_count);
                        prev_count = 0;
                    }
                    if let Some(span) = out.spans.last_mut() {
                        span.1 += (ix - p) as u32;
                    }
                }
                Some(p) => out.spans.push((ix - p - 1, 1)),
                None => out.spans.push((ix, 1)),
            }
            let c = c as i64;
            out.deltas.push(c - prev_count);
            prev_count = c;
            prev_index = Some(ix);
        }
        out
    }

    /// What prometheus-client's encoders take.
    pub fn encoding(&self) -> NativeHistogram<'_> {
        NativeHistogram {
            schema: SCHEMA,
            zero_threshold: ZERO_THRESHOLD,
            zero_count: self.zero_count,
            negative: NativeHistogramBuckets {
                spans: &[],
                deltas: &[],
            },
            positive: NativeHistogramBuckets {
                spans: &self.spans,
                deltas: &self.deltas,
            },
            created: None,
        }
    }

    /// (index, count) of every bucket the spans cover, in order: the
    /// decoding, for tests and checks.
    pub fn buckets(&self) -> Vec<(i32, u64)> {
        let mut out = Vec::new();
        let mut deltas = self.deltas.iter();
        let (mut index, mut count) = (0i32, 0i64);
        for (i, &(offset, len)) in self.spans.iter().enumerate() {
            index = if i == 0 { offset } else { index + offset };
            for _ in 0..len {
                count += deltas.next().copied().unwrap_or(0);
                out.push((index, count.max(0) as u64));
                index += 1;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfsdtop_agent::aggregate::histogram::bucket_of;

    #[test]
    fn every_agent_bucket_lands_in_the_native_bucket_of_its_midpoint() {
        for i in 1..BUCKETS {
            let (lo, hi) = bucket_bounds(i);
            let mid = (lo + hi - 1) as f64 / 2.0 / 1e6;
            let ix = NATIVE_INDEX[i].expect("only bucket 0 is the zero bucket");
            assert!(
                native_upper_bound(ix - 1) < mid && mid <= native_upper_bound(ix),
                "agent bucket {i} [{lo}, {hi}) µs: midpoint {mid} s not in native bucket {ix}"
            );
        }
        assert_eq!(NATIVE_INDEX[0], None);
    }

    #[test]
    fn counts_and_buckets_survive_the_span_and_delta_encoding() {
        let mut counts = vec![0u64; BUCKETS];
        // 0 µs, two waits near 20 µs, one at 300 µs and one at 5 ms: a
        // gap longer than MAX_GAP_IN_SPAN between each.
        for us in [0, 20, 21, 300, 5000] {
            counts[bucket_of(us)] += 1;
        }
        let n = Native::from_counts(&counts);
        assert_eq!(n.zero_count, 1);
        let got: Vec<(i32, u64)> = n.buckets().into_iter().filter(|b| b.1 > 0).collect();
        let want: Vec<(i32, u64)> = {
            let mut w: Vec<(i32, u64)> = Vec::new();
            for us in [20u64, 21, 300, 5000] {
                let (lo, hi) = bucket_bounds(bucket_of(us));
                let ix = native_index((lo + hi - 1) as f64 / 2.0 / 1e6);
                match w.last_mut() {
                    Some((l, c)) if *l == ix => *c += 1,
                    _ => w.push((ix, 1)),
                }
            }
            w
        };
        assert_eq!(got, want);
        assert_eq!(n.spans.len(), 3, "three runs far apart: {n:?}");
        let total: u64 = n.buckets().iter().map(|b| b.1).sum::<u64>() + n.zero_count;
        assert_eq!(total, 5, "every wait counted once");
    }

    #[test]
    fn short_gaps_stay_inside_one_span() {
        let mut counts = vec![0u64; BUCKETS];
        // Native buckets k and k+2 (one empty between): one span of 3.
        // The agent's [16384, 20480) µs and [20480, 24576) µs are two
        // native buckets apart (the first is 25% wide).
        let (a, b) = (bucket_of(16_384), bucket_of(20_480));
        let ka = NATIVE_INDEX[a].unwrap();
        assert_eq!(NATIVE_INDEX[b], Some(ka + 2));
        counts[a] = 5;
        counts[b] = 2;
        let n = Native::from_counts(&counts);
        assert_eq!(n.spans, vec![(ka, 3)]);
        assert_eq!(n.deltas, vec![5, -5, 2]);
        assert_eq!(n.buckets(), vec![(ka, 5), (ka + 1, 0), (ka + 2, 2)]);
    }

    #[test]
    fn an_empty_histogram_has_no_spans_but_is_still_native() {
        let n = Native::from_counts(&[]);
        assert_eq!(n, Native::default());
        assert!(n.encoding().zero_threshold > 0.0);
    }
}
