//! The cumulative counters of one exported series, in one type for the
//! three things the fold keeps of them: an entity's counts as the last
//! snapshot had them, their change since, and a series' running sum
//! (a labelled entity's, or "other"'s).

use nfsdtop_agent::model::{DepthHistogram, EntityStats};

/// Dispatches, entitlement, execution and backlogged time, requests and
/// bytes. Bytes are `None` until measured (classic tracepoints never do),
/// so an unmeasured series is absent from /metrics rather than 0.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counters {
    pub dispatches: u64,
    pub entitled: f64,
    pub exec_seconds: f64,
    pub backlogged_seconds: f64,
    pub requests: u64,
    pub bytes_in: Option<u64>,
    pub bytes_out: Option<u64>,
    /// In-flight depth at enqueue, `None` likewise.
    pub depth: Option<DepthHistogram>,
}

impl Counters {
    /// An entity's counts as its snapshot has them.
    pub fn of(e: &EntityStats) -> Counters {
        Counters {
            dispatches: e.dispatches,
            entitled: e.entitled,
            exec_seconds: e.exec_seconds,
            backlogged_seconds: e.backlogged_seconds,
            requests: e.requests,
            bytes_in: e.bytes_in,
            bytes_out: e.bytes_out,
            depth: e.enqueue_depth,
        }
    }

    /// The change from `prev` (none: the entity is new) to these counts;
    /// a count that went down restarted at 0 (the aggregator evicted and
    /// re-created the entity), so all of it is new.
    pub fn since(&self, prev: Option<&Counters>) -> Counters {
        Counters {
            dispatches: delta_u(self.dispatches, prev.map(|p| p.dispatches)),
            entitled: delta_f(self.entitled, prev.map(|p| p.entitled)),
            exec_seconds: delta_f(self.exec_seconds, prev.map(|p| p.exec_seconds)),
            backlogged_seconds: delta_f(
                self.backlogged_seconds,
                prev.map(|p| p.backlogged_seconds),
            ),
            requests: delta_u(self.requests, prev.map(|p| p.requests)),
            bytes_in: delta_opt(self.bytes_in, prev.map(|p| p.bytes_in)),
            bytes_out: delta_opt(self.bytes_out, prev.map(|p| p.bytes_out)),
            depth: self.depth.map(|d| match prev.and_then(|p| p.depth) {
                Some(p) if d.count() >= p.count() && d.sum >= p.sum => d.since(&p),
                _ => d,
            }),
        }
    }

    /// Add a change to a labelled series: every counter.
    pub fn add(&mut self, d: &Counters) {
        self.dispatches += d.dispatches;
        self.exec_seconds += d.exec_seconds;
        self.add_folded(d);
    }

    /// Add a folded entity's change to "other": the counters without an
    /// aggregator-wide total (dispatches and execution time are the
    /// residual of the totals instead, see the module above).
    pub fn add_folded(&mut self, d: &Counters) {
        self.entitled += d.entitled;
        self.backlogged_seconds += d.backlogged_seconds;
        self.requests += d.requests;
        self.bytes_in = add_opt(self.bytes_in, d.bytes_in);
        self.bytes_out = add_opt(self.bytes_out, d.bytes_out);
        if let Some(d) = d.depth {
            self.depth.get_or_insert_default().merge(&d);
        }
    }
}

/// A measured-or-not counter's change: `None` while it is not measured.
fn delta_opt(cur: Option<u64>, prev: Option<Option<u64>>) -> Option<u64> {
    cur.map(|c| delta_u(c, prev.flatten()))
}

/// `acc + d`, measured once either side is.
fn add_opt(acc: Option<u64>, d: Option<u64>) -> Option<u64> {
    match (acc, d) {
        (None, None) => None,
        (a, d) => Some(a.unwrap_or(0) + d.unwrap_or(0)),
    }
}

pub fn delta_f(cur: f64, prev: Option<f64>) -> f64 {
    match prev {
        Some(p) if cur >= p => cur - p,
        Some(_) | None => cur.max(0.0),
    }
}

pub fn delta_u(cur: u64, prev: Option<u64>) -> u64 {
    match prev {
        Some(p) if cur >= p => cur - p,
        Some(_) | None => cur,
    }
}
