//! Preferences kept between runs of the real UI: what a run leaves
//! (grouping, sort, hidden columns, interval) the next one opens with,
//! flags given win, and a malformed file is said and left alone. Each
//! run's XDG_CONFIG_HOME is a directory of the test's own.

mod common;

use common::tmux::Tmux;

fn prefs_file(t: &Tmux) -> std::path::PathBuf {
    t.config.join("nfsdtop/prefs.toml")
}

#[test]
fn a_run_opens_as_the_last_one_left_and_flags_win() {
    let t = Tmux::new("prefs-save");
    t.start("--demo seed-k16 -d 0.5");
    t.wait_for("the table", |s| s.contains("peers 2/2"));
    // Classes, sorted by ratio ascending, WAIT50 hidden, every 1s.
    t.keys(&["g"]);
    t.wait_for("classes", |s| s.contains("classes 2/2"));
    t.keys(&["7"]);
    t.wait_for("by ratio", |s| s.contains("sort: ratio ▼"));
    t.keys(&["S"]);
    t.wait_for("ascending", |s| s.contains("sort: ratio ▲"));
    t.keys(&["c"]);
    t.wait_for("the chooser", |s| s.contains("[x] WAIT50"));
    for _ in 0..6 {
        t.keys(&["Down"]);
    }
    t.keys(&["Space"]);
    t.wait_for("WAIT50 hidden", |s| s.contains("[ ] WAIT50"));
    t.keys(&["Escape"]);
    // (Apart: an Escape followed at once by a key reads as Alt+key.)
    t.wait_for("the chooser closed", |s| !s.contains("[ ] WAIT50"));
    t.keys(&["+"]);
    t.wait_for("interval", |s| s.contains("every 1s"));
    t.keys(&["q"]);
    t.wait_for("exit", |s| s.contains("EXIT-STATUS=0"));
    let saved = std::fs::read_to_string(prefs_file(&t)).expect("preferences written on quit");
    for want in [
        "group = \"class\"",
        "sort = \"ratio\"",
        "descending = false",
        "hidden = [\"wait50\"]",
        "interval = 1.0",
    ] {
        assert!(saved.contains(want), "{want} in\n{saved}");
    }

    let t2 = Tmux::new("prefs-load");
    std::fs::create_dir_all(t2.config.join("nfsdtop")).unwrap();
    std::fs::write(prefs_file(&t2), &saved).unwrap();
    t2.start("--demo seed-k16");
    // The whole frame (a capture may catch one half drawn): polled until
    // it shows all of the remembered view, or the deadline says what not.
    t2.wait_for("the remembered view", |s| {
        s.contains("classes 2/2")
            && s.contains("sort: ratio ▲")
            && s.contains("every 1s")
            && s.contains("WAIT99")
            && !s.contains("WAIT50")
    });
    t2.keys(&["q"]);
    t2.wait_for("exit", |s| s.contains("EXIT-STATUS=0"));

    // Flags given on the command line win over the file.
    let t3 = Tmux::new("prefs-flags");
    std::fs::create_dir_all(t3.config.join("nfsdtop")).unwrap();
    std::fs::write(prefs_file(&t3), &saved).unwrap();
    t3.start("--demo seed-k16 --group peer -d 0.5");
    t3.wait_for("the flags' view", |s| {
        s.contains("peers 2/2") && s.contains("every 0.50s")
    });
}

#[test]
fn a_malformed_file_is_ignored_with_a_warning_and_left_alone() {
    let t = Tmux::new("prefs-bad");
    std::fs::create_dir_all(t.config.join("nfsdtop")).unwrap();
    let bad = "group = \"class\"\nsort = \"speed\"\n";
    std::fs::write(prefs_file(&t), bad).unwrap();
    t.start("--demo seed-k16 -d 0.5");
    let s = t.wait_for("the warning and the table", |s| {
        s.contains("preferences ignored") && s.contains("peers 2/2")
    });
    assert!(s.contains("prefs.toml:2: no column \"speed\""), "{s}");
    assert!(
        s.contains("sort: share"),
        "the defaults, not half the file: {s}"
    );
    t.keys(&["q"]);
    t.wait_for("exit", |s| s.contains("EXIT-STATUS=0"));
    assert_eq!(std::fs::read_to_string(prefs_file(&t)).unwrap(), bad);
}
