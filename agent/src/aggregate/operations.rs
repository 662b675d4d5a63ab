//! NFSv4 operations of one entity (peer or class), by operation number:
//! a short list (a client uses a dozen or so of the 76), bounded by the
//! numbers a record can carry, counts saturating like every count from a
//! source.

use crate::model::{OperationStats, Operations as Stats};

#[derive(Debug, Default)]
pub struct Operations {
    /// (number, count, count at the last snapshot).
    rows: Vec<(u8, u64, u64)>,
}

impl Operations {
    pub fn add(&mut self, op: u8, count: u64) {
        match self.rows.iter_mut().find(|r| r.0 == op) {
            Some(r) => r.1 = r.1.saturating_add(count),
            None => self.rows.push((op, count, 0)),
        }
    }

    /// Cumulative counts and this interval's rates (`interval_s`); starts
    /// the next interval.
    pub fn snapshot(&mut self, interval_s: f64) -> Stats {
        self.rows
            .iter_mut()
            .map(|r| {
                let d = r.1.saturating_sub(r.2);
                r.2 = r.1;
                let rate = if interval_s > 0.0 {
                    d as f64 / interval_s
                } else {
                    0.0
                };
                (r.0, OperationStats { count: r.1, rate })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_accumulate_and_rates_cover_the_interval() {
        let mut o = Operations::default();
        o.add(25, 3);
        o.add(53, 2);
        o.add(25, 1);
        let s = o.snapshot(2.0);
        assert_eq!(
            s.get("READ"),
            Some(&OperationStats {
                count: 4,
                rate: 2.0
            })
        );
        assert_eq!(s.get("SEQUENCE").map(|s| s.rate), Some(1.0));
        o.add(25, u64::MAX);
        let s = o.snapshot(1.0);
        assert_eq!(s.get("READ").map(|s| s.count), Some(u64::MAX));
        assert_eq!(s.get("SEQUENCE").map(|s| s.rate), Some(0.0));
    }
}
