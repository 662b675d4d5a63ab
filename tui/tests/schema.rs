//! Every JSON document nfsdtop prints says its schema first
//! (docs/json.md, "Schema"): the batch record, doctor's report and
//! whatif's report.

use std::process::{Command, Stdio};

use nfsdtop_agent::model::SCHEMA;

fn stdout(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run nfsdtop");
    String::from_utf8(o.stdout).unwrap()
}

fn first() -> String {
    format!("{{\"schema\":{SCHEMA},")
}

#[test]
fn the_batch_record_says_its_schema_first() {
    let out = stdout(&[
        "--demo", "seed-k4", "-b", "-n", "2", "--speed", "0", "--format", "json",
    ]);
    assert_eq!(out.lines().count(), 2, "{out}");
    for line in out.lines() {
        assert!(line.starts_with(&first()), "{line}");
    }
}

#[test]
fn doctor_and_whatif_reports_say_their_schema() {
    let dir = std::env::temp_dir().join(format!("nfsdtop-schema-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("events/sched")).unwrap();
    let doctor = stdout(&[
        "doctor",
        "--format",
        "json",
        "--tracefs",
        dir.to_str().unwrap(),
    ]);
    assert!(doctor.starts_with(&first()), "{doctor}");

    let rec = dir.join("k4.nfsdrec");
    let rec = rec.to_str().unwrap();
    stdout(&[
        "record",
        "--demo",
        "seed-k4",
        "--speed",
        "0",
        "--duration",
        "5",
        "-o",
        rec,
    ]);
    let w: serde_json::Value =
        serde_json::from_str(&stdout(&["whatif", rec, "--format", "json"])).expect("JSON");
    assert_eq!(w["schema"], SCHEMA, "{w}");
    let _ = std::fs::remove_dir_all(&dir);
}
