//! The real `nfsdtop --demo` inside tmux: keys in, screen out (via
//! `tmux capture-pane`), and the terminal restored after quitting.
//! Every wait polls the screen against a deadline; nothing sleeps to
//! synchronise. tmux comes from scripts/setup.sh.

use std::process::Command;
use std::time::{Duration, Instant};

mod common;

use common::tmux::{row_of, Tmux, DEADLINE};

#[test]
fn keys_drive_the_ui_and_quit_restores_the_terminal() {
    let t = Tmux::new("keys");
    t.start("--demo seed-k16 --policy flat -d 0.5");
    let s = t.wait_for("the table", |s| {
        s.contains("sort: share") && row_of(s, "10.0.0.2").is_some()
    });
    assert!(s.contains("demo: seed-k16 policy=flat"), "{s}");
    assert!(s.contains("wait: enqueue-dequeue"), "{s}");
    assert!(s.contains("disp/s"), "{s}");
    assert!(
        !s.contains("PRE-RUN-MARKER"),
        "on the alternate screen:\n{s}"
    );
    assert_eq!(t.display("#{alternate_on}"), "1");
    assert!(row_of(&s, "10.0.0.3") < row_of(&s, "10.0.0.2"), "{s}");

    // Sort: share -> fair share -> ratio, then reverse.
    t.keys(&["s"]);
    t.wait_for("sort by fair share", |s| s.contains("sort: fair share"));
    t.keys(&["s"]);
    t.wait_for("sort by ratio", |s| s.contains("sort: ratio ▼"));
    t.keys(&["S"]);
    let s = t.wait_for("ratio ascending", |s| {
        s.contains("sort: ratio ▲") && row_of(s, "10.0.0.2") < row_of(s, "10.0.0.3")
    });
    assert!(s.contains("RATIO▲"), "{s}");

    // Group by class and back.
    t.keys(&["g"]);
    t.wait_for("classes", |s| s.contains("classes 2/2"));
    t.keys(&["g"]);
    t.wait_for("peers", |s| s.contains("peers 2/2"));

    // Filter: type, Enter keeps it, Esc clears it.
    t.keys(&["/"]);
    t.wait_for("filter prompt", |s| s.contains("filter: _"));
    t.keys(&["0.0.3", "Enter"]);
    let s = t.wait_for("filtered", |s| {
        s.contains("peers 1/2") && s.contains("| filter: 0.0.3")
    });
    assert!(row_of(&s, "10.0.0.2").is_none(), "{s}");
    assert!(row_of(&s, "10.0.0.3").is_some(), "{s}");
    t.keys(&["Escape"]);
    t.wait_for("filter cleared", |s| {
        s.contains("peers 2/2") && row_of(s, "10.0.0.2").is_some()
    });

    // Help overlay, then closed.
    t.keys(&["?"]);
    let s = t.wait_for("help", |s| s.contains("nfsdtop help"));
    assert!(s.contains("pause / resume"), "{s}");
    t.keys(&["Escape"]);
    t.wait_for("help closed", |s| !s.contains("nfsdtop help"));

    // Drill-down into the selection and back.
    t.keys(&["Home", "Enter"]);
    t.wait_for("drill-down", |s| {
        s.contains("share vs fair share") && s.contains("transports (")
    });
    t.keys(&["Escape"]);
    t.wait_for("table again", |s| s.contains("sort: ratio"));

    // Pause and resume.
    t.keys(&["p"]);
    t.wait_for("paused", |s| s.contains("PAUSED"));
    t.keys(&["p"]);
    t.wait_for("resumed", |s| !s.contains("PAUSED"));

    // Resize to 80x24: still the essentials, nothing garbled ("lost 0",
    // nothing lost, is the first part of its line to go).
    t.run(&["resize-window", "-t", "e2e", "-x", "80", "-y", "24"]);
    let s = t.wait_for("80x24", |s| {
        s.lines().count() <= 24
            && s.lines().any(|l| l.starts_with("q quit"))
            && s.contains("RATIO")
            && s.contains("wait (all) p50 ")
    });
    assert!(s.lines().all(|l| l.chars().count() <= 80), "{s}");

    // Quit: the normal screen is back, with what was there before.
    t.keys(&["q"]);
    let s = t.wait_for("exit", |s| s.contains("EXIT-STATUS="));
    assert!(s.contains("EXIT-STATUS=0"), "{s}");
    assert!(s.contains("PRE-RUN-MARKER"), "{s}");
    assert!(!s.contains("sort:"), "UI left on screen:\n{s}");
    assert_eq!(t.display("#{alternate_on}"), "0");
}

