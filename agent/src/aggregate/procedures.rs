//! Requests per RPC procedure of one entity (peer or class), bounded:
//! the first [`MAX_NAMES`] names seen get a row each, later ones count
//! under `(other)`, so a hostile or broken source cannot grow an entity
//! without bound. Counts saturate like every count from a source.
//!
//! A request whose execution time arrives alone (a classic record, a raw
//! one the kernel did not add up, a kernel sum of one request) also goes
//! into its procedure's histogram, for the 99th percentile. At most
//! [`MAX_TIMED`] procedures of an entity have one (a fixed
//! [`EXEC_BUCKETS`] counts), so memory stays bounded per entity: a
//! procedure with more requests than the least of those takes its
//! histogram over, afresh (a client's busiest procedures keep theirs;
//! NFSv3's mount alone calls seven).

use crate::model::{ProcName, ProcedureStats, Procedures as Stats};

/// Procedure names kept apart per entity (NFSv3 has 22, NLM 24).
pub const MAX_NAMES: usize = 32;
/// Procedures of an entity whose execution times get a histogram.
pub const MAX_TIMED: usize = 8;
/// Two buckets per power of two of µs, to 2^23 µs (8.4 s; longer ones
/// count in the last).
pub const EXEC_BUCKETS: usize = 48;

/// The bucket of an execution time of `us` µs: `us` itself below 2, then
/// `2p + h` for `us` in [2^p, 2^(p+1)), `h` its next bit.
pub fn exec_bucket(us: u64) -> usize {
    if us < 2 {
        return us as usize;
    }
    let pow = 63 - us.leading_zeros() as u64;
    let half = (us >> (pow - 1)) & 1;
    ((2 * pow + half) as usize).min(EXEC_BUCKETS - 1)
}

/// The µs a bucket stands for: its middle (the value itself below 2).
pub fn exec_bucket_mid(b: usize) -> f64 {
    if b < 2 {
        return b as f64;
    }
    let (pow, half) = ((b / 2) as u32, (b % 2) as u64);
    let width = 1u64 << (pow - 1);
    let lo = (1u64 << pow) + half * width;
    lo as f64 + width as f64 / 2.0
}

/// One procedure's individually timed requests.
#[derive(Clone, Debug)]
struct ExecTimes {
    counts: [u32; EXEC_BUCKETS],
}

impl ExecTimes {
    fn add(&mut self, us: u64) {
        let c = &mut self.counts[exec_bucket(us)];
        *c = c.saturating_add(1);
    }

    /// The requests counted.
    fn total(&self) -> u64 {
        self.counts.iter().map(|&c| u64::from(c)).sum()
    }

    fn p99_us(&self) -> Option<f64> {
        let n = self.total();
        let rank = (n as f64 * 0.99).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += u64::from(c);
            if c > 0 && seen >= rank {
                return Some(exec_bucket_mid(b));
            }
        }
        None
    }
}

#[derive(Clone, Debug)]
struct Row {
    name: ProcName,
    requests: u64,
    exec_ns: u64,
    prev_requests: u64,
    timed: Option<Box<ExecTimes>>,
}

#[derive(Debug, Default)]
pub struct Procedures {
    rows: Vec<Row>,
}

impl Procedures {
    pub fn add(&mut self, name: ProcName, requests: u64, exec_ns: u64) {
        let i = match self.rows.iter().position(|r| r.name == name) {
            Some(i) => i,
            None => {
                let name = if self.rows.len() < MAX_NAMES {
                    name
                } else {
                    ProcName::new(ProcName::OTHER)
                };
                match self.rows.iter().position(|r| r.name == name) {
                    Some(i) => i,
                    None => {
                        self.rows.push(Row {
                            name,
                            requests: 0,
                            exec_ns: 0,
                            prev_requests: 0,
                            timed: None,
                        });
                        self.rows.len() - 1
                    }
                }
            }
        };
        let r = &mut self.rows[i];
        r.requests = r.requests.saturating_add(requests);
        r.exec_ns = r.exec_ns.saturating_add(exec_ns);
        if requests == 1 {
            if self.rows[i].timed.is_none() {
                self.rows[i].timed = self.histogram_for(i);
            }
            if let Some(t) = self.rows[i].timed.as_mut() {
                t.add(exec_ns / 1_000);
            }
        }
    }

    /// A histogram for row `i`: a new one while fewer than [`MAX_TIMED`]
    /// rows have one, else that of the row with the fewest requests, if
    /// it has fewer than row `i`, cleared.
    fn histogram_for(&mut self, i: usize) -> Option<Box<ExecTimes>> {
        let held = self.rows.iter().filter(|r| r.timed.is_some()).count();
        if held < MAX_TIMED {
            return Some(Box::new(ExecTimes {
                counts: [0; EXEC_BUCKETS],
            }));
        }
        let least = (0..self.rows.len())
            .filter(|&j| self.rows[j].timed.is_some())
            .min_by_key(|&j| self.rows[j].requests)?;
        if self.rows[least].requests >= self.rows[i].requests {
            return None;
        }
        let mut t = self.rows[least].timed.take()?;
        t.counts = [0; EXEC_BUCKETS];
        Some(t)
    }

