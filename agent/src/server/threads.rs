//! nfsd's threads as they come and go (Linux 7.0+, `min-threads` below
//! `threads`): a ledger of how many ran, from each pool's thread start
//! and exit events, and what an interval makes of it: the time-weighted
//! mean of the threads that ran, the fewest and the most at any moment,
//! and the starts and exits.
//!
//! Each event carries its pool's thread count before the change (the
//! kernel's `nrthreads`): after a start the pool runs one more, after an
//! exit one fewer. A pool's first event is taken as a change of one from
//! the count the ledger started with (the threads seen when it opened),
//! later ones as the change from that pool's last count, so a count the
//! administrator changed meanwhile is caught up by the pool's next event.
//!
//! An event is integrated at its own time. One that arrives after a
//! reading that its time precedes (it was still in the ring) corrects the
//! thread-seconds already read; the correction lands in the next
//! interval, so the total over a run is exact and an interval's mean is
//! late by at most the ring's drain period.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Pools the ledger keeps apart (nfsd has one per CPU at most); events
/// of further pools change the total only.
const MAX_POOLS: usize = 4096;

/// One thread start or exit, as the tracepoint gave it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadEvent {
    /// CLOCK_MONOTONIC, ns.
    pub ts_ns: u64,
    pub start: bool,
    pub pool: u32,
    /// The pool's threads before the change.
    pub nrthreads: u32,
    /// The pool's configured minimum and maximum.
    pub min: u32,
    pub max: u32,
}

#[derive(Clone, Copy, Debug, Default)]
struct Pool {
    running: u32,
    min: u32,
    max: u32,
}

/// The running count and its integral over time.
#[derive(Debug)]
pub struct ThreadLedger {
    pools: BTreeMap<u32, Pool>,
    running: u32,
    /// ∫ running dt, ns × threads, up to `at_ns`.
    thread_ns: u128,
    at_ns: u64,
    /// Fewest and most running since the last reading.
    low: u32,
    high: u32,
}

/// What the ledger says at a reading (cumulative, but for `low`/`high`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadsReading {
    /// Thread-seconds run since the ledger opened.
    pub thread_seconds: f64,
    /// Threads running at the reading.
    pub now: u32,
    /// Fewest and most running at any moment since the last reading.
    pub low: u32,
    pub high: u32,
    /// Starts and exits since the ledger opened (the kernel's counts).
    pub starts: u64,
    pub exits: u64,
    /// Events the ring lost (their counts are in `starts`/`exits`).
    pub lost: u64,
    /// Σ over pools of the configured minimum and maximum, from each
    /// pool's last event; None before any.
    pub configured_min: Option<u32>,
    pub configured_max: Option<u32>,
}

impl ThreadLedger {
    /// A ledger that starts at `running` threads at `now_ns`.
    pub fn new(running: u32, now_ns: u64) -> ThreadLedger {
        ThreadLedger {
            pools: BTreeMap::new(),
            running,
            thread_ns: 0,
            at_ns: now_ns,
            low: running,
            high: running,
        }
    }

    pub fn running(&self) -> u32 {
        self.running
    }

    /// Integrate the running count up to `ts_ns`, or correct the past for
    /// a change of `delta` threads since `ts_ns` when it lies before.
    fn advance(&mut self, ts_ns: u64, delta: i64) {
        if ts_ns >= self.at_ns {
            self.thread_ns += u128::from(self.running) * u128::from(ts_ns - self.at_ns);
            self.at_ns = ts_ns;
        } else {
            let span = u128::from(self.at_ns - ts_ns);
            let moved = u128::from(delta.unsigned_abs()) * span;
            self.thread_ns = if delta >= 0 {
                self.thread_ns + moved
            } else {
                self.thread_ns.saturating_sub(moved)
            };
        }
    }

    pub fn apply(&mut self, e: ThreadEvent) {
        let after = if e.start {
            e.nrthreads.saturating_add(1)
        } else {
            e.nrthreads.saturating_sub(1)
        };
        let before = match self.pools.get(&e.pool) {
            Some(p) => p.running,
            // The pool's first event: a change of one.
            None => {
                if e.start {
                    after.saturating_sub(1)
                } else {
                    after.saturating_add(1)
                }
            }
        };
        let delta = i64::from(after) - i64::from(before);
        self.advance(e.ts_ns, delta);
        self.running = (i64::from(self.running) + delta).clamp(0, i64::from(u32::MAX)) as u32;
        self.low = self.low.min(self.running);
        self.high = self.high.max(self.running);
        if self.pools.len() < MAX_POOLS || self.pools.contains_key(&e.pool) {
            self.pools.insert(
                e.pool,
                Pool {
                    running: after,
                    min: e.min,
                    max: e.max,
                },
            );
        }
    }

