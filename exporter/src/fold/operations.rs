//! A labelled series' NFSv4 operations (`--nfs4-ops`): counters that grow
//! by what each snapshot's cumulative counts grew since the last one,
//! from the round the series was labelled, as its procedures do. Only
//! labelled series have them: at most the top K times the 76 operations.

use std::collections::BTreeMap;

use nfsdtop_agent::model::Operations as Stats;

#[derive(Clone, Debug, Default)]
pub struct Operations {
    /// The exported counters, by operation name.
    pub counts: BTreeMap<&'static str, u64>,
    /// The entity's cumulative counts at the last round.
    seen: BTreeMap<&'static str, u64>,
}

impl Operations {
    /// Start counting from `now` (the round the series is labelled).
    pub fn baseline(&mut self, now: &Stats) {
        self.seen = now.iter().map(|(n, s)| (n, s.count)).collect();
    }

    /// Add what grew since the last round; a count that went down (the
    /// agent restarted) grew by all of it.
    pub fn add(&mut self, now: &Stats) {
        for (n, s) in now.iter() {
            let seen = self.seen.get(n).copied().unwrap_or(0);
            let d = if s.count < seen {
                s.count
            } else {
                s.count - seen
            };
            if d > 0 || self.counts.contains_key(n) {
                let c = self.counts.entry(n).or_default();
                *c = c.saturating_add(d);
            }
        }
        self.baseline(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use nfsdtop_agent::model::OperationStats;

    fn snap(v: &[(u8, u64)]) -> Stats {
        v.iter()
            .map(|&(op, count)| (op, OperationStats { count, rate: 0.0 }))
            .collect()
    }

    #[test]
    fn counts_grow_from_the_baseline_and_survive_a_restart() {
        let mut o = Operations::default();
        o.baseline(&snap(&[(25, 100)]));
        o.add(&snap(&[(25, 130), (53, 5)]));
        assert_eq!(o.counts.get("READ"), Some(&30));
        assert_eq!(o.counts.get("SEQUENCE"), Some(&5));
        // The agent restarted: its counts start again from 0.
        o.add(&snap(&[(25, 4)]));
        assert_eq!(o.counts.get("READ"), Some(&34));
        assert_eq!(o.counts.get("SEQUENCE"), Some(&5));
    }
}
