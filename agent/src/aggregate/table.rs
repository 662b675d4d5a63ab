//! A slot table of entities (peers or classes) with an index by key and
//! bounded size: when full, the least recently active idle entities are
//! forgotten in one batch, so eviction is amortised O(1) per insert.

use std::hash::Hash;

use super::histogram::WaitHistogram;
use super::operations::Operations;
use super::procedures::Procedures;
use crate::keyhash::PeerHashMap;
use crate::model::{Bytes, DepthTally};

/// Per-entity accounting. Peers and classes share it.
#[derive(Debug, Default)]
pub struct Entity {
    pub name: String,
    /// The class label (a peer's class; a class's own name).
    pub class: String,
    pub netns: u32,
    /// For peers: the class entity slot their dispatches also count for.
    pub class_slot: u32,
    /// Transports of this entity on a ready queue now.
    pub queued: u32,
    /// Virtual time when the entity last became backlogged.
    pub v_start: f64,
    /// Entitled dispatches accrued over finished backlogged periods.
    pub entitled_done: f64,
    pub backlog_since_ns: u64,
    pub backlogged_ns: u64,
    pub dispatches: u64,
    pub exec_ns: u64,
    /// Requests whose execution time is in `exec_ns`.
    pub executions: u64,
    /// Bytes received and sent by those requests: `None` until a request
    /// with measured lengths arrives (see `EventKind::Executed`).
    pub bytes: Option<Bytes>,
    /// Requests per procedure: `None` until a source reports one (boxed:
    /// most of 100,000 peers' entities never pay for it).
    pub procedures: Option<Box<Procedures>>,
    /// NFSv4 operations: `None` until a source reports one.
    pub operations: Option<Box<Operations>>,
    /// In-flight depth at its enqueues: `None` until a source reports one.
    pub depth: Option<Box<DepthTally>>,
    /// Transports known for this entity (peers) or member peers (classes).
    pub members: u64,
    pub connections: u64,
    pub wait_interval: WaitHistogram,
    /// Kept for classes only (the exporter's histogram); peers would cost
    /// too much memory at 100k peers. Each snapshot adds the interval's
    /// waits to it (one merge a second, not a record per dispatch).
    pub wait_total: WaitHistogram,
    pub last_active_ns: u64,
    pub prev_dispatches: u64,
    pub prev_entitled: f64,
    pub prev_exec_ns: u64,
    pub prev_executions: u64,
    pub prev_bytes: Bytes,
}

impl Entity {
    pub fn is_idle(&self) -> bool {
        self.queued == 0 && self.members == 0
    }
}

pub struct EntityTable<K> {
    /// Seeded: peers' addresses are theirs to choose (`crate::keyhash`).
    index: PeerHashMap<K, u32>,
    slots: Vec<Option<(K, Entity)>>,
    free: Vec<u32>,
    capacity: usize,
    /// When nothing idle could be evicted, the table may grow past its
    /// capacity (its entities are live); the next eviction scan waits
    /// until it has grown by another eighth, keeping inserts amortised O(1).
    next_scan_at: usize,
    pub evicted: u64,
}

impl<K: Hash + Eq + Clone> EntityTable<K> {
    pub fn new(capacity: usize) -> Self {
        EntityTable {
            index: PeerHashMap::default(),
            slots: Vec::new(),
            free: Vec::new(),
            capacity: capacity.max(8),
            next_scan_at: capacity.max(8),
            evicted: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True when an insert should first try to evict idle entities.
    pub fn is_full(&self) -> bool {
        self.index.len() >= self.next_scan_at
    }

    pub fn slot_of(&self, key: &K) -> Option<u32> {
        self.index.get(key).copied()
    }

    /// Returns the slot of `key`, creating it with `make` if absent. The
    /// second value is true when the entity is new.
    pub fn get_or_insert(&mut self, key: &K, make: impl FnOnce() -> Entity) -> (u32, bool) {
        if let Some(&slot) = self.index.get(key) {
            return (slot, false);
        }
        let entry = Some((key.clone(), make()));
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = entry;
                s
            }
            None => {
                self.slots.push(entry);
                (self.slots.len() - 1) as u32
            }
        };
        self.index.insert(key.clone(), slot);
        (slot, true)
    }

    pub fn get(&self, slot: u32) -> &Entity {
        &self.slots[slot as usize]
            .as_ref()
            .expect("slot referenced while alive")
            .1
    }

    pub fn get_mut(&mut self, slot: u32) -> &mut Entity {
        &mut self.slots[slot as usize]
            .as_mut()
            .expect("slot referenced while alive")
            .1
    }

    pub fn iter(&self) -> impl Iterator<Item = (u32, &K, &Entity)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|(k, e)| (i as u32, k, e)))
    }

    /// Forget the least recently active eighth of the idle entities. Only
    /// idle ones (nothing queued, no transports or members) can go: nothing
    /// else refers to them, so no other table needs fixing up.
    pub fn evict_idle(&mut self) -> Vec<Entity> {
        let mut idle: Vec<(u64, u32)> = self
            .iter()
            .filter(|(_, _, e)| e.is_idle())
            .map(|(s, _, e)| (e.last_active_ns, s))
            .collect();
        let n = (self.capacity / 8).max(1).min(idle.len());
        let after = self.index.len() - n;
        self.next_scan_at = self.capacity.max(after + self.capacity / 8);
        let mut gone = Vec::with_capacity(n);
        if n == 0 {
            return gone;
        }
        idle.select_nth_unstable(n - 1);
        for &(_, slot) in &idle[..n] {
            if let Some((key, e)) = self.slots[slot as usize].take() {
                self.index.remove(&key);
                self.free.push(slot);
                self.evicted += 1;
                gone.push(e);
            }
        }
        gone
    }
}
