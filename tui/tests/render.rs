//! The UI drawn on ratatui's TestBackend from snapshots the demo simulator
//! and the aggregator produce (as agent/tests/seed_shares.rs does), with
//! assertions on concrete cells: text, sort indicator, colours.

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use nfsdtop::state::{LinkLabel, RemoteStatus, Screen, State};
use nfsdtop::view;
use nfsdtop_agent::aggregate::{Aggregator, Limits};
use nfsdtop_agent::model::{EntityKind, Snapshot, SourceInfo, SourceKind, Tracepoint, WaitSource};
use nfsdtop_agent::source::demo::{Policy, Scenario, Simulator};
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};
use ratatui::Terminal;

/// `n` snapshots of `secs` simulated seconds each, after a 2 s warm-up.
fn demo_snapshots(name: &str, policy: Policy, n: usize, secs: u64) -> Vec<Snapshot> {
    let mut scenario = Scenario::builtin(name).unwrap();
    scenario.policy = policy;
    let info = SourceInfo {
        kind: SourceKind::Demo,
        kernel: "simulated".into(),
        generation: "demo".into(),
        wait_source: WaitSource::EnqueueDequeue,
        detail: format!("{name} policy={policy}"),
        host: String::new(),
    };
    let classmap = scenario.class_map().unwrap();
    let mut sim = Simulator::new(scenario);
    let mut agg = Aggregator::new(classmap, Limits::default());
    let mut buf = Vec::new();
    sim.run_until(2_000_000_000, &mut buf);
    agg.ingest_all(&buf);
    agg.snapshot(sim.now_ns(), 0.0, &info);
    (1..=n as u64)
        .map(|i| {
            buf.clear();
            sim.run_until((2 + i * secs) * 1_000_000_000, &mut buf);
            agg.ingest_all(&buf);
            agg.snapshot(sim.now_ns(), i as f64, &info)
        })
        .collect()
}

fn state_with(snaps: &[Snapshot], secs: u64) -> State {
    let mut st = State::new(Duration::from_secs(secs), None);
    for s in snaps {
        st.on_snapshot(Box::new(s.clone()));
    }
    st
}

fn render(st: &mut State, w: u16, h: u16) -> Buffer {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| view::draw(f, st)).unwrap();
    term.backend().buffer().clone()
}

fn lines(b: &Buffer) -> Vec<String> {
    (0..b.area.height)
        .map(|y| {
            (0..b.area.width)
                .map(|x| b[(x, y)].symbol())
                .collect::<String>()
        })
        .collect()
}

fn screen(b: &Buffer) -> String {
    lines(b).join("\n")
}

/// The row (y) whose text contains `needle`, and the x where it starts.
fn find(b: &Buffer, needle: &str) -> Option<(u16, u16)> {
    lines(b).iter().enumerate().find_map(|(y, l)| {
        l.find(needle)
            .map(|byte| (l[..byte].chars().count() as u16, y as u16))
    })
}

fn key(st: &mut State, c: KeyCode) {
    st.on_key(KeyEvent::new(c, KeyModifiers::NONE));
}

fn seed_k16() -> Vec<Snapshot> {
    demo_snapshots("seed-k16", Policy::Flat, 6, 4)
}

