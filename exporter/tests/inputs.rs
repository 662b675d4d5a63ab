//! nfsdtopd on inputs that used to exhaust memory or spin: an endless
//! --config, --class-map, scenario or TLS file is refused at its size limit
//! (and a help text that cannot be written is an error), and a replay
//! with a timestamp gap of 2^62 ns says so once, serves every event and
//! then rests.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::BIN;
use nfsdtop_agent::enrich::classify::ClassMap;
use nfsdtop_agent::model::{Endpoint, Event, EventKind, SourceInfo, XprtKey};
use nfsdtop_agent::record::{Header, Writer};

/// Run nfsdtopd to its exit, killing it (and failing) past 30 s or 500 MB.
fn bounded_exit(args: &[&str]) -> (i32, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        let (rss_kb, _) = common::rss_kib(child.id());
        if rss_kb > 500_000 || Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("nfsdtopd {args:?}: RSS {rss_kb} kB, still running");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.code().unwrap_or(-1), common::stderr_of(&mut child))
}

#[test]
fn an_endless_config_class_map_or_scenario_is_refused_at_its_limit() {
    let (code, err) = bounded_exit(&["--config", "/dev/zero"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("config file /dev/zero is larger than 64 MiB"),
        "{err}"
    );
    assert!(err.contains("--config"), "{err}");
    let (code, err) = bounded_exit(&[
        "--demo",
        "movers",
        "--class-map",
        "/dev/zero",
        "--listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("class map /dev/zero is larger than 64 MiB"),
        "{err}"
    );
    let (code, err) = bounded_exit(&["--demo", "/dev/zero", "--listen", "127.0.0.1:0"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("scenario file /dev/zero is larger than 64 MiB"),
        "{err}"
    );
}

/// The endless TLS files, and a help text that cannot be written: errors
/// with status 1 and a message, not an abort (2 GiB asked of the
/// allocator) or a silent 0.
#[test]
fn endless_tls_files_and_an_unwritable_help_are_errors() {
    let (code, err) = bounded_exit(&[
        "--demo",
        "movers",
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        "/dev/zero",
        "--tls-key",
        "/dev/zero",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("TLS certificate /dev/zero is larger than 1 MiB"),
        "{err}"
    );
    let o = Command::new(BIN)
        .arg("--help")
        .stdout(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot write to stdout"), "{err}");
}

#[test]
fn a_replay_with_a_huge_gap_says_so_serves_everything_and_rests() {
    let dir = std::env::temp_dir().join(format!("nfsdtopd-inputs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("gap.nfsdrec");
    let xprt = XprtKey {
        netns: 1,
        server: Endpoint::from_socket_addr("10.0.0.1:2049".parse().unwrap()),
        client: Endpoint::from_socket_addr("10.0.0.2:700".parse().unwrap()),
    };
    let start = 1_000_000_000u64;
    let events: Vec<Event> = [start, start + (1 << 62)]
        .iter()
        .flat_map(|&t| (0..20).map(move |i| t + i * 1_000_000))
        .map(|ts| Event {
            ts_ns: ts,
            xprt,
            kind: EventKind::Dequeue {
                qtime_ns: None,
                class: None,
            },
        })
        .collect();
    let header = Header::for_source(&SourceInfo::default(), &ClassMap::default(), start);
    let mut w = Writer::create(&path, &header).unwrap();
    w.write_all(&events).unwrap();
    w.finish_file().unwrap();

    let p = path.display().to_string();
    let mut child = Command::new(BIN)
        .args(["--replay", &p, "--speed", "0", "--interval", "0.2"])
        .args(["--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    // Every stderr line until the replay has ended (it used to spin
    // through 2^62 ns of empty snapshots, for ever) and the server is
    // listening: the pipeline and the server start side by side, so
    // either may say so first.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut lines: Vec<String> = Vec::new();
    let seen = |lines: &[String], what: &str| lines.iter().any(|l| l.contains(what));
    while !(seen(&lines, "the event source has ended") && seen(&lines, "listening on http://")) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => lines.push(l),
            Err(_) => {
                let _ = child.kill();
                panic!("the replay never ended: {lines:?}");
            }
        }
    }
    let addr: std::net::SocketAddr = lines
        .iter()
        .find_map(|l| l.split("listening on http://").nth(1))
        .expect("a listening line")
        .trim()
        .parse()
        .unwrap();
    let r = common::http(addr, "GET", "/api/v1/snapshot", &[]);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(r.status, 200, "{r:?}");
    let s = r.json();
    assert_eq!(s["source"]["kind"], "replay");
    assert_eq!(s["totals"]["dispatches"], 40, "every event served");
    let gaps: Vec<&String> = lines.iter().filter(|l| l.contains("gap of ")).collect();
    assert_eq!(gaps.len(), 1, "{lines:?}");
    assert!(
        gaps[0].contains("gap of 4611686018 s in the recording"),
        "{lines:?}"
    );
}
