//! nfsdtopd with 100,000 peers: /metrics stays bounded in size and the
//! daemon's memory stays bounded. Ignored by default (it takes about a
//! minute and wants a release build); run it with
//! `exporter/scripts/bench-100k.sh`, which writes the numbers printed here
//! into BENCHMARKS.md.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{many_peers, rss_kib, Daemon};
use nfsdtop_agent::aggregate::histogram::WaitHistogram;
use nfsdtop_agent::model::{EntityKind, EntityStats, Snapshot, Totals};
use nfsdtop_exporter::metrics::{encode_openmetrics, openmetrics_to_text, registry, MetricsState};

/// /metrics size bound (bytes) for `top_k` peers and `top_k_classes`
/// classes: each class series costs at most ~2.6 KB (7 families, a 21-bucket
/// histogram), each peer series ~0.9 KB (5 families, two labels with IPv6
/// room), plus ~4 KB of fixed families and metadata; and the workload
/// families (requests, received and sent bytes: three counters, ~180 bytes
/// a sample with IPv6 room) on top, for the same top K only.
pub fn size_bound(top_k: usize, top_k_classes: usize) -> usize {
    let fairness = (top_k_classes + 1) * 2600 + (top_k + 1) * 900 + 4096;
    let workload = (top_k_classes + 1 + top_k + 1) * 3 * 180 + 3 * 2 * 300;
    fairness + workload
}

#[test]
#[ignore = "about a minute; run by exporter/scripts/bench-100k.sh in release mode"]
fn daemon_with_100k_peers() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = many_peers(dir.path(), 100_000);
    let secs: u64 = std::env::var("NFSDTOP_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    // 16 threads x 1 ms = 16,000 dispatches per simulated second; at 10x,
    // every one of the 100,000 peers is dispatched every ~0.6 s (wall).
    let d = Daemon::start(&[
        "--demo",
        &scenario,
        "--listen",
        "127.0.0.1:0",
        "--speed",
        "10",
        "--interval",
        "1",
    ]);
    let pid = d.child.id();
    let first: serde_json::Value = d.wait_for("a snapshot with 100,000 peers", 120, |d| {
        let r = d.get("/api/v1/snapshot?group=class&top=1");
        let s: serde_json::Value = serde_json::from_str(&r.body).ok()?;
        (s["totals"]["peers"].as_u64()? >= 100_000).then_some(s)
    });
    println!();
    assert!(first["totals"]["peers"].as_u64().unwrap() >= 100_000);
    let first_rss = rss_kib(pid).0;
    let t0 = Instant::now();
    let (mut max_size, mut max_scrape, mut scrapes) = (0usize, Duration::ZERO, 0u32);
    let mut rss_samples = Vec::new();
    let mut folded = 0.0;
    while t0.elapsed() < Duration::from_secs(secs) {
        let t = Instant::now();
        let m = d.get("/metrics");
        let took = t.elapsed();
        assert_eq!(m.status, 200);
        max_size = max_size.max(m.body.len());
        max_scrape = max_scrape.max(took);
        scrapes += 1;
        folded = m
            .body
            .lines()
            .find(|l| l.starts_with("nfsdtop_peers_folded "))
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        rss_samples.push((t0.elapsed().as_secs_f64(), rss_kib(pid).0));
        // Scrape pacing (a Prometheus scrape interval), not synchronisation.
        std::thread::sleep(Duration::from_secs(2));
    }
    let health = d.get("/healthz").status;
    let last = d.snapshot("?group=class&top=1");
    let (rss_now, hwm) = rss_kib(pid);
    // Memory fills while every peer gets its first dispatches (histograms
    // allocate on first use), then must level off: compare the first third
    // of the run with the rest.
    let third = secs as f64 / 3.0;
    let early = rss_samples
        .iter()
        .filter(|r| r.0 <= third)
        .map(|r| r.1)
        .max()
        .unwrap_or(0);
    let late = rss_samples
        .iter()
        .filter(|r| r.0 > third)
        .map(|r| r.1)
        .max()
        .unwrap_or(0);
    let timeline: Vec<String> = rss_samples
        .iter()
        .step_by((rss_samples.len() / 8).max(1))
        .map(|(t, r)| format!("{t:.0} s: {} MiB", r / 1024))
        .collect();
    let bound = size_bound(50, 200);
    println!("| peers tracked | {} |", last["totals"]["peers"]);
    println!(
        "| classes tracked (no class map: one per peer) | {} |",
        last["totals"]["classes"]
    );
    println!(
        "| dispatches in the run | {} |",
        last["totals"]["dispatches"]
    );
    println!("| peers folded into peer=\"other\" | {folded} |");
    println!("| /metrics size, largest of {scrapes} scrapes | {max_size} bytes (bound {bound}) |");
    println!(
        "| /metrics scrape time, slowest (text format, over HTTP) | {:.1} ms |",
        max_scrape.as_secs_f64() * 1e3
    );
    println!(
        "| RSS at the first 100k-peer snapshot | {} MiB |",
        first_rss / 1024
    );
    println!("| RSS over the run | {} |", timeline.join(", "));
    println!(
        "| RSS, largest in the first third / the rest | {} / {} MiB |",
        early / 1024,
        late / 1024
    );
    println!(
        "| RSS at the end / peak (VmHWM) | {} / {} MiB |",
        rss_now / 1024,
        hwm / 1024
    );
    println!("| /healthz at the end | {health} |");
    assert_eq!(health, 200, "the pipeline kept up");
    assert!(
        max_size <= bound,
        "/metrics {max_size} bytes > bound {bound}"
    );
    assert!(
        folded >= 99_000.0,
        "peers beyond the top 50 are folded: {folded}"
    );
    // Bounded: after the table has filled, memory does not keep growing.
    assert!(
        late <= early * 5 / 4 + 64 * 1024,
        "RSS kept growing: {early} KiB in the first third, {late} KiB later"
    );
    assert!(hwm < 2 * 1024 * 1024, "peak RSS {hwm} KiB over 2 GiB");
}

