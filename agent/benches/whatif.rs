//! What `nfsdtop whatif` costs: fitting a 10-minute recording of 1,000
//! clients and predicting the three policies, on one core (the command is
//! single-threaded), as the command runs and with its calibration forced
//! whatever the fit's miss. The recording is made first by the demo
//! simulator (not timed): 900 interactive clients sending bursts of 8 with 400 ms
//! think times and 100 backlogged clients with 2 connections, against
//! 16 threads at 2 ms a request.
//!
//! Run: `cargo bench -p nfsdtop-agent --bench whatif` (release); `-- --quick`
//! records 1 minute instead. Without `--bench` (`cargo test --benches`)
//! it runs a small smoke version. Results: BENCHMARKS.md, section
//! "What-if model".

use std::path::PathBuf;
use std::time::{Duration, Instant};

use nfsdtop_agent::model::{SourceKind, WaitSource};
use nfsdtop_agent::record::{Header, NfsdConfig, Writer};
use nfsdtop_agent::source::demo::scenario::ClientSpec;
use nfsdtop_agent::source::demo::{Policy, Scenario, Simulator};
use nfsdtop_agent::whatif::{self, calibrate, Options};

fn cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn scenario(interactive: u32, backlogged: u32) -> Scenario {
    let mut s = Scenario::builtin("movers").expect("built-in");
    s.name = "bench-1000".into();
    s.threads = 16;
    s.service_ms = 2.0;
    s.jitter = 0.5;
    s.policy = Policy::Flat;
    s.clients = vec![
        ClientSpec {
            address: "10.1.0.1".parse().expect("literal"),
            count: interactive,
            connections: 1,
            inflight: None,
            burst: Some(8),
            think_ms: 400.0,
            nfs_name: None,
            request_bytes: 200,
            reply_bytes: 4296,
        },
        ClientSpec {
            address: "10.2.0.1".parse().expect("literal"),
            count: backlogged,
            connections: 2,
            inflight: Some(8),
            burst: None,
            think_ms: 0.0,
            nfs_name: None,
            request_bytes: 200,
            reply_bytes: 4296,
        },
    ];
    s.classes[0].prefix = "10.2.0.0/16".into();
    s.classes[0].name = "bulk".into();
    s.classes[1].name = "users".into();
    s.classes[2].name = "users".into();
    s
}

/// Record `secs` of `s` to a temporary file, streaming (memory stays flat).
fn record(s: &Scenario, secs: u64) -> (PathBuf, u64) {
    let path = std::env::temp_dir().join(format!(
        "nfsdtop-bench-whatif-{}.nfsdrec",
        std::process::id()
    ));
    let header = Header {
        host: "bench".into(),
        kernel: "simulated".into(),
        generation: "demo".into(),
        wait_source: WaitSource::EnqueueDequeue,
        source_kind: SourceKind::Demo,
        source_detail: format!("{} policy=flat threads={}", s.name, s.threads),
        class_map: s.class_map().expect("valid").to_string(),
        recorded_by: "bench".into(),
        file_id: 2,
        nfsd: NfsdConfig {
            threads: Some(s.threads),
            pools: Some(1),
            ports: None,
        },
        ..Header::default()
    };
    let mut w = Writer::create(&path, &header).expect("temp file");
    let mut sim = Simulator::new(s.clone());
    let mut buf = Vec::new();
    for t in 1..=secs {
        buf.clear();
        sim.run_until(t * 1_000_000_000, &mut buf);
        w.write_all(&buf).expect("write");
    }
    let summary = w.finish_file().expect("finish");
    (path, summary.events)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let full = args.iter().any(|a| a == "--bench");
    let quick = args.iter().any(|a| a == "--quick");
    let (clients, secs) = match (full, quick) {
        (true, false) => ((900, 100), 600),
        (true, true) => ((900, 100), 60),
        _ => ((18, 2), 5),
    };
    let s = scenario(clients.0, clients.1);
    let t = Instant::now();
    let (path, events) = record(&s, secs);
    eprintln!(
        "whatif bench: recorded {events} events of {} clients over {secs} s in {:.1?}",
        clients.0 + clients.1,
        t.elapsed()
    );
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    // As the command runs it (calibration only where the fit misses by
    // over a point), then calibrating whatever the miss: rounds until six
    // in a row bring no better one (this recording's fit is exact).
    let runs = [
        ("as needed", Options::default()),
        (
            "forced",
            Options {
                calibrate_above_points: -1.0,
                ..Options::default()
            },
        ),
    ];
    println!(
        "| clients | recorded | events | file | calibration | fit + 3 policies, CPU | wall | flat fit error |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (what, opts) in runs {
        let (w, c) = (Instant::now(), cpu());
        let report = whatif::run_file(&path, &opts).expect("whatif");
        let (wall, cpu_s) = (w.elapsed().as_secs_f64(), (cpu() - c).as_secs_f64());
        assert!(
            report.fit.ok,
            "the bench's own fit is off: {:?}",
            report.fit
        );
        let rounds = format!(
            "{what}: {} of at most {} rounds run",
            report.fit.calibration_rounds_run,
            calibrate::MAX_ROUNDS
        );
        println!(
            "| {} ({} transports) | {secs} s | {events} | {:.0} MB | {rounds} | {cpu_s:.2} s | {wall:.2} s | {:.2} points |",
            clients.0 + clients.1,
            report.model.transports,
            bytes as f64 / 1e6,
            report.fit.max_error_points
        );
    }
    let _ = std::fs::remove_file(&path);
}
