//! The queue-wait histograms end to end with a real Prometheus 2.42 that
//! has native histograms on (`--enable-feature=native-histograms`): it
//! negotiates the protobuf format, stores each class's queue wait as one
//! native histogram series, and `histogram_quantile` reads it; the text
//! formats of the same daemon keep the classic `_bucket` series.
//!
//! The demo (seed-k16 at `--speed 4`, a snapshot every 0.25 s) keeps 16
//! threads busy at 10 ms a request with every transport backlogged, so
//! waits are tens of simulated milliseconds: the median must fall within
//! the range nfsdtop measures and be the same, within the resolution of
//! the two bucket layouts, as the classic buckets' median.

mod common;

use std::time::{Duration, Instant};

use common::prometheus::{wait_until, Prometheus};
use common::Daemon;

#[test]
fn prometheus_stores_the_queue_wait_as_a_native_histogram() {
    let d = Daemon::start(&[
        "--demo",
        "seed-k16",
        "--listen",
        "127.0.0.1:0",
        "--speed",
        "4",
        "--interval",
        "0.25",
    ]);
    let prom = Prometheus::start_scraping(
        &[
            "  - job_name: nfsdtopd".into(),
            "    scrape_interval: 1s".into(),
            "    scrape_timeout: 900ms".into(),
            "    static_configs:".into(),
            format!("      - targets: ['{}']", d.addr),
        ],
        &["native-histograms"],
    );
    let wait = "nfsdtop_class_queue_wait_seconds{class!=\"other\"}";
    // histogram_count() answers for native histograms only: a series
    // scraped as classic buckets has nothing for it.
    let deadline = Instant::now() + Duration::from_secs(60);
    let counts = wait_until("native queue-wait histograms with a rate", deadline, || {
        let c = prom.query(&format!("histogram_count(rate({wait}[1m]))"));
        (c.len() == 2 && c.iter().all(|(_, v)| *v > 0.0)).then_some(c)
    });
    eprintln!("native histogram_count of the rate per class: {counts:?}");

    // The stored sample itself is a histogram, not a float.
    let raw = prom.query_raw(wait);
    assert_eq!(raw.len(), 2, "{raw:?}");
    for s in &raw {
        assert!(
            s.get("histogram").is_some() && s.get("value").is_none(),
            "not a native histogram sample: {s}"
        );
        assert!(
            s["histogram"][1]["buckets"]
                .as_array()
                .is_some_and(|b| !b.is_empty()),
            "{s}"
        );
    }
    // Protobuf scrapes store no classic bucket series.
    assert!(
        prom.query("nfsdtop_class_queue_wait_seconds_bucket")
            .is_empty(),
        "classic buckets stored from a protobuf scrape"
    );

    let medians = prom.query(&format!("histogram_quantile(0.5, rate({wait}[1m]))"));
    assert_eq!(medians.len(), 2, "{medians:?}");
    for (m, v) in &medians {
        // Tens of milliseconds (simulated), within 16 µs .. 4.2 s.
        assert!(v.is_finite() && *v > 0.001 && *v < 4.2, "{m}: median {v}");
    }

    // The same daemon's text formats: classic buckets, and the median
    // they give agrees within the coarser layout's resolution (a power of
    // two).
    let text = d.get("/metrics");
    assert_eq!(text.status, 200);
    assert!(
        text.header("content-type")
            .is_some_and(|c| c.starts_with("text/plain")),
        "{:?}",
        text.header("content-type")
    );
    assert!(
        text.body
            .lines()
            .any(|l| l.starts_with("nfsdtop_class_queue_wait_seconds_bucket{le=\"0.016384\"")),
        "no classic buckets in the text format"
    );
    let om = d.get_with(
        "/metrics",
        &[("Accept", "application/openmetrics-text; version=1.0.0")],
    );
    assert!(om
        .body
        .contains("nfsdtop_class_queue_wait_seconds_bucket{le=\"+Inf\""));
    for (m, native) in &medians {
        let class = m["class"].as_str().unwrap();
        let classic = classic_median(&text.body, class);
        eprintln!("{class}: median {native:.6} s native, {classic:.6} s classic");
        assert!(
            *native > classic / 2.0 && *native < classic * 2.0,
            "{class}: native median {native} vs classic {classic}"
        );
    }

    // The process metrics come through the protobuf format too.
    let rss = prom.query("process_resident_memory_bytes");
    assert!(
        rss.len() == 1 && rss[0].1 > 1e6,
        "process_resident_memory_bytes over protobuf: {rss:?}"
    );
}

/// The median of the cumulative classic buckets of `class` in `text`, by
/// linear interpolation within the bucket, as histogram_quantile does.
fn classic_median(text: &str, class: &str) -> f64 {
    let prefix = "nfsdtop_class_queue_wait_seconds_bucket{le=\"";
    let mut buckets: Vec<(f64, f64)> = text
        .lines()
        .filter(|l| l.contains(&format!("class=\"{class}\"")))
        .filter_map(|l| l.strip_prefix(prefix))
        .filter_map(|rest| {
            let (le, tail) = rest.split_once('"')?;
            let count = tail.rsplit(' ').next()?.parse::<f64>().ok()?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, count))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = buckets.last().expect("buckets").1;
    let rank = total / 2.0;
    let mut prev = (0.0, 0.0);
    for (le, c) in buckets {
        if c >= rank {
            return prev.0 + (le - prev.0) * (rank - prev.1) / (c - prev.1);
        }
        prev = (le, c);
    }
    f64::NAN
}
