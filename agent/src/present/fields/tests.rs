//! The field table against the contracts it describes: every JSON key is
//! in both JSON forms of an entity, names are unique where they must be,
//! and every TUI column has a place and words in the manual.

use std::collections::HashSet;

use super::*;
use crate::model::{EntityKind, EntityStats};
use crate::present::output::json_line;

fn entity() -> EntityStats {
    EntityStats {
        name: "10.0.0.2".into(),
        kind: EntityKind::Peer,
        class: "lab".into(),
        fairness: Some(1.0),
        bytes_in: Some(1),
        bytes_out: Some(2),
        bytes_in_rate: Some(1.0),
        bytes_out_rate: Some(2.0),
        ..EntityStats::default()
    }
}

/// The keys of one entity's JSON object.
fn keys(v: &serde_json::Value) -> HashSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

#[test]
fn every_json_key_is_in_both_json_forms_of_an_entity() {
    let e = entity();
    let snapshot = keys(&serde_json::to_value(&e).unwrap());
    let s = Snapshot {
        peers: vec![e],
        ..Snapshot::default()
    };
    let line: serde_json::Value =
        serde_json::from_str(&json_line(&s, EntityKind::Peer, None)).unwrap();
    let batch = keys(&line["entities"][0]);
    for f in FIELDS {
        assert!(
            snapshot.contains(f.json),
            "{}: not in the snapshot's",
            f.json
        );
        assert!(
            batch.contains(f.json),
            "{}: not in the batch line's",
            f.json
        );
    }
}

#[test]
fn names_are_unique_where_a_reader_looks_one_up() {
    let unique = |what: &str, names: Vec<&str>| {
        let mut seen = HashSet::new();
        for n in names {
            assert!(seen.insert(n.to_ascii_lowercase()), "{what}: {n} twice");
        }
    };
    unique("json", FIELDS.iter().map(|f| f.json).collect());
    unique(
        "csv",
        FIELDS
            .iter()
            .filter_map(|f| f.csv)
            .map(|c| c.header)
            .collect(),
    );
    unique(
        "text",
        FIELDS
            .iter()
            .filter_map(|f| f.text)
            .map(|t| t.title)
            .collect(),
    );
    unique(
        "tui",
        FIELDS
            .iter()
            .filter_map(|f| f.tui)
            .map(|t| t.title)
            .collect(),
    );
    for f in FIELDS {
        if let Some(t) = f.tui {
            assert!(
                t.fairness.is_some() || t.workload.is_some(),
                "{f:?}: in no view"
            );
            assert!(!f.doc.is_empty(), "{f:?}: the manual has nothing to say");
            assert!(
                t.title.chars().count() < usize::from(t.width),
                "{f:?}: no room for the sort arrow"
            );
        }
    }
}

/// A cell for every value and its absence; the table's formatter for
/// each unit.
#[test]
fn cells_and_text_of_a_field() {
    let mut e = entity();
    e.share = 0.0834;
    e.bytes_in_rate = None;
    assert_eq!(SHARE.show(&e), "8.3%");
    assert_eq!(SHARE.csv_cell(&e), "0.083400");
    assert_eq!(BYTES_IN_RATE.show(&e), "-");
    assert_eq!(BYTES_IN_RATE.csv_cell(&e), "");
    assert!(BYTES_IN_RATE.key(&e) < BYTES_IN_RATE.key(&entity()));
    assert_eq!(BYTES_OUT.csv_cell(&e), "2");
    assert_eq!(Field::by_json("share"), Some(&SHARE));
}
