//! Lints over a snapshot, shown in the header (one summary line each) and
//! in the warnings panel (`w`, one line per entity). Each lint is a small
//! type: `check` finds what trips it, `summary` says it in one line,
//! `format` describes one hit. [`cause`] names why an entity is below (or
//! above) its share where the snapshot shows it; [`steady`] holds the
//! "below half" level steady across refreshes.

pub mod cause;
pub mod steady;

use nfsdtop_agent::model::{EntityKind, EntityStats, Snapshot};

pub use steady::Steady;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Info,
    Warn,
    Crit,
}

/// One thing a lint found: an entity (or the totals) and the number that
/// tripped it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hit {
    pub name: String,
    pub value: f64,
    pub extra: f64,
    /// Why, in a few words, where the snapshot shows it.
    pub cause: Option<String>,
}

/// What the UI shows for a lint that fired.
#[derive(Clone, Debug, PartialEq)]
pub struct Warning {
    pub lint: &'static str,
    pub severity: Severity,
    pub summary: String,
    pub details: Vec<String>,
}

pub trait Lint {
    fn name(&self) -> &'static str;
    fn severity(&self) -> Severity;
    /// Everything that trips the lint, worst first; empty when all is well.
    /// `steady` holds the levels of the ratios over the last refreshes.
    fn check(&self, s: &Snapshot, kind: EntityKind, steady: &Steady) -> Vec<Hit>;
    /// One line for the header.
    fn summary(&self, hits: &[Hit], kind: EntityKind) -> String;
    /// One line per hit for the warnings panel.
    fn format(&self, hit: &Hit) -> String;
}

fn plural(n: usize, kind: EntityKind) -> String {
    let word = match (kind, n) {
        (EntityKind::Peer, 1) => "peer",
        (EntityKind::Peer, _) => "peers",
        (EntityKind::Class, 1) => "class",
        (EntityKind::Class, _) => "classes",
    };
    format!("{n} {word}")
}

/// Microseconds as a short human duration, as the batch text prints them.
pub use nfsdtop_agent::present::units::fmt_us;

pub use nfsdtop_agent::present::fairness::is_starved;

/// Ratios this close to 1 are fair: nobody is marked as an offender
/// when every entity gets its turn give or take rounding.
pub const MIN_OFFENDER_RATIO: f64 = 1.05;

/// The entity with a ratio above 1 (by at least [`MIN_OFFENDER_RATIO`])
/// and the largest excess of dispatches over its entitlement this interval.
pub fn top_offender(entities: &[EntityStats]) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, e) in entities.iter().enumerate() {
        let Some(r) = e.fairness else { continue };
        if r < MIN_OFFENDER_RATIO {
            continue;
        }
        let excess = e.interval_dispatches as f64 - e.interval_entitled;
        if excess > 0.0 && best.is_none_or(|(_, b)| excess > b) {
            best = Some((i, excess));
        }
    }
    best.map(|(i, _)| i)
}

pub struct EventsLost;

impl Lint for EventsLost {
    fn name(&self) -> &'static str {
        "events-lost"
    }
    fn severity(&self) -> Severity {
        Severity::Crit
    }
    fn check(&self, s: &Snapshot, _: EntityKind, _: &Steady) -> Vec<Hit> {
        if s.totals.events_lost == 0 {
            return Vec::new();
        }
        let mut hits: Vec<Hit> = s
            .totals
            .lost_by_tracepoint
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(t, n)| Hit {
                name: t.name().into(),
                value: n as f64,
                ..Default::default()
            })
            .collect();
        if hits.is_empty() {
            hits.push(Hit {
                name: "all tracepoints".into(),
                value: s.totals.events_lost as f64,
                ..Default::default()
            });
        }
        hits
    }
    fn summary(&self, hits: &[Hit], _: EntityKind) -> String {
        let n: f64 = hits.iter().map(|h| h.value).sum();
        format!("{n:.0} events lost: counts are low")
    }
    fn format(&self, h: &Hit) -> String {
        format!("{}: {:.0} events lost", h.name, h.value)
    }
}

pub struct Starved;

impl Lint for Starved {
    fn name(&self) -> &'static str {
        "starved"
    }
    fn severity(&self) -> Severity {
        Severity::Crit
    }
    fn check(&self, s: &Snapshot, kind: EntityKind, _: &Steady) -> Vec<Hit> {
        let mut hits: Vec<Hit> = s
            .entities(kind)
            .iter()
            .filter(|e| is_starved(e))
            .map(|e| Hit {
                name: e.name.clone(),
                value: e.interval_entitled,
                extra: e.backlogged_seconds,
                cause: None,
            })
            .collect();
        hits.sort_by(|a, b| b.value.total_cmp(&a.value));
        hits
    }
    fn summary(&self, hits: &[Hit], kind: EntityKind) -> String {
        format!(
            "{} starved: backlogged with 0 dispatches",
            plural(hits.len(), kind)
        )
    }
    fn format(&self, h: &Hit) -> String {
        format!(
            "{} is backlogged and got 0 dispatches (entitled to {:.1})",
            h.name, h.value
        )
    }
}

