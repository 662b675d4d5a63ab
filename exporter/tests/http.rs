//! The daemon's HTTP surface, flags and config file, against the real
//! `nfsdtopd` binary running the built-in demo server.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{demo, http, read_events, write, Daemon};
use nfsdtop_agent::model::Snapshot;

fn assert_json_error(r: &common::Response, status: u16, needle: &str) {
    assert_eq!(r.status, status, "{r:?}");
    assert!(
        r.header("content-type")
            .unwrap_or("")
            .starts_with("application/json"),
        "{r:?}"
    );
    let v = r.json();
    let msg = v["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error field: {v}"));
    assert!(msg.contains(needle), "{msg:?} should mention {needle:?}");
}

#[test]
fn bad_requests_get_4xx_json() {
    let d = demo(&[]);
    d.snapshot("");
    for (path, needle) in [
        ("/api/v1/snapshot?group=host", "group"),
        ("/api/v1/snapshot?top=0", "top"),
        ("/api/v1/snapshot?top=-3", "top"),
        ("/api/v1/snapshot?top=abc", "top"),
        ("/api/v1/snapshot?top=99999999999999999999999", "top"),
        ("/api/v1/snapshot?top=1&top=2", "more than once"),
        ("/api/v1/snapshot?colour=blue", "unknown query parameter"),
        ("/api/v1/snapshot?group=%ZZ", "group"),
        ("/api/v1/stream?group=nope", "group"),
    ] {
        assert_json_error(&d.get(path), 400, needle);
    }
    assert_json_error(&d.get("/nope"), 404, "/nope");
    assert_json_error(&d.get("/api/v2/snapshot"), 404, "no such path");
    let r = http(d.addr, "POST", "/metrics", &[("Content-Length", "0")]);
    assert_json_error(&r, 405, "POST");
    let r = http(d.addr, "DELETE", "/api/v1/snapshot", &[]);
    assert_json_error(&r, 405, "DELETE");
    // Garbage on the wire: the daemon answers 400 (or closes) and lives on.
    let mut s = TcpStream::connect(d.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"\x00\x01GARBAGE\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let head = String::from_utf8_lossy(&buf);
    assert!(head.is_empty() || head.starts_with("HTTP/1.1 4"), "{head}");
    assert_eq!(d.get("/healthz").status, 200, "still alive");
}

#[test]
fn snapshot_views_and_healthz() {
    let d = demo(&[]);
    let full = d.snapshot("");
    let snap: Snapshot = serde_json::from_value(full.clone()).expect("a Snapshot");
    assert_eq!(snap.source.kind.as_str(), "demo");
    assert_eq!(snap.peers.len(), 2);
    let classes = d.snapshot("?group=class");
    assert_eq!(classes["peers"].as_array().unwrap().len(), 0);
    assert_eq!(classes["classes"].as_array().unwrap().len(), 2);
    let top = d.snapshot("?group=peer&top=1");
    let peers = top["peers"].as_array().unwrap();
    assert_eq!(peers.len(), 1);
    // Under flat, the client with 16 connections takes most dispatches.
    assert_eq!(peers[0]["name"], "10.0.0.3", "{top}");
    let h = d.get("/healthz");
    assert_eq!((h.status, h.body.trim()), (200, "ok"));
}

#[test]
fn stream_sends_each_snapshot_as_one_event() {
    let d = demo(&["--interval", "0.2"]);
    d.snapshot("");
    // That the latest snapshot comes at once, not after the next interval,
    // is `a_new_stream_gets_the_latest_snapshot_at_once` (no next one).
    let (head, events) = read_events(&d, 1);
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{head}"
    );
    let (_, events) = if events.len() >= 3 {
        (head, events)
    } else {
        read_events(&d, 3)
    };
    let mut last_time = 0.0;
    for e in &events[..3] {
        let data = e
            .strip_prefix("event: snapshot\ndata: ")
            .and_then(|r| r.strip_suffix("\n\n"))
            .unwrap_or_else(|| panic!("not `event: snapshot\\ndata: ...\\n\\n`: {e:?}"));
        assert!(!data.contains('\n'), "one line of JSON");
        let s: Snapshot = serde_json::from_str(data).expect("Snapshot JSON");
        assert!(s.time >= last_time, "snapshots in order");
        last_time = s.time;
    }
}

