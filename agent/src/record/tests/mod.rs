//! The recording format's tests: frames, header versions, round trips
//! and damaged files (in `damage`).

mod damage;

use super::format::{self, FRAME_HEADER_LEN, PREAMBLE_LEN};
use super::*;
use crate::model::{Endpoint, EventKind, SourceKind, Tracepoint, WaitSource, XprtKey};

fn header() -> Header {
    Header {
        host: "h".into(),
        kernel: "6.12".into(),
        generation: "6.6+".into(),
        wait_source: WaitSource::Qtime,
        source_kind: SourceKind::Live,
        source_detail: String::new(),
        class_map: String::new(),
        start_unix_ns: 1,
        start_mono_ns: 1_000_000,
        recorded_by: "test".into(),
        file_id: 77,
        nfsd: Default::default(),
    }
}

fn key(i: u32) -> XprtKey {
    XprtKey {
        netns: 4026531840,
        server: Endpoint::V4 {
            ip: [10, 0, 0, 1],
            port: 2049,
        },
        client: if i.is_multiple_of(3) {
            Endpoint::V6 {
                ip: [
                    0xfd,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    (i >> 8) as u8,
                    i as u8,
                ],
                port: 700,
            }
        } else if i.is_multiple_of(7) {
            Endpoint::None
        } else {
            Endpoint::V4 {
                ip: [10, 1, (i >> 8) as u8, i as u8],
                port: 800 + (i % 5) as u16,
            }
        },
    }
}

fn every_kind(n: u32) -> Vec<Event> {
    let mut v = Vec::new();
    let mut ts = 1_000_000u64;
    for i in 0..n {
        let k = key(i % 50);
        ts += u64::from(i % 1000) * 997;
        // v5: the depth at enqueue, measured now and then, up to 2^32.
        v.push(Event {
            ts_ns: ts,
            xprt: k,
            kind: EventKind::Enqueue {
                inflight: (i % 4 != 0).then_some(if i % 11 == 0 { u32::MAX } else { i % 70 }),
            },
        });
        v.push(Event {
            ts_ns: ts + 5,
            xprt: k,
            kind: EventKind::Dequeue {
                qtime_ns: (i.is_multiple_of(2)).then_some(u64::from(i) * 31),
                class: (i.is_multiple_of(3)).then_some(i.wrapping_mul(2_654_435_761)),
            },
        });
        // Per-CPU clocks: sometimes a record is older than the previous.
        v.push(Event {
            ts_ns: ts - 3,
            xprt: k,
            kind: EventKind::Executed {
                exec_ns: u64::from(i) << 20,
                // Folded in the kernel now and then: a count follows.
                requests: if i % 5 == 0 { u64::from(i) } else { 1 },
                // Measured now and then (v2): two byte counts follow.
                bytes: (i % 3 == 0).then_some(crate::model::Bytes {
                    received: u64::from(i) * 130,
                    sent: u64::from(i) << 16,
                }),
                procedure: None,
            },
        });
        // v3: its procedure, of 20 names, folded now and then.
        v.push(Event {
            ts_ns: ts - 2,
            xprt: k,
            kind: EventKind::Procedure {
                name: crate::model::ProcName::new(&format!("PROC{}", i % 20)),
                requests: if i % 5 == 0 { u64::from(i) } else { 1 },
                exec_ns: u64::from(i) << 20,
            },
        });
        // v4: NFSv4 operations, any number, counts up to 2^32.
        v.push(Event {
            ts_ns: ts - 1,
            xprt: k,
            kind: EventKind::Operation {
                op: (i % 256) as u8,
                count: if i % 7 == 0 { u32::MAX } else { i % 40 + 1 },
            },
        });
        if i.is_multiple_of(97) {
            v.push(Event {
                ts_ns: ts,
                xprt: key(1000 + i),
                kind: EventKind::Accepted,
            });
            v.push(Event {
                ts_ns: ts,
                xprt: key(1000 + i),
                kind: EventKind::Closed,
            });
            v.push(Event {
                ts_ns: ts,
                xprt: XprtKey::default(),
                kind: EventKind::Lost {
                    tracepoint: Tracepoint::ALL[(i % 5) as usize],
                    count: u64::MAX - u64::from(i),
                },
            });
        }
    }
    v.push(Event {
        ts_ns: u64::MAX,
        xprt: key(1),
        kind: EventKind::Enqueue { inflight: None },
    });
    v.push(Event {
        ts_ns: 0,
        xprt: key(1),
        kind: EventKind::Enqueue { inflight: None },
    });
    v
}

