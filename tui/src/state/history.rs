//! Per-entity history rings for the drill-down's charts: a few numbers per
//! snapshot, a bounded number of snapshots, and entities that disappear are
//! forgotten once their last point has scrolled out.

use std::collections::{HashMap, VecDeque};

use nfsdtop_agent::model::{EntityKind, EntityStats, Snapshot};

/// Snapshots kept per entity (a minute and a half at the default 1 s).
pub const DEFAULT_CAPACITY: usize = 90;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// Which snapshot (counted from 1 by [`History::record`]).
    pub seq: u64,
    pub share: f32,
    pub fair_share: f32,
    /// NaN when there was nothing to judge.
    pub ratio: f32,
    pub wait_p99_us: f32,
}

impl Point {
    fn of(seq: u64, e: &EntityStats) -> Point {
        Point {
            seq,
            share: e.share as f32,
            fair_share: e.fair_share as f32,
            ratio: e.fairness.map(|r| r as f32).unwrap_or(f32::NAN),
            wait_p99_us: e.wait_p99_us as f32,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TotalsPoint {
    pub seq: u64,
    pub dispatch_rate: f64,
    pub jain: f64,
}

#[derive(Debug)]
pub struct History {
    capacity: usize,
    seq: u64,
    since_sweep: usize,
    peers: HashMap<String, VecDeque<Point>>,
    classes: HashMap<String, VecDeque<Point>>,
    totals: VecDeque<TotalsPoint>,
}

impl Default for History {
    fn default() -> Self {
        History::new(DEFAULT_CAPACITY)
    }
}

impl History {
    pub fn new(capacity: usize) -> History {
        History {
            capacity: capacity.max(2),
            seq: 0,
            since_sweep: 0,
            peers: HashMap::new(),
            classes: HashMap::new(),
            totals: VecDeque::new(),
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The sequence number of the last snapshot recorded (0: none yet).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Add one snapshot; returns its sequence number.
    pub fn record(&mut self, s: &Snapshot) -> u64 {
        self.seq += 1;
        let seq = self.seq;
        let cap = self.capacity;
        for (map, list) in [(&mut self.peers, &s.peers), (&mut self.classes, &s.classes)] {
            for e in list {
                let ring = match map.get_mut(e.name.as_str()) {
                    Some(r) => r,
                    None => map.entry(e.name.clone()).or_default(),
                };
                if ring.len() == cap {
                    ring.pop_front();
                }
                ring.push_back(Point::of(seq, e));
            }
        }
        if self.totals.len() == cap {
            self.totals.pop_front();
        }
        self.totals.push_back(TotalsPoint {
            seq,
            dispatch_rate: s.totals.dispatch_rate,
            jain: s.totals.jain,
        });
        // Forget entities whose whole ring has scrolled out of the window,
        // once per window so the sweep costs nothing per snapshot.
        self.since_sweep += 1;
        if self.since_sweep >= cap {
            self.since_sweep = 0;
            let oldest = seq.saturating_sub(cap as u64);
            for map in [&mut self.peers, &mut self.classes] {
                map.retain(|_, r| r.back().is_some_and(|p| p.seq > oldest));
            }
        }
        seq
    }

    /// The points of one entity up to snapshot `upto` (inclusive), within
    /// the window ending there.
    pub fn points(&self, kind: EntityKind, name: &str, upto: u64) -> Vec<Point> {
        let map = match kind {
            EntityKind::Peer => &self.peers,
            EntityKind::Class => &self.classes,
        };
        let oldest = upto.saturating_sub(self.capacity as u64);
        map.get(name)
            .map(|r| {
                r.iter()
                    .filter(|p| p.seq <= upto && p.seq > oldest)
                    .copied()
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn totals(&self, upto: u64) -> Vec<TotalsPoint> {
        self.totals
            .iter()
            .filter(|p| p.seq <= upto)
            .copied()
            .collect()
    }

    pub fn tracked(&self) -> usize {
        self.peers.len() + self.classes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(names: &[&str], share: f64) -> Snapshot {
        Snapshot {
            peers: names
                .iter()
                .map(|n| EntityStats {
                    name: n.to_string(),
                    share,
                    fairness: Some(1.0),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn rings_are_bounded_and_gone_entities_forgotten() {
        let mut h = History::new(4);
        h.record(&snap(&["a", "b"], 0.5));
        for i in 0..10 {
            h.record(&snap(&["a"], i as f64 / 10.0));
        }
        let a = h.points(EntityKind::Peer, "a", h.seq());
        assert_eq!(a.len(), 4);
        assert_eq!(a.last().unwrap().share, 0.9);
        assert!(h.points(EntityKind::Peer, "b", h.seq()).is_empty());
        assert_eq!(h.tracked(), 1, "b was swept out");
        // A paused view sees only what it had.
        let upto = h.seq() - 2;
        assert_eq!(
            h.points(EntityKind::Peer, "a", upto).last().unwrap().seq,
            upto
        );
    }
}
