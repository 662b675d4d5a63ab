//! `nfsdtop record` and `nfsdtop --replay` end to end, as a user runs them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use nfsdtop_agent::record;

fn nfsdtop() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nfsdtop-record-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null()).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// "... (N dispatches, ..." from the recorder's summary line.
fn summary_number(stderr: &str, what: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("nfsdtop: recorded "))
        .unwrap_or_else(|| panic!("no summary in {stderr:?}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let i = words
        .iter()
        .position(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '/') == what)
        .unwrap_or_else(|| panic!("no {what:?} in {line:?}"));
    words[i - 1]
        .trim_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .unwrap_or_else(|_| panic!("no number before {what:?} in {line:?}"))
}

/// Replay `path` as fast as possible in batch JSON; the last line's
/// cumulative dispatches, and stderr.
fn replay_dispatches(path: &Path) -> (u64, String) {
    let o = run(nfsdtop()
        .arg("--replay")
        .arg(path)
        .args(["-b", "--speed", "0", "--format", "json"]));
    let err = stderr(&o);
    assert!(o.status.success(), "replay failed: {err}");
    let stdout = String::from_utf8(o.stdout).unwrap();
    let last = stdout.lines().last().expect("at least one snapshot");
    let v: serde_json::Value = serde_json::from_str(last).unwrap();
    assert_eq!(v["source"]["kind"], "replay");
    (v["totals"]["dispatches"].as_u64().unwrap(), err)
}

#[test]
fn a_recorded_demo_replays_to_the_recorders_count() {
    let f = tmp("k8.nfsdrec");
    let o = run(nfsdtop().args(["record", "-o"]).arg(&f).args([
        "--demo",
        "seed-k8",
        "--speed",
        "0",
        "--duration",
        "5",
    ]));
    let err = stderr(&o);
    assert!(o.status.success(), "record failed: {err}");
    assert!(err.contains("--duration reached"), "{err}");
    let dispatches = summary_number(&err, "dispatches");
    let events = summary_number(&err, "events");
    let bytes = summary_number(&err, "bytes");
    // 16 threads, 10 ms a request: 1600 dispatches a second.
    assert!((7_900..=8_100).contains(&dispatches), "{err}");
    assert_eq!(bytes, std::fs::metadata(&f).unwrap().len());
    assert!(
        (bytes as f64 / events as f64) < 8.0,
        "compact: {bytes} bytes for {events} events"
    );
    let (replayed, rerr) = replay_dispatches(&f);
    assert_eq!(replayed, dispatches);
    assert!(!rerr.contains("recording"), "an intact file: {rerr}");
    assert_eq!(
        record::read_file(&f).unwrap().events.len() as u64,
        events,
        "the file holds what the summary says"
    );
}

#[test]
fn count_stops_after_exactly_that_many_events() {
    let f = tmp("count.nfsdrec");
    let o = run(nfsdtop()
        .args(["record", "-o"])
        .arg(&f)
        .args(["--demo", "movers", "--speed", "0", "--count", "12345"]));
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("--count reached"), "{err}");
    let c = record::read_file(&f).unwrap();
    assert!(c.damage.is_none());
    assert_eq!(c.events.len(), 12_345);
    // The movers class map went into the file and comes back on replay.
    assert!(
        c.header.class_map.contains("movers"),
        "{}",
        c.header.class_map
    );
    let o = run(nfsdtop()
        .arg("--replay")
        .arg(&f)
        .args(["-b", "--speed", "0", "--format", "json", "--group", "class"]));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("\"name\":\"movers\""), "{out}");
}

#[test]
fn a_sigtermed_recording_is_finished_and_replays_cleanly() {
    signalled_recording_is_finished("TERM");
}

#[test]
fn a_sighupped_recording_is_finished_and_replays_cleanly() {
    // The terminal of an interactive `nfsdtop record` went away.
    signalled_recording_is_finished("HUP");
}

