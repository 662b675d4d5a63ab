//! The remote link against hand-made agents on loopback: chunked and
//! close-delimited streams, reconnects, HTTP errors, refused credentials
//! (the end of the source, never a retry) and credentials never shown.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use nfsdtop_agent::model::EntityStats;

use nfsdtop::state::RemoteStatus;
use nfsdtop_agent::model::{Snapshot, SourceKind};

use super::*;
use crate::conn::Update;

fn connect_remote(url: &str) -> anyhow::Result<crate::conn::Connection> {
    connect(url, &Options::default())
}

fn snapshot(n: u64) -> Snapshot {
    Snapshot {
        time: n as f64,
        interval_s: 1.0,
        source: nfsdtop_agent::model::SourceInfo {
            kind: SourceKind::Demo,
            detail: "seed-k16 policy=flat".into(),
            ..Default::default()
        },
        peers: vec![EntityStats {
            name: "10.0.0.2".into(),
            dispatches: n,
            share: 2.0 / 18.0,
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn read_request(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = Vec::new();
    let mut b = [0u8; 1];
    while !req.ends_with(b"\r\n\r\n") {
        if s.read(&mut b).unwrap() == 0 {
            break;
        }
        req.push(b[0]);
    }
    String::from_utf8(req).unwrap()
}

/// Server-sent events, chunked in awkward 7-byte pieces so chunk
/// boundaries fall inside lines and inside the JSON.
fn write_chunked_events(s: &mut TcpStream, snaps: &[Snapshot]) {
    s.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
    )
    .unwrap();
    let mut body = String::from(": keep-alive comment\n\n");
    for snap in snaps {
        body.push_str("event: snapshot\ndata: ");
        body.push_str(&serde_json::to_string(snap).unwrap());
        body.push_str("\n\n");
    }
    for piece in body.as_bytes().chunks(7) {
        write!(s, "{:x}\r\n", piece.len()).unwrap();
        s.write_all(piece).unwrap();
        s.write_all(b"\r\n").unwrap();
    }
    s.write_all(b"0\r\n\r\n").unwrap();
}

fn next(rx: &Receiver<Update>) -> Update {
    rx.recv_timeout(Duration::from_secs(20))
        .expect("an update within 20 s")
}

#[test]
fn streams_snapshots_then_reconnects_when_the_agent_closes() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let mut requests = Vec::new();
        // First connection: two snapshots, chunked, then close.
        let (mut s, _) = listener.accept().unwrap();
        requests.push(read_request(&mut s));
        write_chunked_events(&mut s, &[snapshot(1), snapshot(2)]);
        drop(s);
        // Second: the reconnect; one snapshot, close-delimited (no
        // chunking, as an HTTP/1.0-style server would send it).
        let (mut s, _) = listener.accept().unwrap();
        requests.push(read_request(&mut s));
        let body = format!(
            "event: snapshot\r\ndata: {}\r\n\r\n",
            serde_json::to_string(&snapshot(3)).unwrap()
        );
        s.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
            .unwrap();
        s.write_all(body.as_bytes()).unwrap();
        drop(s);
        requests
    });

    let conn = connect_remote(&format!("http://127.0.0.1:{port}")).unwrap();
    let mut seen = Vec::new();
    let mut snapshots = Vec::new();
    // Connecting, Connected, 2 snapshots, Reconnecting, Connecting,
    // Connected, 1 snapshot.
    while snapshots.len() < 3 {
        match next(&conn.updates) {
            Update::Snapshot(s) => {
                seen.push("snapshot".to_string());
                snapshots.push(s);
            }
            Update::Status(st) => seen.push(match st {
                RemoteStatus::Connecting { .. } => "connecting".into(),
                RemoteStatus::Connected { .. } => "connected".into(),
                RemoteStatus::Skipping { .. } => "skipping".into(),
                RemoteStatus::Reconnecting { attempt, error, .. } => {
                    assert_eq!(error, "nfsdtopd closed the stream");
                    format!("reconnecting {attempt}")
                }
            }),
            Update::Ended(r) => panic!("a remote source never ends: {r:?}"),
        }
    }
    assert_eq!(
        seen,
        [
            "connecting",
            "connected",
            "snapshot",
            "snapshot",
            "reconnecting 1",
            "connecting",
            "connected",
            "snapshot"
        ]
    );
    let dispatches: Vec<u64> = snapshots.iter().map(|s| s.peers[0].dispatches).collect();
    assert_eq!(dispatches, [1, 2, 3]);
    let src = &snapshots[0].source;
    assert_eq!(src.kind, SourceKind::Remote);
    assert_eq!(
        src.detail,
        format!("http://127.0.0.1:{port} (demo seed-k16 policy=flat)")
    );
    let requests = server.join().unwrap();
    for r in &requests {
        assert!(r.starts_with("GET /api/v1/stream HTTP/1.1\r\n"), "{r}");
        assert!(r.contains(&format!("host: 127.0.0.1:{port}")), "{r}");
    }
    // The listener is gone: the next attempt fails and says why.
    match next(&conn.updates) {
        Update::Status(RemoteStatus::Reconnecting { .. }) => {}
        Update::Status(RemoteStatus::Connecting { .. }) => match next(&conn.updates) {
            Update::Status(RemoteStatus::Reconnecting { error, .. }) => {
                assert!(!error.is_empty())
            }
            _ => panic!("expected reconnecting"),
        },
        _ => panic!("expected a status"),
    }
}