#[test]
fn main_screen_shows_shares_fair_shares_and_the_offender() {
    let snaps = seed_k16();
    let mut st = state_with(&snaps, 4);
    let b = render(&mut st, 120, 40);
    let text = screen(&b);
    // Header: source, wait source, totals.
    assert!(text.contains("demo: seed-k16 policy=flat"), "{text}");
    assert!(text.contains("kernel simulated (demo)"), "{text}");
    assert!(text.contains("wait: enqueue-dequeue"), "{text}");
    assert!(text.contains("1600 disp/s"), "{text}");
    assert!(text.contains("backlogged 2/2 peers"), "{text}");
    assert!(text.contains("lost 0"), "{text}");
    assert!(text.contains("every 4s"), "{text}");
    // The warning names the cause the connection counts show.
    assert!(
        text.contains(
            "10.0.0.2 gets 0.22x its fair share: 2 connections against 16 (the flat queue \
             serves connections, not clients)"
        ),
        "{text}"
    );
    // Sort indicator in the header row and the title.
    assert!(text.contains("SHARE▼"), "{text}");
    assert!(text.contains("sort: share ▼"), "{text}");
    // The 2-connection client: 2/18 of the dispatches, half by right.
    let (_, y2) = find(&b, "  10.0.0.2").expect("10.0.0.2 row");
    let row2 = &lines(&b)[y2 as usize];
    for want in ["11.1%", "50.0%", "0.22"] {
        assert!(row2.contains(want), "{want} not in {row2:?}");
    }
    // Below half its fair share: red.
    let (x, y) = find(&b, "11.1%").unwrap();
    assert_eq!(y, y2);
    assert_eq!(b[(x, y)].fg, Color::Red);
    assert_eq!(b[(2, y2)].fg, Color::Red);
    // The 16-connection client is the top offender: marked and magenta,
    // first under share-descending, and selected (reversed).
    let (x3, y3) = find(&b, "* 10.0.0.3").expect("offender mark");
    assert!(y3 < y2, "sorted by share, biggest first");
    assert!(lines(&b)[y3 as usize].contains("88.9%"));
    assert_eq!(b[(x3 + 2, y3)].fg, Color::Magenta);
    assert!(b[(x3 + 2, y3)].modifier.contains(Modifier::REVERSED));
}

#[test]
fn sorting_by_ratio_and_reversing() {
    let mut st = state_with(&seed_k16(), 4);
    key(&mut st, KeyCode::Char('s')); // share -> fair
    key(&mut st, KeyCode::Char('s')); // fair -> ratio
    let b = render(&mut st, 120, 40);
    assert!(screen(&b).contains("RATIO▼"), "{}", screen(&b));
    assert!(screen(&b).contains("sort: ratio ▼"));
    assert!(find(&b, "* 10.0.0.3").unwrap().1 < find(&b, "  10.0.0.2").unwrap().1);
    key(&mut st, KeyCode::Char('S'));
    let b = render(&mut st, 120, 40);
    assert!(screen(&b).contains("RATIO▲"), "{}", screen(&b));
    assert!(find(&b, "  10.0.0.2").unwrap().1 < find(&b, "* 10.0.0.3").unwrap().1);
}

#[test]
fn a_starved_row_is_red_and_lost_events_are_highlighted() {
    let mut snaps = seed_k16();
    let last = snaps.last_mut().unwrap();
    let p = last
        .peers
        .iter_mut()
        .find(|p| p.name == "10.0.0.2")
        .unwrap();
    p.interval_dispatches = 0;
    p.dispatch_rate = 0.0;
    p.share = 0.0;
    p.fairness = Some(0.0);
    p.backlogged = true;
    last.totals.events_lost = 5;
    last.totals.lost_by_tracepoint[Tracepoint::Dequeue] = 5;
    let mut st = state_with(&snaps, 4);
    let b = render(&mut st, 120, 40);
    let text = screen(&b);
    assert!(
        text.contains("1 peer starved: backlogged with 0 dispatches"),
        "{text}"
    );
    assert!(text.contains("5 events lost"), "{text}");
    let (x, y) = find(&b, "lost 5").expect("lost count in the header");
    assert_eq!(b[(x, y)].fg, Color::Red);
    assert!(b[(x, y)].modifier.contains(Modifier::REVERSED));
    let (x, y) = find(&b, "  10.0.0.2").unwrap();
    assert_eq!(b[(x + 2, y)].fg, Color::Red);
    let row = &lines(&b)[y as usize];
    assert!(row.contains("0.0%") && row.contains("0.00"), "{row:?}");
}