fn signalled_recording_is_finished(sig: &str) {
    let f = tmp(&format!("{sig}.nfsdrec"));
    let mut child = nfsdtop()
        .args(["record", "-o"])
        .arg(&f)
        .args(["--demo", "seed-k8"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait (polling, with a deadline) until a frame is on disk.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let b = std::fs::read(&f).unwrap_or_default();
        if b.len() >= 20 {
            let hlen = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
            if b.len() > 20 + hlen {
                break;
            }
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the recorder exited early"
        );
        assert!(Instant::now() < deadline, "the recording never grew");
        std::thread::sleep(Duration::from_millis(20));
    }
    let kill = Command::new("kill")
        .args([&format!("-{sig}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the recorder ignored SIG{sig}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert!(status.success(), "{status:?}: {err}");
    assert!(err.contains("(interrupted)"), "{err}");
    let dispatches = summary_number(&err, "dispatches");
    assert!(dispatches > 0, "{err}");
    // Finished: end marker, nothing damaged, everything replays.
    let c = record::read_file(&f).unwrap();
    assert_eq!(c.damage, None);
    assert_eq!(c.events.len() as u64, summary_number(&err, "events"));
    let (replayed, rerr) = replay_dispatches(&f);
    assert_eq!(replayed, dispatches);
    assert!(
        !rerr.contains("damaged") && !rerr.contains("truncated"),
        "{rerr}"
    );
}

#[test]
fn damaged_and_newer_recordings_are_explained() {
    let f = tmp("whole.nfsdrec");
    let o = run(nfsdtop().args(["record", "-o"]).arg(&f).args([
        "--demo",
        "seed-k4",
        "--speed",
        "0",
        "--duration",
        "10",
    ]));
    assert!(o.status.success(), "{}", stderr(&o));
    let total = summary_number(&stderr(&o), "dispatches");
    let bytes = std::fs::read(&f).unwrap();

    // Cut in half: the intact part replays, and stderr says where it stops.
    let cut = tmp("cut.nfsdrec");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let (replayed, err) = replay_dispatches(&cut);
    assert!(replayed > 0 && replayed < total, "{replayed} of {total}");
    assert!(
        err.contains("is truncated at byte") && err.contains("(frame "),
        "{err}"
    );
    assert!(err.contains("events before it"), "{err}");

    // One byte flipped mid-file.
    let mut b = bytes.clone();
    let mid = b.len() / 2;
    b[mid] ^= 0x5a;
    let bad = tmp("bad.nfsdrec");
    std::fs::write(&bad, &b).unwrap();
    let (replayed, err) = replay_dispatches(&bad);
    assert!(replayed < total);
    assert!(
        err.contains("is corrupt at byte") && err.contains("checksum"),
        "{err}"
    );

    // From a newer nfsdtop: refused, with what to do.
    let mut b = bytes.clone();
    b[8..10].copy_from_slice(&(record::FORMAT_VERSION + 1).to_le_bytes());
    let newer = tmp("newer.nfsdrec");
    std::fs::write(&newer, &b).unwrap();
    let o = run(nfsdtop().arg("--replay").arg(&newer).args(["-b"]));
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "recorded by format v{}",
            record::FORMAT_VERSION + 1
        )) && err.contains("upgrade nfsdtop"),
        "{err}"
    );
}

#[test]
fn an_existing_file_is_overwritten_only_with_force() {
    let f = tmp("exists.nfsdrec");
    std::fs::write(&f, b"keep me").unwrap();
    let rec = |force: bool| {
        let mut c = nfsdtop();
        c.args(["record", "-o"])
            .arg(&f)
            .args(["--demo", "movers", "--speed", "0", "--count", "100"]);
        if force {
            c.arg("--force");
        }
        run(&mut c)
    };
    let o = rec(false);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(err.contains("already exists: pass --force"), "{err}");
    assert_eq!(std::fs::read(&f).unwrap(), b"keep me");
    let o = rec(true);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(record::read_file(&f).unwrap().events.len(), 100);
    // A device holds no file to lose: no --force needed.
    let o = run(nfsdtop()
        .args(["record", "-o", "/dev/null", "--demo", "movers"])
        .args(["--speed", "0", "--count", "100"]));
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn recording_over_the_replayed_file_is_refused_even_with_force() {
    let f = tmp("same.nfsdrec");
    let o = run(nfsdtop()
        .args(["record", "-o"])
        .arg(&f)
        .args(["--demo", "movers", "--speed", "0", "--count", "1000"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let before = std::fs::read(&f).unwrap();
    // The same file by another name: a hard link.
    let link = tmp("same-link.nfsdrec");
    let _ = std::fs::remove_file(&link);
    std::fs::hard_link(&f, &link).unwrap();
    for out in [&f, &link] {
        let o = run(nfsdtop()
            .args(["record", "--force", "--speed", "0", "--replay"])
            .arg(&f)
            .arg("-o")
            .arg(out));
        let err = stderr(&o);
        assert!(!o.status.success(), "{err}");
        assert!(err.contains("is the recording being replayed"), "{err}");
    }
    assert_eq!(
        std::fs::read(&f).unwrap(),
        before,
        "the recording is intact"
    );
}
