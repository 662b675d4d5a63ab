//! Folding a varying, possibly huge set of entities (peers or classes) into
//! at most K labelled series plus "other", with counters that stay
//! monotonic whatever happens underneath: entities evicted by the
//! aggregator, re-created after eviction (their cumulative numbers restart
//! at 0), moving in and out of the labelled set.
//!
//! Who gets a label (the rule docs/book/src/nfsdtopd.md states):
//! 1. a label stays with its entity while the entity is in the snapshot,
//!    unless a victim needs the slot (3.);
//! 2. free slots go first to *victims* — entities backlogged in the
//!    interval whose fairness ratio over about the last minute is below
//!    [`VICTIM_BELOW`] — worst ratio first, then to the busiest entities of
//!    the interval;
//! 3. with no slot free, a victim still without a label takes the slot of a
//!    labelled non-victim (the least busy one first), or of a labelled
//!    victim whose ratio is better than its own by more than
//!    [`DISPLACE_FACTOR`] (so near-equal victims do not swap labels every
//!    interval).
//!
//! The victims are the clients an unfair-share alert exists for: they are
//! the least busy entities, which a busiest-first rule would always fold.
//!
//! For dispatches, execution seconds and the queue-wait histogram, "other"
//! is the residual `total - sum(labelled)`, so the series always add up to
//! the exact totals, even for entities the aggregator evicted between two
//! snapshots; entitled and backlogged seconds, requests and bytes (which
//! have no aggregator-wide total) sum the folded entities' deltas. A label that
//! moves away from an entity ends its series; the entity's counts go on in
//! "other".

use std::collections::HashSet;

use nfsdtop_agent::aggregate::histogram::BUCKETS;
use nfsdtop_agent::keyhash::process_hash;
use nfsdtop_agent::model::EntityStats;
use rustc_hash::{FxHashMap, FxHashSet};

pub use counters::{delta_f, delta_u, Counters};

/// The label value of the folded series (peers and classes past the
/// top-K bound, summed).
pub const OTHER: &str = nfsdtop_agent::enrich::classify::OTHER_CLASS;

/// A victim is under its fair share (the TUI's yellow: entities at their
/// fair share, whose ratio wobbles around 1, do not compete for labels).
pub const VICTIM_BELOW: f64 = nfsdtop_agent::present::fairness::UNDER_SHARE;

/// A waiting victim takes a labelled victim's slot only when its own ratio
/// is below this fraction of the labelled one's.
pub const DISPLACE_FACTOR: f64 = 0.75;

/// Time constant of the smoothed fairness ratio, in seconds of source time.
/// Until an entity has been seen this long its ratio is the plain mean
/// since it appeared (a fresh entity is judged on what is known).
pub const SMOOTH_SECONDS: f64 = 60.0;

/// One exported series (a labelled entity or "other").
#[derive(Clone, Debug, Default)]
pub struct Series {
    /// Label values (as they are: each encoder escapes for its format).
    pub name: String,
    pub class: String,
    pub counts: Counters,
    pub connections: u64,
    pub backlogged: bool,
    pub hist: HistAcc,
    /// Requests per procedure (labelled series only).
    pub procedures: procedures::Procedures,
    /// NFSv4 operations (labelled series only).
    pub operations: operations::Operations,
}

/// An entity's fairness over about the last [`SMOOTH_SECONDS`]:
/// exponentially weighted dispatch and entitlement rates.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Smooth {
    /// Source time this entity has been watched, capped at the time constant.
    pub seconds: f64,
    /// Dispatches per second.
    pub dispatch_rate: f64,
    /// Entitled (fair-share) dispatches per second.
    pub entitled_rate: f64,
    /// Backlogged at some point of the latest interval.
    pub active: bool,
}

impl Smooth {
    fn add(&mut self, dt: f64, dispatches: u64, entitled: f64, active: bool) {
        let dt = dt.max(1e-3);
        self.seconds = (self.seconds + dt).min(SMOOTH_SECONDS);
        // The plain mean while younger than the time constant, then an
        // exponential weight of the time constant.
        let w = (dt / self.seconds).max(1.0 - (-dt / SMOOTH_SECONDS).exp());
        self.dispatch_rate += w * (dispatches as f64 / dt - self.dispatch_rate);
        self.entitled_rate += w * (entitled / dt - self.entitled_rate);
        self.active = active;
    }

