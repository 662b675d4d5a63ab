//! Batch runs end on their own, against the real binary: a replay at any
//! speed when the recording ends (every snapshot printed, down to the one
//! with the recording's last events, which ends with them), and `--connect` to an agent that
//! keeps the link open with comments but sends no more snapshots (exit 1,
//! one line saying so). Each run is killed, failing the test, past a
//! deadline.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nfsdtop_agent::model::{Snapshot, SourceInfo, SourceKind};

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// Run nfsdtop to its exit, killing it and failing after `deadline`.
fn run_bounded(args: &[&str], deadline: Duration) -> Run {
    let start = Instant::now();
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
        took: start.elapsed(),
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
    // The snapshots cover the recording to its last event (at most 2.3 s
    // from its start), the last one not a whole interval past it.
    let c = covered(&fast);
    assert!((2.2..=2.3).contains(&c), "--speed 0: {c} s covered");
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
        assert!((2.2..=2.3).contains(&c), "--speed {speed}: {c} s covered");
        let n = paced.len();
        assert!((4..=6).contains(&n), "--speed {speed}: {n} snapshots");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An agent as nfsdtopd is after its replay has ended: one snapshot,
/// then only keep-alive comments (every 100 ms here, 15 s there) on a
/// link it keeps open. Serves connections until the test ends.
fn quiet_agent() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let snap = Snapshot {
        time: 1.0,
        interval_s: 1.0,
        source: SourceInfo {
            kind: SourceKind::Replay,
            detail: "ended".into(),
            ..Default::default()
        },
        ..Default::default()
    };
    let event = format!(
        "event: snapshot\ndata: {}\n\n",
        serde_json::to_string(&snap).unwrap()
    );
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            let event = event.clone();
            std::thread::spawn(move || {
                let mut req = BufReader::new(s.try_clone().unwrap());
                let mut line = String::new();
                while req.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                    line.clear();
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n";
                if s.write_all(head.as_bytes()).is_err() || s.write_all(event.as_bytes()).is_err() {
                    return;
                }
                // Until the client goes.
                while s.write_all(b": keep-alive\n\n").is_ok() {
                    std::thread::sleep(Duration::from_millis(100));
                }
            });
        }
    });
    url
}

#[test]
fn connect_gives_up_on_an_agent_that_sends_no_more_snapshots() {
    let url = quiet_agent();
    let r = run_bounded(
        &[
            "--connect",
            &url,
            "-b",
            "-n",
            "2",
            "--format",
            "json",
            "--give-up-after",
            "2",
        ],
        Duration::from_secs(25),
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert_eq!(records(&r.stdout).len(), 1, "the one snapshot there was");
    let last = r.stderr.lines().last().unwrap();
    // --give-up-after 2 against three of the agent's 1 s intervals.
    assert!(
        last.starts_with(&format!("nfsdtop: giving up on {url}"))
            && last.contains("connected, but no snapshot for 3s")
            && last.contains("--give-up-after"),
        "{last}"
    );
    assert!(
        r.took >= Duration::from_secs(3) && r.took < Duration::from_secs(15),
        "took {:?}",
        r.took
    );
}
