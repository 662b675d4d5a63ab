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
