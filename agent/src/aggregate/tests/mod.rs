//! Hand-computed expectations for entitled dispatches, fairness and Jain's
//! index on small event sequences. Each comment shows the arithmetic.

use super::*;
use crate::model::{Bytes, Endpoint, EntityStats, Snapshot, SourceInfo};

mod services;

fn ep(s: &str) -> Endpoint {
    Endpoint::from_socket_addr(s.parse().unwrap())
}

fn x(client: &str) -> XprtKey {
    XprtKey {
        netns: 1,
        server: ep("10.0.0.1:2049"),
        client: if client.is_empty() {
            Endpoint::None
        } else {
            ep(client)
        },
    }
}

struct Script {
    agg: Aggregator,
    ts: u64,
}

impl Script {
    fn new() -> Self {
        Script {
            agg: Aggregator::default(),
            ts: 0,
        }
    }
    fn with(agg: Aggregator) -> Self {
        Script { agg, ts: 0 }
    }
    fn ev(&mut self, c: &str, kind: EventKind) -> &mut Self {
        self.ts += 1_000; // 1 µs apart
        self.agg.ingest(&Event {
            ts_ns: self.ts,
            xprt: x(c),
            kind,
        });
        self
    }
    fn enq(&mut self, c: &str) -> &mut Self {
        self.ev(c, EventKind::Enqueue { inflight: None })
    }
    fn deq(&mut self, c: &str) -> &mut Self {
        self.ev(
            c,
            EventKind::Dequeue {
                qtime_ns: None,
                class: None,
            },
        )
    }
    fn snap(&mut self) -> Snapshot {
        self.agg.snapshot(self.ts, 0.0, &SourceInfo::default())
    }
}

fn peer<'a>(s: &'a Snapshot, name: &str) -> &'a EntityStats {
    s.peers
        .iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("no peer {name} in {:?}", s.peers))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn two_connections_against_one_both_backlogged() {
    // A has transports A1, A2; B has B1. All stay queued (re-enqueued after
    // each dispatch), so both peers are backlogged at every dispatch and
    // each earns 1/2 per dispatch.
    let mut s = Script::new();
    s.enq("10.0.0.2:1").enq("10.0.0.2:2").enq("10.0.0.3:1");
    // deq A1: V = 0.5; A1 back. deq A2: V = 1.0; deq B1: V = 1.5.
    s.deq("10.0.0.2:1").enq("10.0.0.2:1");
    s.deq("10.0.0.2:2").enq("10.0.0.2:2");
    s.deq("10.0.0.3:1").enq("10.0.0.3:1");
    let snap = s.snap();
    let a = peer(&snap, "10.0.0.2");
    let b = peer(&snap, "10.0.0.3");
    assert_eq!((a.dispatches, b.dispatches), (2, 1));
    assert!(close(a.entitled, 1.5) && close(b.entitled, 1.5));
    assert!(close(a.fairness.unwrap(), 2.0 / 1.5));
    assert!(close(b.fairness.unwrap(), 1.0 / 1.5));
    assert!(close(a.share, 2.0 / 3.0));
    assert!(close(a.fair_share, 0.5));
    // Jain over (4/3, 2/3): (2)^2 / (2 * (16/9 + 4/9)) = 0.9
    assert!(close(snap.totals.jain, 0.9), "{}", snap.totals.jain);
    assert_eq!(snap.totals.backlogged, 2);
    assert_eq!(a.connections, 2);
    // The entitled totals always add up to the dispatches.
    assert!(close(
        a.entitled + b.entitled,
        snap.totals.dispatches as f64
    ));
}