fn synthetic(n: usize, round: u64) -> Snapshot {
    let mut h = WaitHistogram::default();
    for us in [50, 900, 4000, 20_000] {
        h.record_us(us);
    }
    let ent = |i: usize, kind: EntityKind| {
        let name = format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255);
        EntityStats {
            name: name.clone(),
            kind,
            class: name,
            dispatches: round * (i as u64 % 97 + 1),
            interval_dispatches: i as u64 % 97 + 1,
            entitled: round as f64 * 10.0,
            exec_seconds: round as f64 * 0.01,
            backlogged_seconds: round as f64 * 0.5,
            connections: 1,
            // Large values: the workload families at their widest.
            requests: round * 1_000_000_007,
            bytes_in: Some(round * 40_000_000_000_009),
            bytes_out: Some(round * 90_000_000_000_011),
            wait_histogram: if kind == EntityKind::Class {
                h.clone()
            } else {
                WaitHistogram::default()
            },
            ..EntityStats::default()
        }
    };
    Snapshot {
        time: round as f64,
        interval_s: 1.0,
        totals: Totals {
            dispatches: round * 50 * n as u64,
            peers: n as u64,
            classes: n as u64,
            ..Totals::default()
        },
        peers: (0..n).map(|i| ent(i, EntityKind::Peer)).collect(),
        classes: (0..n).map(|i| ent(i, EntityKind::Class)).collect(),
        ..Snapshot::default()
    }
}

#[test]
#[ignore = "timing; run by exporter/scripts/bench-100k.sh in release mode"]
fn encode_time_with_10k_peers() {
    println!();
    for (top_k, top_k_classes) in [(50, 200), (10_000, 10_000)] {
        let state = Arc::new(Mutex::new(MetricsState::new(top_k, top_k_classes)));
        let reg = registry(state.clone());
        let snaps: Vec<Snapshot> = (1..=6).map(|r| synthetic(10_000, r)).collect();
        let mut update = Duration::ZERO;
        let mut encode = Duration::ZERO;
        let mut text = Duration::ZERO;
        let mut protobuf = Duration::ZERO;
        let mut size = 0;
        let mut protobuf_size = 0;
        for s in &snaps {
            let t = Instant::now();
            state.lock().unwrap().update(s);
            update += t.elapsed();
            let t = Instant::now();
            let om = encode_openmetrics(&reg);
            encode += t.elapsed();
            let t = Instant::now();
            let tx = openmetrics_to_text(&om);
            text += t.elapsed();
            size = tx.len();
            // What the first protobuf scrape of a snapshot does (native
            // histograms beside the classic buckets).
            let t = Instant::now();
            let pb = prometheus_client::encoding::prometheus_protobuf::encode_to_vec(&reg).unwrap();
            protobuf += t.elapsed();
            protobuf_size = pb.len();
        }
        let n = snaps.len() as f64;
        println!(
            "| 10,000 peers and classes, top_k={top_k}, top_k_classes={top_k_classes} | update {:.2} ms | encode (OpenMetrics) {:.2} ms | + text 0.0.4 {:.2} ms | {} bytes | protobuf {:.2} ms | {} bytes |",
            update.as_secs_f64() * 1e3 / n,
            encode.as_secs_f64() * 1e3 / n,
            text.as_secs_f64() * 1e3 / n,
            size,
            protobuf.as_secs_f64() * 1e3 / n,
            protobuf_size
        );
        if top_k == 50 {
            assert!(size <= size_bound(top_k, top_k_classes), "{size}");
        }
    }
}
