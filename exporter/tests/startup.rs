//! nfsdtopd's start and stop against the real binary: config errors with
//! file, line and column, a port in use, listening beyond loopback, no
//! silent demo without a source flag, and a prompt stop on SIGTERM.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{demo, read_events, run_to_exit, write, Daemon};

#[test]
fn config_errors_name_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "c1.toml",
            "listen = \"127.0.0.1:1\"\ntop_k = = 3\n",
            ":2:9:",
            "expected",
        ),
        (
            "c2.toml",
            "# a comment\n\nlisen = \"x\"\n",
            ":3:1:",
            "unknown key \"lisen\": write listen",
        ),
        (
            "c3.toml",
            "top_k = 5\nlisten = \"nowhere\"\n",
            ":2:10:",
            "ADDR:PORT",
        ),
        ("c4.toml", "top_k = 0\n", ":1:9:", "top_k"),
        (
            "c5.toml",
            "[source]\nkind = \"demo\"\npolicy = \"fifo\"\n",
            ":3:10:",
            "fifo",
        ),
        (
            "c6.toml",
            "[source]\nkind = \"kernel\"\n",
            ":2:8:",
            "live, demo or replay",
        ),
        (
            "c7.toml",
            "[basic_auth_users]\nalice = \"secret\"\n",
            ":2:9:",
            "bcrypt",
        ),
        ("c8.toml", "interval = 0.0\n", ":1:12:", "interval"),
        // The parser's message is two lines ("invalid array", "expected
        // `]`"): said as one.
        (
            "c9.toml",
            "top_k = 3\nlisten = [\n",
            ":3:1:",
            "invalid array; expected `]`",
        ),
    ];
    for (name, text, at, needle) in cases {
        let path = write(dir.path(), name, text);
        let (code, err) = run_to_exit(&["--config", &path, "--demo", "--listen", "127.0.0.1:0"]);
        assert_eq!(code, 1, "{name}: {err}");
        assert!(
            err.contains(&format!("{path}{at}")),
            "{name}: want {path}{at} in {err:?}"
        );
        assert!(err.contains(needle), "{name}: want {needle:?} in {err:?}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{name}: one line: {err:?}"
        );
    }
    let (code, err) = run_to_exit(&["--config", "/nonexistent/nfsdtopd.toml"]);
    assert_eq!(code, 1);
    assert!(err.contains("/nonexistent/nfsdtopd.toml"), "{err}");
}

/// A port in use is one line: the address, and what to do.
#[test]
fn a_port_in_use_is_one_line_saying_what_to_do() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let (code, err) = run_to_exit(&["--demo", "--listen", &addr]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(&format!("cannot listen on {addr}")), "{err}");
    assert!(
        err.contains("already in use") && err.contains("--web.listen-address"),
        "{err}"
    );
    assert!(!err.contains("os error"), "{err}");
}

#[test]
fn non_loopback_listen_needs_expose() {
    for addr in ["0.0.0.0:9847", "192.0.2.1:9847", "[::]:9847", ":9847"] {
        let (code, err) = run_to_exit(&["--demo", "--listen", addr]);
        assert_eq!(code, 1, "{addr}: {err}");
        assert!(err.contains("--expose"), "{addr}: {err}");
    }
    // A bad command line: clap's status.
    let (code, err) = run_to_exit(&["--demo", "--listen", "nonsense"]);
    assert_eq!(code, 2);
    assert!(err.contains("--web.listen-address"), "{err}");
}

#[test]
fn without_a_source_flag_it_watches_nfsd_and_never_a_silent_demo() {
    match Daemon::try_start(&["--listen", "127.0.0.1:0"]) {
        Err(e) => assert!(
            e.contains("--demo") && e.contains("nfsd"),
            "should say there is no nfsd and name --demo: {e}"
        ),
        Ok(d) => {
            // This host has a live nfsd: then the source must be live.
            let s = d.snapshot("");
            assert_eq!(s["source"]["kind"], "live", "{s}");
        }
    }
}

#[test]
fn sigterm_stops_promptly_even_with_a_stream_open() {
    let mut d = demo(&["--interval", "0.2"]);
    d.snapshot("");
    let (_, events) = read_events(&d, 1);
    assert!(!events.is_empty());
    // Keep a stream open while the daemon is told to stop.
    let mut s = TcpStream::connect(d.addr).unwrap();
    s.write_all(b"GET /api/v1/stream HTTP/1.0\r\n\r\n").unwrap();
    let mut buf = [0u8; 1024];
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert!(s.read(&mut buf).unwrap() > 0);
    let ok = Command::new("kill")
        .args(["-TERM", &d.child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(st) = d.child.try_wait().unwrap() {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "nfsdtopd still running 10 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
}
