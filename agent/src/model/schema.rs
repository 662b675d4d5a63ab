//! The `schema` field every JSON document of nfsdtop carries (the batch
//! record, the snapshot and stream, the unfair list, doctor's and
//! whatif's reports), and its rule (docs/json.md, "Schema"): one whole
//! number, raised only when a field is removed or changes its name, type,
//! unit or meaning. Fields are added without raising it, so a reader
//! ignores fields it does not know and refuses a schema above its own.

use serde::{Deserialize, Serialize};

/// The schema this build writes.
pub const SCHEMA: u32 = 1;

/// A document's schema: [`SCHEMA`] by default (so every document this
/// build makes says so), whatever was read when read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Schema(pub u32);

impl Default for Schema {
    fn default() -> Self {
        Schema(SCHEMA)
    }
}

impl Schema {
    /// What a document without the field is: from before it, schema 1.
    pub fn before_the_field() -> Schema {
        Schema(1)
    }

    /// Whether a reader of this build understands a document of this
    /// schema (its own or an older one: fields only ever get added).
    pub fn understood(self) -> bool {
        self.0 <= SCHEMA
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Snapshot;

    #[test]
    fn written_first_and_an_older_document_reads_as_schema_1() {
        let text = serde_json::to_string(&Snapshot::default()).unwrap();
        assert!(
            text.starts_with(&format!("{{\"schema\":{SCHEMA},")),
            "{text}"
        );
        // Before the field: no `schema` at all.
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v.as_object_mut().unwrap().remove("schema");
        let old: Snapshot = serde_json::from_value(v).unwrap();
        assert_eq!(old.schema, Schema(1));
        assert!(old.schema.understood());
        assert!(!Schema(SCHEMA + 1).understood());
    }
}
