//! The hidden `--max-peers` / `--max-transports` flags reach the
//! aggregator: a replayed flood of short-lived connections from thousands
//! of addresses stays within the peer bound (plus one eviction batch), and
//! the evictions are counted in the batch JSON totals. The VM fault
//! scenario "flood" (scripts/vm/fault-flood.sh) does the same against a
//! real nfsd.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use nfsdtop_agent::enrich::classify::ClassMap;
use nfsdtop_agent::model::{Endpoint, Event, EventKind, SourceInfo, SourceKind, XprtKey};
use nfsdtop_agent::record::{Header, Writer};

const FLOOD: u32 = 3000;
const HELD: u32 = 100;

fn xprt(client: SocketAddr) -> XprtKey {
    XprtKey {
        netns: 1,
        server: Endpoint::from_socket_addr("[fd99:4::1]:2049".parse().unwrap()),
        client: Endpoint::from_socket_addr(client),
    }
}

/// FLOOD short-lived connections (accept, one dispatch, close), each from
/// its own address, 2 ms apart (6 s of recorded time), and HELD
/// connections from 4 addresses that are never closed.
fn flood_recording() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nfsdtop-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("flood.nfsdrec");
    let info = SourceInfo {
        kind: SourceKind::Live,
        kernel: "6.12.0-test".into(),
        generation: "6.6+".into(),
        ..SourceInfo::default()
    };
    let start = 1_000_000_000u64;
    let mut w = Writer::create(
        &path,
        &Header::for_source(&info, &ClassMap::default(), start),
    )
    .unwrap();
    let mut events = Vec::new();
    let mut ts = start;
    let ev = |ts: u64, x: XprtKey, kind: EventKind| Event {
        ts_ns: ts,
        xprt: x,
        kind,
    };
    for i in 0..FLOOD {
        let ip = Ipv6Addr::new(0xfd99, 4, 0, 0, 0, 0, 1, i as u16);
        let x = xprt(SocketAddr::new(IpAddr::V6(ip), 40_000));
        ts += 2_000_000;
        events.push(ev(ts, x, EventKind::Accepted));
        events.push(ev(ts + 1_000, x, EventKind::Enqueue { inflight: None }));
        events.push(ev(
            ts + 2_000,
            x,
            EventKind::Dequeue {
                qtime_ns: None,
                class: None,
            },
        ));
        events.push(ev(ts + 3_000, x, EventKind::Closed));
        if i < HELD {
            let held = Ipv6Addr::new(0xfd99, 4, 0, 0, 0, 0, 2, (i % 4) as u16);
            let x = xprt(SocketAddr::new(IpAddr::V6(held), 700 + i as u16));
            events.push(ev(ts + 4_000, x, EventKind::Accepted));
        }
    }
    w.write_all(&events).unwrap();
    w.finish_file().unwrap();
    path
}

/// Every JSON line of a replay of `path` with `extra` flags.
fn replay(path: &PathBuf, extra: &[&str]) -> Vec<serde_json::Value> {
    let o = Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
        .arg("--replay")
        .arg(path)
        .args(["-b", "--speed", "0", "--format", "json"])
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "replay failed: {err}");
    let lines: Vec<serde_json::Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 3, "a line per second of 6 s: {lines:?}");
    lines
}

fn total(v: &serde_json::Value, key: &str) -> u64 {
    v["totals"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("no totals.{key} in {v}"))
}

#[test]
fn max_peers_and_max_transports_bound_a_flood_and_count_evictions() {
    let f = flood_recording();
    let (max_peers, max_transports) = (16u64, 32u64);
    let lines = replay(
        &f,
        &[
            "--max-peers",
            &max_peers.to_string(),
            "--max-transports",
            &max_transports.to_string(),
        ],
    );
    for l in &lines {
        // One eviction batch is an eighth of the bound.
        assert!(total(l, "peers") <= max_peers + max_peers / 8, "{l}");
        assert!(
            total(l, "transports") <= max_transports + max_transports / 8,
            "{l}"
        );
    }
    let last = lines.last().unwrap();
    assert_eq!(total(last, "dispatches"), u64::from(FLOOD), "{last}");
    assert_eq!(total(last, "events_lost"), 0);
    // Every flood peer beyond the bound was evicted (some are still kept).
    assert!(
        total(last, "peers_evicted") >= u64::from(FLOOD) - max_peers,
        "{last}"
    );
    // The held connections outnumber the transport bound: the idle ones
    // are evicted, and counted.
    assert!(total(last, "transports_evicted") > 0, "{last}");

    // Without the flags nothing is evicted: the bound above is the flags'.
    let lines = replay(&f, &[]);
    let last = lines.last().unwrap();
    assert_eq!(total(last, "peers_evicted"), 0, "{last}");
    assert_eq!(total(last, "transports_evicted"), 0, "{last}");
    assert!(total(last, "peers") > u64::from(FLOOD), "{last}");
    assert_eq!(total(last, "transports"), u64::from(HELD), "{last}");
    let _ = std::fs::remove_dir_all(f.parent().unwrap());
}

#[test]
fn limits_must_be_positive() {
    for flag in ["--max-peers", "--max-transports"] {
        let o = Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
            .args(["--demo", "movers", "-b", "-n", "1", flag, "0"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(!o.status.success(), "{flag} 0 was accepted");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("not a positive number"), "{err}");
    }
}
