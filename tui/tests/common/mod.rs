//! Helpers shared by the integration tests.

#[allow(dead_code)] // the off-screen tests only
pub mod screen;
pub mod tmux;

/// Write a demo scenario to a directory of its own under the temporary
/// directory (the caller removes it) and return the file's path.
#[allow(dead_code)] // not every test file writes scenarios
pub fn scenario(tag: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("nfsdtop-scenario-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("scenario.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// Run the nfsdtop binary to completion; its stdout (it must succeed).
#[allow(dead_code)] // not every test file runs it
pub fn nfsdtop(args: &[&str]) -> String {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
        .args(args)
        .output()
        .expect("run nfsdtop");
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}