    /// dispatches / entitled, once the entity was entitled to at least one
    /// dispatch over the window (less is too little to judge).
    pub fn ratio(&self) -> Option<f64> {
        (self.entitled_rate * self.seconds >= 1.0).then(|| self.dispatch_rate / self.entitled_rate)
    }

    /// Below `below` of its fair share while backlogged.
    pub fn below(&self, below: f64) -> Option<f64> {
        self.ratio().filter(|r| self.active && *r < below)
    }
}

/// An entity's identity: a 64-bit hash of (netns, name). Keys cost no
/// allocation, which matters with 100,000 peers per snapshot; a collision
/// (about 3e-10 for 100,000 keys) would only merge two entities' series.
/// The hash is seeded per process: peers' names are their addresses,
/// which they choose, and an unseeded hash would let two be picked to
/// collide (`nfsdtop_agent::keyhash`).
pub type Key = u64;

pub fn key_of(e: &EntityStats) -> Key {
    process_hash(&(e.netns, &e.name))
}

#[derive(Clone, Copy, Debug)]
struct SeenEntry {
    v: Counters,
    smooth: Smooth,
    folded: bool,
    generation: u64,
}

/// One entity's change since the previous snapshot (a reused buffer).
#[derive(Clone, Copy, Debug)]
struct Delta {
    key: Key,
    known: bool,
    was_folded: bool,
    /// Its counters' change.
    c: Counters,
}

/// Folds entities into at most `k` labelled series plus "other".
#[derive(Debug)]
pub struct Folder {
    k: usize,
    with_hist: bool,
    /// The fairness ratio under which an entity counts as unfairly served
    /// (`nfsdtop_unfair_entities`).
    unfair_below: f64,
    seen: FxHashMap<Key, SeenEntry>,
    generation: u64,
    /// Last cumulative histogram of each labelled entity (classes only).
    seen_hist: FxHashMap<Key, Vec<u64>>,
    labelled: FxHashMap<Key, Series>,
    other: Series,
    deltas: Vec<Delta>,
    /// The latest snapshot's keys, in its order (a reused buffer): each
    /// entity's name is hashed once per update.
    keys: Vec<Key>,
    pub folded_now: u64,
    pub folds_total: u64,
    /// Entities below `unfair_below` now, and how many of them are folded.
    pub unfair_now: u64,
    pub unfair_folded: u64,
}

impl Folder {
    pub fn new(k: usize, with_hist: bool, unfair_below: f64) -> Folder {
        Folder {
            k,
            with_hist,
            unfair_below,
            seen: FxHashMap::default(),
            generation: 0,
            seen_hist: FxHashMap::default(),
            labelled: FxHashMap::default(),
            other: Series {
                name: OTHER.into(),
                class: OTHER.into(),
                ..Series::default()
            },
            deltas: Vec::new(),
            keys: Vec::new(),
            folded_now: 0,
            folds_total: 0,
            unfair_now: 0,
            unfair_folded: 0,
        }
    }

    /// The smoothed fairness of an entity of the latest snapshot, and its
    /// label when it has one.
    pub fn smoothed(&self, e: &EntityStats) -> Option<(Smooth, Option<&str>)> {
        let key = key_of(e);
        let s = self.seen.get(&key)?;
        Some((s.smooth, self.labelled.get(&key).map(|l| l.name.as_str())))
    }