#[test]
fn http_errors_and_refused_connections_become_reconnecting() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        read_request(&mut s);
        // An escape in the error page never reaches the terminal.
        s.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 13\r\n\r\nno \x1b[2Jstream")
            .unwrap();
    });
    let conn = connect_remote(&format!("127.0.0.1:{port}")).unwrap();
    let error = loop {
        if let Update::Status(RemoteStatus::Reconnecting { error, .. }) = next(&conn.updates) {
            break error;
        }
    };
    assert_eq!(
        error,
        "HTTP 404 Not Found from /api/v1/stream: no ?[2Jstream"
    );
    server.join().unwrap();

    // Nothing listening at all.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let conn = connect_remote(&format!("http://127.0.0.1:{port}/")).unwrap();
    let (attempt, retry_in) = loop {
        if let Update::Status(RemoteStatus::Reconnecting {
            attempt, retry_in, ..
        }) = next(&conn.updates)
        {
            break (attempt, retry_in);
        }
    };
    assert_eq!((attempt, retry_in), (1, BACKOFF_MIN));
    // Dropping the connection stops the thread (its sends fail).
    drop(conn);
}

/// Answer every request with `status`; hand back the requests.
fn refusing_agent(status: &'static str, n: usize) -> (u16, std::thread::JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let mut requests = Vec::new();
        for _ in 0..n {
            let (mut s, _) = listener.accept().unwrap();
            requests.push(read_request(&mut s));
            let body = r#"{"error": "authentication required"}"#;
            write!(
                s,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        }
        requests
    });
    (port, server)
}

/// Every update until the source ends (it must, within the deadline).
fn until_ended(rx: &Receiver<Update>) -> (Vec<String>, String) {
    let mut shown = Vec::new();
    loop {
        match next(rx) {
            Update::Status(s) => shown.push(s.to_string()),
            Update::Snapshot(s) => shown.push(s.source.detail.clone()),
            Update::Ended(r) => return (shown, r.expect_err("ends with an error")),
        }
    }
}

