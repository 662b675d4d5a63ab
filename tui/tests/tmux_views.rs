//! The real `nfsdtop` in tmux, for what only a live screen shows: rows
//! that keep their order from one refresh to the next, drill-downs,
//! scrolling overlays, another service's table (small terminals: in
//! tmux_small.rs).

mod common;

use common::scenario;
use common::tmux::Tmux;
use std::path::{Path, PathBuf};

use nfsdtop_agent::enrich::classify::ClassMap;
use nfsdtop_agent::model::{
    Endpoint, Event, EventKind, SourceInfo, SourceKind, WaitSource, XprtKey,
};
use nfsdtop_agent::record::{Header, Writer};

/// Twelve backlogged peers served round-robin: every interval each gets
/// 1/12 of the dispatches give or take one (8.3% each on screen), which
/// one gets the extra changing every interval.
const NEAR_EQUAL: &str = r#"
name = "near-equal"
threads = 64
service_ms = 1.0
jitter = 0.0
policy = "rr-peer"

[[client]]
address = "10.20.0.1"
count = 12
connections = 1
inflight = 64
"#;

/// The names of the table's rows, top to bottom.
fn row_names(screen: &str) -> Vec<String> {
    screen
        .lines()
        .filter(|l| l.starts_with("  10.") || l.starts_with("* 10."))
        .filter_map(|l| l[2..].split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn stable_order_over_10_refreshes_of_a_scenario_with_equal_shares() {
    let t = Tmux::new("order");
    let file = scenario("views-order", NEAR_EQUAL);
    t.start(&format!("--demo '{}' -d 0.25", file.display()));
    let want: Vec<String> = (1..=12).map(|i| format!("10.20.0.{i}")).collect();
    // Ten different screens (each refresh changes the rates) with all
    // twelve rows: every one in address order, the selection on the
    // first.
    let mut seen: Vec<String> = Vec::new();
    while seen.len() < 10 {
        let s = t.wait_for("another refresh with twelve rows", |s| {
            row_names(s).len() == 12 && !seen.iter().any(|p| p == s)
        });
        assert_eq!(row_names(&s), want, "refresh {}:\n{s}", seen.len());
        assert!(s.contains("8.3%"), "{s}");
        seen.push(s);
    }
    // The selection stays on its entity across refreshes, here and in
    // the drill-down.
    t.keys(&["Down", "Down", "Down"]);
    t.keys(&["Enter"]);
    for _ in 0..5 {
        let before = t.screen();
        let s = t.wait_for("a refresh of the drill-down", |s| s != before);
        assert!(s.contains("10.20.0.4"), "drill-down left its peer:\n{s}");
    }
    t.keys(&["Escape"]);
    let s = t.wait_for("the table", |s| row_names(s).len() == 12);
    assert!(s.contains("sort: share"), "{s}");
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
}

#[test]
fn class_table_counts_peers_and_the_drill_down_lists_them() {
    let t = Tmux::new("classes");
    t.start("--demo movers -d 0.5");
    t.wait_for("the peer table", |s| s.contains("sort: share"));
    t.keys(&["g"]);
    // movers: the six data movers in one class, the busiest row.
    let s = t.wait_for("the class table with peer counts", |s| {
        s.contains("classes 5/5") && s.lines().any(|l| l.starts_with("* movers "))
    });
    let header = s
        .lines()
        .find(|l| l.contains("PEERS"))
        .expect("PEERS column");
    assert!(!header.contains("CLASS "), "{s}");
    let movers = s.lines().find(|l| l.starts_with("* movers ")).unwrap();
    let words: Vec<&str> = movers.split_whitespace().collect();
    assert_eq!(words[2], "6", "movers hold six peers: {movers}");
    let one = s
        .lines()
        .find(|l| l.contains("customers/10.2.0.1 "))
        .expect("a per-peer class");
    assert_eq!(one.split_whitespace().nth(1), Some("1"), "{one}");

    t.keys(&["Home", "Enter"]);
    let s = t.wait_for("the class's peers", |s| {
        s.contains(" peers (6) ") && (1..=6).all(|i| s.contains(&format!("10.1.0.{i} ")))
    });
    assert!(!s.contains("per-peer only"), "{s}");
    // Each peer with its share and ratio.
    let row = s
        .lines()
        .find(|l| l.contains("10.1.0.1 "))
        .expect("a peer row");
    let cells: Vec<&str> = row
        .split("10.1.0.1")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .collect();
    assert!(cells[0].ends_with('%'), "share: {row}");
    assert!(cells[1].parse::<f64>().is_ok(), "ratio: {row}");
}

/// Sixty one-connection clients against one with 256 connections, under
/// today's FIFO: each of the sixty gets about a fifth of its fair share,
/// so the below-fair-share lint lists sixty peers.
const MANY_BELOW: &str = r#"
name = "many-below"
threads = 16
service_ms = 10.0
policy = "flat"

[[client]]
address = "10.0.1.1"
count = 60
connections = 1
inflight = 16

[[client]]
address = "10.9.0.1"
connections = 256
inflight = 4096
"#;

/// The title's "lines A-B of N".
fn panel_lines(screen: &str) -> Option<(usize, usize, usize)> {
    let t = screen.split("warnings, lines ").nth(1)?;
    let (range, rest) = t.split_once(" of ")?;
    let (a, b) = range.split_once('-')?;
    let n = rest.split_whitespace().next()?;
    Some((a.parse().ok()?, b.parse().ok()?, n.parse().ok()?))
}

#[test]
fn the_warnings_panel_scrolls_through_every_line() {
    let t = Tmux::new("warnscroll");
    let file = scenario("views-warnscroll", MANY_BELOW);
    t.start_sized(100, 30, "", &format!("--demo '{}' -d 0.5", file.display()));
    t.wait_for("the table with warnings", |s| {
        s.contains("sort: share") && s.contains("below half")
    });
    // Paused: the panel's lines stay put while we scroll.
    t.keys(&["p"]);
    t.wait_for("paused", |s| s.contains("PAUSED"));
    t.keys(&["w"]);
    let s = t.wait_for("a panel longer than the screen", |s| {
        panel_lines(s).is_some_and(|(a, _, n)| a == 1 && n > 60)
    });
    let (_, b, n) = panel_lines(&s).unwrap();
    assert!(!s.contains("more"), "every line is in the panel:\n{s}");
    t.keys(&["PageDown"]);
    let s = t.wait_for("a page down", |s| {
        panel_lines(s).is_some_and(|(a, _, _)| a == b + 1)
    });
    assert!(s.contains("10.0.1."), "{s}");
    t.keys(&["End"]);
    let s = t.wait_for("the end", |s| {
        panel_lines(s).is_some_and(|(_, last, total)| last == total)
    });
    assert_eq!(panel_lines(&s).unwrap().2, n, "{s}");
    t.keys(&["Home"]);
    t.wait_for("the top again", |s| {
        panel_lines(s).is_some_and(|(a, _, _)| a == 1)
    });
    t.keys(&["Escape"]);
    t.wait_for("the panel closed", |s| !s.contains("warnings, lines"));
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
}

/// Twenty seconds of one nfsd client (port 2049) and two lockd clients
/// (port 4045) taking NLM locks: each round 10.0.0.5 and 10.0.0.6 queue
/// together, 10.0.0.5 is dispatched with both backlogged (earns 1/2),
/// 10.0.0.6 then alone (earns 1): fairness 2.00 and 0.67 within lockd.
fn lockd_recording(dir: &Path) -> PathBuf {
    let info = SourceInfo {
        kind: SourceKind::Live,
        kernel: "6.12.57".into(),
        generation: "6.6+".into(),
        wait_source: WaitSource::EnqueueDequeue,
        detail: "crafted: nfsd and lockd".into(),
        host: "h".into(),
    };
    let start = 1_000_000_000u64;
    let header = Header::for_source(&info, &ClassMap::default(), start);
    let xprt = |port: u16, client: &str| XprtKey {
        netns: 1,
        server: Endpoint::from_socket_addr(format!("10.0.0.9:{port}").parse().unwrap()),
        client: Endpoint::from_socket_addr(client.parse().unwrap()),
    };
    let nfs = xprt(2049, "10.0.0.1:700");
    let (c, d) = (xprt(4045, "10.0.0.5:800"), xprt(4045, "10.0.0.6:801"));
    let dequeue = EventKind::Dequeue {
        qtime_ns: None,
        class: None,
    };
    let lock = EventKind::Procedure {
        name: nfsdtop_agent::model::ProcName::new("LOCK"),
        requests: 1,
        exec_ns: 1_000,
    };
    let mut events = Vec::new();
    let ms = 1_000_000u64;
    for i in 0..2_000u64 {
        let t = start + i * 10 * ms;
        for (dt, x, kind) in [
            (0, nfs, EventKind::Enqueue { inflight: None }),
            (10_000, nfs, dequeue),
            (100_000, c, EventKind::Enqueue { inflight: None }),
            (101_000, d, EventKind::Enqueue { inflight: None }),
            (110_000, c, dequeue),
            (120_000, d, dequeue),
            (130_000, c, lock),
            (140_000, d, lock),
        ] {
            events.push(Event {
                ts_ns: t + dt,
                xprt: x,
                kind,
            });
        }
    }
    let path = dir.join("lockd.nfsdrec");
    let mut w = Writer::create(&path, &header).unwrap();
    w.write_all(&events).unwrap();
    w.finish_file().unwrap();
    path
}

/// A replay of nfsd and lockd: lockd stays out of the table, and `R`
/// shows it by name with its own peers' fair shares.
#[test]
fn r_shows_lockd_by_name_with_its_own_fair_shares() {
    let dir = std::env::temp_dir().join(format!("nfsdtop-views-lockd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = lockd_recording(&dir);
    let t = Tmux::new("lockd");
    t.start_sized(100, 30, "", &format!("--replay '{}' -d 0.5", rec.display()));
    let s = t.wait_for("the replay's table", |s| {
        s.contains("sort: share") && s.contains("10.0.0.1 ") && s.contains("other services")
    });
    assert!(
        !s.contains("10.0.0.5"),
        "lockd's peers are not nfsd's:\n{s}"
    );
    t.keys(&["p"]);
    t.wait_for("paused", |s| s.contains("PAUSED"));
    t.keys(&["R"]);
    let s = t.wait_for("the services panel", |s| s.contains("lockd port 4045"));
    // FAIR, the fifth word after the border: a snapshot taken between
    // 10.0.0.5's dispatch and 10.0.0.6's leaves the latter half a
    // dispatch more entitled (50 / 75.5 = 0.66 at 0.5 s).
    let fair = |peer: &str| -> f64 {
        let line = s.lines().find(|l| l.contains(peer)).unwrap_or("");
        let w: Vec<&str> = line.split_whitespace().collect();
        let at = w
            .iter()
            .position(|x| *x == peer)
            .map_or(usize::MAX, |i| i + 4);
        w.get(at).and_then(|x| x.parse().ok()).unwrap_or(f64::NAN)
    };
    assert!((fair("10.0.0.5") - 2.0).abs() <= 0.01, "{s}");
    assert!((fair("10.0.0.6") - 2.0 / 3.0).abs() <= 0.01, "{s}");
    t.keys(&["Escape"]);
    t.wait_for("the panel closed", |s| !s.contains("lockd port 4045"));
    let _ = std::fs::remove_dir_all(&dir);
}
