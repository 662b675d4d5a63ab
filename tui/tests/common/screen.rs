//! The TUI drawn off-screen (ratatui's TestBackend) for tests that look at
//! its text without a terminal, keys fed to its state, and the demo
//! snapshots they draw.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use nfsdtop::state::State;
use nfsdtop::view;
use nfsdtop_agent::aggregate::Aggregator;
use nfsdtop_agent::model::Snapshot;
use nfsdtop_agent::source::demo::{Scenario, Simulator};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

/// Every line of one frame of `st` on a `w`x`h` screen.
pub fn lines(st: &mut State, w: u16, h: u16) -> Vec<String> {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| view::draw(f, st)).unwrap();
    let b = term.backend().buffer().clone();
    (0..h)
        .map(|y| (0..w).map(|x| b[(x, y)].symbol()).collect::<String>())
        .collect()
}

/// A key press without modifiers.
pub fn key(st: &mut State, code: KeyCode) {
    st.on_key(KeyEvent::new(code, KeyModifiers::NONE));
}

/// Open the drill-down of the table's row named `name` (by keys, as a
/// user would).
pub fn open_detail(st: &mut State, name: &str) {
    let row = st
        .rows()
        .iter()
        .position(|&i| st.entities()[i as usize].name == name)
        .unwrap_or_else(|| panic!("no row {name}"));
    key(st, KeyCode::Home);
    for _ in 0..row {
        key(st, KeyCode::Down);
    }
    key(st, KeyCode::Enter);
}

/// Three snapshots of the built-in demo `scenario`, 2 s apart, by `agg`
/// (set up by the caller): `snap(agg, now_ns, time)` takes each.
pub fn demo_snapshots(
    scenario: &str,
    mut agg: Aggregator,
    mut snap: impl FnMut(&mut Aggregator, u64, f64) -> Snapshot,
) -> Vec<Snapshot> {
    let mut sim = Simulator::new(Scenario::builtin(scenario).unwrap());
    let mut buf = Vec::new();
    (1..=3u64)
        .map(|i| {
            buf.clear();
            sim.run_until(i * 2_000_000_000, &mut buf);
            agg.ingest_all(&buf);
            snap(&mut agg, sim.now_ns(), i as f64)
        })
        .collect()
}
