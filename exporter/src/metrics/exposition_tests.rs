//! Tests of the exposition as a whole: a strict OpenMetrics parse of every
//! family, and the full text of a representative state against
//! `testdata/exposition.om` (names, labels, help, units and order, which
//! dashboards/, the rules and the e2e scripts depend on). Set
//! `NFSDTOP_BLESS=1` to rewrite the file after an intended change.

use super::*;
use nfsdtop_agent::aggregate::histogram::WaitHistogram;
use nfsdtop_agent::model::{
    EntityKind, PerTracepoint, PoolView, ServerView, SourceKind, Totals, Tracepoint, WaitSource,
};
use openmetrics_parser::openmetrics::parse_openmetrics;

fn entity(name: &str, kind: EntityKind, dispatches: u64) -> EntityStats {
    let mut e = EntityStats {
        name: name.into(),
        kind,
        class: format!("{name}-class"),
        dispatches,
        interval_dispatches: dispatches,
        entitled: dispatches as f64 * 0.75,
        exec_seconds: dispatches as f64 / 200.0,
        backlogged_seconds: 0.25,
        connections: 2,
        backlogged: dispatches.is_multiple_of(2),
        requests: dispatches + 1,
        // Bytes measured for all but fd00::3 (as if it were only seen on
        // classic tracepoints): its byte series must be absent, not 0.
        bytes_in: (name != "fd00::3").then_some(dispatches * 200),
        bytes_out: (name != "fd00::3").then_some(dispatches * 4200),
        ..EntityStats::default()
    };
    for us in [20, 300, 5000] {
        e.wait_histogram.record_us(us);
    }
    // Requests per procedure: READ and GETATTR (the procedure families).
    for (p, n) in [("READ", dispatches), ("GETATTR", 1)] {
        let stats = nfsdtop_agent::model::ProcedureStats {
            requests: n,
            request_rate: n as f64,
            exec_seconds: n as f64 / 400.0,
            ..Default::default()
        };
        e.procedures
            .insert(nfsdtop_agent::model::ProcName::new(p), stats);
    }
    // NFSv4 operations (--nfs4-ops): SEQUENCE and READ.
    let op = |count| nfsdtop_agent::model::OperationStats { count, rate: 0.0 };
    e.nfs4_operations = [(53, op(dispatches)), (25, op(dispatches / 2))]
        .into_iter()
        .collect();
    e
}

/// Every family at least once: folded peers and classes, a histogram,
/// BPF self-metrics, events, losses, the source, the server (threads,
/// pools, two network namespaces).
fn representative() -> MetricsState {
    let mut m = MetricsState::new(2, 1);
    let peers = vec![
        entity("10.0.0.1", EntityKind::Peer, 40),
        entity("10.0.0.2", EntityKind::Peer, 30),
        entity("fd00::3", EntityKind::Peer, 20),
    ];
    let classes = vec![
        entity("a", EntityKind::Class, 60),
        entity("b", EntityKind::Class, 30),
    ];
    let mut hist = WaitHistogram::default();
    for c in &classes {
        hist.merge(&c.wait_histogram);
    }
    let s = Snapshot {
        schema: Default::default(),
        time: 1_700_000_000.5,
        interval_s: 1.0,
        totals: Totals {
            dispatches: 90,
            exec_seconds: 0.45,
            peers: 3,
            classes: 2,
            transports: 6,
            peers_evicted: 1,
            wait_histogram: hist,
            events: {
                let mut e = PerTracepoint::default();
                e[Tracepoint::Dequeue] = 90;
                e[Tracepoint::Enqueue] = 95;
                e
            },
            lost_by_tracepoint: {
                let mut l = PerTracepoint::default();
                l[Tracepoint::Dequeue] = 1;
                l
            },
            bpf: vec![BpfProgramStats {
                program: "svc_xprt_dequeue".into(),
                hits: 91,
                records: 90,
                lost: 1,
                busy_dropped: 4,
                run_time_ns: 2_000_000,
                runs: 91,
            }],
            ..Totals::default()
        },
        peers,
        classes,
        server: ServerView {
            threads: Some(16),
            busy_threads: Some(3.5),
            pools: (0..2)
                .map(|pool| PoolView {
                    pool,
                    threads: Some(8),
                    busy_threads: Some(0.5 + f64::from(pool)),
                    exec_seconds: Some(4.0),
                    requests: Some(40),
                })
                .collect(),
            netns: vec![4026531840, 4026532077],
            services: vec![
                nfsdtop_agent::model::ServiceView {
                    service: "nfsd".into(),
                    ports: vec![2049],
                    dispatches: 40,
                    listener_dispatches: 2,
                    requests: 38,
                    exec_seconds: 0.5,
                    ..Default::default()
                },
                nfsdtop_agent::model::ServiceView {
                    service: "lockd".into(),
                    ports: vec![4045],
                    dispatches: 3,
                    listener_dispatches: 0,
                    requests: 3,
                    exec_seconds: 0.001,
                    peer_count: Some(2),
                    jain: Some(0.9),
                    peers: vec![
                        nfsdtop_agent::model::ServicePeer {
                            peer: "10.0.0.5".into(),
                            dispatches: 2,
                            entitled: 1.5,
                            ..Default::default()
                        },
                        nfsdtop_agent::model::ServicePeer {
                            peer: "10.0.0.6".into(),
                            dispatches: 1,
                            entitled: 1.5,
                            ..Default::default()
                        },
                        // The same address in another namespace.
                        nfsdtop_agent::model::ServicePeer {
                            peer: "10.0.0.6".into(),
                            netns: 4026532077,
                            dispatches: 0,
                            entitled: 0.5,
                            ..Default::default()
                        },
                    ],
                },
            ],
            nfs4_operations: None,
        },
        source: SourceInfo {
            kind: SourceKind::Live,
            kernel: "6.12.117".into(),
            generation: "6.16+".into(),
            wait_source: WaitSource::Qtime,
            detail: String::new(),
            host: "h".into(),
        },
    };
    m.update(&s);
    m
}