/// Below half the fair share while backlogged, as [`Steady`] holds it (a
/// ratio wobbling around 0.5 does not come and go every refresh).
pub struct BelowFairShare;

impl Lint for BelowFairShare {
    fn name(&self) -> &'static str {
        "below-fair-share"
    }
    fn severity(&self) -> Severity {
        Severity::Warn
    }
    fn check(&self, s: &Snapshot, kind: EntityKind, steady: &Steady) -> Vec<Hit> {
        let mut hits: Vec<Hit> = s
            .entities(kind)
            .iter()
            .filter(|e| steady.level(e) >= steady::BELOW_HALF)
            .filter_map(|e| {
                let r = steady::judged_ratio(e)?;
                Some(Hit {
                    name: e.name.clone(),
                    value: r,
                    extra: e.fair_share,
                    cause: cause::below_share(s, kind, e),
                })
            })
            .collect();
        hits.sort_by(|a, b| a.value.total_cmp(&b.value));
        hits
    }
    /// One entity: what it gets and why ("10.0.0.2 gets 0.22x its fair
    /// share: 2 connections against 16 (...)"); several: how many, and
    /// why the worst one is there.
    fn summary(&self, hits: &[Hit], kind: EntityKind) -> String {
        let worst = hits.first();
        match (hits.len(), worst.and_then(|h| h.cause.as_deref())) {
            (1, Some(why)) => {
                let h = &hits[0];
                format!("{} gets {:.2}x its fair share: {why}", h.name, h.value)
            }
            (n, Some(why)) => format!("{} below half their fair share: {why}", plural(n, kind)),
            (n, None) => {
                let verb = if n == 1 { "its" } else { "their" };
                format!(
                    "{} below half {verb} fair share while backlogged",
                    plural(n, kind)
                )
            }
        }
    }
    fn format(&self, h: &Hit) -> String {
        let why = h
            .cause
            .as_deref()
            .map_or(String::new(), |c| format!(": {c}"));
        format!(
            "{} gets {:.2}x its fair share ({:.1}%){why}",
            h.name,
            h.value,
            h.extra * 100.0
        )
    }
}

pub struct TopOffender {
    /// Only worth a line when the offender takes this much more than fair.
    pub min_ratio: f64,
}

impl Default for TopOffender {
    fn default() -> Self {
        TopOffender {
            min_ratio: steady::OFFENDER_RATIO,
        }
    }
}

impl Lint for TopOffender {
    fn name(&self) -> &'static str {
        "top-offender"
    }
    fn severity(&self) -> Severity {
        Severity::Info
    }
    fn check(&self, s: &Snapshot, kind: EntityKind, steady: &Steady) -> Vec<Hit> {
        let list = s.entities(kind);
        top_offender(list)
            .map(|i| &list[i])
            // Held by `steady` from the refresh it reaches the threshold
            // (a ratio wobbling around it is named once); another
            // threshold than the steady one is judged as it comes.
            .filter(|e| {
                if self.min_ratio == steady::OFFENDER_RATIO {
                    steady.offending(e)
                } else {
                    e.fairness.is_some_and(|r| r >= self.min_ratio)
                }
            })
            .map(|e| Hit {
                name: e.name.clone(),
                value: e.fairness.unwrap_or(0.0),
                extra: e.interval_dispatches as f64 - e.interval_entitled,
                cause: cause::above_share(s, kind, e),
            })
            .into_iter()
            .collect()
    }
    fn summary(&self, hits: &[Hit], _: EntityKind) -> String {
        match hits.first() {
            Some(h) => match &h.cause {
                Some(why) => format!("top offender {} at {:.2}x fair: {why}", h.name, h.value),
                None => format!("top offender {} at {:.2}x fair", h.name, h.value),
            },
            None => String::new(),
        }
    }
    fn format(&self, h: &Hit) -> String {
        format!(
            "{} takes {:.2}x its fair share: {:.0} dispatches more than entitled this interval",
            h.name, h.value, h.extra
        )
    }
}

pub struct HighWait {
    pub p99_us: f64,
}

impl Default for HighWait {
    fn default() -> Self {
        HighWait {
            p99_us: steady::SLOW_P99_US,
        }
    }
}