#[test]
fn refused_credentials_end_the_source_and_the_password_is_never_shown() {
    let (port, server) = refusing_agent("401 Unauthorized", 1);
    let conn = connect_remote(&format!("http://bob:hunter2@127.0.0.1:{port}")).unwrap();
    assert_eq!(
        conn.remote.as_deref(),
        Some(format!("http://127.0.0.1:{port}").as_str())
    );
    let (shown, error) = until_ended(&conn.updates);
    assert_eq!(
        error,
        format!(
            "http://127.0.0.1:{port} refused the user and password (HTTP 401 Unauthorized): \
             {{\"error\": \"authentication required\"}}"
        )
    );
    for s in shown.iter().chain([&error]) {
        assert!(!s.contains("hunter2") && !s.contains("bob"), "{s}");
    }
    let requests = server.join().unwrap();
    // base64("bob:hunter2"), once: a refusal is not retried.
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0].contains("authorization: Basic Ym9iOmh1bnRlcjI=\r\n"),
        "{}",
        requests[0]
    );

    // No credentials at all: say where to put them.
    let (port, server) = refusing_agent("401 Unauthorized", 1);
    let conn = connect_remote(&format!("127.0.0.1:{port}")).unwrap();
    let (_, error) = until_ended(&conn.updates);
    assert!(
        error.contains("wants a user and password (HTTP 401)") && error.contains("NFSDTOP_AUTH"),
        "{error}"
    );
    assert!(!server.join().unwrap()[0]
        .to_ascii_lowercase()
        .contains("authorization"));

    let (port, server) = refusing_agent("403 Forbidden", 1);
    let conn = connect_remote(&format!("127.0.0.1:{port}")).unwrap();
    let (_, error) = until_ended(&conn.updates);
    assert!(
        error.contains("refused access (HTTP 403 Forbidden)"),
        "{error}"
    );
    server.join().unwrap();

    // A request nfsdtopd cannot take (nfsdtopd's answer to plain HTTP
    // on its TLS port) ends the source too, with the agent's words.
    let (port, server) = refusing_agent("400 Bad Request", 1);
    let conn = connect_remote(&format!("127.0.0.1:{port}")).unwrap();
    let (_, error) = until_ended(&conn.updates);
    assert!(
        error.contains("cannot take nfsdtop's request (HTTP 400 Bad Request)"),
        "{error}"
    );
    server.join().unwrap();
}

#[test]
fn credentials_from_the_environment_are_sent() {
    let (port, server) = refusing_agent("401 Unauthorized", 1);
    let opts = Options {
        auth_env: Some("carol:s3cret".into()),
        ..Options::default()
    };
    let conn = connect(&format!("http://127.0.0.1:{port}"), &opts).unwrap();
    let (shown, error) = until_ended(&conn.updates);
    assert!(!error.contains("s3cret") && shown.iter().all(|s| !s.contains("s3cret")));
    let requests = server.join().unwrap();
    // base64("carol:s3cret")
    assert!(
        requests[0].contains("authorization: Basic Y2Fyb2w6czNjcmV0\r\n"),
        "{}",
        requests[0]
    );
}

#[test]
fn a_ca_cert_for_plain_http_or_an_unreadable_one_fails_at_once() {
    let missing = std::path::Path::new("/nonexistent/ca.pem");
    let opts = Options {
        ca_cert: Some(missing),
        ..Options::default()
    };
    let e = connect("https://127.0.0.1:1", &opts)
        .err()
        .expect("an error");
    assert!(
        format!("{e:#}").contains("cannot read CA file /nonexistent/ca.pem"),
        "{e:#}"
    );
    // An endless file is refused at its limit, not read until memory runs
    // out.
    let zero = Options {
        ca_cert: Some(std::path::Path::new("/dev/zero")),
        ..Options::default()
    };
    let e = connect("https://127.0.0.1:1", &zero)
        .err()
        .expect("an error");
    assert!(
        format!("{e:#}").contains("CA file /dev/zero is larger than 16 MiB"),
        "{e:#}"
    );
    let e = connect("http://127.0.0.1:1", &opts)
        .err()
        .expect("an error");
    assert!(format!("{e:#}").contains("plain HTTP"), "{e:#}");
}

/// A snapshot that does not parse is reported without what the agent put
/// in it: serde quotes the unknown value, escapes and all.
#[test]
fn an_unparsable_snapshot_is_reported_without_its_escapes() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        read_request(&mut s);
        let body =
            "event: snapshot\ndata: {\"source\": {\"kind\": \"x\\u001b]0;PWNED\\u0007\"}}\n\n";
        write!(
            s,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
    });
    let conn = connect_remote(&format!("127.0.0.1:{port}")).unwrap();
    let error = loop {
        if let Update::Status(RemoteStatus::Reconnecting { error, .. }) = next(&conn.updates) {
            break error;
        }
    };
    assert!(error.contains("does not parse"), "{error}");
    assert!(error.contains("x?]0;PWNED?"), "{error}");
    assert!(!error.chars().any(char::is_control), "{error:?}");
    server.join().unwrap();
}