#[test]
fn idle_peer_earns_nothing_and_comes_back() {
    let mut s = Script::new();
    s.enq("10.0.0.2:1").enq("10.0.0.3:1");
    // deq A: n=2, V=0.5, A goes idle with entitled 0.5.
    s.deq("10.0.0.2:1");
    // B alone for three dispatches: V = 1.5, 2.5, 3.5; A earns nothing.
    s.deq("10.0.0.3:1").enq("10.0.0.3:1");
    s.deq("10.0.0.3:1").enq("10.0.0.3:1");
    s.deq("10.0.0.3:1").enq("10.0.0.3:1");
    let first = s.snap();
    assert!(close(peer(&first, "10.0.0.2").entitled, 0.5));
    assert!(close(peer(&first, "10.0.0.3").entitled, 3.5));
    // A: 1 dispatch / 0.5 entitled = 2.0; B: 3 / 3.5.
    assert!(close(peer(&first, "10.0.0.2").fairness.unwrap(), 2.0));
    assert!(close(peer(&first, "10.0.0.3").fairness.unwrap(), 3.0 / 3.5));
    // A comes back: both backlogged, two dispatches of B then one of A.
    s.enq("10.0.0.2:1");
    s.deq("10.0.0.3:1").enq("10.0.0.3:1"); // V += 0.5
    s.deq("10.0.0.3:1").enq("10.0.0.3:1"); // V += 0.5
    s.deq("10.0.0.2:1"); // V += 0.5, A idle again
    let second = s.snap();
    let a = peer(&second, "10.0.0.2");
    let b = peer(&second, "10.0.0.3");
    // Interval: A 1 dispatch / 1.5 entitled, B 2 / 1.5.
    assert!(close(a.interval_entitled, 1.5) && close(b.interval_entitled, 1.5));
    assert!(close(a.fairness.unwrap(), 1.0 / 1.5));
    assert!(close(b.fairness.unwrap(), 2.0 / 1.5));
    assert!(close(a.entitled, 2.0) && close(b.entitled, 5.0));
    assert_eq!(second.totals.backlogged, 1);
}

#[test]
fn duplicate_enqueues_do_not_inflate_backlog() {
    let mut s = Script::new();
    s.enq("10.0.0.2:1").enq("10.0.0.2:1").enq("10.0.0.2:1");
    s.enq("10.0.0.3:1");
    assert_eq!(s.agg.peer_clock.backlogged, 2);
    // One dispatch of each; if duplicates counted, A would stay backlogged.
    s.deq("10.0.0.2:1").deq("10.0.0.3:1");
    let snap = s.snap();
    assert_eq!(snap.totals.backlogged, 0);
    // deq A: V=0.5 (A and B); deq B: V=1.5 (B alone).
    assert!(close(peer(&snap, "10.0.0.2").entitled, 0.5));
    assert!(close(peer(&snap, "10.0.0.3").entitled, 1.5));
}

#[test]
fn dequeue_without_enqueue_counts_as_backlogged_for_that_dispatch() {
    let mut s = Script::new();
    s.deq("10.0.0.2:1");
    let snap = s.snap();
    let a = peer(&snap, "10.0.0.2");
    assert_eq!(a.dispatches, 1);
    assert!(close(a.entitled, 1.0));
    assert_eq!(a.fairness, Some(1.0));
    // No wait sample: we never saw the enqueue.
    assert_eq!(snap.source.wait_source, WaitSource::None);
}

#[test]
fn listener_records_go_to_the_listener_pseudo_peer() {
    let mut s = Script::new();
    s.enq("").enq("10.0.0.2:1");
    s.deq("").deq("10.0.0.2:1");
    let snap = s.snap();
    let l = peer(&snap, "(listener)");
    assert_eq!(l.dispatches, 1);
    assert!(close(l.entitled, 0.5));
    assert_eq!(peer(&snap, "10.0.0.2").dispatches, 1);
    assert_eq!(snap.peers.len(), 2);
}