#[test]
fn yellow_between_half_and_nine_tenths() {
    let mut snaps = seed_k16();
    let p = snaps
        .last_mut()
        .unwrap()
        .peers
        .iter_mut()
        .find(|p| p.name == "10.0.0.2")
        .unwrap();
    p.fairness = Some(0.7);
    let mut st = state_with(&snaps, 4);
    let b = render(&mut st, 120, 40);
    let (x, y) = find(&b, "  10.0.0.2").unwrap();
    assert_eq!(b[(x + 2, y)].fg, Color::Yellow);
}

#[test]
fn drill_down_shows_history_histogram_and_transports() {
    let mut st = state_with(&seed_k16(), 4);
    key(&mut st, KeyCode::Down);
    assert_eq!(st.selected_entity().unwrap().name, "10.0.0.2");
    key(&mut st, KeyCode::Enter);
    assert!(matches!(st.screen, Screen::Detail { .. }));
    let b = render(&mut st, 120, 40);
    let text = screen(&b);
    for want in [
        "peer 10.0.0.2 (class 10.0.0.2) | Esc back",
        "share 11.1%",
        "fair share 50.0%",
        "ratio 0.22",
        "2 connections",
        "share vs fair share, last 6 snapshots",
        "queue wait (this interval)",
        "ratio  0.22 ",
        "p99 wait ",
        "transports (2)",
        "CLIENT",
        "10.0.0.1:2049",
        "thread time",
    ] {
        assert!(text.contains(want), "{want:?} missing:\n{text}");
    }
    // The ratio sparkline: 0.22 on a scale full at 1.5, so the lowest
    // bar, red like the row.
    let (x, y) = find(&b, "ratio  0.22").unwrap();
    assert_eq!(b[(x, y)].fg, Color::Red);
    assert_eq!(b[(x + 12, y)].symbol(), "▁", "{}", lines(&b)[y as usize]);
    // Histogram bars and the chart's lines are drawn.
    assert!(text.contains('█'), "{text}");
    assert!(text.chars().any(|c| ('\u{2801}'..='\u{28ff}').contains(&c)));
    // Both transports, each queued (the client is backlogged).
    assert_eq!(text.matches(":2049").count(), 2, "{text}");
    // Esc goes back to the table.
    key(&mut st, KeyCode::Esc);
    assert_eq!(st.screen, Screen::Table);
    assert!(screen(&render(&mut st, 120, 40)).contains("SHARE▼"));
}

#[test]
fn help_overlay_lists_the_keys() {
    let mut st = state_with(&seed_k16(), 4);
    key(&mut st, KeyCode::Char('?'));
    let b = render(&mut st, 120, 40);
    let text = screen(&b);
    for want in [
        "nfsdtop help",
        "quit",
        "pause / resume",
        "group by peer or by class",
        "workload or fairness view",
        "longer / shorter refresh interval",
        // What the header's figures cover.
        "wait (all) p50/p99 over every dispatch",
        "not a row's p50",
    ] {
        assert!(text.contains(want), "{want:?} missing:\n{text}");
    }
    key(&mut st, KeyCode::Esc);
    assert!(!screen(&render(&mut st, 120, 40)).contains("nfsdtop help"));
}

