//! Tests of the exposition as a whole: a strict OpenMetrics parse of every
//! family, and the full text of a representative state against
//! `testdata/exposition.om` (names, labels, help, units and order, which
//! dashboards/, the rules and the e2e scripts depend on; the build's
//! revision and rustc as placeholders). Set `NFSDTOP_BLESS=1` to rewrite
//! the file after an intended change. The protobuf format's families are
//! checked against the text's, and its native histograms decoded.

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
    // Depth at enqueue measured for all but fd00::3, as the bytes.
    if name != "fd00::3" {
        let mut d = nfsdtop_agent::model::DepthHistogram::default();
        for depth in [0, 0, 1, 3, 70] {
            d.record(depth);
        }
        e.enqueue_depth = Some(d);
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
            threads_running: Some(nfsdtop_agent::model::ThreadsRunning {
                mean: 6.25,
                min: 4,
                max: 8,
                now: 5,
                starts: 4,
                exits: 3,
                starts_total: 12,
                exits_total: 9,
                lost: 0,
                configured_min: Some(4),
                configured_max: Some(16),
            }),
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

/// The build's revision and rustc as placeholders: the golden text must
/// not change with every commit.
fn without_build_facts(om: &str) -> String {
    om.replace(
        &format!("revision=\"{BUILD_REVISION}\",rustc=\"{BUILD_RUSTC}\""),
        "revision=\"REVISION\",rustc=\"RUSTC\"",
    )
}

#[test]
fn the_exposition_is_unchanged() {
    let om = without_build_facts(&openmetrics(representative()));
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

/// The protobuf body's families, decoded.
fn decode_protobuf(
    mut bytes: &[u8],
) -> Vec<prometheus_client::encoding::prometheus_protobuf::prometheus_data_model::MetricFamily> {
    use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model::MetricFamily;
    use prost::Message as _;
    let mut out = Vec::new();
    while !bytes.is_empty() {
        out.push(MetricFamily::decode_length_delimited(&mut bytes).expect("a delimited family"));
    }
    out
}

#[test]
fn the_protobuf_has_every_family_and_native_queue_wait_histograms() {
    let e = Exposition::encode(&Arc::new(registry(Arc::new(Mutex::new(representative())))));
    let (format, body) = e.body(Format::Protobuf);
    assert_eq!(format, Format::Protobuf);
    let families = decode_protobuf(&body);
    // The same families as the text format (whose counters' names gain
    // _total and infos' _info there too), then the process ones.
    let text = e.text();
    for f in &families {
        assert!(
            text.contains(&format!("# TYPE {} ", f.name)) || f.name.starts_with("process_"),
            "{} is not in the text format",
            f.name
        );
        for m in &f.metric {
            for l in &m.label {
                assert!(!l.value.is_empty(), "{}: empty {}", f.name, l.name);
                assert!(!l.value.contains('\\'), "{}: escaped {:?}", f.name, l.value);
            }
        }
    }
    let text_families = text.lines().filter(|l| l.starts_with("# TYPE ")).count();
    let process = families
        .iter()
        .filter(|f| f.name.starts_with("process_"))
        .count();
    assert_eq!(families.len() - process, text_families);
    assert!(process >= 5, "the process families: {process}");

    let wait = families
        .iter()
        .find(|f| f.name == "nfsdtop_class_queue_wait_seconds")
        .expect("the queue-wait family");
    for m in &wait.metric {
        let h = m.histogram.as_ref().expect("a histogram");
        assert_eq!(h.schema, native::SCHEMA);
        assert_eq!(h.zero_threshold, native::ZERO_THRESHOLD);
        assert!(!h.bucket.is_empty(), "the classic buckets come along");
        let n = native::Native {
            zero_count: h.zero_count,
            spans: h
                .positive_span
                .iter()
                .map(|s| (s.offset, s.length))
                .collect(),
            deltas: h.positive_delta.clone(),
        };
        let native_total: u64 = n.buckets().iter().map(|b| b.1).sum::<u64>() + n.zero_count;
        assert_eq!(
            native_total, h.sample_count,
            "every wait in one native bucket"
        );
        // 20 µs, 300 µs and 5 ms (entity()): each in the native bucket
        // holding its agent bucket's midpoint, within 25% of the wait.
        let uppers: Vec<f64> = n
            .buckets()
            .iter()
            .filter(|b| b.1 > 0)
            .map(|b| native::native_upper_bound(b.0))
            .collect();
        for (want, got) in [20e-6, 300e-6, 5e-3].iter().zip(&uppers) {
            assert!(
                (got / want - 1.0).abs() < 0.25,
                "{m:?}: bucket bound {got} for a wait of {want}"
            );
        }
    }
}

#[test]
fn every_format_ends_with_the_process_families() {
    let e = Exposition::encode(&Arc::new(registry(Arc::new(Mutex::new(representative())))));
    let (_, om) = e.body(Format::OpenMetrics);
    let om = String::from_utf8(om).unwrap();
    assert!(om.ends_with("# EOF\n") && om.matches("# EOF").count() == 1);
    assert!(om.contains("\nprocess_resident_memory_bytes "));
    strict(&om).unwrap_or_else(|e| panic!("{e}\n{om}"));
    let (_, text) = e.body(Format::Text);
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total "));
    assert!(!text.contains("# EOF"));
    // Without a registry there is no protobuf: OpenMetrics instead.
    let (format, _) = Exposition::new(om.clone()).body(Format::Protobuf);
    assert_eq!(format, Format::OpenMetrics);
}

#[test]
fn the_accept_header_picks_the_format() {
    let pick = |accept: &[&str]| Format::negotiate(accept.iter().copied());
    // Prometheus 2.42 with native histograms on, and without.
    assert_eq!(
        pick(&["application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"]),
        Format::Protobuf
    );
    assert_eq!(
        pick(&["application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"]),
        Format::Protobuf
    );
    assert_eq!(
        pick(&["application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"]),
        Format::OpenMetrics
    );
    // The q values decide, then protobuf over OpenMetrics.
    assert_eq!(
        pick(&["application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5, application/openmetrics-text;q=0.9"]),
        Format::OpenMetrics
    );
    assert_eq!(
        pick(&["application/openmetrics-text", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"]),
        Format::Protobuf
    );
    // Another protobuf message or encoding, q=0, */*, nothing, garbage: text.
    for accept in [
        "application/vnd.google.protobuf;proto=io.prometheus.client.Other;encoding=delimited",
        "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text",
        "application/openmetrics-text;q=0",
        "*/*",
        "",
        ";;;,,=",
    ] {
        assert_eq!(pick(&[accept]), Format::Text, "{accept:?}");
    }
    assert_eq!(pick(&[]), Format::Text);
}