    /// Cumulative counts and this interval's rates (`interval_s`); starts
    /// the next interval.
    pub fn snapshot(&mut self, interval_s: f64) -> Stats {
        self.rows
            .iter_mut()
            .map(|r| {
                let d = r.requests.saturating_sub(r.prev_requests);
                r.prev_requests = r.requests;
                let stats = ProcedureStats {
                    requests: r.requests,
                    request_rate: if interval_s > 0.0 {
                        d as f64 / interval_s
                    } else {
                        0.0
                    },
                    exec_seconds: r.exec_ns as f64 / 1e9,
                    timed: r.timed.as_ref().map_or(0, |t| t.total()),
                    exec_p99_us: r.timed.as_ref().and_then(|t| t.p99_us()),
                };
                (r.name, stats)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn execution_buckets_are_two_per_power_of_two() {
        // [2,3) [3,4) [4,6) [6,8) [8,12) ... by hand.
        let want = [
            (0, 0),
            (1, 1),
            (2, 2),
            (3, 3),
            (4, 4),
            (5, 4),
            (6, 5),
            (7, 5),
            (8, 6),
        ];
        for (us, b) in want {
            assert_eq!(exec_bucket(us), b, "{us} µs");
        }
        assert_eq!(exec_bucket(1000), 19, "[768, 1024)");
        assert_eq!(exec_bucket_mid(19), 896.0);
        assert_eq!(exec_bucket(u64::MAX), EXEC_BUCKETS - 1);
        for us in [2u64, 3, 5, 100, 999, 123_456, 5_000_000] {
            let mid = exec_bucket_mid(exec_bucket(us));
            assert!(
                (mid - us as f64).abs() <= 0.21 * us as f64 + 0.5,
                "{us}: {mid}"
            );
        }
    }

    #[test]
    fn p99_of_the_requests_timed_alone_and_only_of_those() {
        let mut p = Procedures::default();
        let read = ProcName::new("READ");
        // 990 requests of 100 µs and 10 of 10 ms, one by one: the 99th
        // percentile is the 990th value, 100 µs ([96, 128)); one more slow
        // one moves it into the slow bucket ([8192, 12288)).
        for _ in 0..990 {
            p.add(read, 1, 100_000);
        }
        for _ in 0..10 {
            p.add(read, 1, 10_000_000);
        }
        // A kernel sum of 500 requests: counted, not timed.
        p.add(read, 500, 50_000_000);
        let s = p.snapshot(1.0);
        assert_eq!((s[&read].requests, s[&read].timed), (1500, 1000));
        assert_eq!(s[&read].exec_p99_us, Some(112.0));
        p.add(read, 1, 10_000_000);
        assert_eq!(p.snapshot(1.0)[&read].exec_p99_us, Some(10240.0));
        // Only sums: no percentile.
        let mut q = Procedures::default();
        q.add(read, 3, 300_000);
        assert_eq!(q.snapshot(1.0)[&read].exec_p99_us, None);
    }

    #[test]
    fn the_busiest_procedures_keep_the_histograms() {
        let mut p = Procedures::default();
        // A mount's worth of procedures, once each, fills the histograms.
        for i in 0..MAX_TIMED {
            p.add(ProcName::new(&format!("M{i}")), 1, 1_000);
        }
        // READ, busier than any of them, takes one over; a procedure as
        // quiet as they are does not.
        let read = ProcName::new("READ");
        p.add(read, 1, 1_000);
        p.add(read, 1, 1_000);
        p.add(ProcName::new("QUIET"), 1, 1_000);
        let s = p.snapshot(1.0);
        assert_eq!(
            s[&read].timed, 1,
            "its first request came before it was the busier"
        );
        assert!(s[&read].exec_p99_us.is_some());
        assert_eq!(s[&ProcName::new("QUIET")].exec_p99_us, None);
        let held = s.iter().filter(|(_, x)| x.exec_p99_us.is_some()).count();
        assert_eq!(held, MAX_TIMED);
    }

    #[test]
    fn names_beyond_the_bound_count_as_other_and_rates_are_per_interval() {
        let mut p = Procedures::default();
        for i in 0..MAX_NAMES + 5 {
            p.add(ProcName::new(&format!("P{i}")), 2, 1_000);
        }
        p.add(ProcName::new("P0"), 4, 3_000);
        let s = p.snapshot(2.0);
        assert_eq!(s.len(), MAX_NAMES + 1);
        let other = &s[&ProcName::new(ProcName::OTHER)];
        assert_eq!((other.requests, other.request_rate), (10, 5.0));
        let p0 = &s[&ProcName::new("P0")];
        assert_eq!((p0.requests, p0.request_rate), (6, 3.0));
        assert!((p0.exec_seconds - 4e-6).abs() < 1e-12);
        p.add(ProcName::new("P0"), u64::MAX, 0);
        let s = p.snapshot(1.0);
        let p0 = &s[&ProcName::new("P0")];
        assert_eq!(
            (p0.requests, p0.request_rate),
            (u64::MAX, (u64::MAX - 6) as f64)
        );
        assert_eq!(s[&ProcName::new("P1")].request_rate, 0.0);
    }
}
