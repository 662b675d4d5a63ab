//! An entity's requests per RPC procedure as snapshots carry them: a
//! short list sorted by name, exactly as large as it holds (a map node
//! per entity would cost several times more across 100,000 peers), and a
//! JSON object by name. Read from JSON, at most [`MAX_READ`] names are
//! kept, so a hostile snapshot cannot make a reader hold more.

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{ProcName, ProcedureStats};

/// Names read from one entity's JSON at most (the agent sends 33).
pub const MAX_READ: usize = 64;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Procedures(Vec<(ProcName, ProcedureStats)>);

impl Procedures {
    pub fn iter(&self) -> impl Iterator<Item = (&ProcName, &ProcedureStats)> {
        self.0.iter().map(|(n, s)| (n, s))
    }

    pub fn get(&self, name: &ProcName) -> Option<&ProcedureStats> {
        let i = self.0.binary_search_by(|(n, _)| n.cmp(name)).ok()?;
        Some(&self.0[i].1)
    }

    /// Set `name`'s numbers (kept sorted).
    pub fn insert(&mut self, name: ProcName, stats: ProcedureStats) {
        match self.0.binary_search_by(|(n, _)| n.cmp(&name)) {
            Ok(i) => self.0[i].1 = stats,
            Err(i) => self.0.insert(i, (name, stats)),
        }
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn clear(&mut self) {
        self.0 = Vec::new();
    }
}

impl FromIterator<(ProcName, ProcedureStats)> for Procedures {
    fn from_iter<I: IntoIterator<Item = (ProcName, ProcedureStats)>>(it: I) -> Self {
        let mut v: Vec<_> = it.into_iter().collect();
        v.sort_by_key(|a| a.0);
        v.dedup_by(|a, b| a.0 == b.0);
        v.shrink_to_fit();
        Procedures(v)
    }
}

impl std::ops::Index<&ProcName> for Procedures {
    type Output = ProcedureStats;
    fn index(&self, name: &ProcName) -> &ProcedureStats {
        self.get(name)
            .unwrap_or_else(|| panic!("no procedure {name}"))
    }
}

impl Serialize for Procedures {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (n, p) in &self.0 {
            m.serialize_entry(n, p)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Procedures {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ByName;
        impl<'de> Visitor<'de> for ByName {
            type Value = Procedures;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of procedure names")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Procedures, A::Error> {
                let mut v = Vec::new();
                while let Some((n, p)) = m.next_entry::<ProcName, ProcedureStats>()? {
                    if v.len() < MAX_READ {
                        v.push((n, p));
                    }
                }
                Ok(v.into_iter().collect())
            }
        }
        d.deserialize_map(ByName)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(requests: u64) -> ProcedureStats {
        ProcedureStats {
            requests,
            ..ProcedureStats::default()
        }
    }

    #[test]
    fn sorted_exact_and_a_json_object_read_back_bounded() {
        let p: Procedures = [("READ", 5), ("ACCESS", 1), ("READ", 9)]
            .into_iter()
            .map(|(n, r)| (ProcName::new(n), stats(r)))
            .collect();
        assert_eq!(p.len(), 2, "one READ kept");
        assert_eq!(p.0.capacity(), 2);
        let json = serde_json::to_string(&p).unwrap();
        assert!(json.starts_with(r#"{"ACCESS":{"requests":1,"#), "{json}");
        assert_eq!(serde_json::from_str::<Procedures>(&json).unwrap(), p);
        let mut q = p.clone();
        q.insert(ProcName::new("GETATTR"), stats(3));
        assert_eq!(q[&ProcName::new("GETATTR")].requests, 3);
        assert_eq!(
            q.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            ["ACCESS", "GETATTR", "READ"]
        );
        // A hostile object of 1,000 names: 64 kept.
        let many: String = (0..1000)
            .map(|i| format!(r#""P{i}":{{"requests":1,"request_rate":0,"exec_seconds":0}}"#))
            .collect::<Vec<_>>()
            .join(",");
        let big: Procedures = serde_json::from_str(&format!("{{{many}}}")).unwrap();
        assert_eq!(big.len(), MAX_READ);
    }
}
