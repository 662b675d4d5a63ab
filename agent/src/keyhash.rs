//! The hash of every map keyed by what other hosts choose: client
//! addresses and ports (transports, peers, a recording's transports,
//! the exporter's series). FxHash, fast elsewhere in nfsdtop, is the same
//! function in every process: a client that opens connections from ports
//! (or, over IPv6, addresses) picked offline can put all its transports in
//! one bucket chain, and every event of every transport then walks it.
//! foldhash, seeded at random per process, costs about the same per key
//! and leaves nothing to pick offline.

use std::hash::{BuildHasher, Hash};
use std::sync::OnceLock;

/// A map's hasher state: seeded at random (per process and per map).
pub type PeerHashState = foldhash::fast::RandomState;

/// A map keyed by addresses, ports or names that other hosts choose.
pub type PeerHashMap<K, V> = std::collections::HashMap<K, V, PeerHashState>;

/// `value`'s hash under one seed for the whole process: for identities
/// that must agree between maps and snapshots (the exporter's series).
pub fn process_hash(value: &impl Hash) -> u64 {
    static STATE: OnceLock<PeerHashState> = OnceLock::new();
    STATE.get_or_init(PeerHashState::default).hash_one(value)
}

/// What a hostile client can do offline against an unseeded hash, and
/// how its keys land under another: shared by the maps' own tests.
#[cfg(test)]
pub(crate) mod chosen {
    use std::hash::{Hash, Hasher};

    use rustc_hash::FxHasher;

    use crate::model::{Endpoint, XprtKey};

    /// Bucket bits of a 1,024-bucket table (hashbrown indexes by the
    /// hash's low bits).
    const BUCKETS: u64 = 1023;

    pub fn fx(key: &XprtKey) -> u64 {
        let mut h = FxHasher::default();
        key.hash(&mut h);
        h.finish()
    }

    pub fn key(ip: [u8; 4], port: u16) -> XprtKey {
        XprtKey {
            netns: 4026531840,
            server: Endpoint::V4 {
                ip: [10, 0, 0, 1],
                port: 2049,
            },
            client: Endpoint::V4 { ip, port },
        }
    }

    /// 64 transports from one address and ports picked so that FxHash
    /// puts them all in one bucket.
    pub fn keys() -> Vec<XprtKey> {
        let ip = [192, 0, 2, 7];
        let target = fx(&key(ip, 1)) & BUCKETS;
        (1..=u16::MAX)
            .map(|port| key(ip, port))
            .filter(|k| fx(k) & BUCKETS == target)
            .take(64)
            .collect()
    }

    /// The buckets `keys` take under `hash`. 64 random keys in 1,024
    /// buckets take ~62; 32 is far below what a seeded hash misses by
    /// chance.
    pub fn buckets(keys: &[XprtKey], hash: impl Fn(&XprtKey) -> u64) -> usize {
        let mut b: Vec<u64> = keys.iter().map(|k| hash(k) & BUCKETS).collect();
        b.sort_unstable();
        b.dedup();
        b.len()
    }
}

#[cfg(test)]
mod tests {
    use super::chosen::{buckets, fx, key, keys};
    use super::*;

    #[test]
    fn ports_chosen_against_fxhash_spread_under_the_peer_hash() {
        let keys = keys();
        assert_eq!(keys.len(), 64, "FxHash collisions are easy to find");
        assert_eq!(buckets(&keys, fx), 1);
        let state = PeerHashState::default();
        let spread = buckets(&keys, |k| state.hash_one(k));
        assert!(spread >= 32, "{spread} buckets for 64 chosen keys");
        let spread = buckets(&keys, process_hash);
        assert!(spread >= 32, "{spread} buckets (process hash)");
    }

    #[test]
    fn the_process_hash_is_one_function_within_the_process() {
        let k = key([192, 0, 2, 8], 700);
        assert_eq!(process_hash(&k), process_hash(&k.clone()));
        assert_ne!(process_hash(&k), process_hash(&key([192, 0, 2, 8], 701)));
    }
}
