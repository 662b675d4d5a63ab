//! Issue 16 against the real `nfsdtopd`: slow or many clients, a closed
//! stderr, a big class map reload and a costly bcrypt hash neither crash
//! nor hang the daemon, nor grow its memory without bound.
//!
//! The tests with 20,000 peers take turns (a lock): they measure memory,
//! which a neighbour would disturb. No bound here is on how fast the
//! daemon answers on this machine (the benchmarks measure that): time
//! limits only tell a hang or a stall of many seconds from a busy host.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::{kill, many_peers_daemon, rss_kib, wait_exit, write, Daemon};

static HEAVY: Mutex<()> = Mutex::new(());

fn heavy() -> MutexGuard<'static, ()> {
    HEAVY.lock().unwrap_or_else(|p| p.into_inner())
}

/// A GET /api/v1/stream sent, nothing read yet.
fn open_stream(addr: SocketAddr, query: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "GET /api/v1/stream{query} HTTP/1.1\r\nHost: {addr}\r\n\r\n"
    )
    .expect("send");
    s
}

/// Read a response until its head is complete: (status, head, body so far).
fn read_head(s: &mut TcpStream) -> (u16, String, Vec<u8>) {
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..i]).into_owned();
            let status = head
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .expect("status line");
            return (status, head, raw[i + 4..].to_vec());
        }
        let k = s.read(&mut buf).expect("read head");
        assert!(k > 0, "closed before the head: {raw:?}");
        raw.extend_from_slice(&buf[..k]);
    }
}

/// The `time` of the snapshot a stream has begun to send (the first field
/// of its JSON, well inside the first piece), read from its first bytes.
fn stream_time(s: &mut TcpStream) -> f64 {
    let (status, _, mut raw) = read_head(s);
    assert_eq!(status, 200);
    let key = b"\"time\":";
    let mut buf = [0u8; 4096];
    loop {
        if let Some(i) = raw.windows(key.len()).position(|w| w == key) {
            let rest = &raw[i + key.len()..];
            if let Some(end) = rest.iter().position(|&b| b == b',') {
                let text = String::from_utf8_lossy(&rest[..end]).into_owned();
                return text
                    .parse()
                    .unwrap_or_else(|e| panic!("time {text:?}: {e}"));
            }
        }
        assert!(raw.len() < 64 * 1024, "no \"time\" in the first 64 KiB");
        let k = s.read(&mut buf).expect("read the snapshot's first bytes");
        assert!(k > 0, "closed before the snapshot's time");
        raw.extend_from_slice(&buf[..k]);
    }
}

/// The daemon's peak RSS (KiB), printed with the RSS it had before.
fn peak_since(d: &Daemon, before: u64) -> u64 {
    let (rss, hwm) = rss_kib(d.child.id());
    println!(
        "RSS {} MiB before, peak {} MiB, now {} MiB",
        before >> 10,
        hwm >> 10,
        rss >> 10
    );
    hwm
}

/// Descriptors the daemon has open (its connections among them).
fn open_fds(d: &Daemon) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", d.child.id()))
        .map(|r| r.count())
        .unwrap_or(0)
}

