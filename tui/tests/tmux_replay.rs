//! The real `nfsdtop --replay` in tmux under playback control: pause
//! stops the source (the position stands still), `.` steps one interval,
//! Right and Left seek on and back, `>` doubles the speed. Every wait
//! polls the screen against a deadline.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::tmux::{Tmux, BIN};

/// The header's "replay at 12.5s x1 | ...": the position in seconds and
/// the speed.
fn position(screen: &str) -> Option<(f64, String)> {
    let line = screen.lines().find(|l| l.starts_with("replay at "))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let (pos, _length) = words.get(2)?.strip_suffix('s')?.split_once('/')?;
    let pos = pos.parse().ok()?;
    Some((pos, words.get(3)?.to_string()))
}

#[test]
fn replay_pause_step_seek_and_speed() {
    let dir = std::env::temp_dir().join(format!("nfsdtop-replay-ui-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("k8.nfsdrec");
    let o = Command::new(BIN)
        .args(["record", "-o"])
        .arg(&rec)
        .args(["--demo", "seed-k8", "--speed", "0", "--duration", "60"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let t = Tmux::new("replay");
    t.start(&format!("--replay '{}' -d 0.5", rec.display()));
    t.wait_for("the replay under way", |s| {
        position(s).is_some_and(|(p, _)| p >= 1.0) && s.contains("sort: share")
    });
    t.keys(&["p"]);
    let s = t.wait_for("paused", |s| s.contains("PAUSED"));
    let (p0, speed) = position(&s).unwrap();
    assert_eq!(speed, "x1", "{s}");
    // And how long the recording is: its 60 s (the last event a little
    // before the end).
    let line = s.lines().find(|l| l.starts_with("replay at ")).unwrap();
    let word = line.split_whitespace().nth(2).unwrap();
    let length: f64 = word
        .trim_end_matches('s')
        .split_once('/')
        .unwrap()
        .1
        .parse()
        .unwrap();
    assert!((59.0..=60.0).contains(&length), "{line}");
    // Paused means the source: the position stands still (watched for
    // a second and a half, two refresh intervals and more).
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(1500) {
        let s = t.screen();
        assert_eq!(
            position(&s).map(|p| p.0),
            Some(p0),
            "moved while paused:\n{s}"
        );
    }
    // One step: one interval of source time, still paused.
    t.keys(&["."]);
    let s = t.wait_for("a step", |s| {
        position(s).is_some_and(|(p, _)| (p - (p0 + 0.5)).abs() < 0.11)
    });
    assert!(s.contains("PAUSED"), "{s}");
    let p1 = position(&s).unwrap().0;
    // On 10 s, then back 10 s (the replay starts again and reads up to
    // there).
    t.keys(&["Right"]);
    let s = t.wait_for("10 s on", |s| {
        position(s).is_some_and(|(p, _)| (p - (p1 + 10.0)).abs() < 0.11)
    });
    assert!(s.contains("PAUSED") && s.contains("sort: share"), "{s}");
    t.keys(&["Left"]);
    let s = t.wait_for("10 s back", |s| {
        position(s).is_some_and(|(p, _)| (p - p1).abs() < 0.11)
    });
    assert!(s.contains("PAUSED"), "{s}");
    // Faster, and running again: the position moves on.
    t.keys(&[">"]);
    t.wait_for("double speed", |s| {
        position(s).is_some_and(|(_, x)| x == "x2")
    });
    t.keys(&["p"]);
    t.wait_for("running at double speed", |s| {
        !s.contains("PAUSED") && position(s).is_some_and(|(p, _)| p > p1 + 1.0)
    });
    t.keys(&["q"]);
    let s = t.wait_for("exit", |s| s.contains("EXIT-STATUS="));
    assert!(s.contains("EXIT-STATUS=0"), "{s}");
    let _ = std::fs::remove_dir_all(&dir);
}
