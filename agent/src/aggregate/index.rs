//! The transport index: key → slot in the aggregator's transport table.
//! Its buckets hold only slot numbers (4 bytes each, half a MiB at
//! 100,000 transports, so it stays in cache); a lookup compares the key
//! stored in the slot it finds, which the event's update reads next anyway.
//!
//! In front of it, a direct-mapped table of [`HINTS`] slot numbers found
//! by a cheap mix of the client's address and port: a transport's events
//! come in runs (a dispatch's enqueue, dequeue and execution), and the
//! seeded hash and the probe cost more than the record's decoding. A hint
//! is only a guess, checked against the key in its slot, so a stale one
//! (its transport gone, its slot reused) or a collision costs one compare
//! before the seeded index answers; clients choosing ports can make hints
//! miss, never make a lookup wrong or longer than the index's own.

use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::Xprt;
use crate::keyhash::PeerHashState;
use crate::model::{Endpoint, XprtKey};

/// Hints kept (64 KiB, so they stay in a core's cache): at 4,000 busy
/// transports most find their own.
const HINT_BITS: u32 = 14;
pub(super) const HINTS: usize = 1 << HINT_BITS;

pub(super) struct XprtIndex {
    table: HashTable<u32>,
    /// Seeded: clients choose their ports (see `crate::keyhash`).
    state: PeerHashState,
    /// Slot numbers by [`hint_of`]; `u32::MAX`: none yet.
    hints: Box<[u32; HINTS]>,
}

impl Default for XprtIndex {
    fn default() -> Self {
        XprtIndex {
            table: HashTable::new(),
            state: PeerHashState::default(),
            hints: Box::new([u32::MAX; HINTS]),
        }
    }
}

/// Where a key's hint is: the client's address and port (what differs
/// between a server's transports) mixed by one multiply.
#[inline]
fn hint_of(key: &XprtKey) -> usize {
    let word = match key.client {
        Endpoint::V4 { ip, port } => u64::from(port) << 32 | u64::from(u32::from_ne_bytes(ip)),
        Endpoint::V6 { ip, port } => {
            let (hi, lo) = ip.split_at(8);
            let fold = u64::from_ne_bytes(hi.try_into().unwrap_or_default())
                ^ u64::from_ne_bytes(lo.try_into().unwrap_or_default()).rotate_left(29);
            fold ^ u64::from(port) << 48
        }
        Endpoint::None => u64::from(key.netns),
    };
    (word.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - HINT_BITS)) as usize
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
    pub fn get(&mut self, key: &XprtKey, slots: &[Option<Xprt>]) -> Option<u32> {
        let hint = hint_of(key);
        let guess = self.hints[hint];
        if key_at(slots, guess) == Some(key) {
            return Some(guess);
        }
        let xi = self
            .table
            .find(self.hash_of(key), |&xi| key_at(slots, xi) == Some(key))
            .copied()?;
        self.hints[hint] = xi;
        Some(xi)
    }

    /// Indexes slot `xi`, which already holds its transport.
    pub fn insert(&mut self, xi: u32, slots: &[Option<Xprt>]) {
        let Some(key) = key_at(slots, xi) else {
            return;
        };
        self.hints[hint_of(key)] = xi;
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

    fn xprt(key: XprtKey) -> Option<Xprt> {
        Some(Xprt {
            key,
            peer: 0,
            class: 0,
            queued: false,
            enqueued_ns: 0,
            dispatches: 0,
            last_ns: 0,
            kernel_class: None,
        })
    }

    /// Two transports of one client whose hints share a place.
    fn colliding() -> (XprtKey, XprtKey) {
        let a = chosen::key([192, 0, 2, 7], 700);
        let b = (701..=u16::MAX)
            .map(|port| chosen::key([192, 0, 2, 7], port))
            .find(|b| hint_of(b) == hint_of(&a))
            .expect("16,384 places, 64,835 ports");
        (a, b)
    }

    /// A hint is a guess: transports sharing one, a transport gone and
    /// its slot reused by another are all found by their own keys.
    #[test]
    fn a_stale_or_shared_hint_never_finds_another_transport() {
        let (a, b) = colliding();
        let c = chosen::key([198, 51, 100, 1], 2049);
        let mut index = XprtIndex::default();
        let mut slots = vec![xprt(a), xprt(b)];
        index.insert(0, &slots);
        index.insert(1, &slots);
        for _ in 0..2 {
            assert_eq!(index.get(&a, &slots), Some(0));
            assert_eq!(index.get(&b, &slots), Some(1));
        }
        // a leaves; c takes its slot: a's hint now names c's slot.
        index.remove(0, &slots);
        slots[0] = xprt(c);
        index.insert(0, &slots);
        assert_eq!(index.get(&a, &slots), None);
        assert_eq!(index.get(&c, &slots), Some(0));
        assert_eq!(index.get(&b, &slots), Some(1));
        assert_eq!(index.len(), 2);
    }

    #[test]
    fn ports_a_client_chose_against_fxhash_do_not_share_a_bucket() {
        let keys = chosen::keys();
        let index = XprtIndex::default();
        let spread = chosen::buckets(&keys, |k| index.hash_of(k));
        assert!(spread >= 32, "{spread} buckets for 64 chosen transports");
    }
}
