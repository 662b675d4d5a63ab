//! Tests of the exposition: folding residuals, histograms, self-metrics,
//! escaping, OpenMetrics family names.

use super::*;
use nfsdtop_agent::model::{EntityKind, Totals};

fn peer(name: &str, dispatches: u64, interval: u64) -> EntityStats {
    EntityStats {
        name: name.into(),
        kind: EntityKind::Peer,
        class: name.into(),
        dispatches,
        interval_dispatches: interval,
        entitled: dispatches as f64,
        exec_seconds: dispatches as f64 / 100.0,
        connections: 1,
        ..EntityStats::default()
    }
}

fn snap(total: u64, peers: Vec<EntityStats>) -> Snapshot {
    Snapshot {
        time: 1.0,
        totals: Totals {
            dispatches: total,
            exec_seconds: total as f64 / 100.0,
            ..Totals::default()
        },
        classes: peers
            .iter()
            .map(|p| EntityStats {
                kind: EntityKind::Class,
                ..p.clone()
            })
            .collect(),
        peers,
        ..Snapshot::default()
    }
}

fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn text(state: MetricsState) -> (String, Arc<Mutex<MetricsState>>) {
    let st = Arc::new(Mutex::new(state));
    let r = registry(st.clone());
    (openmetrics_to_text(&encode_openmetrics(&r)), st)
}

#[test]
fn top_k_is_sticky_and_other_is_the_monotonic_residual() {
    let mut m = MetricsState::new(2, 2);
    // a, b busiest: labelled; c folded.
    m.update(&snap(
        60,
        vec![peer("a", 30, 30), peer("b", 20, 20), peer("c", 10, 10)],
    ));
    let (t, st) = text(m);
    assert_eq!(
        value(&t, "nfsdtop_peer_dispatches_total{peer=\"a\",class=\"a\"}"),
        Some(30.0)
    );
    assert_eq!(
        value(
            &t,
            "nfsdtop_peer_dispatches_total{peer=\"other\",class=\"other\"}"
        ),
        Some(10.0)
    );
    assert_eq!(value(&t, "nfsdtop_peers_folded"), Some(1.0));
    assert_eq!(value(&t, "nfsdtop_peer_folds_total"), Some(1.0));
    let mut m = Arc::try_unwrap(st).unwrap().into_inner().unwrap();
    // c becomes the busiest: a and b keep their labels (sticky).
    m.update(&snap(
        160,
        vec![peer("a", 31, 1), peer("b", 21, 1), peer("c", 108, 98)],
    ));
    // b is evicted by the aggregator (gone from the snapshot) after 4
    // more dispatches nobody saw; "other" must not go back, and the
    // exact total still adds up.
    m.update(&snap(200, vec![peer("a", 40, 9), peer("c", 135, 27)]));
    let (t, st) = text(m);
    assert_eq!(
        value(&t, "nfsdtop_peer_dispatches_total{peer=\"a\",class=\"a\"}"),
        Some(40.0)
    );
    assert_eq!(
        value(&t, "nfsdtop_peer_dispatches_total{peer=\"b\",class=\"b\"}"),
        None
    );
    // c took b's free slot at the third snapshot; its history (108)
    // stays in "other", its own series starts counting from there.
    assert_eq!(
        value(&t, "nfsdtop_peer_dispatches_total{peer=\"c\",class=\"c\"}"),
        Some(0.0)
    );
    let other = value(
        &t,
        "nfsdtop_peer_dispatches_total{peer=\"other\",class=\"other\"}",
    )
    .unwrap();
    assert_eq!(
        other,
        200.0 - 40.0 - 21.0,
        "other = total - a - the 21 b had when its series went"
    );
    let mut m = Arc::try_unwrap(st).unwrap().into_inner().unwrap();
    // b comes back (re-created: its cumulative restarts at 0).
    m.update(&snap(
        210,
        vec![peer("a", 41, 1), peer("c", 140, 5), peer("b", 4, 4)],
    ));
    let (t, _) = text(m);
    assert_eq!(
        value(&t, "nfsdtop_peer_dispatches_total{peer=\"c\",class=\"c\"}"),
        Some(5.0)
    );
    let other2 = value(
        &t,
        "nfsdtop_peer_dispatches_total{peer=\"other\",class=\"other\"}",
    )
    .unwrap();
    assert!(other2 >= other, "other is monotonic: {other} -> {other2}");
    assert_eq!(other2, other + 4.0);
    assert_eq!(value(&t, "nfsdtop_peer_folds_total"), Some(2.0));
    assert_eq!(value(&t, "nfsdtop_dispatches_total"), Some(210.0));
}