/// An agent that skips a snapshot says why: the view is told, as a link
/// status, with the agent's words made safe.
#[test]
fn a_skipped_snapshot_is_a_status_saying_why() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        read_request(&mut s);
        let body = "event: skipped\ndata: nfsdtopd skipped a snapshot: full\u{1b}[2J\n\n";
        write!(
            s,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
    });
    let conn = connect_remote(&format!("127.0.0.1:{port}")).unwrap();
    let reason = loop {
        if let Update::Status(RemoteStatus::Skipping { reason, .. }) = next(&conn.updates) {
            break reason;
        }
    };
    assert_eq!(reason, "nfsdtopd skipped a snapshot: full?[2J");
    server.join().unwrap();
}

/// A snapshot of a schema newer than this build's ends the source at once
/// (retrying cannot help), saying what to do.
#[test]
fn a_newer_schema_ends_the_source_saying_so() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        read_request(&mut s);
        let mut snap = snapshot(1);
        snap.schema = nfsdtop_agent::model::Schema(nfsdtop_agent::model::SCHEMA + 1);
        write_chunked_events(&mut s, &[snap]);
    });
    let conn = connect_remote(&format!("127.0.0.1:{port}")).unwrap();
    let (shown, error) = until_ended(&conn.updates);
    assert!(
        error.contains("newer than this nfsdtop's") && error.contains("schema 2"),
        "{error}"
    );
    assert!(
        !shown.iter().any(|s| s.contains("seed-k16")),
        "no snapshot shown: {shown:?}"
    );
    server.join().unwrap();
}

/// A snapshot past what `--connect` takes (here: more histograms of more
/// than 8 buckets than [`bounds::REMOTE`] allows, 50 bytes of JSON each
/// but 1 KiB in memory) is refused while it is read, with the bounds.
#[test]
fn a_snapshot_past_the_remote_bounds_is_refused_saying_which() {
    let n = bounds::REMOTE.dense_histograms + 1;
    let peer = "{\"name\":\"p\",\"kind\":\"peer\",\"class\":\"c\",\"dispatches\":0,\
\"dispatch_rate\":0,\"share\":0,\"entitled\":0,\"wait_p50_us\":0,\"wait_p99_us\":0,\
\"exec_share\":0,\"connections\":0,\"wait_histogram\":[[0,1],[1,1],[2,1],[3,1],[4,1],\
[5,1],[6,1],[7,1],[8,1]]}";
    let mut snap = serde_json::to_value(snapshot(1)).unwrap();
    snap["peers"] = serde_json::Value::Array(Vec::new());
    let json = snap.to_string();
    let (head, tail) = json.split_once("\"peers\":[]").unwrap();
    let mut body = format!("event: snapshot\ndata: {head}\"peers\":[");
    for i in 0..n {
        if i > 0 {
            body.push(',');
        }
        body.push_str(peer);
    }
    body.push_str(&format!("]{tail}\n\n"));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        read_request(&mut s);
        write!(
            s,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
            body.len()
        )
        .unwrap();
        s.write_all(body.as_bytes()).unwrap();
    });
    let conn = connect_remote(&format!("127.0.0.1:{port}")).unwrap();
    let error = loop {
        match next(&conn.updates) {
            Update::Status(RemoteStatus::Reconnecting { error, .. }) => break error,
            Update::Snapshot(_) => panic!("the snapshot past the bounds was taken"),
            _ => {}
        }
    };
    assert!(
        error.contains("holds more histograms of more than 8 buckets than nfsdtop --connect takes"),
        "{error}"
    );
    assert!(error.contains("131072 histograms"), "{error}");
    server.join().unwrap();
}