fn record(events: &[Event]) -> (Vec<u8>, Summary) {
    let mut w = Writer::new(Vec::new(), &header()).unwrap();
    w.write_all(events).unwrap();
    let (bytes, s) = w.finish().unwrap();
    assert_eq!(s.bytes, bytes.len() as u64);
    assert_eq!(s.events, events.len() as u64);
    (bytes, s)
}

#[test]
fn every_event_kind_round_trips() {
    let events = every_kind(20_000);
    let (bytes, s) = record(&events);
    assert!(s.frames > 10, "{s:?}");
    let c = read_bytes(&bytes).unwrap();
    assert_eq!(c.damage, None);
    assert_eq!(c.header, header());
    assert_eq!(c.events.len(), events.len());
    assert!(c.events == events);
}

#[test]
fn an_empty_recording_is_valid() {
    let (bytes, _) = record(&[]);
    let c = read_bytes(&bytes).unwrap();
    assert!(c.events.is_empty());
    assert_eq!(c.damage, None);
}

#[test]
fn a_dispatch_costs_a_few_bytes() {
    // One transport's enqueue, dequeue and execution 100 µs apart.
    let k = key(1);
    let mut events = Vec::new();
    for i in 0..100_000u64 {
        let ts = 1_000_000 + i * 100_000;
        events.push(Event {
            ts_ns: ts,
            xprt: k,
            kind: EventKind::Enqueue { inflight: None },
        });
        events.push(Event {
            ts_ns: ts + 20_000,
            xprt: k,
            kind: EventKind::Dequeue {
                qtime_ns: None,
                class: None,
            },
        });
        events.push(Event {
            ts_ns: ts + 60_000,
            xprt: k,
            kind: EventKind::Executed {
                exec_ns: 40_000,
                requests: 1,
                bytes: None,
                procedure: None,
            },
        });
    }
    // Tag byte, 3-byte deltas (20-40 µs in ns), no transport id; the
    // execution time is 3 more bytes: (4 + 4 + 7) / 3 = 5.
    let (_, s) = record(&events);
    assert!(s.bytes_per_event() < 5.1, "{}", s.bytes_per_event());
    // A dispatch alone, 20 µs after the previous one: 4 bytes.
    let dispatches: Vec<Event> = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Dequeue { .. }))
        .copied()
        .collect();
    let (_, s) = record(&dispatches);
    assert!(s.bytes_per_event() < 4.1, "{}", s.bytes_per_event());
}

#[test]
fn the_transport_table_resets_when_full() {
    let n = format::MAX_XPRTS as u32 + 10;
    let events: Vec<Event> = (0..n)
        .map(|i| Event {
            ts_ns: 1_000_000 + u64::from(i),
            xprt: XprtKey {
                netns: i,
                ..XprtKey::default()
            },
            kind: EventKind::Enqueue { inflight: None },
        })
        .chain((0..3).map(|i| Event {
            ts_ns: 0,
            xprt: XprtKey {
                netns: i,
                ..XprtKey::default()
            },
            kind: EventKind::Closed,
        }))
        .collect();
    let (bytes, s) = record(&events);
    assert_eq!(s.transports, u64::from(n) + 3);
    let c = read_bytes(&bytes).unwrap();
    assert_eq!(c.damage, None);
    assert!(c.events == events);
}

