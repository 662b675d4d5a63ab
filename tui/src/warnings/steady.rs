//! How far below its fair share each entity is, held steady: a ratio that
//! wobbles around a threshold (0.49, 0.51, 0.49...) must not make a
//! warning line, and the rows under it, appear and vanish every refresh,
//! nor a row's colour blink. A level changes at once only when the ratio
//! is clearly past a threshold; a ratio just past it must stay there for
//! [`STREAK`] snapshots in a row, and a level is left only once the ratio
//! is clearly back ([`LEAVE`]).
//!
//! The same holds for the two lints above a threshold: a top offender
//! (ratio [`OFFENDER_RATIO`]) and a high p99 wait ([`SLOW_P99_US`]) are
//! named from the refresh their value reaches the threshold until it is
//! clearly back under it (below threshold / [`LEAVE`]).
//!
//! Only new snapshots move the levels: re-sorting, filtering or changing
//! the grouping shows the same levels again.

use std::collections::HashMap;

use nfsdtop_agent::model::{EntityKind, EntityStats, Snapshot};

use super::is_starved;
use nfsdtop_agent::present::fairness;

/// Ratios below these are a level worse each: "under its share"
/// (yellow), "below half its fair share" (red, and the warning).
pub const THRESHOLDS: [f64; 2] = [fairness::UNDER_SHARE, fairness::BELOW_HALF];

/// The level of a ratio below half its fair share.
pub const BELOW_HALF: u8 = 2;

/// A level is entered at once below threshold × ENTER_AT_ONCE ...
pub const ENTER_AT_ONCE: f64 = 0.8;
/// ... or after this many snapshots in a row below the threshold.
pub const STREAK: u8 = 2;
/// A level is left once the ratio is at least threshold × LEAVE.
pub const LEAVE: f64 = 1.1;

/// A top offender worth a warning takes at least this many times its
/// fair share.
pub const OFFENDER_RATIO: f64 = 1.25;
/// A p99 queue wait worth a warning, in microseconds.
pub const SLOW_P99_US: f64 = 100_000.0;

