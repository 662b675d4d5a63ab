//! Requests per RPC procedure of one entity (peer or class), bounded:
//! the first [`MAX_NAMES`] names seen get a row each, later ones count
//! under `(other)`, so a hostile or broken source cannot grow an entity
//! without bound. Counts saturate like every count from a source.

use crate::model::{ProcName, ProcedureStats, Procedures as Stats};

/// Procedure names kept apart per entity (NFSv3 has 22, NLM 24).
pub const MAX_NAMES: usize = 32;

#[derive(Clone, Copy, Debug)]
struct Row {
    name: ProcName,
    requests: u64,
    exec_ns: u64,
    prev_requests: u64,
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
                        });
                        self.rows.len() - 1
                    }
                }
            }
        };
        let r = &mut self.rows[i];
        r.requests = r.requests.saturating_add(requests);
        r.exec_ns = r.exec_ns.saturating_add(exec_ns);
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