    /// `dt` is the source time the snapshot covers; `total_dispatches` and
    /// `total_exec` are the deltas of the aggregator-wide totals since the
    /// previous snapshot, `total_hist` its delta histogram.
    pub fn update(
        &mut self,
        entities: &[EntityStats],
        dt: f64,
        total_dispatches: u64,
        total_exec: f64,
        total_hist: Option<&[u64]>,
    ) {
        self.generation += 1;
        let generation = self.generation;
        let mut keys = std::mem::take(&mut self.keys);
        keys.clear();
        keys.extend(entities.iter().map(key_of));

        // Pass 1: every entity's deltas and smoothed fairness.
        let mut deltas = std::mem::take(&mut self.deltas);
        deltas.clear();
        let mut unfair_now = 0;
        for (e, &key) in entities.iter().zip(&keys) {
            let entry = self.seen.get(&key).copied();
            let now = Counters::of(e);
            let d = Delta {
                key,
                known: entry.is_some(),
                was_folded: entry.is_some_and(|s| s.folded),
                c: now.since(entry.as_ref().map(|s| &s.v)),
            };
            let mut smooth = entry.map(|s| s.smooth).unwrap_or_default();
            let active = e.backlogged || d.c.entitled > 0.0 || d.c.backlogged_seconds > 0.0;
            smooth.add(dt, d.c.dispatches, d.c.entitled, active);
            if smooth.below(self.unfair_below).is_some() {
                unfair_now += 1;
            }
            self.seen.insert(
                key,
                SeenEntry {
                    v: now,
                    smooth,
                    folded: entry.is_some_and(|s| s.folded),
                    generation,
                },
            );
            deltas.push(d);
        }
        // Entities gone from the snapshot are forgotten, and lose their
        // label (and series).
        self.seen.retain(|_, s| s.generation == generation);
        let seen = &self.seen;
        self.labelled.retain(|k, _| seen.contains_key(k));
        self.seen_hist.retain(|k, _| seen.contains_key(k));

        let newly = self.assign_labels(entities, &keys);
        self.keys = keys;

        // Pass 2: each delta to its series or to "other".
        let mut labelled_disp = 0u64;
        let mut labelled_exec = 0.0;
        let mut labelled_hist = vec![0u64; if self.with_hist { BUCKETS } else { 0 }];
        let mut other_conn = 0;
        let mut other_backlogged = false;
        let mut folded_now = 0;
        let mut unfair_folded = 0;
        for (e, d) in entities.iter().zip(&deltas) {
            let key = d.key;
            // An entity labelled now that was folded before: this round's
            // numbers still belong to "other" (its histogram history is
            // there already); its own series counts from the next round.
            let fresh_label = d.known && newly.contains(&key);
            match self.labelled.get_mut(&key) {
                Some(s) if !fresh_label => {
                    s.counts.add(&d.c);
                    s.connections = e.connections;
                    s.backlogged = e.backlogged;
                    s.class.clone_from(&e.class);
                    s.procedures.add(&e.procedures);
                    s.operations.add(&e.nfs4_operations);
                    labelled_disp += d.c.dispatches;
                    labelled_exec += d.c.exec_seconds;
                    if self.with_hist {
                        let now = dense(&e.wait_histogram);
                        let dh: Vec<u64> = match self.seen_hist.get(&key) {
                            Some(p) if now.iter().zip(p).all(|(a, b)| a >= b) => {
                                now.iter().zip(p).map(|(a, b)| a - b).collect()
                            }
                            _ => now.clone(),
                        };
                        s.hist.add(&dh);
                        for (a, b) in labelled_hist.iter_mut().zip(&dh) {
                            *a += b;
                        }
                        self.seen_hist.insert(key, now);
                    }
                }
                Some(s) => {
                    s.connections = e.connections;
                    s.backlogged = e.backlogged;
                    s.procedures.baseline(&e.procedures);
                    s.operations.baseline(&e.nfs4_operations);
                    if self.with_hist {
                        self.seen_hist.insert(key, dense(&e.wait_histogram));
                    }
                    self.other.counts.add_folded(&d.c);
                }
                None => {
                    self.other.counts.add_folded(&d.c);
                    other_conn += e.connections;
                    other_backlogged |= e.backlogged;
                    folded_now += 1;
                    if !d.was_folded {
                        self.folds_total += 1;
                    }
                }
            }
            if let Some(entry) = self.seen.get_mut(&key) {
                entry.folded = !self.labelled.contains_key(&key);
                if entry.folded && entry.smooth.below(self.unfair_below).is_some() {
                    unfair_folded += 1;
                }
            }
        }
        self.deltas = deltas;
        self.folded_now = folded_now;
        self.unfair_now = unfair_now;
        self.unfair_folded = unfair_folded;
        self.other.counts.dispatches += total_dispatches.saturating_sub(labelled_disp);
        self.other.counts.exec_seconds += (total_exec - labelled_exec).max(0.0);
        self.other.connections = other_conn;
        self.other.backlogged = other_backlogged;
        if let Some(t) = total_hist {
            let dh: Vec<u64> = t
                .iter()
                .zip(&labelled_hist)
                .map(|(a, b)| a.saturating_sub(*b))
                .collect();
            self.other.hist.add(&dh);
        }
    }

