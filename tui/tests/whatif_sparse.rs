//! `nfsdtop whatif --policy sparse-flow` against the simulator's own
//! sparse-flow runs: a flat recording of each built-in (seed) scenario,
//! fitted and run under sparse-flow, must give each client the share (3
//! points) and the wait p50 (20%) the demo measures when it runs
//! sparse-flow itself; and the burst completion its own sparse-flow
//! recording shows.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const SHARE_POINTS: f64 = 3.0;
const WAIT_RELATIVE: f64 = 0.2;
/// The demo's round trip (µs): the model folds it into think times, so a
/// wait shorter than it (a request that finds a thread idle) is below
/// what the model resolves, under any policy.
const WAIT_FLOOR_US: f64 = 100.0;

fn nfsdtop() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
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

/// 30 s of `scenario` under `policy`, recorded as fast as the simulator
/// goes, in a file of this test's own.
fn record(scenario: &str, policy: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nfsdtop-sparse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{scenario}-{policy}.nfsdrec"));
    let _ = std::fs::remove_file(&path);
    run(nfsdtop()
        .args(["record", "--demo", scenario, "--policy", policy])
        .args(["--speed", "0", "--duration", "30", "-o"])
        .arg(&path));
    path
}

fn whatif(path: &Path, policies: &str) -> Value {
    let o = run(nfsdtop()
        .arg("whatif")
        .arg(path)
        .args(["--policy", policies, "--format", "json"]));
    serde_json::from_slice(&o.stdout).expect("whatif --format json prints JSON")
}

/// What the demo itself measures running sparse-flow: each peer's share
/// and wait p50 (µs) over its last 10 s of 30.
fn truth(scenario: &str) -> Vec<(String, f64, f64)> {
    let o = run(nfsdtop()
        .args([
            "--demo",
            scenario,
            "--policy",
            "sparse-flow",
            "--group",
            "peer",
        ])
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
                e["share"].as_f64().unwrap(),
                e["wait_p50_us"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// A peer's numbers under `policy` in a whatif report ("measured" for
/// the measured column).
fn numbers<'a>(report: &'a Value, name: &str, policy: &str) -> &'a Value {
    let row = report["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {report:#}"));
    if policy == "measured" {
        return &row["measured"];
    }
    row["predicted"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["policy"] == policy)
        .unwrap_or_else(|| panic!("no {policy} for {name}"))
}

fn f(v: &Value, field: &str) -> f64 {
    v[field]
        .as_f64()
        .unwrap_or_else(|| panic!("no {field} in {v:#}"))
}

/// The prediction from a flat recording of `scenario` matches the demo's
/// own sparse-flow run for every client; returns the report.
fn predicts_the_demos_sparse_flow(scenario: &str) -> Value {
    let report = whatif(&record(scenario, "flat"), "sparse-flow");
    assert_eq!(report["fit"]["ok"], true, "{report:#}");
    let truth = truth(scenario);
    assert!(truth.len() >= 2, "{truth:?}");
    for (name, share, wait_p50) in &truth {
        let p = numbers(&report, name, "sparse-flow");
        let got = f(p, "share");
        assert!(
            (got - share).abs() * 100.0 <= SHARE_POINTS,
            "{scenario} {name}: whatif predicts a share of {got:.3} under sparse-flow, \
             the demo measures {share:.3}"
        );
        let got = f(p, "wait_p50_us");
        assert!(
            (got - wait_p50).abs() <= (WAIT_RELATIVE * wait_p50).max(WAIT_FLOOR_US),
            "{scenario} {name}: whatif predicts a wait p50 of {got:.0} us under sparse-flow, \
             the demo measures {wait_p50:.0} us"
        );
    }
    report
}

#[test]
fn seed_k4_sparse_flow() {
    predicts_the_demos_sparse_flow("seed-k4");
}

#[test]
fn seed_k8_sparse_flow() {
    predicts_the_demos_sparse_flow("seed-k8");
}

/// Backlogged clients never enqueue with nothing in flight after their
/// first: sparse-flow gives them flat's shares.
#[test]
fn seed_k16_sparse_flow_is_flat_for_backlogged_clients() {
    let report = predicts_the_demos_sparse_flow("seed-k16");
    let small = f(numbers(&report, "10.0.0.2", "sparse-flow"), "share");
    assert!((small - 2.0 / 18.0).abs() < 0.01, "{small}");
}

#[test]
fn seed_k32_sparse_flow() {
    predicts_the_demos_sparse_flow("seed-k32");
}

#[test]
fn movers_sparse_flow() {
    predicts_the_demos_sparse_flow("movers");
}

/// The interactive client's bursts of 32 fit its 64-dispatch budget:
/// under sparse-flow they jump the busy host's 16 connections, and the
/// predicted burst completion is what the demo's own sparse-flow
/// recording measures (20%), far below flat's.
#[test]
fn burst_sparse_flow_jumps_the_queue_as_the_demo_does() {
    let report = predicts_the_demos_sparse_flow("burst");
    let bursty = "fd00::9";
    let sparse = numbers(&report, bursty, "sparse-flow");
    let flat = numbers(&report, bursty, "measured");
    let (sparse_burst, flat_burst) = (f(sparse, "burst_p50_us"), f(flat, "burst_p50_us"));
    assert!(
        sparse_burst * 3.0 < flat_burst,
        "sparse-flow burst p50 {sparse_burst} us against flat's {flat_burst} us"
    );
    // Every enqueue of a burst of 32 but its first finds requests in
    // flight; each burst's first finds none.
    let depth0 = f(sparse, "depth0_share");
    assert!(depth0 > 0.0 && depth0 < 0.5, "{depth0}");

    let own = whatif(&record("burst", "sparse-flow"), "sparse-flow");
    let want = f(numbers(&own, bursty, "measured"), "burst_p50_us");
    assert!(
        (sparse_burst - want).abs() <= WAIT_RELATIVE * want,
        "whatif predicts a burst completion p50 of {sparse_burst:.0} us under sparse-flow, \
         the demo's sparse-flow recording measures {want:.0} us"
    );
}