#[test]
fn ipv6_peers_are_told_apart_and_ports_merge() {
    let mut s = Script::new();
    s.enq("[fd00::2]:700")
        .enq("[fd00::2]:701")
        .enq("[fd00::3]:700");
    s.deq("[fd00::2]:700")
        .deq("[fd00::2]:701")
        .deq("[fd00::3]:700");
    let snap = s.snap();
    assert_eq!(peer(&snap, "fd00::2").dispatches, 2);
    assert_eq!(peer(&snap, "fd00::2").connections, 2);
    assert_eq!(peer(&snap, "fd00::3").dispatches, 1);
    // deq fd00::2 twice with 2 backlogged: V=0.5, 1.0 (its second
    // transport keeps it backlogged), then fd00::3 alone: V=2.0.
    assert!(close(peer(&snap, "fd00::2").entitled, 1.0));
    assert!(close(peer(&snap, "fd00::3").entitled, 2.0));
}

#[test]
fn own_waits_qtime_and_wait_source() {
    let mut s = Script::new();
    s.enq("10.0.0.2:1");
    s.ts += 99_000; // 100 µs after the enqueue
    s.deq("10.0.0.2:1");
    let snap = s.snap();
    assert_eq!(snap.source.wait_source, WaitSource::EnqueueDequeue);
    // 100 µs lies in bucket [96,112): midpoint 103.5
    assert_eq!(peer(&snap, "10.0.0.2").wait_p50_us, 103.5);

    s.enq("10.0.0.2:1");
    s.ev(
        "10.0.0.2:1",
        EventKind::Dequeue {
            qtime_ns: Some(5_000_000),
            class: None,
        },
    );
    let snap = s.snap();
    assert_eq!(snap.source.wait_source, WaitSource::Qtime);
    // 5000 µs in [4096,5120): midpoint 4607.5
    assert_eq!(peer(&snap, "10.0.0.2").wait_p99_us, 4607.5);
}

/// The cumulative wait histograms (a class's, the server's) hold every
/// wait since the start, across snapshots; the per-peer one only the
/// interval's.
#[test]
fn cumulative_wait_histograms_span_snapshots() {
    let map = ClassMap::parse("10.1.0.0/24 movers\n", "t").unwrap();
    let mut s = Script::with(Aggregator::new(map, Limits::default()));
    let wait = |s: &mut Script, us: u64| {
        s.enq("10.1.0.1:1");
        s.ts += us * 1_000 - 1_000;
        s.deq("10.1.0.1:1");
    };
    wait(&mut s, 100);
    wait(&mut s, 200);
    let first = s.snap();
    wait(&mut s, 5_000);
    let snap = s.snap();
    let movers = snap.classes.iter().find(|c| c.name == "movers").unwrap();
    for (what, h) in [
        ("class", &movers.wait_histogram),
        ("server", &snap.totals.wait_histogram),
    ] {
        assert_eq!(h.count(), 3, "{what}: every wait since the start");
        assert_eq!(h.count_below_us(1_000), 2, "{what}: the first interval's");
    }
    assert_eq!(peer(&first, "10.1.0.1").wait_histogram.count(), 2);
    assert_eq!(
        peer(&snap, "10.1.0.1").wait_histogram.count(),
        1,
        "the interval's"
    );
}

#[test]
fn class_map_groups_and_per_peer_splits() {
    let map = ClassMap::parse("10.1.0.0/24 movers\n0.0.0.0/0 cust per-peer\n", "t").unwrap();
    let mut s = Script::with(Aggregator::new(map, Limits::default()));
    s.enq("10.1.0.1:1").enq("10.1.0.2:1").enq("10.2.0.1:1");
    s.deq("10.1.0.1:1").deq("10.1.0.2:1").deq("10.2.0.1:1");
    let snap = s.snap();
    let movers = snap.classes.iter().find(|c| c.name == "movers").unwrap();
    let cust = snap
        .classes
        .iter()
        .find(|c| c.name == "cust/10.2.0.1")
        .unwrap();
    assert_eq!(movers.dispatches, 2);
    assert_eq!(cust.dispatches, 1);
    assert_eq!(cust.class, "cust");
    assert_eq!(peer(&snap, "10.1.0.1").class, "movers");
    // Classes: movers and cust backlogged: V=0.5, movers still queued
    // (second transport): V=1.0, then cust alone: V=2.0.
    assert!(close(movers.entitled, 1.0) && close(cust.entitled, 2.0));
    assert_eq!(movers.connections, 2);
}

