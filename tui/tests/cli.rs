//! The command-line contract: batch output shapes and clear errors for bad
//! input (non-zero exit, a message naming the problem and where it is).

use std::io::Write;
use std::process::{Command, Output};

fn nfsdtop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
        .args(args)
        .output()
        .expect("run nfsdtop")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn batch_json_follows_the_contract() {
    let o = nfsdtop(&[
        "--demo", "seed-k16", "--policy", "flat", "-b", "-n", "3", "-d", "1", "--speed", "0",
        "--format", "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(lines.len(), 3);
    let last = &lines[2];
    for key in ["time", "interval_s", "source", "totals", "entities"] {
        assert!(last.get(key).is_some(), "missing {key}");
    }
    assert_eq!(last["source"]["kind"], "demo");
    assert_eq!(last["source"]["wait_source"], "enqueue-dequeue");
    for key in [
        "dispatches",
        "dispatch_rate",
        "backlogged",
        "jain",
        "wait_p50_us",
        "wait_p99_us",
        "events_lost",
    ] {
        assert!(last["totals"][key].is_number(), "totals.{key}");
    }
    let two = last["entities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "10.0.0.2")
        .expect("the 2-connection client");
    for key in [
        "dispatches",
        "dispatch_rate",
        "share",
        "entitled",
        "fairness",
        "wait_p50_us",
        "wait_p99_us",
        "exec_share",
        "connections",
    ] {
        assert!(two[key].is_number(), "entity.{key}: {two}");
    }
    assert_eq!(two["kind"], "peer");
    assert_eq!(two["connections"], 2);
    // Requests are counted; the built-in scenarios' requests are 4 KiB
    // reads: 200 bytes in, 4296 out each.
    let requests = two["requests"].as_u64().unwrap();
    assert!(requests > 0, "{two}");
    assert!(two["request_rate"].as_f64().unwrap() > 0.0, "{two}");
    assert_eq!(two["bytes_in"].as_u64(), Some(requests * 200), "{two}");
    assert_eq!(two["bytes_out"].as_u64(), Some(requests * 4296), "{two}");
    let rate = two["request_rate"].as_f64().unwrap();
    let out_rate = two["bytes_out_rate"].as_f64().unwrap();
    assert!((out_rate - rate * 4296.0).abs() < 1e-6 * out_rate, "{two}");
    let share = two["share"].as_f64().unwrap();
    assert!((share - 2.0 / 18.0).abs() < 0.03, "share {share}");
    assert!(two["fairness"].as_f64().unwrap() < 0.5);
    // Cumulative dispatches grow from line to line.
    let d: Vec<u64> = lines
        .iter()
        .map(|l| l["totals"]["dispatches"].as_u64().unwrap())
        .collect();
    assert!(d[0] < d[1] && d[1] < d[2], "{d:?}");
}

#[test]
fn batch_text_csv_group_and_top() {
    let o = nfsdtop(&[
        "--demo", "movers", "--policy", "rr-class", "-b", "-n", "2", "--speed", "0", "--group",
        "class", "--format", "csv",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    let mut lines = text.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("time,interval_s,source,kind,name,class,"));
    let rows: Vec<&str> = lines.collect();
    // 1 movers class + 4 per-peer customer classes + the total row, two
    // iterations.
    assert_eq!(rows.len(), 12, "{text}");
    assert!(rows.iter().any(|r| r.contains(",class,movers,movers,")));
    assert!(rows
        .iter()
        .any(|r| r.contains(",class,customers/10.2.0.3,customers,")));

    let o = nfsdtop(&[
        "--demo", "movers", "-b", "-n", "1", "--speed", "0", "--top", "3",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("PEER") && text.contains("RATIO"), "{text}");
    assert_eq!(
        text.lines().filter(|l| l.starts_with("10.")).count(),
        3,
        "{text}"
    );
}

#[test]
fn unknown_scenario_is_named() {
    let o = nfsdtop(&["--demo", "seed-k17", "-b", "-n", "1"]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("unknown demo scenario \"seed-k17\""), "{e}");
    assert!(e.contains("seed-k16"), "lists the choices: {e}");
}

#[test]
fn malformed_class_map_names_file_and_line() {
    let mut f = tempfile();
    writeln!(f.1, "# ok\n10.0.0.0/8 lab\n10.1.0.0/33 broken").unwrap();
    let o = nfsdtop(&["--demo", "seed-k4", "-b", "-n", "1", "--class-map", &f.0]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains(&format!("{}:3:", f.0)), "{e}");
    assert!(e.contains("prefix length"), "{e}");

    let o = nfsdtop(&[
        "--demo",
        "seed-k4",
        "-b",
        "-n",
        "1",
        "--class-map",
        "/nonexistent/map",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("cannot read class map /nonexistent/map"));
}

#[test]
fn bad_flag_values_are_rejected_with_the_reason() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--demo", "seed-k4", "--policy", "fifo", "-b"],
            "unknown policy \"fifo\"",
        ),
        (&["--demo", "seed-k4", "-b", "-d", "0"], "out of range"),
        (
            &["--demo", "seed-k4", "-b", "-d", "soon"],
            "not a number of seconds",
        ),
        (
            &["--demo", "seed-k4", "-b", "-n", "0"],
            "not a positive number",
        ),
        (&["--demo", "seed-k4", "-b", "--format", "xml"], "xml"),
        (&["--demo", "seed-k4", "-b", "--group", "host"], "host"),
        (&["--policy", "flat", "-b"], "--demo"),
        (&["--demo", "seed-k4", "-b", "--speed=-1"], "speed"),
    ];
    for (args, want) in cases {
        let o = nfsdtop(args);
        assert!(!o.status.success(), "{args:?} should fail");
        let e = stderr(&o);
        assert!(e.contains(want), "{args:?}: {e}");
    }
}

#[test]
fn bad_scenario_file_names_file_and_line() {
    let mut f = tempfile();
    writeln!(
        f.1,
        "name = \"x\"\n[[client]]\naddress = \"10.0.0.2\"\nconnections = \"two\"\ninflight = 4"
    )
    .unwrap();
    let path = format!("{}.toml", f.0);
    std::fs::rename(&f.0, &path).unwrap();
    let o = nfsdtop(&["--demo", &path, "-b", "-n", "1"]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains(&format!("{path}:4")), "{e}");
    // A syntax error too is one line (the parser's message has two).
    std::fs::write(&path, "name = \"x\"\nthreads = [\n").unwrap();
    let o = nfsdtop(&["--demo", &path, "-b", "-n", "1"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains(&format!("{path}:3: invalid array; expected `]`")),
        "{e}"
    );
    assert_eq!(e.trim_end().lines().count(), 1, "{e:?}");
    let _ = std::fs::remove_file(&path);
}

fn tempfile() -> (String, std::fs::File) {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let path = std::env::temp_dir().join(format!(
        "nfsdtop-cli-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let f = std::fs::File::create(&path).unwrap();
    (path.display().to_string(), f)
}

/// A tracefs with no sunrpc events: "no nfsd on this host", whatever this
/// host really has.
fn tracefs_without_nfsd() -> (String, TempDir) {
    let dir = TempDir::new("no-nfsd");
    std::fs::create_dir_all(dir.0.join("events/sched")).unwrap();
    (dir.0.to_str().unwrap().to_string(), dir)
}

struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("nfsdtop-cli-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn without_nfsd_batch_and_record_fail_instead_of_showing_the_demo() {
    let (tracefs, dir) = tracefs_without_nfsd();
    for extra in [
        &["-b", "-n", "1"][..],
        &["-b", "-n", "1", "--format", "json"],
    ] {
        let o = nfsdtop(&[&["--tracefs", &tracefs][..], extra].concat());
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{extra:?}: {e}");
        assert!(
            o.stdout.is_empty(),
            "{extra:?}: no made-up numbers on stdout"
        );
        assert!(
            e.contains("batch output never shows the demo") && e.contains("--demo"),
            "{extra:?}: {e}"
        );
        assert_eq!(e.lines().count(), 1, "one line: {e}");
    }
    let rec = dir.0.join("x.nfsdrec");
    let o = nfsdtop(&[
        "record",
        "-o",
        rec.to_str().unwrap(),
        "--tracefs",
        &tracefs,
        "--duration",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("--demo"), "{}", stderr(&o));
    assert!(!rec.exists(), "no recording of the demo");
}

#[test]
fn closed_stdout_ends_batch_mode_with_status_0() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
        .args([
            "--demo", "seed-k4", "-b", "--speed", "0", "-d", "0.05", "--format", "json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for _ in 0..3 {
        assert!(lines.next().expect("a line").unwrap().starts_with('{'));
    }
    drop(lines); // like `head -3`
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stderr(&out), "", "nothing to complain about");
}

#[test]
fn closed_stderr_never_panics() {
    // An agent that is not there: batch mode says "reconnecting ..." on
    // stderr, closed here at once, then gives up.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
        .args(["--connect", &url, "-b", "-n", "1", "--give-up-after", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "gave up, without a panic (101)");
    // Closed stdout and stderr together, as `2>&1 | head -1` leaves them.
    let mut child = Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
        .args(["--demo", "seed-k4", "-b", "--speed", "0", "-d", "0.05"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    drop(child.stdout.take());
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(0));
}

/// A report that could not be written (a full disk; /dev/full here) is an
/// error with status 1, not a silent success with nothing written.
#[test]
fn reports_that_cannot_be_written_end_with_status_1() {
    let dir = std::env::temp_dir().join(format!("nfsdtop-cli-full-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("r.nfsdrec");
    let o = Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
        .args([
            "record",
            "--demo",
            "seed-k4",
            "--speed",
            "0",
            "--duration",
            "5",
            "-o",
        ])
        .arg(&rec)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    for args in [
        vec!["doctor".to_string()],
        vec![
            "whatif".into(),
            rec.display().to_string(),
            "--format".into(),
            "json".into(),
        ],
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
            .args(&args)
            .stdout(full())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("cannot write the report to stdout"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    for flag in ["--help", "--version"] {
        let o = Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
            .arg(flag)
            .stdout(full())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{flag}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("cannot write to stdout"),
            "{flag}: {}",
            stderr(&o)
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A recording whose reader goes away (`record -o /dev/stdout | head -c
/// 100`) is cut short: status 1 and a message saying so, where batch
/// output would end quietly.
#[test]
fn a_recording_cut_short_by_its_reader_is_an_error() {
    use std::io::Read;
    let mut child = Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
        .args([
            "record",
            "--demo",
            "seed-k4",
            "--speed",
            "0",
            "--duration",
            "600",
        ])
        .args(["-o", "/dev/stdout"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 100];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The pipe's read end is closed here: the next write fails.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("stopped early"), "{}", stderr(&out));
}
