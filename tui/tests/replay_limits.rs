//! Replays that must stay bounded in time and memory, against the real
//! binary: a recording with a huge timestamp gap (no snapshot storm, said
//! once), a slow reader of batch output (backpressure, not buffering),
//! and counters from a crafted file that saturate instead of wrapping.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nfsdtop_agent::enrich::classify::ClassMap;
use nfsdtop_agent::model::{Endpoint, Event, EventKind, SourceInfo, Tracepoint, XprtKey};
use nfsdtop_agent::record::{Header, Writer};

fn nfsdtop() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nfsdtop-replay-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn proc_field(pid: u32, file: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Resident memory of `pid` in kB.
fn rss_kb(pid: u32) -> Option<u64> {
    proc_field(pid, "status", "VmRSS:")
}

/// User + system CPU ticks of `pid`.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the ")" of the command name: state is the first, utime
    // the 12th and stime the 13th.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// Watch `child` until it exits (`until_idle` false) or until its CPU time
/// stops advancing for a second (true: it is blocked), at most `deadline`.
/// Kills it and fails if its RSS passes `limit_kb`. Returns the peak RSS.
fn watch(child: &mut Child, limit_kb: u64, deadline: Duration, until_idle: bool) -> u64 {
    let pid = child.id();
    let start = Instant::now();
    let (mut peak, mut last_cpu, mut still_since) = (0, None, Instant::now());
    loop {
        if child.try_wait().unwrap().is_some() {
            return peak;
        }
        let rss = rss_kb(pid).unwrap_or(0);
        peak = peak.max(rss);
        if rss > limit_kb || start.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "pid {pid}: RSS {rss} kB (limit {limit_kb} kB) after {:?} (deadline {deadline:?})",
                start.elapsed()
            );
        }
        let cpu = cpu_ticks(pid);
        if cpu != last_cpu {
            last_cpu = cpu;
            still_since = Instant::now();
        } else if until_idle && still_since.elapsed() >= Duration::from_secs(1) {
            return peak;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The exit status and stderr of a child that has exited (or is exiting).
fn finish(child: &mut Child) -> (std::process::ExitStatus, String) {
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut stderr).unwrap();
    }
    (status, stderr)
}

