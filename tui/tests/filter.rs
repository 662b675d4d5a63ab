//! The filter's comparisons on a drawn table: `ratio<0.6` keeps the
//! client under its share, and a word it cannot read is said in the
//! footer rather than silently matching nothing.

use std::time::Duration;

use crossterm::event::KeyCode;
use nfsdtop::state::State;
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

fn type_filter(st: &mut State, text: &str) {
    key(st, KeyCode::Char('/'));
    for c in text.chars() {
        key(st, KeyCode::Char(c));
    }
}

#[test]
fn a_comparison_filters_and_a_word_not_understood_is_said() {
    let mut st = seed_k16();
    type_filter(&mut st, "ratio<0.6");
    key(&mut st, KeyCode::Enter);
    let names: Vec<&str> = st
        .rows()
        .iter()
        .map(|&i| st.entities()[i as usize].name.as_str())
        .collect();
    assert_eq!(names, ["10.0.0.2"]);

    key(&mut st, KeyCode::Esc);
    type_filter(&mut st, "rate<3");
    let typing = lines(&mut st, 120, 30).join("\n");
    assert!(
        typing.contains("not understood: rate<3: no column \"rate\""),
        "{typing}"
    );
    key(&mut st, KeyCode::Enter);
    let screen = lines(&mut st, 120, 30);
    let footer = screen.last().unwrap();
    assert!(
        footer.starts_with("filter not understood: rate<3"),
        "{footer}"
    );
    // Left out of the match: both clients are still listed.
    assert_eq!(st.rows().len(), 2);
}