#[test]
fn eighty_by_twenty_four_fits() {
    let snaps = demo_snapshots("movers", Policy::RrClass, 4, 2);
    let mut st = state_with(&snaps, 2);
    let b = render(&mut st, 80, 24);
    let l = lines(&b);
    let text = l.join("\n");
    // Essential columns kept, low-priority ones dropped.
    let head = l
        .iter()
        .find(|l| l.contains("NAME"))
        .expect("header row")
        .clone();
    for want in ["SHARE▼", "FAIR", "RATIO", "WAIT99", "DISP/S"] {
        assert!(head.contains(want), "{want} not in {head:?}");
    }
    // CLASS is kept; thread time and the median wait go first.
    assert!(head.contains("CLASS"), "{head:?}");
    assert!(!head.contains("EXEC"), "{head:?}");
    // All ten peers fit, the footer is on the last line.
    for i in 1..=6 {
        assert!(text.contains(&format!("10.1.0.{i}")), "{text}");
    }
    for i in 1..=4 {
        assert!(text.contains(&format!("10.2.0.{i}")), "{text}");
    }
    assert!(l[23].contains("q quit"), "{:?}", l[23]);
    // Classes: the movers class gets a fifth, like each customer.
    key(&mut st, KeyCode::Char('g'));
    let b = render(&mut st, 80, 24);
    let text = screen(&b);
    assert!(text.contains("classes 5/5"), "{text}");
    let (_, y) = find(&b, "  movers ").unwrap();
    assert!(lines(&b)[y as usize].contains("20.0%"), "{text}");
    // Drill-down and help at 80x24 draw without losing the essentials.
    key(&mut st, KeyCode::Enter);
    let text = screen(&render(&mut st, 80, 24));
    assert!(text.contains("class "), "{text}");
    assert!(text.contains("share vs fair share"), "{text}");
    key(&mut st, KeyCode::Char('?'));
    let text = screen(&render(&mut st, 80, 24));
    assert!(text.contains("nfsdtop help"), "{text}");
}

#[test]
fn filter_and_pause_show_in_the_ui() {
    let snaps = demo_snapshots("movers", Policy::Flat, 3, 2);
    let mut st = state_with(&snaps[..2], 2);
    key(&mut st, KeyCode::Char('/'));
    for c in "10.2".chars() {
        key(&mut st, KeyCode::Char(c));
    }
    let text = screen(&render(&mut st, 100, 30));
    assert!(text.contains("filter: 10.2_"), "{text}");
    assert!(text.contains("peers 4/10"), "{text}");
    assert!(!text.contains("10.1.0.1"), "{text}");
    key(&mut st, KeyCode::Enter);
    key(&mut st, KeyCode::Char(' '));
    st.on_snapshot(Box::new(snaps[2].clone()));
    let text = screen(&render(&mut st, 100, 30));
    assert!(text.contains("PAUSED"), "{text}");
    assert!(text.contains("| filter: 10.2"), "{text}");
    key(&mut st, KeyCode::Esc);
    let text = screen(&render(&mut st, 100, 30));
    assert!(text.contains("peers 10/10"), "{text}");
}

#[test]
fn remote_link_states_reach_the_header() {
    let mut st = state_with(&seed_k16()[..1], 1);
    st.on_status(RemoteStatus::Connected {
        url: "http://127.0.0.1:9847".into(),
    });
    assert!(screen(&render(&mut st, 120, 30)).contains("connected"));
    st.on_status(RemoteStatus::Reconnecting {
        url: "http://127.0.0.1:9847".into(),
        attempt: 2,
        retry_in: Duration::from_secs(1),
        error: "connection refused".into(),
    });
    assert!(matches!(st.link(), LinkLabel::Reconnecting { .. }));
    let text = screen(&render(&mut st, 120, 30));
    assert!(
        text.contains("reconnecting (attempt 2): connection refused | data from 0s ago"),
        "{text}"
    );
    // No snapshot for over three intervals (of the source's 4 s): stale.
    let mut st = state_with(&seed_k16()[..1], 1);
    let t0 = st.now;
    st.tick(t0 + Duration::from_secs(11));
    let text = screen(&render(&mut st, 120, 30));
    assert!(!text.contains("stale"), "{text}");
    st.tick(t0 + Duration::from_secs(13));
    let text = screen(&render(&mut st, 120, 30));
    assert!(text.contains("stale: no data for"), "{text}");
}

