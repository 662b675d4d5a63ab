//! What an operator expects of any Prometheus exporter, checked on the
//! real `nfsdtopd`: the `process_*` self-metrics agree with what
//! /proc/<pid> says of the daemon, `nfsdtop_build_info` names the git
//! revision it was built from, no series carries an empty label value in
//! any format, and `/` is a landing page of links.

mod common;

use std::time::{Duration, Instant};

use common::Daemon;

/// A sample's value in the text format, by its exact series name.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// /proc/<pid>/stat's fields after the command name (field 3 on).
fn stat_fields(pid: u32) -> Vec<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    rest.split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect()
}

fn clock_ticks() -> f64 {
    let out = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .expect("getconf");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// (cpu seconds, resident bytes, open fds) of `pid`, read from /proc.
fn proc_now(pid: u32) -> (f64, f64, f64) {
    let f = stat_fields(pid);
    // utime and stime are fields 14 and 15 (index 11 and 12 here).
    let cpu = (f[11] + f[12]) as f64 / clock_ticks();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss_kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    (cpu, rss_kib * 1024.0, fds as f64)
}

#[test]
fn process_metrics_agree_with_proc() {
    let d = Daemon::start(&["--demo", "seed-k16", "--listen", "127.0.0.1:0"]);
    let pid = d.child.id();
    // Let the daemon use some CPU (it works on each snapshot).
    d.wait_for("some CPU time", 30, |_| {
        (proc_now(pid).0 > 0.05).then_some(())
    });
    let before = proc_now(pid);
    let r = d.get("/metrics");
    let after = proc_now(pid);
    assert_eq!(r.status, 200);
    let t = &r.body;
    let get = |name: &str| sample(t, name).unwrap_or_else(|| panic!("no {name} in\n{t}"));

    let cpu = get("process_cpu_seconds_total");
    assert!(
        before.0 <= cpu && cpu <= after.0,
        "cpu {cpu} s outside /proc's {} .. {}",
        before.0,
        after.0
    );
    let rss = get("process_resident_memory_bytes");
    let (lo, hi) = (before.1.min(after.1), before.1.max(after.1));
    assert!(
        rss >= lo * 0.8 && rss <= hi * 1.2,
        "rss {rss} vs /proc's VmRSS {lo} .. {hi}"
    );
    let fds = get("process_open_fds");
    // The scrape's own connection is open while it is read.
    assert!(
        fds >= before.2.min(after.2) - 2.0 && fds <= before.2.max(after.2) + 2.0,
        "open fds {fds} vs /proc's {} .. {}",
        before.2,
        after.2
    );
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let soft: f64 = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .expect("a numeric soft limit");
    assert_eq!(get("process_max_fds"), soft);
    let vsize = get("process_virtual_memory_bytes");
    assert!(vsize >= rss, "virtual {vsize} < resident {rss}");
    let btime: f64 = std::fs::read_to_string("/proc/stat")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    // starttime is field 22 (index 19 here).
    let start = btime + stat_fields(pid)[19] as f64 / clock_ticks();
    let got = get("process_start_time_seconds");
    assert!((got - start).abs() < 0.02, "start {got} vs /proc's {start}");
    eprintln!("cpu {cpu} s, rss {rss} B, fds {fds}, max {soft}, start {got}");
}

#[test]
fn build_info_names_the_git_revision() {
    let d = Daemon::start(&["--demo", "seed-k4", "--listen", "127.0.0.1:0"]);
    let t = d.get("/metrics").body;
    let line = t
        .lines()
        .find(|l| l.starts_with("nfsdtop_build_info{"))
        .unwrap_or_else(|| panic!("no nfsdtop_build_info in\n{t}"));
    let label = |k: &str| {
        let start = line
            .find(&format!("{k}=\""))
            .unwrap_or_else(|| panic!("no {k}: {line}"))
            + k.len()
            + 2;
        line[start..].split('"').next().unwrap().to_string()
    };
    assert_eq!(label("version"), env!("CARGO_PKG_VERSION"));
    assert!(label("rustc").starts_with("1."), "{line}");
    let workspace = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let head = std::process::Command::new("git")
        .args(["-C", workspace, "rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match head {
        Some(head) => assert_eq!(label("revision"), head, "{line}"),
        // A source tarball: no git checkout to name.
        None => assert_eq!(label("revision"), "unknown", "{line}"),
    }
}

#[test]
fn no_label_value_is_empty_in_a_busy_demo() {
    let d = Daemon::start(&[
        "--demo",
        "movers",
        "--listen",
        "127.0.0.1:0",
        "--speed",
        "4",
        "--interval",
        "0.25",
    ]);
    // Busy: dispatches counted, the services' families there.
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = loop {
        let t = d.get("/metrics").body;
        if sample(&t, "nfsdtop_dispatches_total").is_some_and(|v| v > 1000.0)
            && t.contains("nfsdtop_service_dispatches_total{")
        {
            break t;
        }
        assert!(Instant::now() < deadline, "the demo never got busy:\n{t}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let om = d
        .get_with(
            "/metrics",
            &[("Accept", "application/openmetrics-text; version=1.0.0")],
        )
        .body;
    for (format, body) in [("text 0.0.4", &text), ("OpenMetrics", &om)] {
        let empty: Vec<&str> = body
            .lines()
            .filter(|l| !l.starts_with('#') && l.contains("=\"\""))
            .collect();
        assert!(
            empty.is_empty(),
            "{format}: series with an empty label value:\n{}",
            empty.join("\n")
        );
    }
    assert!(
        text.contains("nfsdtop_service_dispatches_total{service=\"nfsd\",port=\"2049\"} "),
        "nfsd's row names its port"
    );
}

#[test]
fn the_root_is_a_landing_page_of_links() {
    let d = Daemon::start(&["--demo", "seed-k4", "--listen", "127.0.0.1:0"]);
    let r = d.get("/");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    for path in [
        "/metrics",
        "/healthz",
        "/api/v1/snapshot",
        "/api/v1/stream",
        "/api/v1/unfair",
    ] {
        assert!(
            r.body.contains(&format!("href=\"{path}\"")),
            "{path}: {}",
            r.body
        );
        // Each link leads somewhere (the stream never ends: not read).
        if path != "/api/v1/stream" {
            assert_ne!(d.get(path).status, 404, "{path}");
        }
    }
    assert!(r.body.contains("metrics.md"), "no docs: {}", r.body);
    assert!(!r.body.to_ascii_lowercase().contains("<script"));
    // Other unknown paths are still a JSON 404.
    let r = d.get("/nope");
    assert_eq!(r.status, 404);
    assert!(r.body.contains("no such path"), "{}", r.body);
}
