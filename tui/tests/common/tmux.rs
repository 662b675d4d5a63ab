//! The tmux harness of the UI's end-to-end tests: a private tmux server
//! running the real `nfsdtop`, keys in, screen out (`capture-pane`).
//! Every wait polls the screen against a deadline; nothing sleeps to
//! synchronise. tmux comes from scripts/setup.sh.
#![allow(dead_code)] // each test file uses its own part of the harness

use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_nfsdtop");
/// Generous: a debug build on a busy two-core machine.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A private tmux server (its own socket), killed on drop. nfsdtop runs
/// with `XDG_CONFIG_HOME` in a directory of its own (removed on drop), so
/// no test reads or writes the user's preferences, nor another test's.
pub struct Tmux {
    socket: String,
    pub config: std::path::PathBuf,
}

impl Tmux {
    pub fn new(tag: &str) -> Tmux {
        let probe = Command::new("tmux").arg("-V").output();
        assert!(
            probe.as_ref().is_ok_and(|o| o.status.success()),
            "tmux is needed for this test: run scripts/setup.sh (or apt-get install tmux)"
        );
        let config =
            std::env::temp_dir().join(format!("nfsdtop-e2e-config-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&config);
        std::fs::create_dir_all(&config).expect("a config directory for the test");
        Tmux {
            socket: format!("nfsdtop-e2e-{}-{tag}", std::process::id()),
            config,
        }
    }

    pub fn run(&self, args: &[&str]) -> Output {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// Start `nfsdtop ARGS` in a 120x40 session, after a marker line, and
    /// keep the pane open after it exits (`cat` copies typed lines).
    pub fn start(&self, args: &str) {
        self.start_env("", args)
    }

    /// The same with extra `NAME=value` environment words.
    pub fn start_env(&self, env: &str, args: &str) {
        self.start_sized(120, 40, env, args)
    }

    /// The same in a `cols`x`rows` session.
    pub fn start_sized(&self, cols: u16, rows: u16, env: &str, args: &str) {
        let script = format!(
            "printf 'PRE-RUN-MARKER\\n'; XDG_CONFIG_HOME='{}' {env} LANG=C.UTF-8 LC_ALL=C.UTF-8 \
             '{BIN}' {args}; printf 'EXIT-STATUS=%s\\n' $?; exec cat",
            self.config.display()
        );
        self.run(&[
            "new-session",
            "-d",
            "-s",
            "e2e",
            "-x",
            &cols.to_string(),
            "-y",
            &rows.to_string(),
            "sh",
            "-c",
            &script,
        ]);
    }

    /// The pid of nfsdtop, the child of the pane's `sh -c`.
    pub fn ui_pid(&self) -> u32 {
        let sh = self.display("#{pane_pid}");
        let children = std::fs::read_to_string(format!("/proc/{sh}/task/{sh}/children"))
            .expect("/proc children of the pane's shell");
        let pid = children.split_whitespace().next().expect("nfsdtop's pid");
        pid.parse().expect("a pid")
    }

    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "e2e"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// Bytes typed into the pane as they are (escape sequences included).
    pub fn raw(&self, bytes: &[u8]) {
        let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut args = vec!["send-keys", "-t", "e2e", "-H"];
        args.extend(hex.iter().map(String::as_str));
        self.run(&args);
    }

    /// A left click at 1-based `x`, `y`, as an xterm SGR mouse report
    /// (press and release).
    pub fn mouse_click(&self, x: u16, y: u16) {
        self.raw(format!("\x1b[<0;{x};{y}M\x1b[<0;{x};{y}m").as_bytes());
    }

    /// One notch of the wheel, down, at 1-based `x`, `y`.
    pub fn mouse_wheel_down(&self, x: u16, y: u16) {
        self.raw(format!("\x1b[<65;{x};{y}M").as_bytes());
    }

    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "e2e"]).stdout).into_owned()
    }

    pub fn display(&self, format: &str) -> String {
        String::from_utf8_lossy(&self.run(&["display", "-p", "-t", "e2e", format]).stdout)
            .trim()
            .to_string()
    }

    /// Poll the screen until `ok` holds; panic with the last screen at the
    /// deadline.
    pub fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            if start.elapsed() > DEADLINE {
                panic!("timed out waiting for {what}; screen:\n{s}");
            }
            // Polling interval of the screen scrape, not a synchronisation.
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
        let _ = std::fs::remove_dir_all(&self.config);
    }
}

/// The line of the table whose name column is `name` (after the marker).
pub fn row_of(screen: &str, name: &str) -> Option<usize> {
    screen
        .lines()
        .position(|l| l.starts_with(&format!("  {name} ")) || l.starts_with(&format!("* {name} ")))
}