/// A stream opened after the replay has ended, when no snapshot will ever
/// be published again, gets the latest one: a stream that waited for the
/// next interval would get none (read_events fails at its deadline, which
/// only bounds that broken run). Judged without a clock: a bound on how
/// soon it came failed on a loaded host and, with 0.2 s intervals, could
/// not tell "at once" from "at the next interval" anyway.
#[test]
fn a_new_stream_gets_the_latest_snapshot_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("ended.nfsdrec");
    let o = Command::new(common::nfsdtop_bin())
        .args(["record", "-o"])
        .arg(&rec)
        .args(["--demo", "seed-k16", "--speed", "0", "--duration", "2"])
        .stdin(Stdio::null())
        .output()
        .expect("nfsdtop record");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rec = rec.display().to_string();
    let d = Daemon::start(&[
        "--replay",
        &rec,
        "--speed",
        "0",
        "--interval",
        "0.2",
        "--listen",
        "127.0.0.1:0",
    ]);
    // The pipeline and the server start side by side: the end of the
    // replay may be said before or after the listening line.
    const ENDED: &str = "the event source has ended";
    if !d.early.iter().any(|l| l.contains(ENDED)) {
        d.wait_for("the end of the replay", 60, |d| {
            d.stderr.try_iter().find(|l| l.contains(ENDED))
        });
    }
    let last = d.snapshot("");
    let (_, events) = read_events(&d, 1);
    let data = events[0]
        .strip_prefix("event: snapshot\ndata: ")
        .and_then(|r| r.strip_suffix("\n\n"))
        .unwrap_or_else(|| panic!("not `event: snapshot\\ndata: ...\\n\\n`: {:?}", events[0]));
    let first: serde_json::Value = serde_json::from_str(data).expect("Snapshot JSON");
    assert_eq!(first["time"], last["time"], "the latest snapshot");
    assert_eq!(first["totals"], last["totals"], "the latest snapshot");
}

const REQUIRED: &[&str] = &[
    "nfsdtop_class_dispatches_total{class=\"10.0.0.2\"}",
    "nfsdtop_class_entitled_dispatches_total{class=\"10.0.0.2\"}",
    "nfsdtop_class_execution_seconds_total{class=\"10.0.0.2\"}",
    "nfsdtop_class_backlogged_seconds_total{class=\"10.0.0.2\"}",
    "nfsdtop_class_queue_wait_seconds_bucket{le=\"0.000016\",class=\"10.0.0.2\"}",
    "nfsdtop_class_queue_wait_seconds_bucket{le=\"4.194304\",class=\"10.0.0.2\"}",
    "nfsdtop_class_queue_wait_seconds_bucket{le=\"+Inf\",class=\"10.0.0.2\"}",
    "nfsdtop_class_queue_wait_seconds_sum{class=\"10.0.0.2\"}",
    "nfsdtop_class_queue_wait_seconds_count{class=\"10.0.0.2\"}",
    "nfsdtop_class_connections{class=\"10.0.0.2\"} 2",
    "nfsdtop_class_backlogged{class=\"10.0.0.2\"} 1",
    "nfsdtop_class_dispatches_total{class=\"other\"}",
    "nfsdtop_peer_dispatches_total{peer=\"10.0.0.3\",class=\"10.0.0.3\"}",
    "nfsdtop_peer_entitled_dispatches_total{peer=\"10.0.0.3\",class=\"10.0.0.3\"}",
    "nfsdtop_peer_execution_seconds_total{peer=\"10.0.0.3\",class=\"10.0.0.3\"}",
    "nfsdtop_peer_backlogged_seconds_total{peer=\"10.0.0.3\",class=\"10.0.0.3\"}",
    "nfsdtop_peer_connections{peer=\"10.0.0.3\",class=\"10.0.0.3\"} 16",
    "nfsdtop_peer_dispatches_total{peer=\"other\",class=\"other\"}",
    "nfsdtop_peers_folded 0",
    "nfsdtop_peer_folds_total 0",
    "nfsdtop_dispatches_total ",
    "nfsdtop_peers 2",
    "nfsdtop_classes 2",
    "nfsdtop_transports 18",
    "nfsdtop_peers_evicted_total 0",
    "nfsdtop_events_total{tracepoint=\"svc_xprt_dequeue\"}",
    "nfsdtop_events_lost_total{tracepoint=\"svc_xprt_dequeue\"} 0",
    "nfsdtop_build_info{version=\"",
    "nfsdtop_source_info{kind=\"demo\",kernel=\"simulated\",generation=\"demo\",wait_source=\"enqueue-dequeue\"} 1",
    "nfsdtop_last_snapshot_timestamp_seconds ",
];

