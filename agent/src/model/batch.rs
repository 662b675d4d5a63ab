//! One entity of a batch JSON line (docs/json.md, "Batch entity"): the
//! snapshot's own [`EntityStats`] under a subset of its keys, not a type
//! of its own, so that a key names the same number in both contracts and
//! a new number reaches the batch line by one more key. The key list sits
//! beside `EntityStats` (`batch_keys!` in `snapshot.rs`); this file writes
//! an entity through it (borrowing, as a batch line is written every
//! interval) and reads one back, keeping which keys an older line lacked.

use std::borrow::Cow;
use std::ops::Deref;

use serde::de::{self, Deserializer};
use serde::ser::{SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};

use super::EntityStats;

/// Declares the batch entity's keys, in the order a line has them, each
/// the name of an `EntityStats` field (so a key cannot name another
/// number). `required`: in every batch line ever written, and a line
/// without one is refused; `added`: keys added since, which a line from
/// an older nfsdtop lacks ([`BatchEntity::has`]); `unless_empty`: left
/// out where empty, as the snapshot leaves them out.
macro_rules! batch_keys {
    (
        required: $($req:ident),+ ;
        added: $($add:ident),+ ;
        unless_empty: $($opt:ident if $empty:path),+ $(;)?
    ) => {
        impl $crate::model::BatchEntity<'_> {
            /// Every key of a batch entity, in the line's order.
            pub const KEYS: &'static [&'static str] = &[
                $(stringify!($req),)+ $(stringify!($add),)+ $(stringify!($opt),)+
            ];
            /// How many of [`Self::KEYS`] (the first ones) are required.
            pub(crate) const REQUIRED: usize = [$(stringify!($req)),+].len();

            /// Writes `e`'s keys but those in `absent` (bits by index in
            /// [`Self::KEYS`]).
            // The bit after the last added key is never read.
            #[allow(unused_assignments)]
            pub(crate) fn write_keys<S: ::serde::ser::SerializeStruct>(
                e: &$crate::model::EntityStats,
                absent: u64,
                st: &mut S,
            ) -> Result<(), S::Error> {
                $( st.serialize_field(stringify!($req), &e.$req)?; )+
                let mut bit = 1u64 << Self::REQUIRED;
                $(
                    if absent & bit == 0 {
                        st.serialize_field(stringify!($add), &e.$add)?;
                    }
                    bit <<= 1;
                )+
                $(
                    if !$empty(&e.$opt) {
                        st.serialize_field(stringify!($opt), &e.$opt)?;
                    }
                )+
                Ok(())
            }
        }
    };
}
pub(super) use batch_keys;

/// One entity (peer or class) of a batch JSON line: the snapshot's entity,
/// borrowed when a line is written, owned when one is read. Read through
/// it as an [`EntityStats`] (it derefs to one); a snapshot-only field
/// reads as its default, and a key an older line lacked reads as the
/// field's default too, which [`Self::has`] tells from a number that was
/// written (the workload and depth fields, `inflight_mean`).
#[derive(Clone, Debug, PartialEq)]
pub struct BatchEntity<'a> {
    pub stats: Cow<'a, EntityStats>,
    /// Keys of [`Self::KEYS`] the line read lacked, a bit each by index.
    absent: u64,
}

// `absent` has a bit per key.
const _: () = assert!(BatchEntity::KEYS.len() <= 64);

impl BatchEntity<'_> {
    /// Whether the entity has the batch key `key`: false where the line it
    /// was read from lacked it (written by an nfsdtop from before the key,
    /// or left out as empty), and for a key that is not a batch key.
    pub fn has(&self, key: &str) -> bool {
        Self::KEYS
            .iter()
            .position(|k| *k == key)
            .is_some_and(|i| self.absent & (1 << i) == 0)
    }

    /// The entity as read from a line without the `added` keys `keys`, as
    /// an older nfsdtop wrote it (for readers' tests).
    pub fn without(mut self, keys: &[&str]) -> Self {
        for (i, k) in Self::KEYS.iter().enumerate().skip(Self::REQUIRED) {
            if keys.contains(k) {
                self.absent |= 1 << i;
            }
        }
        self
    }
}

impl<'a> From<&'a EntityStats> for BatchEntity<'a> {
    fn from(e: &'a EntityStats) -> Self {
        BatchEntity {
            stats: Cow::Borrowed(e),
            absent: 0,
        }
    }
}

impl From<EntityStats> for BatchEntity<'static> {
    fn from(e: EntityStats) -> Self {
        BatchEntity {
            stats: Cow::Owned(e),
            absent: 0,
        }
    }
}

impl Deref for BatchEntity<'_> {
    type Target = EntityStats;
    fn deref(&self) -> &EntityStats {
        &self.stats
    }
}

impl Serialize for BatchEntity<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("BatchEntity", Self::KEYS.len())?;
        Self::write_keys(&self.stats, self.absent, &mut st)?;
        st.end()
    }
}

/// Reads the keys first, to refuse a line without a required one (a
/// renamed field fails instead of reading as 0) and to note the added
/// ones it lacks; then the entity from them, as the snapshot's reader does.
impl<'de> Deserialize<'de> for BatchEntity<'_> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = serde_json::Map::deserialize(d)?;
        let mut absent = 0u64;
        for (i, &key) in Self::KEYS.iter().enumerate() {
            if !map.contains_key(key) {
                if i < Self::REQUIRED {
                    return Err(de::Error::missing_field(key));
                }
                absent |= 1 << i;
            }
        }
        let stats =
            EntityStats::deserialize(serde_json::Value::Object(map)).map_err(de::Error::custom)?;
        Ok(BatchEntity {
            stats: Cow::Owned(stats),
            absent,
        })
    }
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