impl Lint for HighWait {
    fn name(&self) -> &'static str {
        "high-wait"
    }
    fn severity(&self) -> Severity {
        Severity::Warn
    }
    fn check(&self, s: &Snapshot, kind: EntityKind, steady: &Steady) -> Vec<Hit> {
        let mut hits: Vec<Hit> = s
            .entities(kind)
            .iter()
            .filter(|e| {
                if self.p99_us == steady::SLOW_P99_US {
                    steady.slow(e)
                } else {
                    e.wait_p99_us >= self.p99_us
                }
            })
            .map(|e| Hit {
                name: e.name.clone(),
                value: e.wait_p99_us,
                extra: e.wait_p50_us,
                cause: None,
            })
            .collect();
        hits.sort_by(|a, b| b.value.total_cmp(&a.value));
        hits
    }
    fn summary(&self, hits: &[Hit], kind: EntityKind) -> String {
        let worst = hits.first().map(|h| h.value).unwrap_or(0.0);
        format!(
            "{} with p99 queue wait >= {} (worst {})",
            plural(hits.len(), kind),
            fmt_us(self.p99_us),
            fmt_us(worst)
        )
    }
    fn format(&self, h: &Hit) -> String {
        format!(
            "{} waits p99 {} (p50 {})",
            h.name,
            fmt_us(h.value),
            fmt_us(h.extra)
        )
    }
}

/// The lints the UI runs, most severe first.
pub fn default_lints() -> Vec<Box<dyn Lint + Send>> {
    vec![
        Box::new(EventsLost),
        Box::new(Starved),
        Box::new(BelowFairShare),
        Box::new(HighWait::default()),
        Box::new(TopOffender::default()),
    ]
}

/// Run `lints` over a snapshot; details are capped at `max_details` each.
pub fn run(
    lints: &[Box<dyn Lint + Send>],
    s: &Snapshot,
    kind: EntityKind,
    steady: &Steady,
    max_details: usize,
) -> Vec<Warning> {
    let mut out: Vec<Warning> = lints
        .iter()
        .filter_map(|l| {
            let hits = l.check(s, kind, steady);
            if hits.is_empty() {
                return None;
            }
            let mut details: Vec<String> =
                hits.iter().take(max_details).map(|h| l.format(h)).collect();
            if hits.len() > max_details {
                details.push(format!("... and {} more", hits.len() - max_details));
            }
            Some(Warning {
                lint: l.name(),
                severity: l.severity(),
                summary: l.summary(&hits, kind),
                details,
            })
        })
        .collect();
    out.sort_by_key(|w| std::cmp::Reverse(w.severity));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfsdtop_agent::model::Tracepoint;

    fn peer(name: &str, disp: u64, entitled: f64, backlogged: bool) -> EntityStats {
        EntityStats {
            name: name.into(),
            interval_dispatches: disp,
            interval_entitled: entitled,
            fairness: (entitled > 0.0).then(|| disp as f64 / entitled),
            backlogged,
            ..Default::default()
        }
    }

    fn snap(peers: Vec<EntityStats>) -> Snapshot {
        Snapshot {
            peers,
            ..Default::default()
        }
    }

    #[test]
    fn below_half_and_starved_are_told_apart() {
        let s = snap(vec![
            peer("a", 10, 100.0, true),
            peer("b", 30, 100.0, true),
            peer("c", 0, 50.0, true),
            peer("d", 250, 50.0, true),
        ]);
        let mut steady = Steady::default();
        steady.update(&s);
        let w = run(&default_lints(), &s, EntityKind::Peer, &steady, 5);
        let by = |n: &str| w.iter().find(|w| w.lint == n).cloned();
        assert_eq!(
            by("below-fair-share").unwrap().summary,
            "2 peers below half their fair share while backlogged"
        );
        assert_eq!(
            by("starved").unwrap().summary,
            "1 peer starved: backlogged with 0 dispatches"
        );
        assert_eq!(
            by("top-offender").unwrap().summary,
            "top offender d at 5.00x fair"
        );
        assert_eq!(w[0].severity, Severity::Crit, "most severe first");
        assert!(by("events-lost").is_none());
    }

    #[test]
    fn events_lost_fires_only_when_non_zero() {
        let mut s = snap(vec![]);
        assert!(EventsLost
            .check(&s, EntityKind::Peer, &Steady::default())
            .is_empty());
        s.totals.events_lost = 7;
        s.totals.lost_by_tracepoint[Tracepoint::Dequeue] = 7;
        let h = EventsLost.check(&s, EntityKind::Peer, &Steady::default());
        assert_eq!(
            EventsLost.summary(&h, EntityKind::Peer),
            "7 events lost: counts are low"
        );
        assert_eq!(EventsLost.format(&h[0]), "svc_xprt_dequeue: 7 events lost");
    }

    #[test]
    fn offender_is_the_largest_excess_not_the_largest_ratio() {
        let list = vec![
            peer("small", 3, 1.0, true),   // ratio 3, excess 2
            peer("big", 300, 200.0, true), // ratio 1.5, excess 100
            peer("fair", 100, 100.0, true),
        ];
        assert_eq!(top_offender(&list), Some(1));
        assert_eq!(top_offender(&list[2..]), None);
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(fmt_us(850.0), "850us");
        assert_eq!(fmt_us(5_100.0), "5.1ms");
        assert_eq!(fmt_us(180_000.0), "180ms");
        assert_eq!(fmt_us(1_200_000.0), "1.20s");
        assert_eq!(fmt_us(f64::NAN), "0");
    }
}