#[test]
fn kernel_class_field_overrides_the_map() {
    let mut s = Script::new();
    s.enq("10.0.0.2:1").enq("10.0.0.3:1");
    for c in ["10.0.0.2:1", "10.0.0.3:1"] {
        s.ev(
            c,
            EventKind::Dequeue {
                qtime_ns: None,
                class: Some(7),
            },
        );
    }
    let snap = s.snap();
    let k = snap.classes.iter().find(|c| c.name == "class-7").unwrap();
    assert_eq!(k.dispatches, 2);
}

#[test]
fn reloading_the_class_map_keeps_counts() {
    let mut s = Script::new();
    s.enq("10.1.0.1:1").deq("10.1.0.1:1");
    s.agg
        .set_classmap(ClassMap::parse("10.1.0.0/16 lab\n", "t").unwrap());
    s.enq("10.1.0.1:1").deq("10.1.0.1:1");
    let snap = s.snap();
    assert_eq!(peer(&snap, "10.1.0.1").dispatches, 2);
    assert_eq!(peer(&snap, "10.1.0.1").class, "lab");
    let lab = snap.classes.iter().find(|c| c.name == "lab").unwrap();
    assert_eq!(lab.dispatches, 1);
    assert_eq!(snap.totals.dispatches, 2);
}

#[test]
fn close_and_eviction_bound_memory() {
    let limits = Limits {
        max_peers: 64,
        max_classes: 64,
        max_transports: 64,
    };
    let mut s = Script::with(Aggregator::new(ClassMap::default(), limits));
    for i in 0..10_000u32 {
        let c = format!("10.{}.{}.{}:{}", i >> 16, (i >> 8) & 255, i & 255, 700);
        s.ev(&c, EventKind::Accepted);
        s.enq(&c).deq(&c);
        s.ev(&c, EventKind::Closed);
    }
    let snap = s.snap();
    assert!(snap.totals.peers <= 64, "{}", snap.totals.peers);
    assert!(snap.totals.classes <= 64);
    assert!(snap.totals.peers_evicted >= 10_000 - 64);
    assert_eq!(snap.totals.dispatches, 10_000);
    // Transports that never close are evicted too, counted.
    for i in 0..1000u32 {
        let c = format!("10.9.{}.{}:1", i >> 8, i & 255);
        s.ev(&c, EventKind::Accepted);
    }
    let snap = s.snap();
    assert!(snap.totals.transports <= 64);
    assert!(snap.totals.transports_evicted >= 1000 - 64);
}

/// The transport index under churn: transports opened, served and closed
/// in a pseudo-random order (closed slots reused, the table grown past
/// several resizes), each listed with exactly the dispatches a plain map
/// counted for it since it was last opened.
#[test]
fn transports_are_found_through_churn_and_slot_reuse() {
    let mut s = Script::new();
    let mut model: std::collections::BTreeMap<String, u64> = Default::default();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..60_000 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let i = (rng >> 8) % 3_000;
        let c = format!("10.1.{}.{}:{}", i / 3 / 256, (i / 3) % 256, 700 + i % 3);
        match rng % 4 {
            0 => {
                s.ev(&c, EventKind::Closed);
                model.remove(&c);
            }
            1 => {
                s.ev(&c, EventKind::Accepted);
                model.entry(c).or_default();
            }
            _ => {
                s.enq(&c).deq(&c);
                *model.entry(c).or_default() += 1;
            }
        }
    }
    let snap = s.snap();
    assert_eq!(snap.totals.transports, model.len() as u64);
    let mut listed = 0;
    for p in &snap.peers {
        for t in &p.transports {
            let want = model.get(&t.client).copied();
            assert_eq!(Some(t.dispatches), want, "transport {}", t.client);
            listed += 1;
        }
    }
    assert_eq!(listed, model.len());
}

