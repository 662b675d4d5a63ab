//! nfsdtopd's /metrics for the golden scenario (the input of the batch
//! and snapshot golden files, tui/tests/golden/scenario.toml), byte for
//! byte: two one-second snapshots of the simulator run as fast as
//! possible, folded as the daemon folds them (top 2 peers, so one is
//! `other`). The build's revision and rustc are placeholders. Set
//! `NFSDTOP_BLESS=1` to rewrite the file after an intended change, and
//! name the change in CHANGELOG.md.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use nfsdtop_agent::pipeline::Flow;
use nfsdtop_exporter::metrics::{
    encode_openmetrics, registry, MetricsState, BUILD_REVISION, BUILD_RUSTC,
};
use nfsdtop_testkit::golden_pipeline;

#[test]
fn the_exposition_of_the_golden_scenario() {
    let p = golden_pipeline();
    let mut state = MetricsState::new(2, 2);
    let mut n = 0;
    p.run(None, |mut s| {
        // The wall clock's: the only field that is not the scenario's.
        s.time = 0.0;
        state.update(&s);
        n += 1;
        if n == 2 {
            Flow::Stop
        } else {
            Flow::Continue
        }
    })
    .unwrap();
    let om = encode_openmetrics(&registry(Arc::new(Mutex::new(state)))).replace(
        &format!("revision=\"{BUILD_REVISION}\",rustc=\"{BUILD_RUSTC}\""),
        "revision=\"REVISION\",rustc=\"RUSTC\"",
    );
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/exposition.om");
    if std::env::var("NFSDTOP_BLESS").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &om).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (NFSDTOP_BLESS=1 writes it)", path.display()));
    assert!(
        om == want,
        "/metrics differs from {} (NFSDTOP_BLESS=1 rewrites it after an intended change)\n--- want\n{want}\n--- got\n{om}",
        path.display()
    );
}