/// Above `t` from the moment `v` reaches it until it is under t / LEAVE.
fn above(was: bool, v: f64, t: f64) -> bool {
    if was {
        v >= t / LEAVE
    } else {
        v >= t
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Mark {
    /// Held above [`OFFENDER_RATIO`].
    offending: bool,
    /// Held above [`SLOW_P99_US`].
    slow: bool,
    level: u8,
    /// Snapshots in a row whose ratio was worse than `level`.
    streak: u8,
}

/// How many thresholds `r` is under, each scaled by `scale`.
fn level_of(r: f64, scale: f64) -> u8 {
    THRESHOLDS.iter().filter(|t| r < *t * scale).count() as u8
}

impl Mark {
    fn next(self, r: f64) -> Mark {
        let (sure, raw, unless_clear) = (
            level_of(r, ENTER_AT_ONCE),
            level_of(r, 1.0),
            level_of(r, LEAVE),
        );
        let (level, streak) = if sure > self.level {
            // Already on its way to the level beyond, this counts.
            (sure, u8::from(raw > sure))
        } else if raw > self.level {
            match self.streak.saturating_add(1) {
                s if s >= STREAK => (raw, 0),
                s => (self.level, s),
            }
        } else {
            (self.level.min(unless_clear), 0)
        };
        Mark {
            level,
            streak,
            offending: above(self.offending, r, OFFENDER_RATIO),
            ..self
        }
    }
}

/// An entity's ratio, where it can be judged against its fair share
/// (entitled to something and not starved: starvation is its own lint).
pub fn judged_ratio(e: &EntityStats) -> Option<f64> {
    if is_starved(e) || e.interval_entitled <= 0.0 {
        return None;
    }
    e.fairness.filter(|r| r.is_finite())
}

/// The levels of every entity of both groupings, by kind (class or not),
/// name and network namespace. Entities at level 0 with no streak are not kept.
#[derive(Debug, Default)]
pub struct Steady {
    marks: HashMap<(bool, String, u32), Mark>,
}

impl Steady {
    /// Move the levels on by one snapshot.
    pub fn update(&mut self, s: &Snapshot) {
        let mut next = HashMap::with_capacity(self.marks.len());
        for kind in [EntityKind::Peer, EntityKind::Class] {
            for e in s.entities(kind) {
                let key = (kind == EntityKind::Class, e.name.clone(), e.netns);
                let was = self.marks.get(&key).copied().unwrap_or_default();
                let mut m = match judged_ratio(e) {
                    Some(r) => was.next(r),
                    None => Mark {
                        slow: was.slow,
                        ..Mark::default()
                    },
                };
                m.slow = above(was.slow, e.wait_p99_us, SLOW_P99_US);
                if m != Mark::default() {
                    next.insert(key, m);
                }
            }
        }
        self.marks = next;
    }

    fn mark(&self, e: &EntityStats) -> Mark {
        self.marks
            .get(&(e.kind == EntityKind::Class, e.name.clone(), e.netns))
            .copied()
            .unwrap_or_default()
    }

    /// The entity's steady level: 0 fair enough, 1 under its share, 2
    /// below half of it.
    pub fn level(&self, e: &EntityStats) -> u8 {
        self.mark(e).level
    }

    /// Held above [`OFFENDER_RATIO`] times its fair share.
    pub fn offending(&self, e: &EntityStats) -> bool {
        self.mark(e).offending
    }

    /// Held above [`SLOW_P99_US`] of p99 wait.
    pub fn slow(&self, e: &EntityStats) -> bool {
        self.mark(e).slow
    }

    pub fn clear(&mut self) {
        self.marks.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(ratios: &[f64]) -> Vec<u8> {
        let mut m = Mark::default();
        ratios
            .iter()
            .map(|r| {
                m = m.next(*r);
                m.level
            })
            .collect()
    }

    #[test]
    fn a_ratio_wobbling_around_half_changes_level_once() {
        let levels = walk(&[0.51, 0.49, 0.51, 0.49, 0.51, 0.49, 0.52, 0.48]);
        let changes = levels.windows(2).filter(|w| w[0] != w[1]).count();
        // 0.51 is well under 0.9 (under 0.72): yellow at once; never two
        // below 0.5 in a row, so never red.
        assert_eq!(levels[0], 1, "{levels:?}");
        assert!(changes <= 1, "{levels:?}");
        assert!(!levels.contains(&0), "{levels:?}");
    }

    #[test]
    fn clearly_below_shows_at_once_and_clearly_back_clears() {
        assert_eq!(walk(&[0.22]), vec![BELOW_HALF]);
        assert_eq!(walk(&[0.45, 0.45]), vec![1, BELOW_HALF]);
        assert_eq!(walk(&[0.22, 0.53, 0.56]), vec![2, 2, 1]);
        assert_eq!(walk(&[0.22, 1.0]), vec![2, 0]);
        assert_eq!(walk(&[1.0, 0.95, 0.89, 0.89]), vec![0, 0, 0, 1]);
    }

    #[test]
    fn an_offender_or_a_wait_near_its_threshold_is_named_once() {
        let mut m = Mark::default();
        let offending: Vec<bool> = [1.26, 1.24, 1.26, 1.2, 1.26, 1.1, 1.2]
            .iter()
            .map(|r| {
                m = m.next(*r);
                m.offending
            })
            .collect();
        assert_eq!(offending, [true, true, true, true, true, false, false]);
        let mut slow = false;
        let waits: Vec<bool> = [99e3, 101e3, 95e3, 101e3, 80e3]
            .iter()
            .map(|w| {
                slow = above(slow, *w, SLOW_P99_US);
                slow
            })
            .collect();
        assert_eq!(waits, [false, true, true, true, false]);
    }

    #[test]
    fn only_judged_entities_are_kept() {
        let mut st = Steady::default();
        let e = |name: &str, r: f64| EntityStats {
            name: name.into(),
            fairness: Some(r),
            interval_entitled: 10.0,
            interval_dispatches: (r * 10.0) as u64,
            ..Default::default()
        };
        let s = Snapshot {
            peers: vec![e("a", 0.2), e("b", 1.0)],
            ..Default::default()
        };
        st.update(&s);
        assert_eq!(st.level(&s.peers[0]), BELOW_HALF);
        assert_eq!(st.level(&s.peers[1]), 0);
        assert_eq!(st.marks.len(), 1);
        st.update(&Snapshot::default());
        assert_eq!(st.level(&s.peers[0]), 0, "gone, forgotten");
    }
}