#[test]
fn lost_events_are_counted() {
    let mut s = Script::new();
    s.ev(
        "",
        EventKind::Lost {
            tracepoint: Tracepoint::Dequeue,
            count: 42,
        },
    );
    let snap = s.snap();
    assert_eq!(snap.totals.events_lost, 42);
    assert_eq!(snap.totals.lost_by_tracepoint[Tracepoint::Dequeue], 42);
}

#[test]
fn jain_index_by_hand() {
    assert!(close(jain_index([1.0, 1.0, 1.0]), 1.0));
    // (1 + 0)^2 / (2 * 1) = 0.5: one of two gets everything.
    assert!(close(jain_index([1.0, 0.0]), 0.5));
    // seed-k16 under flat: ratios (2/18)/(1/2) and (16/18)/(1/2).
    let x: [f64; 2] = [2.0 / 18.0 * 2.0, 16.0 / 18.0 * 2.0];
    let want = (x[0] + x[1]).powi(2) / (2.0 * (x[0] * x[0] + x[1] * x[1]));
    assert!(close(jain_index(x), want));
    assert!(close(jain_index([]), 1.0));
}

#[test]
fn exec_share_and_time() {
    let mut s = Script::new();
    s.ev(
        "10.0.0.2:1",
        EventKind::Executed {
            exec_ns: 3_000_000,
            requests: 1,
            bytes: None,
            procedure: None,
        },
    );
    s.ev(
        "10.0.0.3:1",
        EventKind::Executed {
            exec_ns: 1_000_000,
            requests: 2,
            bytes: None,
            procedure: None,
        },
    );
    let snap = s.snap();
    assert!(close(peer(&snap, "10.0.0.2").exec_share, 0.75));
    assert!(close(peer(&snap, "10.0.0.2").exec_seconds, 0.003));
    assert!(close(snap.totals.exec_seconds, 0.004));
    // A sum the kernel added up counts every request in it.
    assert_eq!(peer(&snap, "10.0.0.2").executions, 1);
    assert_eq!(peer(&snap, "10.0.0.3").executions, 2);
}

/// Requests and bytes per peer and class, cumulative and per second;
/// bytes stay `None` for an entity no measured request reached.
#[test]
fn requests_and_bytes_with_their_rates() {
    let mut s = Script::new();
    let b = |received, sent| Some(Bytes { received, sent });
    let exec = |requests, bytes| EventKind::Executed {
        exec_ns: 1_000,
        requests,
        bytes,
        procedure: None,
    };
    s.ev("10.0.0.2:1", exec(1, b(200, 4096)));
    s.ev("10.0.0.2:2", exec(3, b(600, 12_288)));
    // Classic tracepoints: counted, bytes not measured.
    s.ev("10.0.0.3:1", exec(2, None));
    // First interval: 0 → 0.5 s.
    let snap = s.agg.snapshot(500_000_000, 0.0, &SourceInfo::default());
    let p = peer(&snap, "10.0.0.2");
    assert_eq!((p.executions, p.requests), (4, 4));
    assert!(close(p.request_rate, 8.0), "4 requests / 0.5 s");
    assert_eq!((p.bytes_in, p.bytes_out), (Some(800), Some(16_384)));
    assert_eq!(p.bytes_in_rate, Some(1600.0), "800 B / 0.5 s");
    assert_eq!(p.bytes_out_rate, Some(32_768.0));
    let q = peer(&snap, "10.0.0.3");
    assert_eq!((q.executions, q.bytes_in, q.bytes_out), (2, None, None));
    assert_eq!((q.bytes_in_rate, q.bytes_out_rate), (None, None));
    // Without a class map every peer is its own class: the same sums.
    let class = |name: &str| snap.classes.iter().find(|c| c.class == name).unwrap();
    let c = class(&p.class);
    assert_eq!(
        (c.executions, c.bytes_in, c.bytes_out),
        (4, Some(800), Some(16_384))
    );
    assert!(close(c.request_rate, 8.0));
    assert_eq!(class(&q.class).bytes_in, None);
    // Second interval, 0.5 → 1.5 s: rates of what grew only.
    s.ts = 600_000_000;
    s.ev("10.0.0.2:1", exec(1, b(100, 1000)));
    let snap = s.agg.snapshot(1_500_000_000, 0.0, &SourceInfo::default());
    let p = peer(&snap, "10.0.0.2");
    assert_eq!(
        (p.executions, p.bytes_in, p.bytes_out),
        (5, Some(900), Some(17_384))
    );
    assert!(close(p.request_rate, 1.0));
    assert_eq!(
        (p.bytes_in_rate, p.bytes_out_rate),
        (Some(100.0), Some(1000.0))
    );
    assert!(close(peer(&snap, "10.0.0.3").request_rate, 0.0));
}