/// A v1 file (no byte counts: v1 had no flag for them, and a v1 writer
/// wrote what this one writes for events without bytes) replays whole,
/// its requests' bytes not measured.
#[test]
fn version_1_files_still_replay() {
    let events: Vec<Event> = every_kind(2_000)
        .into_iter()
        .filter(|e| {
            !matches!(
                e.kind,
                EventKind::Procedure { .. } | EventKind::Operation { .. }
            )
        })
        .map(|mut e| {
            match &mut e.kind {
                EventKind::Executed { bytes, .. } => *bytes = None,
                EventKind::Enqueue { inflight } => *inflight = None,
                _ => {}
            }
            e
        })
        .collect();
    let (mut bytes, _) = record(&events);
    assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), FORMAT_VERSION);
    bytes[8..10].copy_from_slice(&1u16.to_le_bytes());
    let c = read_bytes(&bytes).unwrap();
    assert_eq!(c.damage, None);
    assert!(c.events == events);
    // The same events with bytes cost two varints each, and read back.
    let with = every_kind(2_000);
    assert!(with
        .iter()
        .any(|e| matches!(e.kind, EventKind::Executed { bytes: Some(_), .. })));
    let (b2, _) = record(&with);
    assert!(b2.len() > bytes.len());
    assert!(read_bytes(&b2).unwrap().events == with);
}

/// v4's NFSv4 operation records read back; in a v3 file the same flags
/// mean a procedure record with bytes, which v3 never wrote: damage.
#[test]
fn operation_records_are_v4() {
    let op = Event {
        ts_ns: 2_000_000,
        xprt: key(3),
        kind: EventKind::Operation { op: 53, count: 3 },
    };
    let (mut bytes, _) = record(&[op]);
    let c = read_bytes(&bytes).unwrap();
    assert_eq!((c.damage, c.events), (None, vec![op]));
    bytes[8..10].copy_from_slice(&3u16.to_le_bytes());
    assert!(read_bytes(&bytes).unwrap().damage.is_some());
}

/// v5's enqueue with its in-flight depth reads back, 0 as 0 (not "not
/// measured"); in a v4 file the same flag on an enqueue is damage.
#[test]
fn inflight_enqueues_are_v5() {
    let at = |inflight| Event {
        ts_ns: 2_000_000,
        xprt: key(3),
        kind: EventKind::Enqueue { inflight },
    };
    let events = [at(Some(0)), at(None), at(Some(7))];
    let (mut bytes, _) = record(&events);
    let c = read_bytes(&bytes).unwrap();
    assert_eq!((c.damage, c.events), (None, events.to_vec()));
    bytes[8..10].copy_from_slice(&4u16.to_le_bytes());
    assert!(read_bytes(&bytes).unwrap().damage.is_some());
    let (mut plain, _) = record(&[at(None)]);
    plain[8..10].copy_from_slice(&4u16.to_le_bytes());
    assert_eq!(read_bytes(&plain).unwrap().events, vec![at(None)]);
}

/// v3's procedure records: names defined once then by index, at most
/// MAX_PROC_NAMES of them (later names recorded as `(other)`); in a v2
/// file the same flag is reserved, and the frame is damaged there.
#[test]
fn procedure_names_are_bounded_and_reserved_before_v3() {
    use crate::model::ProcName;
    let proc = |i: u32, name: &str| Event {
        ts_ns: 2_000_000 + u64::from(i),
        xprt: key(i % 7),
        kind: EventKind::Procedure {
            name: ProcName::new(name),
            requests: 1,
            exec_ns: 1000,
        },
    };
    let events: Vec<Event> = (0..400).map(|i| proc(i, &format!("N{i}"))).collect();
    let (bytes, _) = record(&events);
    let c = read_bytes(&bytes).unwrap();
    assert_eq!(c.damage, None);
    let names: Vec<String> = c
        .events
        .iter()
        .map(|e| match e.kind {
            EventKind::Procedure { name, .. } => name.to_string(),
            _ => panic!("{e:?}"),
        })
        .collect();
    let max = format::MAX_PROC_NAMES;
    assert_eq!(
        names[..max - 1],
        (0..max - 1).map(|i| format!("N{i}")).collect::<Vec<_>>()[..]
    );
    assert!(
        names[max - 1..].iter().all(|n| n == ProcName::OTHER),
        "{names:?}"
    );
    // A repeated name costs its index only.
    let (one, _) = record(&[proc(0, "READ")]);
    let (two, _) = record(&[proc(0, "READ"), proc(7, "READ")]);
    assert!(
        two.len() - one.len() < 8,
        "{} then {}",
        one.len(),
        two.len()
    );
    // The same file claiming v2: the procedure record is damage.
    let mut v2 = two.clone();
    v2[8..10].copy_from_slice(&2u16.to_le_bytes());
    let c = read_bytes(&v2).unwrap();
    assert!(c.events.is_empty());
    assert!(
        format!("{:?}", c.damage).contains("reserved flag"),
        "{:?}",
        c.damage
    );
}