    /// The reading at `now_ns`; the next interval's low and high start
    /// from the threads running now.
    pub fn read(&mut self, now_ns: u64, starts: u64, exits: u64, lost: u64) -> ThreadsReading {
        self.advance(now_ns, 0);
        let bound = |f: fn(&Pool) -> u32| {
            (!self.pools.is_empty()).then(|| self.pools.values().map(f).sum::<u32>())
        };
        let r = ThreadsReading {
            thread_seconds: self.thread_ns as f64 / 1e9,
            now: self.running,
            low: self.low,
            high: self.high,
            starts,
            exits,
            lost,
            configured_min: bound(|p| p.min),
            configured_max: bound(|p| p.max),
        };
        self.low = self.running;
        self.high = self.running;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn ev(ts_s: f64, start: bool, pool: u32, nrthreads: u32) -> ThreadEvent {
        ThreadEvent {
            ts_ns: (ts_s * S as f64) as u64,
            start,
            pool,
            nrthreads,
            min: 1,
            max: 8,
        }
    }

    /// 2 threads from 0 s; a start at 1 s (3), another at 1.5 s (4), an
    /// exit at 3 s (3): by hand, 0–1 s 2, 1–1.5 s 3, 1.5–2 s 4, which
    /// make 5.5 thread-seconds in the first 2 s; 2–3 s 4, 3–4 s 3, which
    /// make 7 in the next 2 s.
    #[test]
    fn thread_seconds_low_and_high_follow_the_events() {
        let mut l = ThreadLedger::new(2, 0);
        l.apply(ev(1.0, true, 0, 2));
        l.apply(ev(1.5, true, 0, 3));
        let r = l.read(2 * S, 2, 0, 0);
        assert!((r.thread_seconds - 5.5).abs() < 1e-9, "{r:?}");
        assert_eq!((r.now, r.low, r.high), (4, 2, 4));
        assert_eq!((r.configured_min, r.configured_max), (Some(1), Some(8)));
        l.apply(ev(3.0, false, 0, 4));
        let r = l.read(4 * S, 2, 1, 0);
        assert!((r.thread_seconds - 12.5).abs() < 1e-9, "{r:?}");
        assert_eq!((r.now, r.low, r.high), (3, 3, 4));
        // Nothing happens: low and high are the count throughout.
        let r = l.read(5 * S, 2, 1, 0);
        assert!((r.thread_seconds - 15.5).abs() < 1e-9);
        assert_eq!((r.low, r.high), (3, 3));
    }

    /// An event read after a reading its time precedes: the thread-seconds
    /// of the past are corrected in the next reading, the total exact.
    #[test]
    fn a_late_event_corrects_the_next_reading() {
        let mut l = ThreadLedger::new(1, 0);
        let r = l.read(2 * S, 0, 0, 0);
        assert!((r.thread_seconds - 2.0).abs() < 1e-9);
        // A start at 1 s, drained after the 2 s reading.
        l.apply(ev(1.0, true, 0, 1));
        let r = l.read(3 * S, 1, 0, 0);
        // 0–1 s 1, 1–3 s 2: 5 in all.
        assert!((r.thread_seconds - 5.0).abs() < 1e-9, "{r:?}");
        assert_eq!((r.now, r.high), (2, 2));
        // An exit back in time, likewise.
        l.apply(ev(2.5, false, 0, 2));
        let r = l.read(4 * S, 1, 1, 0);
        // 0–1 1, 1–2.5 2, 2.5–4 1: 1 + 3 + 1.5.
        assert!((r.thread_seconds - 5.5).abs() < 1e-9, "{r:?}");
    }

    /// Two pools: each keeps its own count; a pool's event whose count
    /// disagrees with the ledger's (the administrator changed it between
    /// events) moves the total by the difference.
    #[test]
    fn pools_are_kept_apart_and_caught_up() {
        let mut l = ThreadLedger::new(4, 0);
        l.apply(ev(1.0, true, 0, 2));
        l.apply(ev(1.0, true, 1, 2));
        assert_eq!(l.running(), 6);
        // Pool 1 was set to 6 meanwhile: its exit finds 6, leaves 5.
        l.apply(ev(2.0, false, 1, 6));
        assert_eq!(l.running(), 3 + 5);
        let r = l.read(2 * S, 2, 1, 0);
        assert_eq!((r.configured_min, r.configured_max), (Some(2), Some(16)));
        // An exit below zero stays at zero.
        let mut l = ThreadLedger::new(0, 0);
        l.apply(ev(1.0, false, 0, 0));
        assert_eq!(l.running(), 0);
    }
}
