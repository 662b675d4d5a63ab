//! The real `nfsdtop` in tmux at 80x24: every line of the header, the
//! help and the tables whole (or cut at a whole word with "…"), with a
//! long kernel name, two network namespaces and the demo's busy threads.

mod common;

use common::scenario;
use common::tmux::Tmux;
use nfsdtop_agent::source::demo::{DemoSource, Scenario};
use std::path::{Path, PathBuf};

use common::tmux::row_of;
use nfsdtop_agent::enrich::classify::ClassMap;
use nfsdtop_agent::model::{
    Endpoint, Event, EventKind, SourceInfo, SourceKind, WaitSource, XprtKey,
};
use nfsdtop_agent::record::{Header, NfsdConfig, Writer};
use nfsdtop_agent::source::replay::ReplaySource;
use nfsdtop_agent::source::Source;

/// `shown` is `full`, or its first whole words and "…".
fn whole_words_of(shown: &str, full: &str) -> bool {
    shown == full
        || shown.strip_suffix('…').is_some_and(|p| {
            full.starts_with(p) && full[p.len()..].starts_with([' ', ',', ';', ':'])
        })
}

/// "12ms", "950us", "1.20s" or "0".
fn is_duration(w: &str) -> bool {
    let n = w.trim_end_matches(['u', 'm', 's']);
    (w == "0" || w.ends_with('s')) && n.parse::<f64>().is_ok()
}

/// Every header line (above the title rule of the table or drill-down)
/// ends at a part boundary:
/// each part is one of the header's, whole; the source's free text at
/// most shortened at a word.
fn assert_header_whole(s: &str, src: &SourceInfo) {
    let lines: Vec<&str> = s
        .lines()
        .take_while(|l| !l.contains('─'))
        .map(str::trim_end)
        .collect();
    assert!(lines.len() >= 3, "no header:\n{s}");
    let kind = src.kind.as_str();
    let mut l1 = lines[0].split(" | ");
    assert!(l1.next().unwrap().starts_with("nfsdtop"), "{s}");
    for p in l1 {
        let ok = match p.split_once(" at ") {
            _ if p.starts_with("wait: ") => ["qtime", "enqueue-dequeue", "none"].contains(&&p[6..]),
            Some((every, t)) if p.starts_with("every ") => {
                every.ends_with('s') && t.len() == 9 && t.ends_with('Z') && &t[2..3] == ":"
            }
            None if p.starts_with("every ") => p.ends_with('s'),
            _ if p.starts_with("kernel ") => {
                p == format!("kernel {} ({})", src.kernel, src.generation)
            }
            _ => {
                p == kind
                    || p.strip_prefix(&format!("{kind}: "))
                        .is_some_and(|d| whole_words_of(d, &src.detail))
            }
        };
        assert!(ok, "header line 1 cut at {p:?}:\n{s}");
    }
    for p in lines[1].split("  ") {
        let w: Vec<&str> = p.split_whitespace().collect();
        let ok = match w.as_slice() {
            [n, "disp/s"] | ["lost", n] => n.parse::<u64>().is_ok(),
            ["backlogged", of, what] => of.contains('/') && ["peers", "classes"].contains(what),
            ["Jain", j] => j.len() == 5 && j.parse::<f64>().is_ok(),
            ["wait", "(all)", "p50", a, "p99", b] => is_duration(a) && is_duration(b),
            _ => false,
        };
        assert!(ok, "header line 2 cut at {p:?}:\n{s}");
    }
    for p in lines[2].split(" | ") {
        let last = p.rsplit(' ').next().unwrap();
        let ok = if p.starts_with(&format!("{kind} at ")) {
            last.starts_with('x')
        } else if p.starts_with("nfsd threads ") {
            last.ends_with("%)") || last == "?" || last.parse::<f64>().is_ok()
        } else if let Some(n) = p.strip_prefix("netns ") {
            n.parse::<u32>().is_ok()
        } else if let Some(n) = p.strip_prefix("pools ") {
            n.split('+').all(|t| t == "?" || t.parse::<u32>().is_ok())
        } else {
            false
        };
        assert!(ok, "header line 3 cut at {p:?}:\n{s}");
    }
    let ends = [
        "while backlogged",
        "x fair",
        "with 0 dispatches",
        "counts are low",
        ")",
        "…",
    ];
    for l in &lines[3..] {
        let whole = l.starts_with("! ") && ends.iter().any(|e| l.ends_with(e));
        assert!(whole, "header line cut: {l:?}:\n{s}");
    }
}