#[test]
fn tiny_and_empty_terminals_never_panic() {
    let snaps = seed_k16();
    for (w, h) in [(1, 1), (10, 3), (20, 6), (30, 8), (40, 10), (300, 100)] {
        let mut st = state_with(&snaps, 4);
        render(&mut st, w, h);
        key(&mut st, KeyCode::Enter);
        render(&mut st, w, h);
        key(&mut st, KeyCode::Char('?'));
        render(&mut st, w, h);
        key(&mut st, KeyCode::Char('?'));
        key(&mut st, KeyCode::Char('w'));
        render(&mut st, w, h);
    }
    // Before the first snapshot.
    let mut st = State::new(
        Duration::from_secs(1),
        Some("no live nfsd: showing the built-in demo".into()),
    );
    let text = screen(&render(&mut st, 80, 24));
    assert!(text.contains("waiting for the first snapshot"), "{text}");
    assert!(
        text.contains("no live nfsd: showing the built-in demo"),
        "{text}"
    );
    let _ = EntityKind::Peer;
}

#[test]
fn peer_drill_down_at_eighty_by_twenty_four() {
    let mut st = state_with(&seed_k16(), 4);
    key(&mut st, KeyCode::End);
    key(&mut st, KeyCode::Enter);
    let b = render(&mut st, 80, 24);
    let l = lines(&b);
    let text = l.join("\n");
    for want in [
        "peer 10.0.0.2",
        "share 11.1%",
        "fair share 50.0%",
        "ratio 0.22",
        "thread time, 1.78 in flight)",
        "backlogged (2 queued)  2 connections",
        "10.0.0.1:2049",
        "transports (2)",
    ] {
        assert!(text.contains(want), "{want:?} missing:\n{text}");
    }
    assert!(l[23].contains("Esc back"), "{:?}", l[23]);
}

/// One snapshot of two clients each dispatched once, `a` in namespace
/// `ns_a` and `b` in `ns_b`, with the server view the pipeline gives it.
fn two_namespaces(ns_a: u32, ns_b: u32) -> Snapshot {
    use nfsdtop_agent::model::{Endpoint, Event, EventKind, XprtKey};
    let mut agg = Aggregator::default();
    agg.start_clock(0);
    for (i, (ns, client)) in [(ns_a, "10.0.0.1:700"), (ns_b, "10.0.0.2:700")]
        .into_iter()
        .enumerate()
    {
        let xprt = XprtKey {
            netns: ns,
            server: Endpoint::from_socket_addr("10.0.0.9:2049".parse().unwrap()),
            client: Endpoint::from_socket_addr(client.parse().unwrap()),
        };
        let ts = 1_000 + i as u64 * 10_000;
        for (ts, kind) in [
            (ts, EventKind::Enqueue { inflight: None }),
            (
                ts + 1_000,
                EventKind::Dequeue {
                    qtime_ns: None,
                    class: None,
                },
            ),
        ] {
            agg.ingest(&Event {
                ts_ns: ts,
                xprt,
                kind,
            });
        }
    }
    let info = SourceInfo {
        kind: SourceKind::Live,
        ..SourceInfo::default()
    };
    let mut s = agg.snapshot(1_000_000_000, 0.0, &info);
    let threads = nfsdtop_agent::server::NfsdThreads::default();
    s.server = nfsdtop_agent::server::Tracker::default().view(&threads, &s);
    s
}

/// Where nfsd serves two network namespaces, the header counts them and
/// each peer's drill-down says which one is its own; with one, neither.
#[test]
fn drill_down_shows_the_peers_namespace_where_there_are_two() {
    let mut st = state_with(&[two_namespaces(4026531840, 4026532077)], 1);
    let text = screen(&render(&mut st, 80, 24));
    assert!(text.contains("| netns 2"), "{text}");
    key(&mut st, KeyCode::Enter);
    let mut seen = Vec::new();
    for _ in 0..2 {
        let l = lines(&render(&mut st, 80, 24));
        let text = l.join("\n");
        let peer = ["10.0.0.1", "10.0.0.2"]
            .into_iter()
            .find(|p| text.contains(&format!("peer {p} ")))
            .unwrap_or_else(|| panic!("no peer's drill-down:\n{text}"));
        let want = if peer == "10.0.0.1" {
            "1 connections  netns 4026531840"
        } else {
            "1 connections  netns 4026532077"
        };
        let line = l.iter().find(|l| l.contains("connections")).unwrap();
        assert!(line.trim_end().ends_with(want), "{peer}: {line:?}\n{text}");
        seen.push(peer);
        key(&mut st, KeyCode::Down);
    }
    seen.sort();
    assert_eq!(seen, ["10.0.0.1", "10.0.0.2"]);

    let mut st = state_with(&[two_namespaces(7, 7)], 1);
    key(&mut st, KeyCode::Enter);
    let text = screen(&render(&mut st, 80, 24));
    assert!(
        text.contains("1 connections") && !text.contains("netns"),
        "{text}"
    );
}

