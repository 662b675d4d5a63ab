//! `nfsdtop record` whose output is deleted (the file or its directory) or
//! replaced while it records: it fails (exit 1) saying the recording is
//! lost, instead of "recorded N events ... to F" with F gone.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "nfsdtop-record-deleted-{}-{tag}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A recording of the seed-k8 demo to `f`, once a frame is on disk.
fn recording(f: &Path) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
        .args(["record", "-o"])
        .arg(f)
        .args(["--demo", "seed-k8"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::metadata(f).map_or(0, |m| m.len()) < 4096 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the recorder exited early"
        );
        assert!(Instant::now() < deadline, "the recording never grew");
        // Polling the file's size against the deadline.
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// SIGTERM (which finishes a recording), then its exit status and stderr.
fn stop(child: Child) -> (Option<i32>, String) {
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let o = child.wait_with_output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// What a case does to the recording's directory and file.
type Remove = fn(&Path, &Path);

#[test]
fn a_recording_whose_file_or_directory_goes_fails_saying_so() {
    let cases: [(&str, Remove, &str); 3] = [
        (
            "file",
            |_, f| std::fs::remove_file(f).unwrap(),
            "the file was deleted",
        ),
        (
            "dir",
            |d, _| std::fs::remove_dir_all(d).unwrap(),
            "the file was deleted",
        ),
        (
            "replaced",
            |d, f| {
                std::fs::rename(f, d.join("old")).unwrap();
                std::fs::write(f, b"another").unwrap();
            },
            "the path was given to another file",
        ),
    ];
    for (tag, remove, want) in cases {
        let d = dir(tag);
        let f = d.join("r.nfsdrec");
        let child = recording(&f);
        remove(&d, &f);
        let (code, err) = stop(child);
        assert_eq!(code, Some(1), "{tag}: {err}");
        assert!(
            err.contains(&format!("recording to {}", f.display())),
            "{tag}: {err}"
        );
        assert!(
            err.contains(want) && err.contains("the recording is lost"),
            "{tag}: {err}"
        );
        assert!(
            !err.contains("recorded "),
            "{tag}: no summary of a lost file: {err}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }
    // Moved to another name: the path names nothing.
    let d = dir("moved");
    let f = d.join("r.nfsdrec");
    let child = recording(&f);
    std::fs::rename(&f, d.join("elsewhere")).unwrap();
    let (code, err) = stop(child);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("the file was moved away"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}