#[test]
fn ctrl_c_quits_and_restores_the_terminal() {
    let t = Tmux::new("ctrlc");
    t.start("--demo burst");
    t.wait_for("the table", |s| {
        s.contains("sort: share") && s.contains("disp/s")
    });
    t.keys(&["C-c"]);
    let s = t.wait_for("exit", |s| s.contains("EXIT-STATUS="));
    assert!(s.contains("EXIT-STATUS=0"), "{s}");
    assert!(s.contains("PRE-RUN-MARKER"), "{s}");
    assert_eq!(t.display("#{alternate_on}"), "0");
    // The terminal is out of raw mode: a typed line is echoed by the tty
    // and then copied by `cat` (raw mode would show it once, unechoed).
    t.keys(&["typed-after-exit", "Enter"]);
    t.wait_for("echo and copy", |s| {
        s.matches("typed-after-exit").count() == 2
    });
}

#[test]
fn a_panic_restores_the_terminal_before_the_message() {
    let t = Tmux::new("panic");
    t.start_env("NFSDTOP_TEST_PANIC_AFTER_DRAW=1", "--demo seed-k4");
    let s = t.wait_for("the panic exit", |s| s.contains("EXIT-STATUS="));
    assert!(s.contains("EXIT-STATUS=101"), "{s}");
    assert!(s.contains("PRE-RUN-MARKER"), "{s}");
    assert!(
        s.contains("test panic"),
        "the message is on the normal screen:\n{s}"
    );
    assert_eq!(t.display("#{alternate_on}"), "0");
    assert_eq!(t.display("#{cursor_flag}"), "1", "cursor shown again");
    t.keys(&["typed-after-panic", "Enter"]);
    t.wait_for("echo and copy", |s| {
        s.matches("typed-after-panic").count() == 2
    });
}

#[test]
fn sigterm_restores_the_terminal() {
    let t = Tmux::new("sigterm");
    t.start("--demo seed-k8");
    t.wait_for("the table", |s| {
        s.contains("sort: share") && s.contains("disp/s")
    });
    let pid = t.ui_pid().to_string();
    let st = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(st.success());
    let s = t.wait_for("exit", |s| s.contains("EXIT-STATUS="));
    assert!(s.contains("EXIT-STATUS=0"), "{s}");
    assert!(s.contains("PRE-RUN-MARKER"), "{s}");
    assert_eq!(t.display("#{alternate_on}"), "0");
}

#[test]
fn sighup_by_hand_to_a_live_terminal_restores_it() {
    let t = Tmux::new("sighup");
    t.start("--demo seed-k8");
    t.wait_for("the table", |s| s.contains("sort: share"));
    let pid = t.ui_pid().to_string();
    assert!(Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap()
        .success());
    let s = t.wait_for("exit", |s| s.contains("EXIT-STATUS="));
    assert!(s.contains("EXIT-STATUS=0"), "{s}");
    assert_eq!(t.display("#{alternate_on}"), "0");
}

/// Is `pid` still a running process (a zombie nobody reaps counts as gone)?
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // "PID (comm) STATE ...": the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