    /// Steps 2 and 3 of the rule in the module comment; returns the keys
    /// labelled in this round.
    fn assign_labels(&mut self, entities: &[EntityStats], keys: &[Key]) -> FxHashSet<Key> {
        let victim = |f: &Folder, key: &Key| -> Option<f64> {
            f.seen.get(key).and_then(|s| s.smooth.below(VICTIM_BELOW))
        };
        let busier = |a: &EntityStats, b: &EntityStats| {
            b.interval_dispatches
                .cmp(&a.interval_dispatches)
                .then(b.dispatches.cmp(&a.dispatches))
                .then(a.name.cmp(&b.name))
        };
        // Unlabelled victims, worst first (only the worst k can matter).
        let mut waiting: Vec<(f64, &EntityStats, Key)> = entities
            .iter()
            .zip(keys)
            .filter_map(|(e, &key)| {
                if self.labelled.contains_key(&key) {
                    return None;
                }
                victim(self, &key).map(|r| (r, e, key))
            })
            .collect();
        let by_ratio = |a: &(f64, &EntityStats, Key), b: &(f64, &EntityStats, Key)| {
            a.0.total_cmp(&b.0).then(a.1.name.cmp(&b.1.name))
        };
        if waiting.len() > self.k && self.k > 0 {
            waiting.select_nth_unstable_by(self.k - 1, by_ratio);
            waiting.truncate(self.k);
        }
        waiting.sort_by(by_ratio);

        let mut chosen: Vec<(&EntityStats, Key)> = Vec::new();
        let mut waiting = waiting.into_iter().peekable();
        let free = self.k.saturating_sub(self.labelled.len());
        while chosen.len() < free {
            match waiting.next() {
                Some((_, e, key)) => chosen.push((e, key)),
                None => break,
            }
        }
        if waiting.peek().is_some() {
            // Slots to give up: labelled non-victims, least busy first;
            // then labelled victims, best ratio first.
            let mut holders: Vec<(Option<f64>, &EntityStats, Key)> = entities
                .iter()
                .zip(keys)
                .filter(|&(_, key)| self.labelled.contains_key(key))
                .map(|(e, &key)| (victim(self, &key), e, key))
                .collect();
            holders.sort_by(|a, b| match (a.0, b.0) {
                (None, None) => busier(b.1, a.1),
                (None, Some(_)) => std::cmp::Ordering::Less,
                (Some(_), None) => std::cmp::Ordering::Greater,
                (Some(x), Some(y)) => y.total_cmp(&x).then(a.1.name.cmp(&b.1.name)),
            });
            for (held, _, key) in holders {
                let Some(&(ratio, e, wkey)) = waiting.peek() else {
                    break;
                };
                if held.is_some_and(|h| ratio >= h * DISPLACE_FACTOR) {
                    // Ordered by ratio: no later holder is better.
                    break;
                }
                self.labelled.remove(&key);
                self.seen_hist.remove(&key);
                chosen.push((e, wkey));
                waiting.next();
            }
        }
        // Slots still free: the busiest unlabelled entities.
        let free = self.k.saturating_sub(self.labelled.len() + chosen.len());
        if free > 0 {
            let taken: FxHashSet<Key> = chosen.iter().map(|&(_, key)| key).collect();
            let mut cands: Vec<(&EntityStats, Key)> = entities
                .iter()
                .zip(keys)
                .filter(|&(_, key)| !self.labelled.contains_key(key) && !taken.contains(key))
                .map(|(e, &key)| (e, key))
                .collect();
            let by = |a: &(&EntityStats, Key), b: &(&EntityStats, Key)| busier(a.0, b.0);
            if cands.len() > free {
                cands.select_nth_unstable_by(free - 1, by);
                cands.truncate(free);
            }
            chosen.extend(cands);
        }

        // Labels must be unique even when two namespaces hold the same
        // address.
        let mut names: HashSet<String> = self.labelled.values().map(|s| s.name.clone()).collect();
        let mut newly = FxHashSet::default();
        for (e, key) in chosen {
            let mut label = e.name.clone();
            if names.contains(&label) || label == OTHER {
                label = format!("{label}@netns:{}", e.netns);
            }
            names.insert(label.clone());
            let mut s = Series {
                name: label,
                class: e.class.clone(),
                ..Series::default()
            };
            if self.with_hist {
                s.hist.counts = vec![0; BUCKETS];
            }
            self.labelled.insert(key, s);
            newly.insert(key);
        }
        newly
    }

    /// Labelled series in a stable order, then "other".
    pub fn series(&self) -> Vec<&Series> {
        let mut v: Vec<&Series> = self.labelled.values().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name).then(a.class.cmp(&b.class)));
        v.push(&self.other);
        v
    }
}

mod counters;
mod hist;
pub use hist::WAIT_BOUNDS_POW;
mod operations;
mod procedures;
pub use hist::{dense, HistAcc};
pub use procedures::ProcCounts;

#[cfg(test)]
mod tests;