#[test]
fn newer_versions_and_strangers_are_refused_clearly() {
    let (mut bytes, _) = record(&every_kind(10));
    bytes[8..10].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let e = read_bytes(&bytes).err().unwrap().to_string();
    assert!(
        e.contains(&format!(
            "recorded by format v{}; this nfsdtop",
            FORMAT_VERSION + 1
        )) && e.contains(&format!("reads up to v{FORMAT_VERSION}: upgrade nfsdtop")),
        "{e}"
    );
    // A version word no nfsdtop will write soon is damage (a flipped
    // byte), not a reason to upgrade.
    bytes[9] ^= 0xff;
    let e = read_bytes(&bytes).err().unwrap().to_string();
    assert!(e.contains("corrupt preamble"), "{e}");
    let e = read_bytes(b"hello world, I am not a recording")
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("not an nfsdtop recording"), "{e}");
    assert!(read_bytes(b"").is_err());
}

/// A request named with its execution is recorded in the format's own
/// two records (an older reader replays it): it reads back as its
/// execution, then its procedure, with the same time and counts.
#[test]
fn a_named_execution_is_recorded_as_execution_and_procedure() {
    use crate::model::{Bytes, ProcName};
    let bytes = Some(Bytes {
        received: 200,
        sent: 8_192,
    });
    let named = Event {
        ts_ns: 7_000_000,
        xprt: key(2),
        kind: EventKind::Executed {
            exec_ns: 42_000,
            requests: 1,
            bytes,
            procedure: Some(ProcName::new("READ")),
        },
    };
    let mut w = Writer::new(Vec::new(), &header()).unwrap();
    w.write(&named).unwrap();
    let (file, summary) = w.finish().unwrap();
    assert_eq!(summary.events, 2);
    let c = read_bytes(&file).unwrap();
    assert_eq!(c.damage, None);
    let executed = EventKind::Executed {
        exec_ns: 42_000,
        requests: 1,
        bytes,
        procedure: None,
    };
    let procedure = EventKind::Procedure {
        name: ProcName::new("READ"),
        requests: 1,
        exec_ns: 42_000,
    };
    let kinds: Vec<EventKind> = c.events.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [executed, procedure]);
    assert!(c
        .events
        .iter()
        .all(|e| e.ts_ns == named.ts_ns && e.xprt == named.xprt));
}

/// A recording is anyone's file: the one-line texts of its header come
/// back without control characters (no escape reaches a terminal through
/// a replay's description), the class map with its lines intact.
#[test]
fn header_texts_are_read_without_control_characters() {
    let evil = "x\u{1b}]0;PWNED\u{7}\u{1b}[2J";
    let h = Header {
        host: evil.into(),
        kernel: evil.into(),
        generation: evil.into(),
        source_detail: evil.into(),
        recorded_by: evil.into(),
        class_map: "10.0.0.0/8 a\n10.1.0.0/16 b\n".into(),
        ..header()
    };
    let back = Header::decode(&h.encode()).unwrap();
    let clean = "x?]0;PWNED??[2J";
    for t in [
        &back.host,
        &back.kernel,
        &back.generation,
        &back.source_detail,
        &back.recorded_by,
    ] {
        assert_eq!(t, clean);
    }
    assert_eq!(back.class_map, h.class_map);
}
