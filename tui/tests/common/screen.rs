//! The TUI drawn off-screen (ratatui's TestBackend) for tests that look at
//! its text without a terminal, and keys fed to its state.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use nfsdtop::state::State;
use nfsdtop::view;
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
