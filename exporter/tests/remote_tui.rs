//! `nfsdtop --connect` against a real nfsdtopd shows the same entities (and
//! the same numbers, where they are cumulative and deterministic) as a
//! local run of the same demo.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn nfsdtop_bin() -> PathBuf {
    // Built beside nfsdtopd by `cargo test --workspace` (the README's test
    // command); build it here when this crate is tested alone.
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_nfsdtopd")).with_file_name("nfsdtop");
    if !bin.exists() {
        let st = Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "nfsdtop"])
            .status()
            .expect("cargo build -p nfsdtop");
        assert!(st.success());
    }
    bin
}

fn names(line: &serde_json::Value) -> Vec<String> {
    let mut v: Vec<String> = line["entities"]
        .as_array()
        .expect("entities")
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn connect_shows_the_same_entities_as_a_local_run() {
    let nfsdtop = nfsdtop_bin();
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_nfsdtopd"))
        .args([
            "--demo",
            "movers",
            "--policy",
            "rr-class",
            "--listen",
            "127.0.0.1:0",
        ])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start nfsdtopd");
    // Read stderr on a thread so a silent daemon cannot hang the test.
    let err = BufReader::new(daemon.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut url = None;
    while url.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                url = line
                    .split_once("listening on ")
                    .map(|(_, u)| u.trim().to_string())
            }
            Err(_) => break,
        }
    }
    let url = url.expect("nfsdtopd said where it listens");

    for group in ["peer", "class"] {
        let remote = Command::new(&nfsdtop)
            .args([
                "--connect",
                &url,
                "-b",
                "-n",
                "2",
                "--format",
                "json",
                "--group",
                group,
            ])
            .output()
            .expect("nfsdtop --connect");
        assert!(
            remote.status.success(),
            "{}",
            String::from_utf8_lossy(&remote.stderr)
        );
        let local = Command::new(&nfsdtop)
            .args([
                "--demo", "movers", "--policy", "rr-class", "-b", "-n", "1", "--speed", "0",
            ])
            .args(["--format", "json", "--group", group])
            .output()
            .expect("nfsdtop local");
        assert!(local.status.success());
        let last = |o: &[u8]| -> serde_json::Value {
            let text = String::from_utf8_lossy(o).into_owned();
            serde_json::from_str(text.lines().last().expect("a line")).expect("JSON")
        };
        let (r, l) = (last(&remote.stdout), last(&local.stdout));
        assert_eq!(r["source"]["kind"], "remote", "a remote source says so");
        assert_eq!(
            names(&r),
            names(&l),
            "{group}: same entities remotely and locally"
        );
        assert_eq!(names(&r).len(), if group == "peer" { 10 } else { 5 });
        // rr-class: four customer classes and the movers class, each 1/5.
        for e in r["entities"].as_array().unwrap() {
            if group == "class" && e["dispatches"].as_u64().unwrap_or(0) > 0 {
                let share = e["share"].as_f64().unwrap();
                assert!((share - 0.2).abs() < 0.05, "{e}");
            }
        }
    }
    let _ = daemon.kill();
    let _ = daemon.wait();
}
