//! How far below its fair share each entity is, held steady: a ratio that
//! wobbles around a threshold (0.49, 0.51, 0.49...) must not make a
//! warning line, and the rows under it, appear and vanish every refresh,
//! nor a row's colour blink. A level changes at once only when the ratio
//! is clearly past a threshold; a ratio just past it must stay there for
//! [`STREAK`] snapshots in a row, and a level is left only once the ratio
//! is clearly back ([`LEAVE`]).
//!
//! Only new snapshots move the levels: re-sorting, filtering or changing
//! the grouping shows the same levels again.

use std::collections::HashMap;

use nfsdtop_agent::model::{EntityKind, EntityStats, Snapshot};

use super::is_starved;

/// Ratios below these are a level worse each: below 0.9 "under its
/// share" (yellow), below 0.5 "below half its fair share" (red, and the
/// warning).
pub const THRESHOLDS: [f64; 2] = [0.9, 0.5];

/// The level of a ratio below half its fair share.
pub const BELOW_HALF: u8 = 2;

/// A level is entered at once below threshold × ENTER_AT_ONCE ...
pub const ENTER_AT_ONCE: f64 = 0.8;
/// ... or after this many snapshots in a row below the threshold.
pub const STREAK: u8 = 2;
/// A level is left once the ratio is at least threshold × LEAVE.
pub const LEAVE: f64 = 1.1;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Mark {
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
        if sure > self.level {
            // Already on its way to the level beyond, this counts.
            return Mark {
                level: sure,
                streak: u8::from(raw > sure),
            };
        }
        if raw > self.level {
            let streak = self.streak.saturating_add(1);
            return if streak >= STREAK {
                Mark {
                    level: raw,
                    streak: 0,
                }
            } else {
                Mark {
                    level: self.level,
                    streak,
                }
            };
        }
        Mark {
            level: self.level.min(unless_clear),
            streak: 0,
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
                let Some(r) = judged_ratio(e) else {
                    continue;
                };
                let was = self.marks.get(&key).copied().unwrap_or_default();
                let m = was.next(r);
                if m != Mark::default() {
                    next.insert(key, m);
                }
            }
        }
        self.marks = next;
    }

    /// The entity's steady level: 0 fair enough, 1 under its share, 2
    /// below half of it.
    pub fn level(&self, e: &EntityStats) -> u8 {
        self.marks
            .get(&(e.kind == EntityKind::Class, e.name.clone(), e.netns))
            .map_or(0, |m| m.level)
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