/// Every cell of a rendered buffer, row by row.
fn screen_text(b: &Buffer) -> String {
    let mut out = String::new();
    for y in 0..b.area.height {
        for x in 0..b.area.width {
            out.push_str(b[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

#[test]
fn r_shows_the_other_services_own_shares_and_esc_closes_it() {
    use nfsdtop_agent::model::{Endpoint, Event, EventKind, ProcName, XprtKey};
    // lockd on 4045: two peers queued, each dispatched once; the first
    // with both backlogged (1/2 each), the second alone (1): fairness
    // 1/0.5 = 2.00 and 1/1.5 = 0.67, from the aggregator's own arithmetic.
    let ev = |client: &str, kind: EventKind, ts: u64| Event {
        ts_ns: ts,
        xprt: XprtKey {
            netns: 1,
            server: Endpoint::from_socket_addr("10.0.0.1:4045".parse().unwrap()),
            client: Endpoint::from_socket_addr(client.parse().unwrap()),
        },
        kind,
    };
    let deq = EventKind::Dequeue {
        qtime_ns: None,
        class: None,
    };
    let mut agg = Aggregator::default();
    agg.ingest(&ev(
        "10.0.0.5:700",
        EventKind::Enqueue { inflight: None },
        1,
    ));
    agg.ingest(&ev(
        "10.0.0.6:700",
        EventKind::Enqueue { inflight: None },
        2,
    ));
    agg.ingest(&ev("10.0.0.5:700", deq, 3));
    agg.ingest(&ev("10.0.0.6:700", deq, 4));
    agg.ingest(&ev(
        "10.0.0.6:700",
        EventKind::Procedure {
            name: ProcName::new("LOCK"),
            requests: 1,
            exec_ns: 10,
        },
        5,
    ));
    agg.ingest(&ev(
        "10.0.0.6:700",
        EventKind::Executed {
            exec_ns: 10,
            requests: 1,
            bytes: None,
            procedure: None,
        },
        5,
    ));
    let info = SourceInfo::default();
    let mut snap = agg.snapshot(1_000_000_000, 0.0, &info);
    snap.server.services = agg.services();
    let mut st = state_with(&[snap], 1);
    let before = screen_text(&render(&mut st, 100, 30));
    assert!(!before.contains("other RPC services"), "{before}");
    st.on_key(KeyEvent::new(KeyCode::Char('R'), KeyModifiers::NONE));
    let shown = screen_text(&render(&mut st, 100, 30));
    assert!(shown.contains("other RPC services"), "{shown}");
    assert!(
        shown.contains("lockd port 4045: 2 dispatches, 1 requests, 2 peers"),
        "{shown}"
    );
    let row = |peer: &str| {
        shown
            .lines()
            .find(|l| l.contains(peer))
            .unwrap_or_else(|| panic!("{peer} not on screen:\n{shown}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(
        row("10.0.0.5").contains("10.0.0.5 1 1.0 50.0% 2.00"),
        "{}",
        row("10.0.0.5")
    );
    assert!(
        row("10.0.0.6").contains("10.0.0.6 1 1.0 50.0% 0.67"),
        "{}",
        row("10.0.0.6")
    );
    st.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    let after = screen_text(&render(&mut st, 100, 30));
    assert!(!after.contains("other RPC services"), "{after}");
}