/// The count in a "dropped N /api/v1/stream client(s)" log line.
fn dropped_in(line: &str) -> usize {
    line.split("dropped ")
        .nth(1)
        .filter(|_| line.contains("/api/v1/stream"))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Beyond the daemon's own memory, what 32 clients that stop reading, 8
/// on each of 4 snapshots, may cost once the slowest are dropped: the
/// shared encodings of the snapshots they are stuck on (34 MB each for
/// 20,000 peers), at most 2 besides the latest two, and a connection
/// buffer each. Had each its own copy, 32 would cost 32 x 34 MB (1.1 GB):
/// the bound is well below that, and above what a loaded host adds while
/// the pipeline's own snapshots and an encoding overlap (+210 MB peak
/// measured beside `stress-ng --cpu 2`, +190 MB alone).
const STALLED_BOUND_KIB: u64 = 400 * 1024;

#[test]
fn stalled_stream_clients_are_dropped_and_hold_no_snapshot() {
    let _turn = heavy();
    let dir = tempfile::tempdir().unwrap();
    // Writes that make no progress time out only after an hour: a
    // connection closed in this test was closed by the drop.
    let cfg = write(
        dir.path(),
        "nfsdtopd.toml",
        "[http]\nwrite_timeout = 3600\n",
    );
    let d = many_peers_daemon(dir.path(), 20_000, &["--interval", "1", "--config", &cfg]);
    let rss0 = rss_kib(d.child.id()).0;
    let fds0 = open_fds(&d);
    let time = |d: &Daemon| d.snapshot("?group=class&top=1")["time"].as_f64();
    let mut stalled = Vec::new();
    for _ in 0..4 {
        let mut wave: Vec<TcpStream> = (0..8).map(|_| open_stream(d.addr, "")).collect();
        // Each of the wave has begun its snapshot (encoding it can take
        // seconds in a debug build on a busy machine); then it stops
        // reading. The next wave waits for a snapshot newer than any this
        // one is on: had two waves shared one, fewer would be dropped.
        let mut newest = f64::MIN;
        for s in &mut wave {
            s.set_read_timeout(Some(Duration::from_secs(90))).unwrap();
            newest = newest.max(stream_time(s));
        }
        stalled.extend(wave);
        d.wait_for("the next snapshot", 60, |d| {
            (time(d) > Some(newest)).then_some(())
        });
    }
    let mut dropped = 0;
    d.wait_for("the two slowest waves dropped", 60, |d| {
        dropped += d.stderr.try_iter().map(|l| dropped_in(&l)).sum::<usize>();
        (dropped >= 16).then_some(())
    });
    // The dropped ones' connections are closed then, not when their stuck
    // writes time out (an hour here): the other 16 are left (2 to spare
    // for descriptors the daemon opens meanwhile). The wait bounds a hang.
    d.wait_for("the dropped clients' connections closed", 120, |d| {
        (open_fds(d) <= fds0 + 16 + 2).then_some(())
    });
    let hwm = peak_since(&d, rss0);
    assert!(
        hwm <= rss0 + STALLED_BOUND_KIB,
        "32 stalled clients: peak RSS {hwm} KiB, {rss0} KiB before (bound +{STALLED_BOUND_KIB})"
    );
    drop(stalled);
    // Still serving streams.
    let mut s = open_stream(d.addr, "?group=class&top=1");
    let (status, _, _) = read_head(&mut s);
    assert_eq!(status, 200);
}

#[test]
fn stream_clients_past_max_streams_get_a_503() {
    let d = Daemon::start(&[
        "--demo",
        "seed-k4",
        "--listen",
        "127.0.0.1:0",
        "--interval",
        "0.2",
        "--max-streams",
        "2",
    ]);
    d.snapshot("");
    let mut open: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = open_stream(d.addr, "");
            assert_eq!(read_head(&mut s).0, 200);
            s
        })
        .collect();
    let r = d.get("/api/v1/stream");
    assert_eq!(r.status, 503, "{r:?}");
    assert!(r.header("retry-after").is_some(), "{r:?}");
    let msg = r.json()["error"].as_str().unwrap_or_default().to_string();
    assert!(msg.contains("max_streams") && msg.contains('2'), "{msg}");
    // Other routes are not limited.
    assert_eq!(d.get("/api/v1/snapshot").status, 200);
    // A client that leaves frees its place (noticed at the next snapshot).
    drop(open.pop());
    d.wait_for("a free stream place", 20, |d| {
        let mut s = open_stream(d.addr, "");
        (read_head(&mut s).0 == 200).then_some(())
    });
}

/// Beyond the daemon's own memory, what 8 concurrent snapshots of 20,000
/// peers may cost: one shared 12 MB encoding (two at the turn of an
/// interval). Eight copies of the peers and of their JSON cost ~330 MB.
const SNAPSHOTS_BOUND_KIB: u64 = 150 * 1024;

