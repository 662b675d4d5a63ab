//! The fairness vocabulary every surface speaks, in one place: where
//! "under its share" and "below half" begin, and what "starved" means.
//! The TUI's colours and warnings, nfsdtopd's unfair list and victim
//! labels, the services view's order, the alerts' and dashboards'
//! defaults (dashboards/mixin/config.libsonnet, held equal to these by a
//! test) and the docs all use these words with these meanings.

use crate::model::EntityStats;

/// Under its fair share: a ratio below this. A margin under 1.0, so
/// entities at their fair share, whose ratio wobbles around 1, are not
/// called out (the TUI's yellow; nfsdtopd's victim labels; the
/// dashboards' green from here up).
pub const UNDER_SHARE: f64 = 0.9;

/// Below half its fair share: a ratio below this (the TUI's red and its
/// warning; nfsdtopd's `--unfair-ratio` default, which its unfair list and
/// the NfsdtopUnfairShare alert use).
pub const BELOW_HALF: f64 = 0.5;

// The levels nest: below half is under its share, under its share is
// below a fair turn.
const _: () = assert!(BELOW_HALF < UNDER_SHARE && UNDER_SHARE < 1.0);

/// Starved: backlogged during the interval yet not one dispatch. Not a
/// low ratio (that is "under its share" or "below half"): nothing at all.
pub fn is_starved(e: &EntityStats) -> bool {
    e.interval_dispatches == 0 && (e.backlogged || e.interval_entitled >= 1.0)
}

/// Short of its turn this interval: entitled to something and given less
/// (its ratio, below 1). The services view lists these first, worst first.
pub fn short_of_turn(e: &EntityStats) -> Option<f64> {
    e.fairness.filter(|&f| e.interval_entitled > 0.0 && f < 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(dispatches: u64, entitled: f64, backlogged: bool) -> EntityStats {
        EntityStats {
            interval_dispatches: dispatches,
            interval_entitled: entitled,
            backlogged,
            fairness: (entitled > 0.0).then(|| dispatches as f64 / entitled),
            ..EntityStats::default()
        }
    }

    #[test]
    fn starved_is_nothing_at_all_and_short_is_any_ratio_below_one() {
        let starved = entity(0, 3.0, true);
        assert!(is_starved(&starved));
        assert_eq!(short_of_turn(&starved), Some(0.0));
        let low = entity(1, 4.0, true);
        assert!(!is_starved(&low), "a dispatch is not starvation");
        assert_eq!(short_of_turn(&low), Some(0.25));
        assert!(short_of_turn(&entity(4, 4.0, true)).is_none());
        let idle = entity(0, 0.0, false);
        assert!(!is_starved(&idle) && short_of_turn(&idle).is_none());
    }
}
