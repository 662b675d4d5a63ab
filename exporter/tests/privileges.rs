//! nfsdtopd started without the capabilities the live source needs exits
//! non-zero and names them (and the daemon never falls back to a demo).

use std::path::Path;
use std::process::Command;

#[test]
fn missing_capabilities_are_named() {
    let root = std::fs::read_to_string("/proc/self/status")
        .map(|s| s.lines().any(|l| l.starts_with("Uid:\t0\t")))
        .unwrap_or(false);
    if !(root && Path::new(nfsdtop_testkit::SETPRIV).exists()) {
        // It drops privileges with setpriv, so it must start as root.
        nfsdtop_agent::testing::skip("not root, or no /usr/bin/setpriv");
        return;
    }
    // A tracefs fixture with the 6.6+ sunrpc formats: the daemon gets past
    // "is nfsd here" and fails on privileges, as on a real server.
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../agent/tests/fixtures/formats/6.6+");
    // The checkout may sit where an unprivileged user cannot read (/root):
    // run a world-readable copy of the binary and the fixture.
    let dir = std::env::temp_dir().join(format!("nfsdtopd-caps-{}", std::process::id()));
    let tracefs = dir.join("tracefs");
    copy_tree(&fixture, &tracefs);
    let bin = dir.join("nfsdtopd");
    std::fs::copy(env!("CARGO_BIN_EXE_nfsdtopd"), &bin).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for p in [&dir, &bin] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = nfsdtop_testkit::as_nobody(&bin)
        .args(["--listen", "127.0.0.1:0", "--tracefs"])
        .arg(&tracefs)
        .output()
        .expect("run setpriv");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "must fail: {err}");
    for cap in ["CAP_BPF", "CAP_PERFMON"] {
        assert!(err.contains(cap), "error does not name {cap}: {err}");
    }
    assert!(err.contains("missing privileges"), "{err}");
    // The binary to grant them to is the daemon, not the TUI.
    assert!(err.contains("$(command -v nfsdtopd)"), "{err}");
    assert!(!err.contains("listening on"), "{err}");

    // As root, the same fixture gets past the privilege check (and fails
    // later, on attaching to a tracefs that is only a fixture).
    let out = Command::new(env!("CARGO_BIN_EXE_nfsdtopd"))
        .args(["--listen", "127.0.0.1:0", "--tracefs"])
        .arg(&tracefs)
        .output()
        .expect("run nfsdtopd");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("missing privileges"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn copy_tree(from: &Path, to: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(to).unwrap();
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
}
