//! A labelled series' requests per RPC procedure: counters that grow by
//! what each snapshot's cumulative counts grew since the last one, from
//! the round the series was labelled (what an entity did while folded
//! into `other` stays out of them, as for its other counters). Only
//! labelled series have them, so their number is bounded by the top K
//! times the agent's names per entity.

use std::collections::BTreeMap;

use nfsdtop_agent::model::{ProcName, Procedures as Stats};

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcCounts {
    pub requests: u64,
    pub exec_seconds: f64,
}

#[derive(Clone, Debug, Default)]
pub struct Procedures {
    /// The exported counters.
    pub counts: BTreeMap<ProcName, ProcCounts>,
    /// The entity's cumulative counts at the last round.
    seen: BTreeMap<ProcName, ProcCounts>,
}

impl Procedures {
    /// Start counting from `now` (the round the series is labelled).
    pub fn baseline(&mut self, now: &Stats) {
        self.seen = now
            .iter()
            .map(|(n, p)| {
                let c = ProcCounts {
                    requests: p.requests,
                    exec_seconds: p.exec_seconds,
                };
                (*n, c)
            })
            .collect();
    }

    /// Add what grew since the last round; a count that went down (the
    /// agent restarted) grew by all of it.
    pub fn add(&mut self, now: &Stats) {
        for (n, p) in now.iter() {
            let seen = self.seen.get(n).copied().unwrap_or_default();
            let (dr, de) = if p.requests < seen.requests {
                (p.requests, p.exec_seconds)
            } else {
                (
                    p.requests - seen.requests,
                    (p.exec_seconds - seen.exec_seconds).max(0.0),
                )
            };
            if dr > 0 || de > 0.0 || self.counts.contains_key(n) {
                let c = self.counts.entry(*n).or_default();
                c.requests = c.requests.saturating_add(dr);
                c.exec_seconds += de;
            }
        }
        self.baseline(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use nfsdtop_agent::model::ProcedureStats;

    fn snap(v: &[(&str, u64, f64)]) -> Stats {
        v.iter()
            .map(|&(n, requests, exec_seconds)| {
                let p = ProcedureStats {
                    requests,
                    exec_seconds,
                    ..ProcedureStats::default()
                };
                (ProcName::new(n), p)
            })
            .collect()
    }

    #[test]
    fn counts_grow_from_the_baseline_and_survive_an_agent_restart() {
        let mut p = Procedures::default();
        p.baseline(&snap(&[("READ", 100, 1.0)]));
        p.add(&snap(&[("READ", 130, 1.5), ("WRITE", 4, 0.25)]));
        let read = p.counts[&ProcName::new("READ")];
        assert_eq!(read.requests, 30);
        assert!((read.exec_seconds - 0.5).abs() < 1e-12);
        assert_eq!(p.counts[&ProcName::new("WRITE")].requests, 4);
        // The agent restarted: its counts start again from 0.
        p.add(&snap(&[("READ", 7, 0.1)]));
        assert_eq!(p.counts[&ProcName::new("READ")].requests, 37);
        assert_eq!(p.counts[&ProcName::new("WRITE")].requests, 4, "kept");
    }
}
