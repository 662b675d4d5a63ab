//! `--resolve` on the surfaces of `nfsdtop`: the host name beside the
//! address in the table (where there is no NFSv4 client name) and as
//! `host NAME` in the drill-down, at 80x24 with every line whole; and the
//! batch JSON of a demo whose peer is 127.0.0.1, named by the system
//! resolver, as a pseudonym under `--redact`.

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

/// seed-k4: 10.0.0.2 named "h2.example" by its host name only, 10.0.0.3
/// with an NFSv4 client name and a host name.
fn resolved_snapshots() -> Vec<Snapshot> {
    let mut names = ClientMap::new(None);
    names.insert(
        "10.0.0.3".parse().unwrap(),
        ClientName {
            name: "Linux NFSv4.2 nat-a".into(),
            minor_version: Some(2),
            implementation: None,
        },
    );
    let mut agg = Aggregator::new(Default::default(), Limits::default());
    agg.set_client_names(Arc::new(names));
    let info = SourceInfo::default();
    demo_snapshots("seed-k4", agg, |a, now, t| {
        a.snapshot_resolving(now, t, &info, &mut |ip| match ip.to_string().as_str() {
            "10.0.0.2" => Some("h2.example".into()),
            "10.0.0.3" => Some("h3.example".into()),
            _ => None,
        })
    })
}

fn open(st: &mut State, peer: &str) {
    key(st, KeyCode::Esc);
    open_detail(st, peer);
    assert!(matches!(st.screen, Screen::Detail { .. }));
}

#[test]
fn the_table_and_the_drill_down_show_the_host_name() {
    let mut st = State::new(Duration::from_secs(2), None);
    for s in resolved_snapshots() {
        st.on_snapshot(Box::new(s));
    }
    let l = lines(&mut st, 80, 24);
    let text = l.join("\n");
    assert!(text.contains("10.0.0.2 h2.example "), "{text}");
    // The NFSv4 client's name comes first where there is one.
    assert!(text.contains("10.0.0.3 nat-a "), "{text}");
    assert!(!text.contains("h3.example"), "{text}");
    assert!(text.contains("SHARE") && l[23].contains("quit"), "{text}");

    open(&mut st, "10.0.0.2");
    let l = lines(&mut st, 80, 24);
    let text = l.join("\n");
    assert!(text.contains("peer 10.0.0.2"), "{text}");
    assert!(
        l.iter().any(|l| l.trim_end() == "host h2.example"),
        "{text}"
    );
    assert!(text.contains("transports (2)"), "{text}");
    assert!(l[23].contains("Esc back"), "{:?}", l[23]);

    open(&mut st, "10.0.0.3");
    let text = lines(&mut st, 80, 24).join("\n");
    assert!(text.contains("client \"Linux NFSv4.2 nat-a\""), "{text}");
    assert!(text.contains("host h3.example"), "{text}");
}

/// The host names the batch JSON gave 127.0.0.1 (none in the first
/// records: the lookup runs in the background).
fn loopback_names(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| {
            let rec: serde_json::Value = serde_json::from_str(l).unwrap();
            let peer = rec["entities"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| {
                    e["name"] == "127.0.0.1" || e["name"].as_str().unwrap().starts_with("anon-")
                })
                .cloned()
                .unwrap();
            peer["hostname"].as_str().map(str::to_string)
        })
        .collect()
}

#[test]
fn batch_json_names_127_0_0_1_and_redact_hides_the_name() {
    let expected = nfsdtop_agent::enrich::resolve::system_lookup("127.0.0.1".parse().unwrap())
        .expect(
        "the system resolver has no name for 127.0.0.1: /etc/hosts needs \"127.0.0.1 localhost\"",
    );
    let dir = std::env::temp_dir().join(format!("nfsdtop-resolve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = dir.join("loopback.toml");
    std::fs::write(
        &scenario,
        "name = \"loopback\"\n[[client]]\naddress = \"127.0.0.1\"\nconnections = 1\ninflight = 4\n",
    )
    .unwrap();
    let scenario = scenario.to_str().unwrap();
    // Real time, 0.1 s apart: a lookup in /etc/hosts is back long before
    // the last of 20 records.
    let base = [
        "-b", "-n", "20", "-d", "0.1", "--format", "json", "--demo", scenario,
    ];
    let without = nfsdtop(&base);
    assert!(!without.contains("hostname"), "off by default: {without}");

    let out = nfsdtop(&[&base[..], &["--resolve"]].concat());
    let names = loopback_names(&out);
    assert!(!names.is_empty(), "no record named 127.0.0.1: {out}");
    assert!(
        names.iter().all(|n| *n == expected),
        "{names:?} vs {expected}"
    );

    let out = nfsdtop(&[&base[..], &["--resolve", "--redact"]].concat());
    let names = loopback_names(&out);
    assert!(!names.is_empty(), "no record named 127.0.0.1: {out}");
    assert!(names.iter().all(|n| n.starts_with("anon-")), "{names:?}");
    assert!(
        !out.contains(&expected) && !out.contains("127.0.0.1"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