/// Replay `path` as fast as possible in batch JSON: the last snapshot.
fn last_snapshot(path: &Path) -> serde_json::Value {
    let o = nfsdtop()
        .arg("--replay")
        .arg(path)
        .args(["-b", "--speed", "0", "--format", "json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let stdout = String::from_utf8(o.stdout).unwrap();
    serde_json::from_str(stdout.lines().last().expect("a snapshot")).unwrap()
}

fn key(last: u8) -> XprtKey {
    XprtKey {
        netns: 1,
        server: Endpoint::from_socket_addr("10.0.0.1:2049".parse().unwrap()),
        client: Endpoint::from_socket_addr(format!("10.0.0.{last}:700").parse().unwrap()),
    }
}

/// A recording of `events` (with a header starting at `start`).
fn craft(path: &Path, start: u64, events: &[Event]) {
    let info = SourceInfo {
        detail: "crafted".into(),
        ..SourceInfo::default()
    };
    let header = Header::for_source(&info, &ClassMap::default(), start);
    let mut w = Writer::create(path, &header).unwrap();
    w.write_all(events).unwrap();
    w.finish_file().unwrap();
}

/// Dispatches of one client, one a millisecond from `from`.
fn dispatches(from: u64, n: u64) -> Vec<Event> {
    (0..n)
        .flat_map(|i| {
            let ts = from + i * 1_000_000;
            [
                Event {
                    ts_ns: ts,
                    xprt: key(2),
                    kind: EventKind::Enqueue { inflight: None },
                },
                Event {
                    ts_ns: ts + 1000,
                    xprt: key(2),
                    kind: EventKind::Dequeue {
                        qtime_ns: None,
                        class: None,
                    },
                },
            ]
        })
        .collect()
}

#[test]
fn a_timestamp_gap_of_2_62_ns_is_skipped_and_said_once() {
    let f = tmp("gap.nfsdrec");
    let start = 1_000_000_000;
    let mut events = dispatches(start, 50);
    events.extend(dispatches(start + (1 << 62), 50));
    craft(&f, start, &events);
    assert!(std::fs::metadata(&f).unwrap().len() < 1000);

    let mut child = nfsdtop()
        .arg("--replay")
        .arg(&f)
        .args(["-b", "--speed", "0", "--format", "json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).unwrap();
        s
    });
    let peak = watch(&mut child, 300_000, Duration::from_secs(30), false);
    let (status, stderr) = finish(&mut child);
    let stdout = reader.join().unwrap();
    assert!(status.success(), "{stderr}");
    assert_eq!(stderr.matches("gap of ").count(), 1, "{stderr}");
    assert!(
        stderr.contains("gap of 4611686018 s in the recording"),
        "{stderr}"
    );
    let lines: Vec<&str> = stdout.lines().collect();
    // Two stretches of 50 ms and one second between them.
    assert!(lines.len() <= 5, "{} snapshots", lines.len());
    let last: serde_json::Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    assert_eq!(last["totals"]["dispatches"], 100, "every event replayed");
    eprintln!("gap replay: {} snapshots, peak RSS {peak} kB", lines.len());
}

#[test]
fn counts_from_a_file_saturate_instead_of_wrapping() {
    let f = tmp("lost.nfsdrec");
    let start = 1_000_000_000;
    let lost = |ts| Event {
        ts_ns: ts,
        xprt: XprtKey::default(),
        kind: EventKind::Lost {
            tracepoint: Tracepoint::Dequeue,
            count: u64::MAX,
        },
    };
    let executed = |ts| Event {
        ts_ns: ts,
        xprt: key(2),
        kind: EventKind::Executed {
            exec_ns: u64::MAX,
            requests: u64::MAX,
            bytes: None,
            procedure: None,
        },
    };
    let mut events = dispatches(start, 3);
    events.extend([lost(start + 10), lost(start + 20)]);
    events.extend([executed(start + 30), executed(start + 40)]);
    events.push(Event {
        ts_ns: start + 50,
        xprt: key(2),
        kind: EventKind::Dequeue {
            qtime_ns: Some(u64::MAX),
            class: Some(u32::MAX),
        },
    });
    craft(&f, start, &events);
    let last = last_snapshot(&f);
    assert_eq!(last["totals"]["events_lost"], u64::MAX, "{last}");
    assert_eq!(last["totals"]["lost_dispatches"], u64::MAX, "{last}");
    let peer = &last["entities"][0];
    assert_eq!(peer["executions"], u64::MAX, "{last}");
}

#[test]
fn a_stalled_reader_of_batch_json_holds_the_replay_back() {
    // 2000 clients: every snapshot is about 1 MB in memory and 700 kB of
    // JSON; 300 of them queued would be hundreds of megabytes.
    let scenario = tmp("many.toml");
    std::fs::write(
        &scenario,
        "name = \"many\"\n[[client]]\naddress = \"10.0.0.2\"\ncount = 2000\nconnections = 1\ninflight = 1\n",
    )
    .unwrap();
    let f = tmp("many.nfsdrec");
    let o = nfsdtop()
        .args(["record", "-o"])
        .arg(&f)
        .arg("--demo")
        .arg(&scenario)
        .args(["--speed", "0", "--duration", "15"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let mut child = nfsdtop()
        .arg("--replay")
        .arg(&f)
        .args(["-b", "--speed", "0", "--format", "json", "-d", "0.05"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Nobody reads stdout: the producer must block, not buffer.
    let peak = watch(&mut child, 200_000, Duration::from_secs(120), true);
    eprintln!("stalled reader: producer blocked at a peak RSS of {peak} kB");
    let mut out = child.stdout.take().unwrap();
    let mut lines = 0usize;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = out.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        lines += buf[..n].iter().filter(|&&b| b == b'\n').count();
    }
    assert!(child.wait().unwrap().success());
    // 15 s at 50 ms: every snapshot arrives once the reader reads.
    assert!((299..=302).contains(&lines), "{lines} snapshots");
}

#[test]
fn a_fifo_or_a_pipe_is_refused_at_once_not_hung_on() {
    let fifo = tmp("rec.fifo");
    let _ = std::fs::remove_file(&fifo);
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let pipe_path = PathBuf::from("/dev/stdin");
    for (path, stdin) in [(&fifo, Stdio::null()), (&pipe_path, Stdio::piped())] {
        let mut child = nfsdtop()
            .arg("--replay")
            .arg(path)
            .args(["-b", "--speed", "0"])
            .stdin(stdin)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Nobody ever writes to the FIFO or the pipe: a second open or
        // read would wait for ever.
        watch(&mut child, 300_000, Duration::from_secs(30), false);
        let (status, stderr) = finish(&mut child);
        assert!(!status.success(), "{path:?}");
        assert!(
            stderr.contains("is not a regular file"),
            "{path:?}: {stderr}"
        );
        assert!(stderr.contains("save it to a file first"), "{stderr}");
    }
}

#[test]
fn a_clock_at_the_end_of_its_range_replays_without_overflow() {
    let f = tmp("late.nfsdrec");
    // Whole intervals from the start overshoot the end of the range.
    let start = u64::MAX - 2_500_000_000;
    let mut events = dispatches(start, 10);
    events.extend(dispatches(u64::MAX - 10_000_000, 10));
    craft(&f, start, &events);
    let last = last_snapshot(&f);
    assert_eq!(last["totals"]["dispatches"], 20, "{last}");
}