#[test]
fn redaction_hides_every_client_address() {
    let map = ClassMap::parse("10.1.0.0/24 movers\n0.0.0.0/0 cust per-peer\n", "t").unwrap();
    let agg = Aggregator::new(map, Limits::default()).with_redactor(Redactor::with_key("k"));
    let mut s = Script::with(agg);
    s.enq("10.1.0.1:1")
        .enq("10.2.0.7:1")
        .enq("")
        .enq("[fd00::5]:9");
    s.deq("10.1.0.1:1")
        .deq("10.2.0.7:1")
        .deq("")
        .deq("[fd00::5]:9");
    let snap = s.snap();
    let json = serde_json::to_string(&snap).unwrap();
    for raw in ["10.1.0.1", "10.2.0.7", "fd00::5"] {
        assert!(!json.contains(raw), "{raw} leaked: {json}");
    }
    // Classification still used the real address.
    assert!(snap.classes.iter().any(|c| c.name == "movers"));
    assert!(snap
        .classes
        .iter()
        .any(|c| c.name.starts_with("cust/anon-")));
    assert!(snap.peers.iter().any(|p| p.name == "(listener)"));
}

/// A request named with its execution counts exactly as its execution
/// followed by its procedure's breakdown: the same snapshot, procedure
/// rows, times and histograms included.
#[test]
fn a_named_execution_is_its_execution_and_its_procedure() {
    let name = |n: &str| crate::model::ProcName::new(n);
    let exec = |us: u64, procedure| EventKind::Executed {
        exec_ns: us * 1_000,
        requests: 1,
        bytes: Some(crate::model::Bytes {
            received: 120,
            sent: 4_096,
        }),
        procedure,
    };
    let mut merged = Script::new();
    let mut apart = Script::new();
    for (i, p) in ["READ", "GETATTR", "READ", "WRITE", "READ"]
        .iter()
        .enumerate()
    {
        let us = 10 + 7 * i as u64;
        let c = if i % 2 == 0 {
            "10.0.0.2:1"
        } else {
            "10.0.0.3:1"
        };
        merged.deq(c).ev(c, exec(us, Some(name(p))));
        apart.deq(c).ev(c, exec(us, None));
        // The breakdown shares its execution's time stamp.
        apart.ts -= 1_000;
        apart.ev(
            c,
            EventKind::Procedure {
                name: name(p),
                requests: 1,
                exec_ns: us * 1_000,
            },
        );
    }
    apart.ts = merged.ts;
    let (m, a) = (merged.snap(), apart.snap());
    let read = &peer(&m, "10.0.0.2").procedures[&name("READ")];
    assert_eq!(read.requests, 3);
    assert_eq!(
        serde_json::to_value(&m.peers).unwrap(),
        serde_json::to_value(&a.peers).unwrap()
    );
    assert_eq!(
        serde_json::to_value(&m.classes).unwrap(),
        serde_json::to_value(&a.classes).unwrap()
    );
}
