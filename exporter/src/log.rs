//! The daemon's log lines, on stderr. Writing one never panics and never
//! fails the caller: with stderr closed (journald gone, `| head` ended)
//! the line is lost and the daemon carries on (`eprintln!` would panic
//! the task or thread that logged).

use std::fmt::Display;
use std::io::Write as _;

/// Write "nfsdtopd: {msg}" and a newline to stderr, ignoring any error.
pub fn log(msg: impl Display) {
    let line = format!("nfsdtopd: {msg}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
