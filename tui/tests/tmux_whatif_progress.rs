//! `nfsdtop whatif` says each stage of a long fit on stderr when stderr
//! is a terminal (here tmux's), and nothing when it is piped: the report
//! alone for scripts and logs.

mod common;

use std::process::{Command, Stdio};

use common::tmux::{Tmux, BIN};

#[test]
fn whatif_shows_its_stages_on_a_terminal_only() {
    let dir = std::env::temp_dir().join(format!("nfsdtop-whatif-progress-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("k4.nfsdrec");
    let o = Command::new(BIN)
        .args([
            "record",
            "--demo",
            "seed-k4",
            "--speed",
            "0",
            "--duration",
            "10",
            "-o",
        ])
        .arg(&file)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let piped = Command::new(BIN)
        .args(["whatif", "--policy", "flat,rr-peer"])
        .arg(&file)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(piped.status.success());
    let err = String::from_utf8_lossy(&piped.stderr);
    assert!(!err.contains("whatif:"), "piped stderr: {err}");

    let t = Tmux::new("whatif-progress");
    t.start(&format!(
        "whatif --policy flat,rr-peer '{}'",
        file.display()
    ));
    let screen = t.wait_for("the report after its stages", |s| {
        s.contains("EXIT-STATUS=")
    });
    assert!(screen.contains("EXIT-STATUS=0"), "{screen}");
    for stage in [
        "whatif: reading and fitting ",
        "transports fitted; calibrating (up to 12 simulations of 60 s)...",
        "whatif: simulating flat (1 of 2)...",
        "whatif: simulating rr-peer (2 of 2)...",
    ] {
        assert!(screen.contains(stage), "{stage:?} missing:\n{screen}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
