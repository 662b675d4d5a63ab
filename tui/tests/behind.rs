//! An agent that reads the kernel's records late says so in the header
//! (`Snapshot::behind_s`), and one that keeps up does not.

use std::time::Duration;

use nfsdtop::state::State;
use nfsdtop::view;
use nfsdtop_agent::model::Snapshot;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn screen(lag_s: Option<f64>) -> String {
    let mut s = Snapshot {
        interval_s: 1.0,
        ..Snapshot::default()
    };
    s.totals.lag_s = lag_s;
    let mut st = State::new(Duration::from_secs(1), None);
    st.on_snapshot(Box::new(s));
    let mut term = Terminal::new(TestBackend::new(160, 20)).unwrap();
    term.draw(|f| view::draw(f, &mut st)).unwrap();
    let buf = term.backend().buffer().clone();
    (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_header_says_when_the_agent_is_behind_the_kernel() {
    let behind = screen(Some(12.34));
    assert!(
        behind.contains("BEHIND: 12.3s behind the kernel"),
        "{behind}"
    );
    for lag in [None, Some(0.05)] {
        let s = screen(lag);
        assert!(!s.contains("BEHIND"), "lag {lag:?}:\n{s}");
    }
}
