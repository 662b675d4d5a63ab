//! Every JSON document nfsdtopd serves says its schema first
//! (docs/json.md, "Schema"): the snapshot (and so each stream event, the
//! same encoding) and the unfair list.

mod common;

use common::Daemon;
use nfsdtop_agent::model::SCHEMA;

#[test]
fn the_snapshot_and_the_unfair_list_say_their_schema_first() {
    let d = Daemon::start(&[
        "--demo",
        "seed-k16",
        "--listen",
        "127.0.0.1:0",
        "--speed",
        "8",
        "--interval",
        "0.25",
    ]);
    let first = format!("{{\"schema\":{SCHEMA},");
    let snap = d.wait_for("a snapshot", 20, |d| {
        let r = d.get("/api/v1/snapshot?group=peer");
        (r.status == 200).then_some(r.body)
    });
    assert!(snap.starts_with(&first), "{}", &snap[..80.min(snap.len())]);
    let unfair = d.wait_for("the unfair list", 20, |d| {
        let r = d.get("/api/v1/unfair");
        (r.status == 200).then_some(r.body)
    });
    assert!(unfair.starts_with(&first), "{unfair}");
}
