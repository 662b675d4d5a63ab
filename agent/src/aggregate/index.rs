//! The transport index: key → slot in the aggregator's transport table.
//! Its buckets hold only slot numbers (4 bytes each, half a MiB at
//! 100,000 transports, so it stays in cache); a lookup compares the key
//! stored in the slot it finds, which the event's update reads next anyway.

use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::Xprt;
use crate::keyhash::PeerHashState;
use crate::model::XprtKey;

#[derive(Default)]
pub(super) struct XprtIndex {
    table: HashTable<u32>,
    /// Seeded: clients choose their ports (see `crate::keyhash`).
    state: PeerHashState,
}

/// The hash a key is indexed by, under the index's seed.
#[inline]
fn hash_with(state: &PeerHashState, key: &XprtKey) -> u64 {
    state.hash_one(key)
}

#[inline]
fn key_at(slots: &[Option<Xprt>], xi: u32) -> Option<&XprtKey> {
    slots.get(xi as usize)?.as_ref().map(|x| &x.key)
}

impl XprtIndex {
    #[inline]
    fn hash_of(&self, key: &XprtKey) -> u64 {
        hash_with(&self.state, key)
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    #[inline]
    pub fn get(&self, key: &XprtKey, slots: &[Option<Xprt>]) -> Option<u32> {
        self.table
            .find(self.hash_of(key), |&xi| key_at(slots, xi) == Some(key))
            .copied()
    }

    /// Indexes slot `xi`, which already holds its transport.
    pub fn insert(&mut self, xi: u32, slots: &[Option<Xprt>]) {
        let Some(key) = key_at(slots, xi) else {
            return;
        };
        let state = &self.state;
        self.table
            .insert_unique(hash_with(state, key), xi, |&other| {
                key_at(slots, other).map_or(0, |k| hash_with(state, k))
            });
    }

    /// Forgets slot `xi`, which still holds its transport.
    pub fn remove(&mut self, xi: u32, slots: &[Option<Xprt>]) {
        let Some(key) = key_at(slots, xi) else {
            return;
        };
        if let Ok(entry) = self
            .table
            .find_entry(self.hash_of(key), |&other| other == xi)
        {
            entry.remove();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyhash::chosen;

    #[test]
    fn ports_a_client_chose_against_fxhash_do_not_share_a_bucket() {
        let keys = chosen::keys();
        let index = XprtIndex::default();
        let spread = chosen::buckets(&keys, |k| index.hash_of(k));
        assert!(spread >= 32, "{spread} buckets for 64 chosen transports");
    }
}