/// Start `nfsdtop --demo` after `env` (words before it), kill the tmux
/// server (every session, so the pane's terminal goes away) and check that
/// nfsdtop is gone within 2 s; SIGKILL it otherwise.
fn ends_within_2s_when_the_terminal_goes(tag: &str, env: &str) {
    let t = Tmux::new(tag);
    t.start_env(env, "--demo seed-k8");
    t.wait_for("the table", |s| s.contains("sort: share"));
    let pid = t.ui_pid();
    assert!(running(pid));
    let start = Instant::now();
    t.run(&["kill-server"]);
    let limit = Duration::from_secs(2);
    while running(pid) && start.elapsed() < limit {
        // Polling interval of the check, not a synchronisation.
        std::thread::sleep(Duration::from_millis(20));
    }
    let still = running(pid);
    if still {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert!(
        !still,
        "nfsdtop {pid} still runs 2 s after its terminal went away"
    );
}

#[test]
fn killing_the_tmux_session_ends_the_ui_within_2s() {
    ends_within_2s_when_the_terminal_goes("hangup", "");
}

#[test]
fn a_terminal_that_hangs_up_without_sighup_ends_the_ui_within_2s() {
    // In a session of its own the pane is not nfsdtop's controlling
    // terminal: killing tmux sends it no SIGHUP, its reads just fail.
    ends_within_2s_when_the_terminal_goes("eio", "setsid env");
}

#[test]
fn without_nfsd_only_the_plain_ui_shows_the_demo_and_says_so() {
    // A tracefs with no sunrpc events: "no nfsd", whatever this host has.
    let dir = std::env::temp_dir().join(format!("nfsdtop-e2e-no-nfsd-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("events/sched")).unwrap();
    let t = Tmux::new("nodemo");
    t.start(&format!("--tracefs {}", dir.display()));
    let s = t.wait_for("the demo's table", |s| {
        row_of(s, "10.1.0.1").is_some() || s.contains("sort: share")
    });
    assert!(s.contains("DEMO DATA, NOT THIS HOST: no live nfsd"), "{s}");
    t.keys(&["q"]);
    t.wait_for("exit", |s| s.contains("EXIT-STATUS=0"));
    // --format asks for output for a program: without -b it is refused
    // (bad usage), never the demo nor the UI.
    let t = Tmux::new("nodemo-format");
    t.start(&format!("--tracefs {} --format json", dir.display()));
    let s = t.wait_for("exit", |s| s.contains("EXIT-STATUS="));
    assert!(s.contains("EXIT-STATUS=2"), "{s}");
    assert!(s.contains("--batch"), "{s}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two real snapshots (seed-k16, flat), as the daemon would send.
fn seed_k16_snapshots() -> Vec<nfsdtop_agent::model::Snapshot> {
    use nfsdtop_agent::aggregate::{Aggregator, Limits};
    use nfsdtop_agent::source::demo::{Scenario, Simulator};
    let scenario = Scenario::builtin("seed-k16").unwrap();
    let mut sim = Simulator::new(scenario);
    let mut agg = Aggregator::new(Default::default(), Limits::default());
    let info = nfsdtop_agent::model::SourceInfo {
        kind: nfsdtop_agent::model::SourceKind::Demo,
        detail: "seed-k16 policy=flat".into(),
        ..Default::default()
    };
    let mut buf = Vec::new();
    sim.run_until(2_000_000_000, &mut buf);
    agg.ingest_all(&buf);
    agg.snapshot(sim.now_ns(), 0.0, &info);
    (3..=4u64)
        .map(|s| {
            buf.clear();
            sim.run_until(s * 1_000_000_000, &mut buf);
            agg.ingest_all(&buf);
            agg.snapshot(sim.now_ns(), s as f64, &info)
        })
        .collect()
}

/// A one-connection agent on loopback: it streams `seed_k16_snapshots`,
/// closes and stops listening (every retry is refused). Returns its port
/// and the request it got (once served).
fn one_shot_agent() -> (u16, std::sync::mpsc::Receiver<String>) {
    one_shot_agent_with(|_| {})
}

/// `one_shot_agent` whose snapshots `edit` changes first (a hostile agent).
fn one_shot_agent_with(
    edit: fn(&mut nfsdtop_agent::model::Snapshot),
) -> (u16, std::sync::mpsc::Receiver<String>) {
    use std::io::{Read, Write};
    use std::net::TcpListener;

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (served_tx, served_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut req = Vec::new();
        let mut b = [0u8; 1];
        while !req.ends_with(b"\r\n\r\n") && s.read(&mut b).unwrap() == 1 {
            req.push(b[0]);
        }
        s.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            .unwrap();
        for mut snap in seed_k16_snapshots() {
            edit(&mut snap);
            let ev = format!(
                "event: snapshot\ndata: {}\n\n",
                serde_json::to_string(&snap).unwrap()
            );
            write!(s, "{:x}\r\n{ev}\r\n", ev.len()).unwrap();
        }
        s.write_all(b"0\r\n\r\n").unwrap();
        // Close the stream and stop listening: every retry is refused.
        drop(s);
        drop(listener);
        let _ = served_tx.send(String::from_utf8_lossy(&req).into_owned());
    });
    (port, served_rx)
}

#[test]
fn remote_agent_streams_then_closes_and_the_ui_says_reconnecting() {
    let (port, served) = one_shot_agent();
    let t = Tmux::new("remote");
    t.start(&format!("--connect http://127.0.0.1:{port}"));
    let req = served
        .recv_timeout(DEADLINE)
        .expect("the UI connects to the agent");
    assert!(req.starts_with("GET /api/v1/stream HTTP/1.1"), "{req}");
    let s = t.wait_for("the agent's data and the reconnecting status", |s| {
        s.contains("reconnecting (attempt") && row_of(s, "10.0.0.2").is_some()
    });
    assert!(
        s.contains(&format!("remote demo: http://127.0.0.1:{port}")),
        "{s}"
    );
    let row = s.lines().find(|l| l.starts_with("  10.0.0.2 ")).unwrap();
    assert!(row.contains("11.1%") && row.contains("50.0%"), "{row}");
    // Quitting does not wait for the reconnect loop.
    t.keys(&["q"]);
    let s = t.wait_for("exit", |s| s.contains("EXIT-STATUS=0"));
    assert_eq!(t.display("#{alternate_on}"), "0");
    let _ = s;
}

#[test]
fn remote_ui_never_shows_the_password_and_redacts_addresses() {
    let (port, served) = one_shot_agent();
    let t = Tmux::new("remote-redact");
    t.start(&format!(
        "--connect http://bob:hunter2@127.0.0.1:{port} --redact"
    ));
    let req = served.recv_timeout(DEADLINE).expect("the UI connects");
    // base64("bob:hunter2")
    assert!(
        req.contains("authorization: Basic Ym9iOmh1bnRlcjI=\r\n"),
        "{req}"
    );
    let s = t.wait_for("pseudonyms and the reconnecting status", |s| {
        s.contains("reconnecting (attempt") && s.contains("  anon-")
    });
    assert!(
        s.contains(&format!("remote demo: http://127.0.0.1:{port}")),
        "{s}"
    );
    assert!(
        !s.contains("hunter2") && !s.contains("bob"),
        "credentials shown:\n{s}"
    );
    assert!(!s.contains("10.0.0."), "a client address shown:\n{s}");
    // The drill-down (transports) too.
    t.keys(&["Enter"]);
    let s = t.wait_for("the detail view", |s| {
        s.contains("anon-") && s.contains("Esc")
    });
    // The server's own address (10.0.0.1:2049) is no client's.
    let clients = s.replace("10.0.0.1:2049", "");
    assert!(!clients.contains("10.0.0."), "a client address shown:\n{s}");
    t.keys(&["Escape", "q"]);
    t.wait_for("exit", |s| s.contains("EXIT-STATUS=0"));
}

#[test]
fn a_hostile_agents_escape_sequences_never_reach_the_terminal() {
    // OSC 0 retitles the terminal, CSI 2J clears it, CSI 41m paints it
    // red: in a client name, an implementation and a host name.
    let (port, served) = one_shot_agent_with(|s| {
        let evil = "EVIL\u{1b}]0;PWNED\u{7}\u{1b}[41m\u{1b}[2J";
        for p in &mut s.peers {
            p.hostname = Some(evil.into());
            p.client_names = vec![nfsdtop_agent::model::ClientName {
                name: evil.into(),
                minor_version: Some(2),
                implementation: Some(evil.into()),
            }];
        }
        s.source.detail = evil.into();
    });
    let t = Tmux::new("remote-hostile");
    t.start(&format!("--connect http://127.0.0.1:{port}"));
    served.recv_timeout(DEADLINE).expect("the UI connects");
    let s = t.wait_for("the hostile agent's rows", |s| {
        row_of(s, "10.0.0.2").is_some() && s.contains("EVIL?")
    });
    t.keys(&["Enter"]);
    let s2 = t.wait_for("the drill-down", |s| s.contains("implementation"));
    assert!(
        !t.display("#{pane_title}").contains("PWNED"),
        "the terminal was retitled:\n{s}\n{s2}"
    );
    assert!(s2.contains("EVIL?]0;PWNED??[41m?[2J"), "{s2}");
    t.keys(&["q"]);
    t.wait_for("exit", |s| s.contains("EXIT-STATUS=0"));
}