fn openmetrics(m: MetricsState) -> String {
    encode_openmetrics(&registry(Arc::new(Mutex::new(m))))
}

/// The strict parse, with the parser's complaint as the message.
///
/// Two places where openmetrics-parser 0.4 is stricter than the
/// OpenMetrics specification are worked around, each checked here
/// instead: it refuses a `# UNIT` on histograms (the specification allows
/// one on every type but info and stateset; the name must end in
/// `_<unit>`), and its grammar takes the metadata of a family with no
/// samples (allowed: e.g. no event counts before the first snapshot) for
/// the next family's, so such families are left out of the parse.
fn strict(om: &str) -> Result<usize, String> {
    // (family name, type, lines), in order.
    let mut blocks: Vec<(&str, &str, Vec<&str>)> = Vec::new();
    for line in om.lines() {
        let meta = ["# HELP ", "# TYPE ", "# UNIT "]
            .iter()
            .find_map(|p| line.strip_prefix(p))
            .map(|r| r.split_once(' ').unwrap_or((r, "")));
        if let Some((name, rest)) = meta {
            if blocks.last().is_none_or(|b| b.0 != name) {
                blocks.push((name, "", Vec::new()));
            }
            let b = blocks.last_mut().expect("pushed above");
            if line.starts_with("# TYPE ") {
                b.1 = rest;
            }
            if line.starts_with("# UNIT ") {
                if !name.ends_with(&format!("_{rest}")) {
                    return Err(format!("{line:?}: a family's name must end in its unit"));
                }
                if b.1 == "histogram" {
                    continue;
                }
            }
            b.2.push(line);
        } else if let Some(b) = blocks.last_mut() {
            b.2.push(line);
        } else {
            blocks.push(("", "", vec![line]));
        }
    }
    let mut kept = String::with_capacity(om.len());
    for (_, _, lines) in &blocks {
        if lines.iter().all(|l| l.starts_with("# ")) && lines.iter().all(|l| *l != "# EOF") {
            continue;
        }
        for l in lines {
            kept.push_str(l);
            kept.push('\n');
        }
    }
    parse_openmetrics(&kept)
        .map(|e| e.families.len())
        .map_err(|e| format!("{e:?}"))
}

#[test]
fn the_strict_parser_rejects_what_openmetrics_forbids() {
    let good = "# TYPE a counter\na_total 1\n# EOF\n";
    assert_eq!(strict(good), Ok(1));
    for (why, bad) in [
        ("no # EOF", "# TYPE a counter\na_total 1\n"),
        ("a counter without _total", "# TYPE a counter\na 1\n# EOF\n"),
        (
            "a unit its name does not end in",
            "# TYPE a_bytes gauge\n# UNIT a_bytes seconds\na_bytes 1\n# EOF\n",
        ),
        (
            "a family twice, apart",
            "# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\n# TYPE a gauge\na 2\n# EOF\n",
        ),
        (
            "a family twice",
            "# TYPE a gauge\na 1\n# TYPE a counter\na_total 1\n# EOF\n",
        ),
    ] {
        assert!(strict(bad).is_err(), "{why} was accepted: {bad:?}");
    }
}

#[test]
fn the_exposition_parses_strictly_as_openmetrics() {
    let om = openmetrics(representative());
    let families = strict(&om).unwrap_or_else(|e| panic!("{e}\n{om}"));
    let declared = om.lines().filter(|l| l.starts_with("# TYPE ")).count();
    assert_eq!(
        families, declared,
        "every declared family parsed once (all have samples)"
    );
    // A state before any snapshot, too (what the first scrape sees).
    let empty = openmetrics(MetricsState::new(5, 5));
    strict(&empty).unwrap_or_else(|e| panic!("{e}\n{empty}"));
}

#[test]
fn the_exposition_is_unchanged() {
    let om = openmetrics(representative());
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/metrics/testdata/exposition.om");
    if std::env::var_os("NFSDTOP_BLESS").is_some() {
        std::fs::write(&path, &om).expect("write the golden exposition");
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (NFSDTOP_BLESS=1 writes it)", path.display()));
    if om != want {
        let first = om
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(om.lines().count().min(want.lines().count()));
        panic!(
            "/metrics changed at line {}:\n  now:  {:?}\n  was:  {:?}\n(NFSDTOP_BLESS=1 rewrites {} after an intended change)",
            first + 1,
            om.lines().nth(first),
            want.lines().nth(first),
            path.display()
        );
    }
}

#[test]
fn the_prometheus_text_is_made_once_per_snapshot() {
    let e = Exposition::new(openmetrics(representative()));
    assert_eq!(e.text(), openmetrics_to_text(e.openmetrics()));
    assert!(
        std::ptr::eq(e.text(), e.text()),
        "later scrapes share the first one's text"
    );
    assert!(!e.text().contains("# EOF"));
}
