//! An entity's NFSv4 operations (`--nfs4-ops`) as snapshots carry them:
//! a short list by operation number, and a JSON object by the operation's
//! name ("READ", "SEQUENCE": `nfsdtop_common::nfs4ops::NAMES`). Read from
//! JSON, names nfsdtop does not know are skipped and at most one entry per
//! number is kept, so a hostile snapshot cannot make a reader hold more.

use std::fmt;

use nfsdtop_common::nfs4ops;
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One operation's numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OperationStats {
    /// Cumulative.
    pub count: u64,
    /// Per second, this interval.
    pub rate: f64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Operations(Vec<(u8, OperationStats)>);

impl Operations {
    /// (name, numbers), by operation number.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &OperationStats)> {
        self.0.iter().map(|(op, s)| (nfs4ops::name(*op), s))
    }

    pub fn get(&self, name: &str) -> Option<&OperationStats> {
        self.iter().find(|(n, _)| *n == name).map(|(_, s)| s)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Operations counted over every entry.
    pub fn total(&self) -> u64 {
        self.0
            .iter()
            .fold(0u64, |a, (_, s)| a.saturating_add(s.count))
    }
}

impl FromIterator<(u8, OperationStats)> for Operations {
    fn from_iter<I: IntoIterator<Item = (u8, OperationStats)>>(it: I) -> Self {
        let mut v: Vec<_> = it.into_iter().collect();
        v.sort_by_key(|a| a.0);
        v.dedup_by_key(|a| a.0);
        v.shrink_to_fit();
        Operations(v)
    }
}

impl Serialize for Operations {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (name, stats) in self.iter() {
            m.serialize_entry(name, stats)?;
        }
        m.end()
    }
}

/// The number of the operation called `name` (`ILLEGAL`: [`nfs4ops::OP_UNKNOWN`]).
fn number(name: &str) -> Option<u8> {
    if name == nfs4ops::name(nfs4ops::OP_UNKNOWN) {
        return Some(nfs4ops::OP_UNKNOWN);
    }
    nfs4ops::NAMES
        .iter()
        .position(|n| !n.is_empty() && *n == name)
        .map(|i| i as u8)
}

impl<'de> Deserialize<'de> for Operations {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Operations;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of NFSv4 operation names")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Operations, A::Error> {
                let mut v = Vec::new();
                while let Some((name, stats)) =
                    m.next_entry::<std::borrow::Cow<'de, str>, OperationStats>()?
                {
                    if let Some(op) = number(&name) {
                        if v.len() < 256 {
                            v.push((op, stats));
                        }
                    }
                }
                Ok(v.into_iter().collect())
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_by_name_round_trips_and_skips_unknown_names() {
        let ops: Operations = [
            (
                25,
                OperationStats {
                    count: 7,
                    rate: 1.5,
                },
            ),
            (
                53,
                OperationStats {
                    count: 9,
                    rate: 2.0,
                },
            ),
            (
                nfs4ops::OP_UNKNOWN,
                OperationStats {
                    count: 1,
                    rate: 0.0,
                },
            ),
        ]
        .into_iter()
        .collect();
        let j = serde_json::to_string(&ops).unwrap();
        assert_eq!(
            j,
            r#"{"READ":{"count":7,"rate":1.5},"SEQUENCE":{"count":9,"rate":2.0},"ILLEGAL":{"count":1,"rate":0.0}}"#
        );
        assert_eq!(serde_json::from_str::<Operations>(&j).unwrap(), ops);
        let odd: Operations =
            serde_json::from_str(r#"{"READ":{"count":1,"rate":0},"NOPE":{"count":5,"rate":0}}"#)
                .unwrap();
        assert_eq!((odd.len(), odd.total()), (1, 1));
        assert_eq!(ops.get("SEQUENCE").map(|s| s.count), Some(9));
    }
}
