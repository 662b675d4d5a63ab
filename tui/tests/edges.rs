//! The TUI at the edges of its terminal: on a wide one the NAME column
//! stops growing (the numbers stay by their names); on an 80-column one
//! the R panel's lines wrap rather than being cut. (The demo banner at 80
//! columns: tests/first_contact.rs, on the real binary.)

use std::time::Duration;

use crossterm::event::KeyCode;
use nfsdtop::state::State;
use nfsdtop::view::table::NAME_MAX;
use nfsdtop_agent::aggregate::{Aggregator, Limits};
use nfsdtop_agent::model::SourceInfo;

mod common;

use common::screen::{demo_snapshots, key, lines};

fn seed_k16() -> State {
    let agg = Aggregator::new(Default::default(), Limits::default());
    let snaps = demo_snapshots("seed-k16", agg, |a, now, t| {
        a.snapshot(now, t, &SourceInfo::default())
    });
    let mut st = State::new(Duration::from_secs(2), None);
    for s in snaps {
        st.on_snapshot(Box::new(s));
    }
    st
}

#[test]
fn the_name_column_stops_growing_on_a_wide_terminal() {
    let mut st = seed_k16();
    for width in [200u16, 300] {
        let screen = lines(&mut st, width, 30);
        let head = screen
            .iter()
            .find(|l| l.contains("  NAME "))
            .expect("the table's header");
        let class = head.find("CLASS").expect("CLASS column") as u16;
        assert!(
            class <= NAME_MAX + 1,
            "{width} columns: CLASS at {class}, NAME capped at {NAME_MAX}:\n{head}"
        );
        // Nothing is left out for it: the last column is there.
        assert!(head.contains("EXEC"), "{head}");
    }
    // Narrow, NAME takes what is left (here less than the cap).
    let screen = lines(&mut st, 80, 30);
    let head = screen.iter().find(|l| l.contains("  NAME ")).unwrap();
    assert!(head.find("CLASS").unwrap() < NAME_MAX as usize, "{head}");
}

#[test]
fn the_services_panel_wraps_at_80_columns() {
    let mut st = seed_k16();
    key(&mut st, KeyCode::Char('R'));
    let screen = lines(&mut st, 80, 24).join("\n");
    let text: String = screen
        .lines()
        .filter(|l| l.contains('│'))
        .map(|l| l.trim_matches(|c: char| c == ' ' || c == '│').to_string())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        text.contains(
            "no other RPC service dispatched: lockd and the NFS callback service show here \
             when they do"
        ),
        "{screen}"
    );
}

/// The drill-down chart's legend is its title, each name in its line's
/// colour, at any size; no legend box is drawn over the lines.
#[test]
fn the_drill_down_chart_has_a_legend_that_covers_no_line() {
    use nfsdtop::view::styles::{FAIR, SHARE};
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;
    for (w, h) in [(80u16, 24u16), (120, 40), (200, 50)] {
        let mut st = seed_k16();
        common::screen::open_detail(&mut st, "10.0.0.2");
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        term.draw(|f| nfsdtop::view::draw(f, &mut st)).unwrap();
        let b = term.backend().buffer().clone();
        let rows: Vec<String> = (0..h)
            .map(|y| (0..w).map(|x| b[(x, y)].symbol()).collect())
            .collect();
        let (y, line) = rows
            .iter()
            .enumerate()
            .find(|(_, l)| l.contains(" share vs fair share, last "))
            .unwrap_or_else(|| panic!("{w}x{h}: no legend:\n{}", rows.join("\n")));
        let x = line[..line.find(" share vs").unwrap()].chars().count() as u16 + 1;
        assert_eq!(b[(x, y as u16)].fg, SHARE, "{w}x{h}: 'share' in its colour");
        assert_eq!(
            b[(x + 9, y as u16)].fg,
            FAIR,
            "{w}x{h}: 'fair share' in its colour"
        );
        // No box of ratatui's legend below the title (its names, boxed).
        let boxed = rows[y + 1..]
            .iter()
            .any(|l| l.contains("│share") || l.contains("│fair share"));
        assert!(
            !boxed,
            "{w}x{h}: a legend box over the chart:\n{}",
            rows.join("\n")
        );
    }
}

/// The column chooser (`c`): a column hidden there leaves the table, and
/// the room it frees goes to a column the width had dropped.
#[test]
fn the_column_chooser_hides_a_column_and_frees_its_room() {
    let mut st = seed_k16();
    let head = |st: &mut State| -> String {
        lines(st, 80, 24)
            .into_iter()
            .find(|l| l.contains("  NAME "))
            .unwrap()
    };
    let before = head(&mut st);
    assert!(
        before.contains("WAIT99") && !before.contains("EXEC"),
        "{before}"
    );
    key(&mut st, KeyCode::Char('c'));
    let menu = lines(&mut st, 80, 24).join("\n");
    assert!(menu.contains("[x] WAIT99"), "{menu}");
    // CLASS, CONN, DISP/S, SHARE, FAIR, RATIO, WAIT50, WAIT99: the 8th.
    for _ in 0..7 {
        key(&mut st, KeyCode::Down);
    }
    key(&mut st, KeyCode::Char(' '));
    assert!(lines(&mut st, 80, 24).join("\n").contains("[ ] WAIT99"));
    key(&mut st, KeyCode::Esc);
    let after = head(&mut st);
    assert!(!after.contains("WAIT99"), "{after}");
    assert!(
        after.contains("RATIO") && after.contains("WAIT50"),
        "{after}"
    );
}