#[test]
fn metrics_pass_promtool_in_both_formats() {
    let d = demo(&[]);
    d.snapshot("");
    let text = d.get("/metrics");
    assert_eq!(text.status, 200);
    assert_eq!(
        text.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    for name in REQUIRED {
        assert!(text.body.contains(name), "missing {name} in\n{}", text.body);
    }
    let promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut p =
        promtool.expect("promtool (Debian package prometheus, installed by scripts/setup.sh)");
    p.stdin
        .take()
        .unwrap()
        .write_all(text.body.as_bytes())
        .unwrap();
    let out = p.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let om = http(
        d.addr,
        "GET",
        "/metrics",
        &[(
            "Accept",
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
        )],
    );
    assert_eq!(om.status, 200);
    assert_eq!(
        om.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    assert!(om.body.ends_with("# EOF\n"));
    assert!(om
        .body
        .contains("# TYPE nfsdtop_class_dispatches counter\n"));
    assert!(om
        .body
        .contains("# UNIT nfsdtop_class_execution_seconds seconds\n"));
    for name in REQUIRED {
        assert!(
            om.body.contains(name),
            "missing {name} in OpenMetrics output"
        );
    }
}

#[test]
fn basic_auth_with_bcrypt_and_sha256_users() {
    let dir = tempfile::tempdir().unwrap();
    let bc = bcrypt::hash("s3cret", 4).unwrap();
    // sha256("hunter2")
    let sha = "f52fbd32b2b3b86ff88ef6c490628285f482af15ddcb29541f94bcf526a3f6c7";
    let cfg = write(
        dir.path(),
        "auth.toml",
        &format!(
            "listen = \"127.0.0.1:0\"\n[source]\nkind = \"demo\"\nscenario = \"seed-k4\"\n\
[basic_auth_users]\nprom = \"{bc}\"\nops = \"sha256:{sha}\"\n"
        ),
    );
    let d = Daemon::start(&["--config", &cfg]);
    let r = d.get("/metrics");
    assert_json_error(&r, 401, "authentication required");
    assert_eq!(
        r.header("www-authenticate"),
        Some("Basic realm=\"nfsdtopd\"")
    );
    let basic = |u: &str, p: &str| {
        use base64::Engine as _;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
        )
    };
    let r = http(
        d.addr,
        "GET",
        "/healthz",
        &[("Authorization", &basic("prom", "wrong"))],
    );
    assert_json_error(&r, 401, "invalid");
    let r = http(
        d.addr,
        "GET",
        "/healthz",
        &[("Authorization", "Bearer abc")],
    );
    assert_json_error(&r, 401, "malformed");
    for (u, p) in [("prom", "s3cret"), ("ops", "hunter2")] {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let r = http(
                d.addr,
                "GET",
                "/healthz",
                &[("Authorization", &basic(u, p))],
            );
            if r.status == 200 {
                break;
            }
            assert_eq!(r.status, 503, "{u}: {r:?}");
            assert!(Instant::now() < deadline, "no healthy snapshot");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn sighup_reloads_the_class_map_without_losing_counts() {
    let dir = tempfile::tempdir().unwrap();
    let map = write(dir.path(), "classes", "10.0.0.0/24 lab\n");
    let d = demo(&["--class-map", &map, "--interval", "0.2"]);
    let before = d.wait_for("class lab", 20, |d| {
        let s = d.snapshot("?group=class");
        let has = s["classes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "lab");
        (has && s["totals"]["dispatches"].as_u64().unwrap() > 0).then_some(s)
    });
    let disp0 = before["totals"]["dispatches"].as_u64().unwrap();
    write(
        dir.path(),
        "classes",
        "10.0.0.2/32 two\n10.0.0.3/32 three\n",
    );
    let ok = Command::new("kill")
        .args(["-HUP", &d.child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let after = d.wait_for("classes two and three", 20, |d| {
        let s = d.snapshot("");
        let names: Vec<&str> = s["peers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["class"].as_str().unwrap())
            .collect();
        (names.contains(&"two") && names.contains(&"three")).then_some(s)
    });
    assert!(
        after["totals"]["dispatches"].as_u64().unwrap() >= disp0,
        "counts kept"
    );
    let m = d.get("/metrics").body;
    assert!(
        m.contains("nfsdtop_peer_dispatches_total{peer=\"10.0.0.2\",class=\"two\"}"),
        "{m}"
    );
    // A broken map is reported and the current one kept.
    write(dir.path(), "classes", "10.0.0.2/33 bad\n");
    Command::new("kill")
        .args(["-HUP", &d.child.id().to_string()])
        .status()
        .unwrap();
    let msg = d.wait_for("a reload error", 20, |d| {
        d.stderr
            .try_iter()
            .find(|l| l.contains("keeping the current class map"))
    });
    assert!(msg.contains(":1"), "names the line: {msg}");
    assert_eq!(d.get("/healthz").status, 200);
}

#[test]
fn tls_serves_https() {
    let dir = tempfile::tempdir().unwrap();
    let ck =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let cert = write(dir.path(), "server.crt", &ck.cert.pem());
    let key = write(dir.path(), "server.key", &ck.key_pair.serialize_pem());
    let d = demo(&["--tls-cert", &cert, "--tls-key", &key]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let body = rt.block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        use tokio_rustls::rustls;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ck.cert.der().clone()).unwrap();
        let cfg = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        let conn = tokio_rustls::TlsConnector::from(std::sync::Arc::new(cfg));
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let tcp = tokio::net::TcpStream::connect(d.addr).await.unwrap();
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let mut s = conn.connect(name, tcp).await.expect("TLS handshake");
            s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .await
                .unwrap();
            let mut out = Vec::new();
            let _ = s.read_to_end(&mut out).await;
            let r = common::parse_response(&out);
            if r.status == 200 || Instant::now() > deadline {
                return r;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    assert_eq!(body.status, 200, "{body:?}");
    // Plain HTTP on the TLS port is told, in plain HTTP, to use https, and
    // gets nothing else.
    let mut s = TcpStream::connect(d.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(b"GET /healthz HTTP/1.1\r\n\r\n");
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let r = common::parse_response(&buf);
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.body.contains("use https://"), "{r:?}");
    assert!(!r.body.contains("ok"), "{r:?}");
}

#[test]
fn replay_serves_the_recording_then_reports_stale_health() {
    use nfsdtop_agent::enrich::classify::ClassMap;
    use nfsdtop_agent::model::EventKind;
    use nfsdtop_agent::record::{Header, Writer};
    use nfsdtop_agent::source::SourceSpec;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seed-k4.nfsdrec");
    let mut src = SourceSpec::Demo {
        scenario: "seed-k4".into(),
        policy: None,
    }
    .open()
    .unwrap();
    let header = Header::for_source(&src.info(), &ClassMap::default(), src.now_ns());
    let mut w = Writer::create(&path, &header).unwrap();
    let mut events = Vec::new();
    let until = src.now_ns() + 3_000_000_000;
    src.poll(until, &mut events).unwrap();
    w.write_all(&events).unwrap();
    w.finish_file().unwrap();
    let dispatches = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Dequeue { .. }))
        .count() as u64;
    assert!(dispatches > 1000);

    let p = path.display().to_string();
    let d = Daemon::start(&[
        "--replay",
        &p,
        "--speed",
        "0",
        "--interval",
        "0.2",
        "--listen",
        "127.0.0.1:0",
    ]);
    // As fast as possible: the recording ends at once; its numbers stay.
    let s = d.wait_for("the whole recording", 20, |d| {
        let s = d.snapshot("");
        (s["totals"]["dispatches"].as_u64() == Some(dispatches)).then_some(s)
    });
    assert_eq!(s["source"]["kind"], "replay");
    let m = d.get("/metrics").body;
    assert!(
        m.contains(&format!("nfsdtop_dispatches_total {dispatches}\n")),
        "{m}"
    );
    // No new snapshot for 3 intervals: /healthz says so.
    let h = d.wait_for("a stale /healthz", 20, |d| {
        let r = d.get("/healthz");
        (r.status == 503).then_some(r)
    });
    // Like every error, a JSON object.
    let e: serde_json::Value = serde_json::from_str(&h.body).expect("a JSON error body");
    assert!(e["error"].as_str().unwrap().starts_with("stale"), "{h:?}");
    assert_eq!(
        d.get("/api/v1/snapshot").status,
        200,
        "the last snapshot is still served"
    );
}

fn sum_of(metrics: &str, prefix: &str) -> (f64, usize) {
    metrics
        .lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold((0.0, 0), |(s, n), v| (s + v, n + 1))
}

fn scalar(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name}"))
}

#[test]
fn top_k_folds_the_rest_into_other_and_the_series_add_up() {
    // movers: 10 peers; with --top-k 3, 7 are folded into peer="other".
    let d = Daemon::start(&[
        "--demo",
        "movers",
        "--listen",
        "127.0.0.1:0",
        "--top-k",
        "3",
        "--top-k-classes",
        "2",
        "--interval",
        "0.2",
    ]);
    d.wait_for("10 peers", 20, |d| {
        (d.snapshot("")["totals"]["peers"].as_u64() == Some(10)).then_some(())
    });
    // Two scrapes apart in time: every series only grows, and at each the
    // series add up to the total exactly.
    let mut last: Option<(f64, f64)> = None;
    for _ in 0..2 {
        let m = d.wait_for("a scrape with dispatches", 20, |d| {
            let m = d.get("/metrics").body;
            (scalar(&m, "nfsdtop_dispatches_total") > 0.0).then_some(m)
        });
        let total = scalar(&m, "nfsdtop_dispatches_total");
        let (peers, n_peers) = sum_of(&m, "nfsdtop_peer_dispatches_total{");
        let (classes, n_classes) = sum_of(&m, "nfsdtop_class_dispatches_total{");
        assert_eq!(n_peers, 4, "3 labelled peers + other:\n{m}");
        assert_eq!(n_classes, 3, "2 labelled classes + other:\n{m}");
        assert_eq!(peers, total, "peer series add up to the total");
        assert_eq!(classes, total, "class series add up to the total");
        assert_eq!(scalar(&m, "nfsdtop_peers_folded"), 7.0);
        assert!(m.contains("nfsdtop_peer_dispatches_total{peer=\"other\",class=\"other\"}"));
        let other = m
            .lines()
            .find(|l| l.starts_with("nfsdtop_peer_dispatches_total{peer=\"other\""))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap();
        assert!(other > 0.0);
        if let Some((t0, o0)) = last {
            assert!(total >= t0 && other >= o0, "monotonic");
        }
        last = Some((total, other));
        // Let at least one more snapshot happen.
        let t = d.snapshot("")["time"].as_f64().unwrap();
        d.wait_for("the next snapshot", 20, |d| {
            (d.snapshot("")["time"].as_f64().unwrap() > t).then_some(())
        });
    }
}

#[test]
fn redact_hides_client_addresses_everywhere() {
    let d = demo(&["--redact"]);
    let s = d.snapshot("");
    let m = d.get("/metrics").body;
    let json = s.to_string();
    for out in [&m, &json] {
        assert!(
            !out.contains("10.0.0.2") && !out.contains("10.0.0.3"),
            "{out}"
        );
        assert!(out.contains("anon-"), "{out}");
    }
}
