//! `nfsdtop whatif` against the simulator's own ground truth: a recording
//! of a demo scenario under `flat`, fitted and run under another policy,
//! must predict what the demo measures when it really runs that policy.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use nfsdtop_agent::record::{self, NfsdConfig, Writer};
use serde_json::Value;

fn nfsdtop() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nfsdtop-whatif-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn run(cmd: &mut Command) -> Output {
    let o = cmd.stdin(Stdio::null()).output().unwrap();
    assert!(
        o.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// 30 s of `scenario` (a built-in name or a .toml path) under flat,
/// recorded as fast as the simulator goes.
fn record_flat(scenario: &str) -> PathBuf {
    // Tests run in parallel: each recording gets a file of its own.
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let name = Path::new(scenario).file_name().unwrap().to_string_lossy();
    let path = tmp(&format!("{name}-flat-{n}.nfsdrec"));
    run(nfsdtop()
        .args(["record", "--demo", scenario, "--policy", "flat"])
        .args(["--speed", "0", "--duration", "30", "-o"])
        .arg(&path));
    path
}

fn whatif(path: &Path, args: &[&str]) -> Value {
    let o = run(nfsdtop()
        .arg("whatif")
        .arg(path)
        .args(args)
        .args(["--format", "json"]));
    serde_json::from_slice(&o.stdout).expect("whatif --format json prints JSON")
}

/// What the demo itself measures running `policy`: the share of each
/// entity (peers, or classes) over its last 20 s of 30.
fn truth(scenario: &str, policy: &str, group: &str) -> Vec<(String, String, f64)> {
    let o = run(nfsdtop()
        .args(["--demo", scenario, "--policy", policy, "--group", group])
        .args([
            "-b", "--speed", "0", "-d", "10", "-n", "3", "--format", "json",
        ]));
    let text = String::from_utf8(o.stdout).unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    last["entities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["class"].as_str().unwrap().to_string(),
                e["share"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// The predicted share of `name` under `policy` in a whatif report.
fn predicted(report: &Value, table: &str, name: &str, policy: &str) -> f64 {
    let row = report[table]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {table}: {report:#}"));
    row["predicted"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["policy"] == policy)
        .unwrap_or_else(|| panic!("no {policy} for {name}"))["share"]
        .as_f64()
        .unwrap()
}

fn share_of(truth: &[(String, String, f64)], name: &str) -> f64 {
    truth
        .iter()
        .find(|(n, _, _)| n == name)
        .unwrap_or_else(|| panic!("no {name} in {truth:?}"))
        .2
}

/// The model reproduces the recording under flat: as fitted, before any
/// calibration of its think times (the fitter itself is what these
/// recordings of the simulator check), and as run.
fn assert_fit_ok(report: &Value) {
    assert_eq!(report["fit"]["policy"], "flat", "{report:#}");
    assert_eq!(report["fit"]["ok"], true, "{report:#}");
    let fitted = report["fit"]["fitted_error_points"].as_f64().unwrap();
    assert!(
        fitted <= 3.0,
        "as fitted, off by {fitted} points: {report:#}"
    );
    for r in report["peers"].as_array().unwrap() {
        let err = r["fit_error_points"].as_f64().unwrap();
        assert!(err.abs() <= 3.0, "flat fit off by {err} points: {r:#}");
    }
}

#[test]
fn seed_k16_flat_recording_predicts_rr_peer() {
    let file = record_flat("seed-k16");
    let report = whatif(&file, &["--policy", "rr-peer"]);
    assert_fit_ok(&report);
    assert_eq!(report["recording"]["threads"], 16);
    assert_eq!(report["recording"]["threads_from"], "recorded");
    // Measured under flat: 2 of 18 transports, about 11%.
    let small = &report["peers"].as_array().unwrap()[1];
    assert_eq!(small["name"], "10.0.0.2");
    let measured = small["measured"]["share"].as_f64().unwrap();
    assert!((measured - 2.0 / 18.0).abs() < 0.01, "{measured}");

    let want = share_of(&truth("seed-k16", "rr-peer", "peer"), "10.0.0.2");
    let got = predicted(&report, "peers", "10.0.0.2", "rr-peer");
    assert!(
        (got - want).abs() <= 0.02,
        "rr-peer: whatif predicts {got:.3} for the small client, the demo measures {want:.3}"
    );
    assert!(
        want > 0.4,
        "the demo's own rr-peer should be near 50%: {want}"
    );
    // Both clients stay backlogged: rr-peer gives each its fair turn.
    for r in report["peers"].as_array().unwrap() {
        let p = &r["predicted"].as_array().unwrap()[0];
        assert_eq!(p["policy"], "rr-peer");
        let ratio = p["fairness"].as_f64().unwrap();
        assert!((ratio - 1.0).abs() < 0.05, "{}: ratio {ratio}", r["name"]);
    }
}

#[test]
fn movers_flat_recording_predicts_rr_class() {
    let file = record_flat("movers");
    let report = whatif(&file, &["--policy", "rr-class"]);
    assert_fit_ok(&report);
    let truth = truth("movers", "rr-class", "class");
    let customers: Vec<&(String, String, f64)> =
        truth.iter().filter(|(_, c, _)| c == "customers").collect();
    assert_eq!(customers.len(), 4, "{truth:?}");
    let want: f64 = customers.iter().map(|(_, _, s)| s).sum();
    let got: f64 = customers
        .iter()
        .map(|(n, _, _)| predicted(&report, "classes", n, "rr-class"))
        .sum();
    assert!(
        (got - want).abs() <= 0.02,
        "rr-class: whatif predicts {got:.3} for the customers, the demo measures {want:.3}"
    );
    assert!((want - 0.8).abs() < 0.03, "customers near 80%: {want}");
}

#[test]
fn burst_flat_recording_predicts_rr_peer_for_the_interactive_client() {
    let file = record_flat("burst");
    let report = whatif(&file, &["--policy", "rr-peer,rr-class"]);
    assert_fit_ok(&report);
    assert_eq!(report["model"]["bursty"], 1, "{report:#}");
    let demand = report["peers"].to_string();
    assert!(
        demand.contains("1 in bursts: p50 32 requests, think p50 200."),
        "{demand}"
    );
    let want = share_of(&truth("burst", "rr-peer", "peer"), "fd00::9");
    let got = predicted(&report, "peers", "fd00::9", "rr-peer");
    assert!(
        (got - want).abs() <= 0.02,
        "rr-peer: whatif predicts {got:.3} for the bursty client, the demo measures {want:.3}"
    );
    // Under flat it gets clearly less: the prediction is not just its
    // recorded share.
    let measured = report["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "fd00::9")
        .unwrap()["measured"]["share"]
        .as_f64()
        .unwrap();
    assert!(want > measured * 1.5, "rr-peer {want} vs flat {measured}");
}

#[test]
fn a_recording_without_thread_counts_says_what_was_assumed() {
    // As written before the header recorded nfsd's threads.
    let file = record_flat("seed-k4");
    let mut c = record::read_file(&file).unwrap();
    c.header.nfsd = NfsdConfig::default();
    let old = tmp("seed-k4-old.nfsdrec");
    let mut w = Writer::create(&old, &c.header).unwrap();
    w.write_all(&c.events).unwrap();
    w.finish_file().unwrap();

    let report = whatif(&old, &["--policy", "rr-peer"]);
    let from = report["recording"]["threads_from"].as_str().unwrap();
    assert!(from.starts_with("assumed 16"), "{from}");
    let notes = report["notes"].to_string();
    assert!(notes.contains("pass --threads"), "{notes}");
    assert!(notes.contains("pools"), "{notes}");

    let report = whatif(&old, &["--policy", "rr-peer", "--threads", "8"]);
    assert_eq!(report["recording"]["threads"], 8);
    assert_eq!(report["recording"]["threads_from"], "--threads");
}

#[test]
fn text_output_has_the_measured_column_first_and_each_policy() {
    let file = record_flat("seed-k8");
    let o = run(nfsdtop().arg("whatif").arg(&file));
    let text = String::from_utf8(o.stdout).unwrap();
    // One line per policy under each client: measured, the fit, then
    // each prediction; the TUI's column names; readable at 100 columns.
    let block: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("10.0.0.3 "))
        .take(4)
        .collect();
    let policy = |l: &str| {
        l.get(10..)
            .unwrap_or("")
            .split_whitespace()
            .next()
            .map(str::to_string)
    };
    let policies: Vec<_> = block.iter().filter_map(|l| policy(l)).collect();
    assert_eq!(
        policies,
        ["measured", "flat", "rr-peer", "rr-class"],
        "{text}"
    );
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("PEER "))
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(table[0].contains(" SHARE RATIO "), "{text}");
    assert!(
        table.len() == 9 && table.iter().all(|l| l.len() <= 100),
        "{text}"
    );
    assert!(text.contains("16 threads (recorded)"), "{text}");
    assert!(text.contains("fit: under flat"), "{text}");
    // seed-k8 has no class map: rr-class then says what it does.
    assert!(text.contains("note: no class map"), "{text}");
}

#[test]
fn bad_input_is_refused_with_what_to_do() {
    let not = tmp("not-a-recording");
    std::fs::write(&not, b"hello").unwrap();
    let o = nfsdtop()
        .arg("whatif")
        .arg(&not)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not an nfsdtop recording"), "{err}");

    let o = nfsdtop()
        .args(["whatif", "x.nfsdrec", "--policy", "fifo"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("unknown policy \"fifo\""), "{err}");
}

#[test]
fn a_latency_bound_closed_loop_is_predicted_as_one() {
    // 4 requests in flight over a 20 ms round trip: at most 160/s however
    // the server dispatches. Modelled as bursts it would be predicted to
    // grow with its share under rr-peer; it must not.
    let toml = tmp("loop.toml");
    std::fs::write(
        &toml,
        "name = \"loop\"\nthreads = 8\nservice_ms = 5.0\njitter = 0.5\nrtt_us = 20000.0\n\
         [[client]]\naddress = \"10.0.0.2\"\nconnections = 1\ninflight = 4\n\
         [[client]]\naddress = \"10.0.0.3\"\nconnections = 8\ninflight = 64\n",
    )
    .unwrap();
    let toml = toml.to_str().unwrap();
    let file = record_flat(toml);
    let report = whatif(&file, &["--policy", "rr-peer"]);
    assert_fit_ok(&report);
    assert_eq!(report["model"]["closed_loops"], 1, "{report:#}");
    let small = report["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "10.0.0.2")
        .unwrap();
    assert_eq!(
        small["demand"], "1 closed loop: 4 in flight, think p50 20.0 ms",
        "{small:#}"
    );
    let want = share_of(&truth(toml, "rr-peer", "peer"), "10.0.0.2");
    let got = predicted(&report, "peers", "10.0.0.2", "rr-peer");
    assert!(
        (got - want).abs() <= 0.02,
        "rr-peer: whatif predicts {got:.3} for the closed loop, the demo measures {want:.3}"
    );
}

#[test]
fn a_damaged_recording_is_modelled_from_its_intact_part_and_says_so() {
    let file = record_flat("seed-k8");
    let bytes = std::fs::read(&file).unwrap();
    let cut = tmp("seed-k8-cut.nfsdrec");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let report = whatif(&cut, &["--policy", "rr-peer"]);
    let notes = report["notes"].to_string();
    assert!(notes.contains("truncated"), "{notes}");
    assert!(notes.contains("modelled from the"), "{notes}");
    assert_fit_ok(&report);
    let secs = report["recording"]["seconds"].as_f64().unwrap();
    assert!((5.0..25.0).contains(&secs), "{secs}");
}

#[test]
fn a_recording_without_dispatches_is_refused_plainly() {
    let c = record::read_file(&record_flat("seed-k4")).unwrap();
    let empty = tmp("empty.nfsdrec");
    let mut w = Writer::create(&empty, &c.header).unwrap();
    // Connections, but no request ever dispatched.
    let accepted: Vec<_> = c
        .events
        .iter()
        .filter(|e| matches!(e.kind, nfsdtop_agent::model::EventKind::Accepted))
        .copied()
        .collect();
    assert!(!accepted.is_empty());
    w.write_all(&accepted).unwrap();
    w.finish_file().unwrap();
    let o = nfsdtop()
        .arg("whatif")
        .arg(&empty)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("holds no dispatches"), "{err}");
}

#[test]
fn a_re_recording_keeps_the_thread_count() {
    let file = record_flat("seed-k4");
    let again = tmp("seed-k4-again.nfsdrec");
    run(nfsdtop()
        .arg("record")
        .arg("--replay")
        .arg(&file)
        .args(["--speed", "0", "-o"])
        .arg(&again));
    let h = record::read_file(&again).unwrap().header;
    assert_eq!(h.nfsd.threads, Some(16));
    assert_eq!(h.nfsd.pools, Some(1));
}
