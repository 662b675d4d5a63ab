//! Unit tests of the UI state: keys, sorting, filtering, selection,
//! pause and staleness, without a terminal.

use super::*;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn key(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

fn snap(n: usize) -> Box<Snapshot> {
    Box::new(Snapshot {
        interval_s: 1.0,
        peers: (0..n)
            .map(|i| EntityStats {
                name: format!("10.0.{}.{}", i / 256, i % 256),
                class: if i % 2 == 0 { "even" } else { "odd" }.into(),
                share: (i + 1) as f64 / 1000.0,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    })
}

#[test]
fn sort_filter_select_and_scroll() {
    let mut st = State::new(Duration::from_secs(1), None);
    st.on_snapshot(snap(100));
    assert_eq!(st.selected_entity().unwrap().name, "10.0.0.99");
    st.on_key(key(KeyCode::Char('S')));
    assert_eq!(
        st.selected_entity().unwrap().name,
        "10.0.0.99",
        "selection follows"
    );
    st.on_key(key(KeyCode::Home));
    assert_eq!(st.selected_entity().unwrap().name, "10.0.0.0");
    st.fit(10);
    st.on_key(key(KeyCode::PageDown));
    st.on_key(key(KeyCode::Char('j')));
    st.fit(10);
    assert_eq!(st.selected(), 11);
    assert_eq!(st.offset(), 2);
    st.on_key(key(KeyCode::End));
    st.fit(10);
    assert_eq!((st.selected(), st.offset()), (99, 90));
    // Filter: live while typing, Enter keeps it, Esc clears it.
    st.on_key(key(KeyCode::Char('/')));
    for c in "0.0.4".chars() {
        st.on_key(key(KeyCode::Char(c)));
    }
    assert_eq!(st.rows().len(), 11, "10.0.0.4 and 10.0.0.40..49");
    st.on_key(key(KeyCode::Enter));
    assert_eq!(st.filter, "0.0.4");
    st.on_snapshot(snap(100));
    assert_eq!(st.rows().len(), 11, "kept across snapshots");
    st.on_key(key(KeyCode::Esc));
    assert_eq!(st.rows().len(), 100);
    // Class filter matches the class column too.
    st.on_key(key(KeyCode::Char('/')));
    for c in "ODD".chars() {
        st.on_key(key(KeyCode::Char(c)));
    }
    assert_eq!(st.rows().len(), 50);
}

/// Twelve peers within a dispatch of 1/12 each, the last digits
/// reshuffled every interval: the rows and the selection stay put.
#[test]
fn near_equal_shares_keep_their_order_and_the_selection() {
    let mut st = State::new(Duration::from_secs(1), None);
    let names = |st: &State| -> Vec<String> {
        st.rows()
            .iter()
            .map(|i| st.entities()[*i as usize].name.clone())
            .collect()
    };
    let mut first = None;
    for round in 0..10u64 {
        let mut s = snap(12);
        for (i, e) in s.peers.iter_mut().enumerate() {
            // 2666 or 2667 dispatches of 32000, which one varies.
            let extra = ((i as u64 * 7 + round * 5) % 12 < 8) as u64;
            e.share = (2666 + extra) as f64 / 32_000.0;
        }
        st.on_snapshot(s);
        if round == 0 {
            st.on_key(key(KeyCode::Down));
            st.on_key(key(KeyCode::Down));
            first = Some(names(&st));
        }
        assert_eq!(Some(names(&st)), first, "round {round}");
        assert_eq!(st.selected_entity().unwrap().name, "10.0.0.2");
    }
    let want: Vec<String> = (0..12).map(|i| format!("10.0.0.{i}")).collect();
    assert_eq!(first.unwrap(), want, "ties go by address");
}

/// One address in two network namespaces is two peers: the selection
/// and the drill-down stay on the one chosen when their order flips.
#[test]
fn one_address_in_two_namespaces_is_selected_and_shown_apart() {
    let mut st = State::new(Duration::from_secs(1), None);
    let two = |share_ns1: f64, share_ns2: f64| {
        let mut s = snap(0);
        for (ns, share) in [(1, share_ns1), (2, share_ns2)] {
            s.peers.push(EntityStats {
                name: "10.0.0.1".into(),
                netns: ns,
                share,
                dispatches: ns as u64 * 100,
                ..Default::default()
            });
        }
        s
    };
    st.on_snapshot(two(0.6, 0.4));
    // Sorted by share, descending: namespace 1's row first.
    assert_eq!(st.selected_entity().unwrap().netns, 1);
    st.on_key(key(KeyCode::Down));
    assert_eq!(st.selected_entity().unwrap().netns, 2);
    st.on_key(key(KeyCode::Enter));
    assert_eq!(st.detail_entity().unwrap().dispatches, 200);
    st.on_snapshot(two(0.3, 0.7));
    assert_eq!(st.selected_entity().unwrap().netns, 2, "selection follows");
    assert_eq!(st.selected(), 0, "now the first row");
    assert_eq!(st.detail_entity().unwrap().netns, 2, "drill-down stays");
}

#[test]
fn top_n_keeps_the_first_rows_of_the_sort() {
    let mut st = State::new(Duration::from_secs(1), None);
    st.top = Some(5);
    st.on_snapshot(snap(100));
    assert_eq!(st.rows().len(), 5);
    assert_eq!(st.selected_entity().unwrap().name, "10.0.0.99");
    st.on_key(key(KeyCode::Char('S')));
    assert_eq!(st.rows().len(), 5);
    assert_eq!(st.entities()[st.rows()[0] as usize].name, "10.0.0.0");
}

#[test]
fn pause_freezes_the_display_not_the_data() {
    let mut st = State::new(Duration::from_secs(1), None);
    st.on_snapshot(snap(3));
    st.on_key(key(KeyCode::Char(' ')));
    st.on_snapshot(snap(5));
    assert_eq!(st.entities().len(), 3);
    assert_eq!(st.history.seq(), 2);
    st.on_key(key(KeyCode::Char('p')));
    assert_eq!(st.entities().len(), 5);
}

#[test]
fn keys_map_to_actions() {
    let mut st = State::new(Duration::from_secs(1), None);
    assert_eq!(
        st.on_key(key(KeyCode::Char('+'))),
        Action::SetInterval(Duration::from_secs(2))
    );
    assert_eq!(
        st.on_key(key(KeyCode::Char('-'))),
        Action::SetInterval(Duration::from_secs(1))
    );
    assert_eq!(st.on_key(key(KeyCode::Char('q'))), Action::Quit);
    assert_eq!(
        st.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
        Action::Quit
    );
    // A remote nfsdtopd keeps its own pace: nothing to send.
    st.on_status(RemoteStatus::Connected { url: "x".into() });
    assert_eq!(st.on_key(key(KeyCode::Char('+'))), Action::Redraw);
    assert!(st.message.as_deref().unwrap().contains("remote nfsdtopd"));
    assert_eq!(st.interval, Duration::from_secs(1));
    // Keys on an empty table never panic.
    for c in [KeyCode::Enter, KeyCode::Down, KeyCode::End, KeyCode::PageUp] {
        st.on_key(key(c));
    }
    assert_eq!(st.screen, Screen::Table);
}

#[test]
fn stale_after_three_intervals_without_a_snapshot() {
    let mut st = State::new(Duration::from_secs(1), None);
    let t0 = st.now;
    st.on_snapshot(snap(1));
    st.tick(t0 + Duration::from_millis(2900));
    assert_eq!(st.link(), LinkLabel::Ok);
    st.tick(t0 + Duration::from_millis(3100));
    assert!(matches!(st.link(), LinkLabel::Stale(_)));
    st.on_snapshot(snap(1));
    assert_eq!(st.link(), LinkLabel::Ok);
}

#[test]
fn digits_sort_by_each_column_and_again_reverses() {
    let mut st = State::new(Duration::from_secs(1), None);
    st.on_snapshot(snap(5));
    let first = |st: &State| st.entities()[st.rows()[0] as usize].name.clone();
    st.on_key(key(KeyCode::Char('1')));
    assert_eq!((st.sort, st.descending), (Column::Name, false));
    assert_eq!(first(&st), "10.0.0.0");
    st.on_key(key(KeyCode::Char('1')));
    assert_eq!((st.sort, st.descending), (Column::Name, true));
    assert_eq!(first(&st), "10.0.0.4");
    st.on_key(key(KeyCode::Char('5')));
    assert_eq!((st.sort, st.descending), (Column::SHARE, true));
    st.on_key(key(KeyCode::Char('0')));
    assert_eq!(st.sort, Column::EXEC);
    // Grouped by class, the second column is PEERS; back to CLASS.
    st.on_key(key(KeyCode::Char('2')));
    assert_eq!(st.sort, Column::Class);
    st.on_key(key(KeyCode::Char('g')));
    assert_eq!(st.sort, Column::Peers);
    st.on_key(key(KeyCode::Char('g')));
    assert_eq!(st.sort, Column::Class);
}

#[test]
fn clicks_sort_and_select_and_the_wheel_scrolls() {
    use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    let mouse = |kind, column, row| MouseEvent {
        kind,
        column,
        row,
        modifiers: KeyModifiers::NONE,
    };
    let click = |c, r| mouse(MouseEventKind::Down(MouseButton::Left), c, r);
    let mut st = State::new(Duration::from_secs(1), None);
    st.on_snapshot(snap(20));
    // Before a draw nothing is where: clicks do nothing.
    assert_eq!(st.on_mouse(click(1, 1)), Action::None);
    st.fit(10);
    st.geometry = Some(Geometry {
        header_y: 4,
        body_rows: 10,
        columns: vec![(Column::Name, 0, 20), (Column::SHARE, 21, 27)],
    });
    st.on_mouse(click(3, 4));
    assert_eq!((st.sort, st.descending), (Column::Name, false));
    st.on_mouse(click(3, 4));
    assert!(st.descending, "a second click reverses");
    assert_eq!(st.on_mouse(click(20, 4)), Action::None, "the gap");
    st.on_mouse(click(22, 4));
    assert_eq!(st.sort, Column::SHARE);
    // Rows: the third on screen.
    st.on_mouse(click(5, 7));
    assert_eq!(st.selected(), 2);
    assert_eq!(st.selected_entity().unwrap().name, "10.0.0.17");
    // Below the last row: nothing.
    assert_eq!(st.on_mouse(click(5, 15)), Action::None);
    st.on_mouse(mouse(MouseEventKind::ScrollDown, 5, 7));
    assert_eq!(st.selected(), 5);
    st.on_mouse(mouse(MouseEventKind::ScrollUp, 5, 7));
    assert_eq!(st.selected(), 2);
    // Not on the drill-down or under an overlay.
    st.show_help = true;
    assert_eq!(st.on_mouse(click(5, 8)), Action::None);
    assert_eq!(st.selected(), 2);
}
