//! Who the client is, on every surface of `nfsdtop`: the peer table and
//! the drill-down (drawn on ratatui's TestBackend at 80x24), and the
//! batch JSON of a demo given a fake `/proc/fs/nfsd/clients`, with and
//! without `--redact`.

mod common;

use common::nfsdtop;

use std::sync::Arc;
use std::time::Duration;

use common::screen::{demo_snapshots, key, lines, open_detail};
use crossterm::event::KeyCode;
use nfsdtop::state::{Screen, State};
use nfsdtop_agent::aggregate::{Aggregator, Limits};
use nfsdtop_agent::enrich::clients::{ClientMap, ClientName};
use nfsdtop_agent::model::{Snapshot, SourceInfo};

/// seed-k4 (10.0.0.2 with 2 connections, 10.0.0.3 with 4) where the
/// server knows one NFSv4 client at 10.0.0.2 and two at 10.0.0.3.
fn named_snapshots() -> Vec<Snapshot> {
    let mut names = ClientMap::new(None);
    let name = |n: &str, minor, imp: Option<&str>| ClientName {
        name: n.into(),
        minor_version: Some(minor),
        implementation: imp.map(str::to_string),
    };
    let (a, b) = ("10.0.0.2".parse().unwrap(), "10.0.0.3".parse().unwrap());
    names.insert(
        a,
        name("Linux NFSv4.2 build-01", 2, Some("Linux 6.12.0 x86_64")),
    );
    names.insert(b, name("Linux NFSv4.1 nat-a", 1, None));
    names.insert(b, name("Linux NFSv4.2 nat-b", 2, None));
    let mut agg = Aggregator::new(Default::default(), Limits::default());
    agg.set_client_names(Arc::new(names));
    let info = SourceInfo::default();
    demo_snapshots("seed-k4", agg, |a, now, t| a.snapshot(now, t, &info))
}

#[test]
fn the_table_and_the_drill_down_say_who_the_client_is() {
    let mut st = State::new(Duration::from_secs(2), None);
    for s in named_snapshots() {
        st.on_snapshot(Box::new(s));
    }
    let l = lines(&mut st, 80, 24);
    let text = l.join("\n");
    // Beside the address: the host part of a Linux client's name, and
    // how many more clients share the address.
    assert!(text.contains("10.0.0.2 build-01 "), "{text}");
    assert!(text.contains("10.0.0.3 nat-a +1 "), "{text}");
    assert!(text.contains("SHARE"), "the numeric columns stay:\n{text}");

    open_detail(&mut st, "10.0.0.2");
    assert!(matches!(st.screen, Screen::Detail { .. }));
    let l = lines(&mut st, 80, 24);
    let text = l.join("\n");
    for want in [
        "peer 10.0.0.2",
        "client \"Linux NFSv4.2 build-01\" (NFSv4.2)  implementation \"Linux 6.12.0",
        "2 connections",
        "transports (2)",
    ] {
        assert!(text.contains(want), "{want:?} missing:\n{text}");
    }
    assert!(l[23].contains("Esc back"), "{:?}", l[23]);

    key(&mut st, KeyCode::Esc);
    key(&mut st, KeyCode::Home);
    for _ in 0..st.rows().len() {
        if st.selected_entity().unwrap().name == "10.0.0.3" {
            break;
        }
        key(&mut st, KeyCode::Down);
    }
    key(&mut st, KeyCode::Enter);
    let text = lines(&mut st, 80, 24).join("\n");
    assert!(
        text.contains("2 clients: \"Linux NFSv4.1 nat-a\" (NFSv4.1), \"Linux NFSv4.2 nat-b\""),
        "{text}"
    );
}

#[test]
fn batch_json_carries_the_names_and_redact_hides_them() {
    let root = nfsdtop_testkit::nfsd_clients_dir(
        "tui",
        &[nfsdtop_testkit::NfsdClient {
            id: 7,
            address: "10.0.0.3:790",
            name: "Linux NFSv4.2 secret-host",
            implementation: "Linux 6.1 secret-build",
        }],
    );
    let dir = root.to_str().unwrap();
    let base = [
        "--demo",
        "seed-k4",
        "-b",
        "-n",
        "1",
        "--speed",
        "0",
        "--format",
        "json",
        "--nfsd-clients",
        dir,
    ];
    let plain = nfsdtop(&base);
    let rec: serde_json::Value = serde_json::from_str(plain.lines().next().unwrap()).unwrap();
    let peer = |n: &str| {
        rec["entities"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == n)
            .cloned()
            .unwrap()
    };
    let named = peer("10.0.0.3");
    assert_eq!(
        named["client_names"][0]["name"],
        "Linux NFSv4.2 secret-host"
    );
    assert_eq!(named["client_names"][0]["minor_version"], 2);
    assert_eq!(
        named["client_names"][0]["implementation"],
        "Linux 6.1 secret-build"
    );
    assert!(
        peer("10.0.0.2").get("client_names").is_none(),
        "absent where unknown: {plain}"
    );

    let redacted = nfsdtop(&[&base[..], &["--redact"]].concat());
    assert!(
        redacted.contains("\"client_names\":[{\"name\":\"anon-"),
        "{redacted}"
    );
    assert!(!redacted.contains("secret"), "{redacted}");
    let _ = std::fs::remove_dir_all(&root);
}