#[test]
fn concurrent_snapshots_of_many_peers_share_one_encoding() {
    let _turn = heavy();
    let dir = tempfile::tempdir().unwrap();
    let d = many_peers_daemon(dir.path(), 20_000, &["--interval", "1"]);
    let rss0 = rss_kib(d.child.id()).0;
    let addr = d.addr;
    let pollers: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn(move || {
                (0..2)
                    .map(|_| common::http(addr, "GET", "/api/v1/snapshot?group=peer", &[]))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut health = Vec::new();
    while pollers.iter().any(|p| !p.is_finished()) {
        let h = d.get("/healthz");
        health.push((h.status, h.body));
        // Pacing of the health checks, not synchronisation.
        std::thread::sleep(Duration::from_millis(100));
    }
    let hwm = peak_since(&d, rss0);
    for p in pollers {
        for r in p.join().unwrap() {
            assert_eq!(r.status, 200);
            assert!(r.body.len() > 20_000 * 400, "{} bytes", r.body.len());
        }
    }
    let first = d.snapshot("?group=peer");
    assert_eq!(first["peers"].as_array().unwrap().len(), 20_000);
    // /healthz answered throughout (the encodings never held the async
    // workers), and said the pipeline was serving at least once: it is
    // "stale" only when the pipeline published nothing for three
    // intervals, which a host loaded by others can cause without any bug
    // here, so a stale answer is not a failure, but none at all is.
    let fresh = health.iter().filter(|h| h.0 == 200).count();
    let other: Vec<_> = health
        .iter()
        .filter(|h| h.0 != 200 && !(h.0 == 503 && h.1.contains("stale")))
        .collect();
    println!("/healthz while serving: {fresh} of {} ok", health.len());
    assert!(
        other.is_empty() && fresh > 0,
        "/healthz while serving: {} of {} neither ok nor stale, first {:?}; {fresh} ok",
        other.len(),
        health.len(),
        other.first()
    );
    assert!(
        hwm <= rss0 + SNAPSHOTS_BOUND_KIB,
        "8 snapshots: peak RSS {hwm} KiB, {rss0} KiB before (bound +{SNAPSHOTS_BOUND_KIB})"
    );
}

#[test]
fn reloading_a_big_class_map_never_stalls_a_scrape() {
    let _turn = heavy();
    let dir = tempfile::tempdir().unwrap();
    let map = write(dir.path(), "classes", "10.0.0.0/8 all\n");
    let d = many_peers_daemon(
        dir.path(),
        20_000,
        &["--interval", "1", "--class-map", &map],
    );
    let big: String = (1..30_000)
        .map(|i| format!("10.{}.{}.0/24 c{}\n", (i >> 8) & 255, i & 255, i % 50))
        .collect();
    write(dir.path(), "classes", &big);
    let t0 = Instant::now();
    kill(d.child.id(), "HUP");
    let stop = Arc::new(AtomicBool::new(false));
    // Scrapers (and a snapshot poller beside them) through the reload,
    // the first requests as it starts.
    let scrapers: Vec<_> = ["/metrics", "/metrics", "/api/v1/snapshot?group=class&top=1"]
        .into_iter()
        .map(|path| {
            let (stop, addr) = (stop.clone(), d.addr);
            std::thread::spawn(move || {
                let mut slowest = Duration::ZERO;
                while !stop.load(Ordering::SeqCst) {
                    let t = Instant::now();
                    let r = common::http(addr, "GET", path, &[]);
                    slowest = slowest.max(t.elapsed());
                    assert_eq!(r.status, 200, "{path}");
                    // Scrape pacing, not synchronisation.
                    std::thread::sleep(Duration::from_millis(50));
                }
                (path, slowest)
            })
        })
        .collect();
    let line = d.wait_for("the reload's log line", 90, |d| {
        d.stderr.try_iter().find(|l| l.contains("SIGHUP"))
    });
    assert!(line.contains("reloaded (29999 rules)"), "{line}");
    let took = t0.elapsed();
    // And a second past it, while the pipeline applies the map.
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::SeqCst);
    for s in scrapers {
        let (path, slowest) = s.join().unwrap();
        println!(
            "reload took {:.1} s; slowest {path}: {:.0} ms",
            took.as_secs_f64(),
            slowest.as_secs_f64() * 1e3
        );
        // A reload that held what scrapes need would stall them for as
        // long as it ran; this bound only tells a stall of many seconds
        // (a map parsed under the lock, a hang) from a busy host.
        if path == "/metrics" {
            assert!(
                slowest < Duration::from_secs(10),
                "a scrape took {slowest:?} during the reload"
            );
        }
    }
}

#[test]
fn with_stderr_closed_reloads_go_on_and_sigterm_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let map = write(dir.path(), "classes", "10.0.0.0/8 lab\n");
    let mut d = Daemon::start_then_close_stderr(&[
        "--demo",
        "seed-k4",
        "--listen",
        "127.0.0.1:0",
        "--interval",
        "0.2",
        "--class-map",
        &map,
    ]);
    // Every reload logs a line, into the broken pipe.
    for class in ["lab", "first", "second", "third"] {
        if class != "lab" {
            write(dir.path(), "classes", &format!("10.0.0.0/8 {class}\n"));
            kill(d.child.id(), "HUP");
        }
        d.wait_for(&format!("class {class} after SIGHUP"), 20, |d| {
            let s = d.snapshot("?group=class");
            s["classes"]
                .as_array()?
                .iter()
                .any(|c| c["name"] == class)
                .then_some(())
        });
    }
    assert_eq!(d.get("/healthz").status, 200);
    kill(d.child.id(), "TERM");
    let st = wait_exit(&mut d.child, 10.0).expect("exits within 10 s of SIGTERM");
    assert!(st.success(), "{st}");
}

#[test]
fn a_bcrypt_cost_of_31_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // A real hash, its cost field made 31: checking it would take days.
    let hash = bcrypt::hash("secret", 4)
        .unwrap()
        .replacen("$04$", "$31$", 1);
    assert_eq!(hash.len(), 60);
    let cfg = write(
        dir.path(),
        "nfsdtopd.toml",
        &format!("listen = \"127.0.0.1:0\"\n[basic_auth_users]\nalice = \"{hash}\"\n"),
    );
    let mut child = std::process::Command::new(common::BIN)
        .args(["--config", &cfg, "--demo", "seed-k4"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let Some(st) = wait_exit(&mut child, 10.0) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("nfsdtopd still starting 10 s later: it is checking the cost-31 hash");
    };
    let err = common::stderr_of(&mut child);
    assert!(!st.success());
    assert!(err.contains(&format!("{cfg}:3:9: ")), "{err}");
    assert!(
        err.contains("\"alice\"") && err.contains("cost 31"),
        "{err}"
    );
    assert!(err.contains("maximum, 14"), "{err}");
    // The same file with a sane cost starts.
    let ok = bcrypt::hash("secret", 4).unwrap();
    write(
        dir.path(),
        "nfsdtopd.toml",
        &format!("listen = \"127.0.0.1:0\"\n[basic_auth_users]\nalice = \"{ok}\"\n"),
    );
    let d = Daemon::start(&["--config", &cfg, "--demo", "seed-k4"]);
    assert_eq!(d.get("/metrics").status, 401);
}
