//! Batch runs end on their own, against the real binary: a replay at any
//! speed when the recording ends (every snapshot printed, down to the one
//! with the recording's last events). Each run is killed, failing the
//! test, past a deadline.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Run nfsdtop to its exit, killing it and failing after `deadline`.
fn run_bounded(args: &[&str], deadline: Duration) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run nfsdtop");
    // Read on threads: a full pipe must not stall the child.
    let read_all = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = read_all(Box::new(child.stdout.take().unwrap()));
    let err = read_all(Box::new(child.stderr.take().unwrap()));
    // The child's exit, or the deadline, whichever comes first.
    let (tx, rx) = mpsc::channel();
    let pid = child.id();
    let waiter = std::thread::spawn(move || {
        let st = child.wait();
        let _ = tx.send(());
        st
    });
    if rx.recv_timeout(deadline).is_err() {
        let _ = Command::new("kill").arg(pid.to_string()).status();
        let st = waiter.join().unwrap();
        panic!(
            "nfsdtop {args:?} still running after {deadline:?} (killed: {st:?}); stdout: \
             {} lines; stderr: {}",
            out.join().unwrap().lines().count(),
            err.join().unwrap()
        );
    }
    let status = waiter.join().unwrap().unwrap();
    Run {
        code: status.code(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

fn records(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

/// 2.3 s of the demo: four 0.5 s intervals and a partial one of 0.3 s.
fn recording(dir: &Path) -> PathBuf {
    let rec = dir.join("demo.nfsdrec");
    let r = run_bounded(
        &[
            "record",
            "-o",
            rec.to_str().unwrap(),
            "--demo",
            "seed-k4",
            "--speed",
            "0",
            "--duration",
            "2.3",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    rec
}

#[test]
fn batch_replay_ends_with_the_recording_at_any_speed() {
    let dir = std::env::temp_dir().join(format!("nfsdtop-batch-ends-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = recording(&dir);
    let replay = |speed: &str, delay: &str| {
        let r = run_bounded(
            &[
                "--replay",
                rec.to_str().unwrap(),
                "-b",
                "--format",
                "json",
                "--speed",
                speed,
                "-d",
                delay,
            ],
            Duration::from_secs(30),
        );
        assert_eq!(r.code, Some(0), "--speed {speed}: {}", r.stderr);
        assert_eq!(r.stderr, "", "--speed {speed}: nothing to complain about");
        records(&r.stdout)
    };
    let fast = replay("0", "0.5");
    assert_eq!(
        fast.len(),
        5,
        "four whole intervals and the last, partial one"
    );
    let covered = |rs: &[serde_json::Value]| -> f64 {
        rs.iter().map(|r| r["interval_s"].as_f64().unwrap()).sum()
    };
    // Real time and ten times as fast, 0.5 s of source time a snapshot:
    // the whole recording, its last events in a last snapshot, then the
    // end of the run.
    for (speed, delay) in [("1", "0.5"), ("10", "0.05")] {
        let paced = replay(speed, delay);
        let last = paced.last().expect("snapshots");
        assert_eq!(
            last["totals"]["dispatches"],
            fast.last().unwrap()["totals"]["dispatches"],
            "--speed {speed}: every event replayed"
        );
        let c = covered(&paced);
        assert!((2.29..2.8).contains(&c), "--speed {speed}: {c} s covered");
        let n = paced.len();
        assert!((4..=6).contains(&n), "--speed {speed}: {n} snapshots");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
