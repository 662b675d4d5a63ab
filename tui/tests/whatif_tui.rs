//! The replay's what-if columns (`nfsdtop --replay FILE --whatif POLICY`)
//! drawn on ratatui's TestBackend, and the flag's command-line rules.

use std::process::{Command, Stdio};
use std::time::Duration;

use nfsdtop::state::whatif::WhatIf;
use nfsdtop::state::State;
use nfsdtop::view;
use nfsdtop_agent::aggregate::{Aggregator, Limits};
use nfsdtop_agent::model::{Snapshot, SourceInfo, SourceKind, WaitSource};
use nfsdtop_agent::source::demo::{Policy, Scenario, Simulator};
use nfsdtop_agent::whatif::{self, Options};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn nfsdtop() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
}

/// A snapshot of seed-k16 under flat, as a replay of its recording shows.
fn flat_snapshot() -> Snapshot {
    let scenario = Scenario::builtin("seed-k16").unwrap();
    let info = SourceInfo {
        kind: SourceKind::Replay,
        kernel: "simulated".into(),
        generation: "demo".into(),
        wait_source: WaitSource::EnqueueDequeue,
        detail: "seed-k16 policy=flat".into(),
        host: String::new(),
    };
    let mut sim = Simulator::new(scenario);
    let mut agg = Aggregator::new(Default::default(), Limits::default());
    let mut buf = Vec::new();
    sim.run_until(5_000_000_000, &mut buf);
    agg.ingest_all(&buf);
    agg.snapshot(sim.now_ns(), 5.0, &info)
}

#[test]
fn a_replay_shows_the_predicted_columns_beside_the_measured_ones() {
    let dir = std::env::temp_dir().join(format!("nfsdtop-whatif-tui-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("k16.nfsdrec");
    let o = nfsdtop()
        .args(["record", "--demo", "seed-k16", "--policy", "flat"])
        .args(["--speed", "0", "--duration", "20", "-o"])
        .arg(&file)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let opts = Options {
        policies: vec![Policy::RrPeer],
        ..Options::default()
    };
    let report = whatif::run_file(&file, &opts).unwrap();
    let wi = WhatIf::from_report(&report, "rr-peer").unwrap();
    assert!(WhatIf::from_report(&report, "rr-class").is_none());

    let mut st = State::new(Duration::from_secs(1), None);
    st.whatif = Some(wi);
    st.on_snapshot(Box::new(flat_snapshot()));
    let mut term = Terminal::new(TestBackend::new(140, 12)).unwrap();
    term.draw(|f| view::draw(f, &mut st)).unwrap();
    let b = term.backend().buffer().clone();
    let lines: Vec<String> = (0..b.area.height)
        .map(|y| (0..b.area.width).map(|x| b[(x, y)].symbol()).collect())
        .collect();
    let screen = lines.join("\n");
    assert!(screen.contains("what-if rr-peer"), "{screen}");
    let head = lines.iter().find(|l| l.contains("→SHARE")).expect(&screen);
    assert!(
        head.contains("→RATIO") && head.contains("→WAIT99"),
        "{head}"
    );
    // The text of `row` under the right-aligned column titled `title`.
    let under = |row: &str, title: &str, width: usize| -> String {
        let h: Vec<char> = head.chars().collect();
        let t: Vec<char> = title.chars().collect();
        let at = (0..h.len())
            .find(|&i| h[i..].starts_with(&t) && (i == 0 || h[i - 1] == ' '))
            .unwrap_or_else(|| panic!("no {title} in {head}"));
        let end = at + t.len();
        let r: Vec<char> = row.chars().collect();
        r[end - width..end]
            .iter()
            .collect::<String>()
            .trim()
            .to_string()
    };
    // Measured about 11% under flat; predicted 50.0% and a ratio of 1.00
    // under rr-peer.
    // Its row (the warning above the table names it too).
    let small = lines
        .iter()
        .find(|l| l.starts_with("  10.0.0.2 "))
        .expect(&screen);
    assert!(
        under(small, "SHARE", 6).starts_with("11."),
        "{head}\n{small}"
    );
    assert_eq!(under(small, "→SHARE", 7), "50.0%", "{head}\n{small}");
    assert_eq!(under(small, "→RATIO", 7), "1.00", "{head}\n{small}");
    assert_eq!(under(small, "RATIO", 6), "0.22", "{head}\n{small}");
}

#[test]
fn whatif_columns_need_a_replay_and_the_interactive_ui() {
    let o = nfsdtop()
        .args(["--demo", "seed-k4", "--whatif", "rr-peer"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot be used with '--whatif"), "{err}");
    let o = nfsdtop()
        .args(["--whatif", "rr-peer"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--replay"), "{err}");

    let o = nfsdtop()
        .args(["--replay", "x.nfsdrec", "-b", "--whatif", "rr-peer"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--batch") || err.contains("-b"), "{err}");
}
