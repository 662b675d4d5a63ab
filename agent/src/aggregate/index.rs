//! The transport index: key → slot in the aggregator's transport table.
//! Its buckets hold only slot numbers (4 bytes each, half a MiB at
//! 100,000 transports, so it stays in cache); a lookup compares the key
//! stored in the slot it finds, which the event's update reads next anyway.

use std::hash::{Hash, Hasher};

use hashbrown::HashTable;
use rustc_hash::FxHasher;

use super::Xprt;
use crate::model::XprtKey;

#[derive(Default)]
pub(super) struct XprtIndex {
    table: HashTable<u32>,
}

#[inline]
fn hash_of(key: &XprtKey) -> u64 {
    let mut h = FxHasher::default();
    key.hash(&mut h);
    h.finish()
}

#[inline]
fn key_at(slots: &[Option<Xprt>], xi: u32) -> Option<&XprtKey> {
    slots.get(xi as usize)?.as_ref().map(|x| &x.key)
}

impl XprtIndex {
    pub fn len(&self) -> usize {
        self.table.len()
    }

    #[inline]
    pub fn get(&self, key: &XprtKey, slots: &[Option<Xprt>]) -> Option<u32> {
        self.table
            .find(hash_of(key), |&xi| key_at(slots, xi) == Some(key))
            .copied()
    }

    /// Indexes slot `xi`, which already holds its transport.
    pub fn insert(&mut self, xi: u32, slots: &[Option<Xprt>]) {
        let Some(key) = key_at(slots, xi) else {
            return;
        };
        self.table.insert_unique(hash_of(key), xi, |&other| {
            key_at(slots, other).map_or(0, hash_of)
        });
    }

    /// Forgets slot `xi`, which still holds its transport.
    pub fn remove(&mut self, xi: u32, slots: &[Option<Xprt>]) {
        let Some(key) = key_at(slots, xi) else {
            return;
        };
        if let Ok(entry) = self.table.find_entry(hash_of(key), |&other| other == xi) {
            entry.remove();
        }
    }
}