#[test]
fn at_80x24_every_line_is_whole() {
    let t = Tmux::new("small");
    t.start_sized(80, 24, "", "--demo movers -d 0.5");
    let s = t.wait_for("the table", |s| {
        s.contains("sort: share") && s.contains("10.1.0.1 ") && s.contains("nfsd threads")
    });
    let movers = DemoSource::new(Scenario::builtin("movers").unwrap()).info();
    assert_header_whole(&s, &movers);
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

/// A kernel release longer than any header line has room for.
const LONG_KERNEL: &str = "6.12.0-1017-vendor-enterprise-realtime-debug-build-with-a-long-name";

/// Two minutes recorded on a live host with a long kernel release, 8
/// threads, two clients each in a network namespace of its own: 10.0.0.1
/// (namespace 4026531840) dispatched every 2 ms, 1 ms of execution each;
/// 10.0.0.2 (4026532077) every 20 ms after waiting 15 ms for it.
fn two_namespace_recording(dir: &Path) -> PathBuf {
    let info = SourceInfo {
        kind: SourceKind::Live,
        kernel: LONG_KERNEL.into(),
        generation: "6.6+".into(),
        wait_source: WaitSource::EnqueueDequeue,
        detail: "tracefs /sys/kernel/tracing; crafted for the header test".into(),
        host: "h".into(),
    };
    let start = 1_000_000_000u64;
    let mut header = Header::for_source(&info, &ClassMap::default(), start);
    header.nfsd = NfsdConfig {
        threads: Some(8),
        pools: Some(1),
        ports: None,
    };
    let xprt = |ns: u32, client: &str| XprtKey {
        netns: ns,
        server: Endpoint::from_socket_addr("10.0.0.9:2049".parse().unwrap()),
        client: Endpoint::from_socket_addr(client.parse().unwrap()),
    };
    let (a, b) = (
        xprt(4026531840, "10.0.0.1:700"),
        xprt(4026532077, "10.0.0.2:701"),
    );
    let dequeue = EventKind::Dequeue {
        qtime_ns: None,
        class: None,
    };
    let mut events = Vec::new();
    let ms = 1_000_000u64;
    for i in 0..60_000u64 {
        let t = start + i * 2 * ms;
        let mut add = |dt: u64, xprt: XprtKey, kind: EventKind| {
            events.push(Event {
                ts_ns: t + dt,
                xprt,
                kind,
            })
        };
        add(0, a, EventKind::Enqueue { inflight: None });
        add(10_000, a, dequeue);
        let done = EventKind::Executed {
            exec_ns: ms,
            requests: 1,
            bytes: None,
            procedure: None,
        };
        add(ms + 10_000, a, done);
        if i % 10 == 0 {
            add(20_000, b, EventKind::Enqueue { inflight: None });
            add(15 * ms, b, dequeue);
        }
    }
    // In time order, as a source delivers them.
    events.sort_by_key(|e| e.ts_ns);
    let path = dir.join("two-namespaces.nfsdrec");
    let mut w = Writer::create(&path, &header).unwrap();
    w.write_all(&events).unwrap();
    w.finish_file().unwrap();
    path
}

/// A replay of a host whose kernel release is too long for 80 columns
/// and whose clients are in two namespaces: every header line still ends
/// at a part boundary, and the drill-down says each peer's namespace.
#[test]
fn at_80x24_a_long_kernel_and_two_namespaces_leave_the_header_whole() {
    let dir = std::env::temp_dir().join(format!("nfsdtop-views-ns-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = two_namespace_recording(&dir);
    let src = ReplaySource::open(&rec).unwrap().info();
    let t = Tmux::new("netns");
    t.start_sized(80, 24, "", &format!("--replay '{}' -d 0.5", rec.display()));
    let s = t.wait_for("the replay's table", |s| {
        s.contains("sort: share") && s.contains("10.0.0.2 ") && s.contains("| netns 2")
    });
    assert_header_whole(&s, &src);
    assert!(!s.contains("vendor"), "the kernel is left out whole:\n{s}");
    assert!(s.contains("nfsd threads 8, busy"), "{s}");
    t.keys(&["p"]);
    t.wait_for("paused", |s| s.contains("PAUSED"));
    for (peer, ns) in [("10.0.0.1", 4026531840u32), ("10.0.0.2", 4026532077)] {
        let row = row_of(&t.screen(), peer).expect("the peer's row");
        t.mouse_click(5, row as u16 + 1);
        t.keys(&["Enter"]);
        let s = t.wait_for("the drill-down", |s| s.contains(&format!("peer {peer} ")));
        let line = s.lines().find(|l| l.contains(" connections")).unwrap();
        assert!(
            line.trim_end()
                .ends_with(&format!("connections  netns {ns}")),
            "{line:?}\n{s}"
        );
        assert_header_whole(&s, &src);
        t.keys(&["Escape"]);
        t.wait_for("the table", |s| s.contains("sort: share"));
    }
    let _ = std::fs::remove_dir_all(&dir);
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
        "10.0.0.0/24, <fair, ratio<0.6    │",
        "seek back, on 10 s  │",
        "other RPC services      │",
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
