//! Golden files: the batch JSON line, the CSV (header and rows), the
//! batch text, for peers and classes, and the snapshot's JSON (what
//! /api/v1/snapshot serves), byte for byte, for one deterministic
//! scenario simulated as fast as possible. They pin the external
//! contracts while the presentation code changes underneath. The clock's
//! time is the only field set to 0 (it is the wall clock's). Set
//! `NFSDTOP_BLESS=1` to rewrite the files after an intended change, and
//! name the change in CHANGELOG.md.

mod common;

use std::path::PathBuf;

use nfsdtop_agent::pipeline::Flow;

/// The input of every golden file here and of nfsdtopd's
/// (exporter/tests/golden.rs).
use nfsdtop_testkit::{golden_pipeline, GOLDEN_SCENARIO as SCENARIO};

fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

/// `got` against the golden file `name` (rewritten under NFSDTOP_BLESS=1).
fn check(name: &str, got: &str) {
    let path = golden(name);
    if std::env::var("NFSDTOP_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (NFSDTOP_BLESS=1 writes it)", path.display()));
    assert!(
        got == want,
        "{name} differs from its golden file (NFSDTOP_BLESS=1 rewrites it after an intended change)\n--- want\n{want}\n--- got\n{got}"
    );
}

/// The batch output of two one-second iterations.
fn batch(tag: &str, extra: &[&str]) -> String {
    let file = common::scenario(&format!("golden-{tag}"), SCENARIO);
    let mut args = vec![
        "--demo",
        file.to_str().unwrap(),
        "-b",
        "-n",
        "2",
        "-d",
        "1",
        "--speed",
        "0",
    ];
    args.extend_from_slice(extra);
    let out = common::nfsdtop(&args);
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
    out
}

/// A JSON line with its wall-clock time set to 0, byte for byte
/// otherwise (the order of the keys is part of what is pinned).
fn json_without_time(line: &str) -> String {
    const KEY: &str = "\"time\":";
    let at = line.find(KEY).expect("a time") + KEY.len();
    let end = at + line[at..].find(',').expect("more after the time");
    assert!(line[at..end].parse::<f64>().is_ok(), "{line}");
    format!("{}0{}", &line[..at], &line[end..])
}

/// A CSV row with its wall-clock time (the first cell) set to 0.
fn csv_without_time(line: &str) -> String {
    match line.split_once(',') {
        Some((t, rest)) if t.parse::<f64>().is_ok() => format!("0.000,{rest}"),
        _ => line.to_string(),
    }
}

fn lines(out: &str, f: fn(&str) -> String) -> String {
    out.lines().map(|l| f(l) + "\n").collect()
}

#[test]
fn batch_json_lines() {
    check(
        "batch-peer.jsonl",
        &lines(&batch("json", &["--format", "json"]), json_without_time),
    );
    check(
        "batch-class.jsonl",
        &lines(
            &batch("json-class", &["--format", "json", "--group", "class"]),
            json_without_time,
        ),
    );
}

#[test]
fn batch_csv() {
    check(
        "batch-peer.csv",
        &lines(&batch("csv", &["--format", "csv"]), csv_without_time),
    );
    check(
        "batch-class.csv",
        &lines(
            &batch("csv-class", &["--format", "csv", "--group", "class"]),
            csv_without_time,
        ),
    );
}

#[test]
fn batch_text() {
    check("batch-peer.txt", &batch("text", &[]));
    check(
        "batch-class.txt",
        &batch("text-class", &["--group", "class"]),
    );
}

/// The snapshot as /api/v1/snapshot serialises it (`Snapshot`'s serde
/// form), the second of two one-second snapshots.
#[test]
fn snapshot_json() {
    let p = golden_pipeline();
    let mut snaps = Vec::new();
    p.run(None, |s| {
        snaps.push(s);
        if snaps.len() == 2 {
            Flow::Stop
        } else {
            Flow::Continue
        }
    })
    .unwrap();
    let mut s = snaps.pop().unwrap();
    s.time = 0.0;
    let text = serde_json::to_string_pretty(&s).unwrap() + "\n";
    check("snapshot.json", &text);
}
