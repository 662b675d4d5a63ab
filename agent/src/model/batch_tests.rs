//! The batch entity against the snapshot's: the same key holds the same
//! number in both, every entity field is in the batch line or named as
//! the snapshot's alone, and lines read back (older ones too) keep what
//! they had.

use serde_json::{Map, Value};

use super::*;
use crate::model::{
    ClientName, DepthHistogram, EntityKind, OperationStats, ProcName, ProcedureStats, Snapshot,
    TransportStats,
};
use crate::present::output::{json_line, BatchRecord};

/// The entity fields the batch line leaves out (docs/json.md, "Snapshot
/// entity"). A new field of `EntityStats` is here or a batch key.
const SNAPSHOT_ONLY: &[&str] = &[
    "netns",
    "interval_dispatches",
    "interval_entitled",
    "backlogged",
    "queued_transports",
    "wait_histogram",
    "transports",
];

/// An entity with every field set, each to a value of its own (so that a
/// key written with another field's value shows).
fn entity() -> EntityStats {
    let mut wait_histogram = crate::model::histogram::WaitHistogram::default();
    wait_histogram.record_us(40);
    EntityStats {
        name: "10.0.0.2".into(),
        kind: EntityKind::Peer,
        class: "lab".into(),
        dispatches: 1,
        dispatch_rate: 2.5,
        share: 0.25,
        entitled: 3.5,
        fairness: Some(0.75),
        wait_p50_us: 4.5,
        wait_p99_us: 5.5,
        exec_share: 0.125,
        connections: 6,
        netns: 7,
        interval_dispatches: 8,
        interval_entitled: 9.5,
        fair_share: 0.375,
        backlogged: true,
        queued_transports: 10,
        exec_seconds: 11.5,
        inflight_mean: 12.5,
        exec_mean_us: Some(812.5),
        executions: 13,
        requests: 14,
        request_rate: 15.5,
        bytes_in: Some(16),
        bytes_out: Some(17),
        bytes_in_rate: Some(18.5),
        bytes_out_rate: Some(19.5),
        procedures: [(
            ProcName::new("READ"),
            ProcedureStats {
                requests: 20,
                request_rate: 21.5,
                exec_seconds: 22.5,
                timed: 23,
                exec_p99_us: Some(24.5),
            },
        )]
        .into_iter()
        .collect(),
        nfs4_operations: [(
            25,
            OperationStats {
                count: 26,
                rate: 27.5,
            },
        )]
        .into_iter()
        .collect(),
        enqueue_depth: Some(DepthHistogram {
            counts: [28, 29, 30, 31, 32, 33, 34, 35],
            sum: 36,
        }),
        depth0_share: Some(0.625),
        enqueue_depth_mean: Some(37.5),
        enqueue_depth_max: Some(38),
        backlogged_seconds: 39.5,
        wait_histogram,
        transports: vec![TransportStats {
            client: "10.0.0.2:700".into(),
            server: "10.0.0.1:2049".into(),
            dispatches: 41,
            queued: true,
        }],
        client_names: vec![ClientName {
            name: "Linux NFSv4.2 host1".into(),
            minor_version: Some(2),
            implementation: Some("kernel".into()),
        }],
        hostname: Some("host1.example".into()),
    }
}

fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        o => panic!("not an object: {o}"),
    }
}

/// The entity of a batch line of `s`'s peers, as JSON.
fn batch_entity(s: &Snapshot) -> Map<String, Value> {
    let line: Value = serde_json::from_str(&json_line(s, EntityKind::Peer, None)).unwrap();
    object(line["entities"][0].clone())
}

fn snapshot_of(e: EntityStats) -> Snapshot {
    Snapshot {
        peers: vec![e],
        ..Snapshot::default()
    }
}

#[test]
fn batch_and_snapshot_agree_on_every_shared_key() {
    let s = snapshot_of(entity());
    let snapshot = object(serde_json::to_value(&s).unwrap()["peers"][0].clone());
    let batch = batch_entity(&s);
    // The line's keys are the batch keys, in their order.
    let mut keys: Vec<&str> = batch.keys().map(String::as_str).collect();
    let mut expected = BatchEntity::KEYS.to_vec();
    keys.sort_unstable();
    expected.sort_unstable();
    assert_eq!(keys, expected);
    let written = json_line(&s, EntityKind::Peer, None);
    let mut at = written.find("\"entities\":").unwrap();
    for k in BatchEntity::KEYS {
        let found = written[at..]
            .find(&format!("\"{k}\":"))
            .unwrap_or_else(|| panic!("{k}: not in order in {written}"));
        at += found + 1;
    }
    for (k, v) in &batch {
        assert_eq!(snapshot.get(k), Some(v), "{k}: the batch line's differs");
    }
    // Every field of the entity is in the batch line or the snapshot's alone.
    for k in snapshot.keys() {
        assert!(
            batch.contains_key(k) != SNAPSHOT_ONLY.contains(&k.as_str()),
            "{k}: a batch key or in SNAPSHOT_ONLY, not both or neither"
        );
    }
    assert_eq!(snapshot.len(), batch.len() + SNAPSHOT_ONLY.len());
}

#[test]
fn a_line_reads_back_as_the_snapshots_entity_and_writes_the_same() {
    let e = entity();
    let written = json_line(&snapshot_of(e.clone()), EntityKind::Peer, None);
    let rec: BatchRecord<'static> = serde_json::from_str(&written).unwrap();
    let read = &rec.entities[0];
    assert!(BatchEntity::KEYS.iter().all(|k| read.has(k)));
    assert!(!read.has("netns") && !read.has("no such key"));
    // The snapshot's alone read as their defaults; the rest as written.
    let only_batch = EntityStats {
        netns: 0,
        interval_dispatches: 0,
        interval_entitled: 0.0,
        backlogged: false,
        queued_transports: 0,
        wait_histogram: Default::default(),
        transports: Vec::new(),
        ..e
    };
    assert_eq!(**read, only_batch);
    assert_eq!(serde_json::to_string(&rec).unwrap(), written);
}

#[test]
fn an_older_line_lacks_the_added_keys_and_a_missing_required_one_fails() {
    let written = json_line(&snapshot_of(entity()), EntityKind::Peer, None);
    let mut v: Value = serde_json::from_str(&written).unwrap();
    let old = ["inflight_mean", "requests", "request_rate", "enqueue_depth"];
    for k in old {
        v["entities"][0].as_object_mut().unwrap().remove(k).unwrap();
    }
    let rec: BatchRecord<'static> = serde_json::from_value(v.clone()).unwrap();
    let e = &rec.entities[0];
    for k in old {
        assert!(!e.has(k), "{k}");
    }
    assert!(e.has("bytes_in") && e.has("executions"));
    assert_eq!(
        (e.requests, e.inflight_mean, e.enqueue_depth),
        (0, 0.0, None)
    );
    assert_eq!(e.executions, 13);
    // Written back as it was read: without the keys it lacked.
    assert_eq!(serde_json::to_value(&rec).unwrap(), v);
    assert_eq!(
        *e,
        BatchEntity::from(rec.entities[0].stats.clone().into_owned()).without(&old)
    );
    for required in ["name", "executions"] {
        let mut v: Value = serde_json::from_str(&written).unwrap();
        v["entities"][0].as_object_mut().unwrap().remove(required);
        let err = serde_json::from_value::<BatchRecord<'static>>(v).expect_err(required);
        assert!(
            err.to_string()
                .contains(&format!("missing field `{required}`")),
            "{err}"
        );
    }
}
