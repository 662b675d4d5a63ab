//! The real `nfsdtop` in tmux, for what only a live screen shows: rows
//! that keep their order from one refresh to the next, drill-downs,
//! scrolling overlays and small terminals.

mod common;

use common::scenario;
use common::tmux::Tmux;

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

#[test]
fn at_80x24_every_line_is_whole() {
    let t = Tmux::new("small");
    t.start_sized(80, 24, "", "--demo movers -d 0.5");
    let s = t.wait_for("the table", |s| {
        s.contains("sort: share") && s.contains("10.1.0.1 ")
    });
    // The columns that matter stay, CLASS included; the footer keeps its
    // most useful keys whole, the warnings key among them.
    let header = s.lines().find(|l| l.contains("RATIO")).expect("header");
    for col in ["NAME", "CLASS", "SHARE", "FAIR", "RATIO", "WAIT99"] {
        assert!(header.contains(col), "{col} dropped:\n{s}");
    }
    let footer = s.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    assert!(footer.contains("w warnings"), "{s}");
    let last_word = footer.split_whitespace().last().unwrap();
    let words = [
        "quit", "help", "warnings", "sort", "group", "filter", "detail", "pause", "interval",
    ];
    assert!(words.contains(&last_word), "footer cut: {footer:?}");
    // The drill-down: its counts since the start on a line of their own,
    // whole.
    t.keys(&["Enter"]);
    let s = t.wait_for("the drill-down", |s| s.contains("since start:"));
    let line = s.lines().find(|l| l.contains("since start:")).unwrap();
    assert!(
        line.trim_end().ends_with("s backlogged"),
        "cut: {line:?}\n{s}"
    );
    // Too small for anything: the message says so, whole.
    t.run(&["resize-window", "-t", "e2e", "-x", "16", "-y", "5"]);
    let s = t.wait_for("the too-small message", |s| s.contains("terminal too"));
    let text: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        text.contains("nfsdtop: terminal too small (16x5, need 20x6)"),
        "{s}"
    );
}

/// Four threads, 2 ms a request, one client that always has work: every
/// thread busy all the time (4.0 busy threads, 100%).
const FOUR_BUSY: &str = r#"
name = "four-busy"
threads = 4
service_ms = 2.0
jitter = 0.0
policy = "flat"

[[client]]
address = "10.30.0.1"
connections = 4
inflight = 64
"#;

#[test]
fn the_header_shows_the_demos_threads_and_busy_threads_whole_at_80x24() {
    let t = Tmux::new("server");
    let file = scenario("views-server", FOUR_BUSY);
    t.start_sized(80, 24, "", &format!("--demo '{}' -d 0.5", file.display()));
    let s = t.wait_for("the server line", |s| s.contains("nfsd threads 4, busy"));
    let line = s.lines().find(|l| l.contains("nfsd threads")).unwrap();
    // After where the demo is ("demo at 0.5s x1 | ").
    let server = line.trim_end().rsplit(" | ").next().unwrap();
    assert_eq!(server, "nfsd threads 4, busy 4.0 (100%)", "{s}");
    assert!(line.starts_with("demo at "), "{s}");
    assert!(s.lines().all(|l| l.chars().count() <= 80), "{s}");
    // The table and the footer are still there, whole.
    assert!(s.contains("10.30.0.1 "), "{s}");
    assert!(s.lines().any(|l| l.starts_with("q quit")), "{s}");
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
}

#[test]
fn help_says_what_each_header_figure_covers_whole_at_80x24() {
    let t = Tmux::new("help");
    t.start_sized(80, 24, "", "--demo movers -d 0.5");
    t.wait_for("the table", |s| s.contains("sort: share"));
    t.keys(&["?"]);
    let s = t.wait_for("the whole help", |s| {
        s.contains("nfsdtop help") && s.lines().last().is_some_and(|l| l.contains('┘'))
    });
    for want in [
        "header",
        "over every dispatch",
        "not a row's p50",
        "busy = thread time / interval",
        "1-9, 0",
        "10.0.0.0/24",
        "<fair",
        "seek back",
    ] {
        assert!(s.contains(want), "{want:?} not in help:\n{s}");
    }
    // The box is whole: its right border on every line, and the longest
    // lines end inside it.
    let right = s.lines().next().unwrap().chars().position(|c| c == '┐');
    let right = right.expect("the help's top border");
    for l in s.lines() {
        let c = l.chars().nth(right);
        assert!(matches!(c, Some('│' | '┐' | '┘')), "{l:?}:\n{s}");
    }
    for end in [
        "or click a title│",
        "10.0.0.0/24, <fair  │",
        "seek back, on 10 s  │",
        "PgUp/PgDn scroll)",
        "(% of the threads)",
    ] {
        assert!(s.contains(end), "{end:?} cut:\n{s}");
    }
}

/// A scenario whose busy client has an NFSv4 client name (the demo's
/// stand-in for /proc/fs/nfsd/clients) and whose other has none.
const NAMED: &str = r#"
name = "named"
threads = 8
service_ms = 2.0
policy = "flat"

[[client]]
address = "10.40.0.1"
connections = 4
inflight = 64
nfs_name = "Linux NFSv4.2 tmux-host"

[[client]]
address = "10.40.0.2"
connections = 1
inflight = 16
"#;

#[test]
fn the_peer_table_and_drill_down_name_the_client_whole_at_80x24() {
    let t = Tmux::new("names");
    let file = scenario("views-names", NAMED);
    t.start_sized(80, 24, "", &format!("--demo '{}' -d 0.5", file.display()));
    // Both rows: the first frames may show the busy client alone.
    let s = t.wait_for("the named row on top, and the other row", |s| {
        s.lines().any(|l| l.starts_with("* 10.40.0.1 tmux-host "))
            && s.lines().any(|l| l.contains("10.40.0.2"))
    });
    let other = s.lines().find(|l| l.contains("10.40.0.2")).unwrap();
    assert!(!other.contains("tmux-host"), "{s}");
    t.keys(&["Home", "Enter"]);
    let s = t.wait_for("the drill-down", |s| s.contains("since start:"));
    let line = s
        .lines()
        .find(|l| l.contains("client \"Linux NFSv4.2 tmux-host\" (NFSv4.2)"))
        .unwrap_or_else(|| panic!("no client line:\n{s}"));
    assert!(line.contains("implementation \"nfsdtop demo\""), "{s}");
    assert!(s.lines().all(|l| l.chars().count() <= 80), "{s}");
    assert!(s.contains("Esc back"), "{s}");
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
}
