//! The interactive UI's behaviour without a terminal.

use std::process::{Command, Stdio};

#[test]
fn without_a_terminal_the_ui_points_at_batch_mode() {
    let out = Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
        .args(["--demo", "seed-k4"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the interactive UI needs a terminal: use -b for batch output"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "no escape sequences on a pipe");
}

#[test]
fn a_bad_connect_url_fails_before_any_ui() {
    let out = Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
        .args(["--connect", "ftp://server:9847", "-b", "-n", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ftp:// is not supported: use http:// or https://"),
        "{err}"
    );
}