#[test]
fn histogram_buckets_are_exact_at_powers_of_two() {
    let mut c = EntityStats {
        name: "x".into(),
        kind: EntityKind::Class,
        class: "x".into(),
        dispatches: 4,
        ..EntityStats::default()
    };
    for us in [15, 16, 1000, 5_000_000] {
        c.wait_histogram.record_us(us);
    }
    let mut s = snap(4, vec![]);
    s.totals.wait_histogram = c.wait_histogram.clone();
    s.classes = vec![c];
    let mut m = MetricsState::new(5, 5);
    m.update(&s);
    let (t, _) = text(m);
    let b = |le: &str| {
        value(
            &t,
            &format!("nfsdtop_class_queue_wait_seconds_bucket{{le=\"{le}\",class=\"x\"}}"),
        )
    };
    assert_eq!(b("0.000016"), Some(1.0));
    assert_eq!(b("0.000032"), Some(2.0));
    assert_eq!(b("0.001024"), Some(3.0));
    assert_eq!(b("4.194304"), Some(3.0));
    assert_eq!(b("+Inf"), Some(4.0));
    assert_eq!(
        value(&t, "nfsdtop_class_queue_wait_seconds_count{class=\"x\"}"),
        Some(4.0)
    );
    // Nothing folded: the "other" histogram is empty.
    assert_eq!(
        value(
            &t,
            "nfsdtop_class_queue_wait_seconds_count{class=\"other\"}"
        ),
        Some(0.0)
    );
}

#[test]
fn bpf_self_metrics_appear_when_the_source_has_them() {
    let mut m = MetricsState::new(5, 5);
    m.update(&snap(1, vec![peer("a", 1, 1)]));
    let (t, st) = text(m);
    assert!(!t.contains("nfsdtop_bpf_"), "demo: no BPF families");
    let mut m = Arc::try_unwrap(st).unwrap().into_inner().unwrap();
    let mut s = snap(2, vec![peer("a", 2, 1)]);
    s.totals.bpf = vec![BpfProgramStats {
        program: "svc_xprt_dequeue".into(),
        hits: 10,
        records: 10,
        lost: 0,
        busy_dropped: 3,
        run_time_ns: 1_500_000_000,
        runs: 10,
    }];
    m.update(&s);
    let (t, _) = text(m);
    let p = "{program=\"svc_xprt_dequeue\"}";
    assert_eq!(
        value(&t, &format!("nfsdtop_bpf_run_seconds_total{p}")),
        Some(1.5)
    );
    assert_eq!(value(&t, &format!("nfsdtop_bpf_runs_total{p}")), Some(10.0));
    assert_eq!(
        value(&t, &format!("nfsdtop_bpf_busy_dropped_total{p}")),
        Some(3.0)
    );
    let out = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write as _;
            c.stdin.take().unwrap().write_all(t.as_bytes())?;
            c.wait_with_output()
        })
        .expect("promtool (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn label_values_are_escaped() {
    let mut m = MetricsState::new(5, 5);
    m.update(&snap(1, vec![peer("we\"ird\\name\n", 1, 1)]));
    let (t, _) = text(m);
    assert!(t.contains("peer=\"we\\\"ird\\\\name\\n\""), "{t}");
}

mod openmetrics_tests {
    use super::*;
    use nfsdtop_agent::model::{EntityKind, Totals};

    /// OpenMetrics: every family name once, and no family's samples
    /// (name + a suffix its type reserves) named like another family.
    #[test]
    fn family_names_are_unique_as_openmetrics_requires() {
        let mut m = MetricsState::new(1, 1);
        let e = |name: &str| EntityStats {
            name: name.into(),
            kind: EntityKind::Peer,
            class: name.into(),
            dispatches: 5,
            interval_dispatches: 5,
            ..EntityStats::default()
        };
        let s = Snapshot {
            time: 1.0,
            interval_s: 1.0,
            totals: Totals {
                dispatches: 10,
                ..Totals::default()
            },
            peers: vec![e("a"), e("b")],
            classes: vec![e("a"), e("b")],
            ..Snapshot::default()
        };
        m.update(&s);
        let om = encode_openmetrics(&registry(Arc::new(Mutex::new(m))));
        let mut families: Vec<(String, String)> = Vec::new();
        for l in om.lines() {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                let (name, ty) = rest.split_once(' ').unwrap();
                assert!(
                    families.iter().all(|(n, _)| n != name),
                    "family {name} declared twice"
                );
                families.push((name.into(), ty.into()));
            }
        }
        for (name, ty) in &families {
            let suffixes: &[&str] = match ty.as_str() {
                "counter" => &["_total", "_created"],
                "histogram" => &["_bucket", "_count", "_sum", "_created"],
                "info" => &["_info"],
                _ => &[],
            };
            for suf in suffixes {
                let sample = format!("{name}{suf}");
                assert!(
                    families.iter().all(|(n, _)| *n != sample),
                    "{name}'s sample {sample} is also a family"
                );
            }
        }
        assert!(families.iter().any(|(n, _)| n == "nfsdtop_peers_folded"));
        assert!(families.iter().any(|(n, _)| n == "nfsdtop_unfair_entities"));
    }
}

