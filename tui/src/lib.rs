//! The parts of the `nfsdtop` UI that do not touch a terminal or a source:
//! the view state ([`state`]), the drawing ([`view`]) and the lints shown
//! in the header ([`warnings`]). The binary (`src/main.rs`) wires them to a
//! terminal and a connection; the render tests and the frame-time
//! benchmark drive them on ratatui's `TestBackend`.

pub mod prefs;
pub mod state;
pub mod view;
pub mod warnings;