#[test]
fn server_threads_busy_threads_and_namespaces_are_exported_only_when_known() {
    use nfsdtop_agent::model::{PoolView, ServerView};
    let mut m = MetricsState::new(2, 2);
    m.update(&snap(10, vec![peer("a", 10, 10)]));
    let (t, _) = text(m);
    for unknown in [
        "nfsdtop_server_threads",
        "nfsdtop_server_busy",
        "nfsdtop_server_pool",
    ] {
        assert!(!t.contains(unknown), "unknown is left out:\n{t}");
    }
    // Known from the first snapshot on (0: no peer yet), never before.
    assert_eq!(value(&t, "nfsdtop_server_network_namespaces"), Some(0.0));
    let (t, _) = text(MetricsState::new(2, 2));
    assert!(!t.contains("nfsdtop_server_"), "before a snapshot:\n{t}");
    let mut m = MetricsState::new(2, 2);
    for _ in 0..2 {
        let mut s = snap(10, vec![peer("a", 10, 10)]);
        s.interval_s = 2.0;
        s.server = ServerView {
            threads: Some(16),
            busy_threads: Some(3.5),
            pools: vec![
                PoolView {
                    pool: 0,
                    threads: Some(8),
                    busy_threads: None,
                    exec_seconds: None,
                    requests: None,
                },
                PoolView {
                    pool: 1,
                    threads: Some(8),
                    busy_threads: Some(1.25),
                    exec_seconds: Some(9.0),
                    requests: Some(90),
                },
            ],
            netns: vec![4026531840, 4026532077],
            ..Default::default()
        };
        m.update(&s);
    }
    let (t, _) = text(m);
    assert_eq!(value(&t, "nfsdtop_server_threads"), Some(16.0), "{t}");
    assert_eq!(value(&t, "nfsdtop_server_busy_threads"), Some(3.5), "{t}");
    // Two intervals of 2 s at 3.5 busy threads.
    assert_eq!(
        value(&t, "nfsdtop_server_busy_thread_seconds_total"),
        Some(14.0),
        "{t}"
    );
    assert_eq!(
        value(&t, "nfsdtop_server_pool_threads{pool=\"1\"}"),
        Some(8.0),
        "{t}"
    );
    // Pool 1's busy threads, and two intervals of 2 s at 1.25; pool 0's
    // are unknown: left out.
    assert_eq!(
        value(&t, "nfsdtop_server_pool_busy_threads{pool=\"1\"}"),
        Some(1.25),
        "{t}"
    );
    assert_eq!(
        value(
            &t,
            "nfsdtop_server_pool_busy_thread_seconds_total{pool=\"1\"}"
        ),
        Some(5.0),
        "{t}"
    );
    assert!(
        !t.contains("nfsdtop_server_pool_busy_threads{pool=\"0\"}"),
        "{t}"
    );
    assert_eq!(
        value(&t, "nfsdtop_server_network_namespaces"),
        Some(2.0),
        "two namespaces:\n{t}"
    );
}

#[test]
fn hostname_lookups_dropped_are_exported_only_with_resolve() {
    let mut m = MetricsState::new(2, 2);
    m.update(&snap(10, vec![peer("a", 10, 10)]));
    let (t, _) = text(m);
    assert!(
        !t.contains("nfsdtop_hostname_lookups"),
        "without resolve:\n{t}"
    );
    let mut m = MetricsState::new(2, 2);
    let mut s = snap(10, vec![peer("a", 10, 10)]);
    s.totals.hostname_lookups_dropped = Some(74);
    m.update(&s);
    let (t, _) = text(m);
    assert_eq!(
        value(&t, "nfsdtop_hostname_lookups_dropped_total"),
        Some(74.0),
        "{t}"
    );
}

#[test]
fn the_lag_gauge_is_exported_for_a_live_source_only() {
    let mut m = MetricsState::new(2, 2);
    m.update(&snap(10, vec![peer("a", 10, 10)]));
    let (t, _) = text(m);
    assert!(!t.contains("nfsdtop_lag_seconds"), "demo or replay:\n{t}");
    let mut m = MetricsState::new(2, 2);
    let mut s = snap(10, vec![peer("a", 10, 10)]);
    s.totals.lag_s = Some(12.5);
    m.update(&s);
    let (t, _) = text(m);
    assert_eq!(value(&t, "nfsdtop_lag_seconds"), Some(12.5), "{t}");
}

/// Requests per procedure: for labelled peers and classes only, counted
/// from the round they were labelled, a procedure label escaped like any
/// other; the folded peer's procedures are in no series.
#[test]
fn procedures_of_the_top_k_only_from_their_labelling() {
    use nfsdtop_agent::model::{ProcName, ProcedureStats};
    let with = |mut e: EntityStats, procs: &[(&str, u64)]| {
        e.procedures = procs
            .iter()
            .map(|&(n, requests)| {
                let p = ProcedureStats {
                    requests,
                    exec_seconds: requests as f64 / 1000.0,
                    ..ProcedureStats::default()
                };
                (ProcName::new(n), p)
            })
            .collect();
        e
    };
    let mut m = MetricsState::new(1, 1);
    m.update(&snap(
        40,
        vec![
            with(peer("a", 30, 30), &[("READ", 25), ("WR\"ITE", 5)]),
            with(peer("c", 10, 10), &[("READ", 9)]),
        ],
    ));
    m.update(&snap(
        50,
        vec![
            with(peer("a", 38, 8), &[("READ", 31), ("WR\"ITE", 7)]),
            with(peer("c", 12, 2), &[("READ", 11)]),
        ],
    ));
    let (t, _) = text(m);
    let series = |p: &str| {
        format!("nfsdtop_peer_procedure_requests_total{{peer=\"a\",class=\"a\",procedure=\"{p}\"}}")
    };
    assert_eq!(value(&t, &series("READ")), Some(31.0), "{t}");
    assert_eq!(value(&t, &series("WR\\\"ITE")), Some(7.0), "{t}");
    assert_eq!(
        value(
            &t,
            "nfsdtop_peer_procedure_execution_seconds_total{peer=\"a\",class=\"a\",procedure=\"READ\"}"
        ),
        Some(0.031)
    );
    assert_eq!(
        value(
            &t,
            "nfsdtop_class_procedure_requests_total{class=\"a\",procedure=\"READ\"}"
        ),
        Some(31.0)
    );
    assert!(
        !t.lines()
            .any(|l| l.starts_with("nfsdtop_peer_procedure") && l.contains("\"c\"")),
        "the folded peer has none:\n{t}"
    );
    assert!(
        !t.contains("peer=\"other\",class=\"other\",procedure"),
        "{t}"
    );
}

/// NFSv4 operations (`--nfs4-ops`): for labelled peers and classes only,
/// counted as their procedures are; the folded peer's are in no series.
#[test]
fn nfs4_operations_of_the_top_k_only() {
    use nfsdtop_agent::model::OperationStats;
    let with = |mut e: EntityStats, ops: &[(u8, u64)]| {
        e.nfs4_operations = ops
            .iter()
            .map(|&(op, count)| (op, OperationStats { count, rate: 0.0 }))
            .collect();
        e
    };
    let mut m = MetricsState::new(1, 1);
    m.update(&snap(
        40,
        vec![
            with(peer("a", 30, 30), &[(53, 30), (25, 25)]),
            with(peer("c", 10, 10), &[(53, 10)]),
        ],
    ));
    m.update(&snap(
        50,
        vec![
            with(peer("a", 38, 8), &[(53, 38), (25, 31)]),
            with(peer("c", 12, 2), &[(53, 12)]),
        ],
    ));
    let (t, _) = text(m);
    let series = |op: &str| {
        format!("nfsdtop_peer_nfs4_operations_total{{peer=\"a\",class=\"a\",operation=\"{op}\"}}")
    };
    assert_eq!(value(&t, &series("SEQUENCE")), Some(38.0), "{t}");
    assert_eq!(value(&t, &series("READ")), Some(31.0), "{t}");
    assert_eq!(
        value(
            &t,
            "nfsdtop_class_nfs4_operations_total{class=\"a\",operation=\"READ\"}"
        ),
        Some(31.0)
    );
    assert!(
        !t.lines()
            .any(|l| l.starts_with("nfsdtop_peer_nfs4") && l.contains("\"c\"")),
        "the folded peer has none:\n{t}"
    );
}
