//! The live source's view of each tracepoint generation, from fixture
//! format files (fake tracefs trees under tests/fixtures/formats/).

use std::path::{Path, PathBuf};
use std::time::Duration;

use nfsdtop_agent::model::{Endpoint, EventKind, WaitSource};
use nfsdtop_agent::source::live::decode::TraceFields;
use nfsdtop_agent::source::live::{self, decode, Generation, Layout, LiveError, LiveOptions};
use nfsdtop_common::{Record, RecordView, Slot, SlotConfig, OFF_NONE};

fn fixture(gen: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/formats")
        .join(gen)
}

fn layout(gen: &str) -> Layout {
    Layout::from_tracefs(&fixture(gen)).unwrap_or_else(|e| panic!("{gen}: {e}"))
}

fn cfg(l: &Layout, s: Slot) -> SlotConfig {
    l.slots[s as usize]
}

#[test]
fn gen_5_18_to_6_5_enqueue_has_pid_and_is_never_dropped() {
    let l = layout("5.18-6.5");
    assert_eq!(l.generation, Generation::G518);
    assert_eq!(l.label(), "5.18-6.5");
    assert_eq!(l.wait_source(), WaitSource::EnqueueDequeue);
    let e = cfg(&l, Slot::Enqueue);
    assert_eq!((e.server_off, e.client_off), (8, 12));
    assert_eq!((e.flags_off, e.flags_size), (16, 8));
    assert_eq!((e.netns_off, e.netns_size), (24, 4));
    // Real enqueues have BUSY set on these kernels: drop nothing.
    assert_eq!(e.drop_mask, 0);
    assert_eq!(e.need_mask, 0, "5.18-6.5 traces only real enqueues");
    assert_eq!(l.busy_mask, 1);
    let d = cfg(&l, Slot::Dequeue);
    assert_eq!(d.value_off, OFF_NONE, "no qtime before 6.16");
    assert_eq!(d.class_off, OFF_NONE);
}

#[test]
fn gen_6_6_drops_busy_attempts_with_the_6_12_layout() {
    let l = layout("6.6+");
    assert_eq!(l.generation, Generation::G66);
    assert_eq!(l.label(), "6.6+");
    assert_eq!(l.wait_source(), WaitSource::EnqueueDequeue);
    let e = cfg(&l, Slot::Enqueue);
    assert_eq!(e.enabled, 1);
    assert_eq!(
        (e.server_off, e.client_off, e.flags_off, e.netns_off),
        (8, 12, 16, 24)
    );
    assert_eq!(e.drop_mask, 1);
    // CONN 1, CLOSE 2, DATA 3, DEFERRED 7, HANDSHAKE 14 (from print fmt).
    assert_eq!(e.need_mask, 1 << 1 | 1 << 2 | 1 << 3 | 1 << 7 | 1 << 14);
    let d = cfg(&l, Slot::Dequeue);
    assert_eq!(
        (d.server_off, d.client_off, d.flags_off, d.netns_off),
        (8, 12, 16, 24)
    );
    let s = cfg(&l, Slot::StatsLatency);
    assert_eq!((s.netns_off, s.value_off, s.value_size), (16, 24, 8));
    for sl in [Slot::Accept, Slot::Close] {
        assert_eq!(cfg(&l, sl).enabled, 1);
    }
    assert_eq!(
        l.events[Slot::Close as usize].as_deref(),
        Some("svc_xprt_free")
    );
    assert!(l.notes.is_empty(), "{:?}", l.notes);
}

#[test]
fn gen_6_16_uses_qtime() {
    let l = layout("6.16+");
    assert_eq!(l.generation, Generation::G616);
    assert_eq!(l.label(), "6.16+");
    assert!(l.qtime);
    assert_eq!(l.wait_source(), WaitSource::Qtime);
    let d = cfg(&l, Slot::Dequeue);
    assert_eq!((d.value_off, d.value_size), (40, 8));
}

#[test]
fn kernel_class_field_on_dequeue() {
    let l = layout("class");
    assert!(l.kernel_class);
    assert_eq!(l.label(), "6.16+ +class");
    let d = cfg(&l, Slot::Dequeue);
    assert_eq!((d.class_off, d.class_size), (48, 4));
}

#[test]
fn xpt_id_shifts_later_offsets_by_8() {
    let l = layout("xpt_id");
    let e = cfg(&l, Slot::Enqueue);
    assert_eq!((e.server_off, e.client_off), (8, 12));
    assert_eq!((e.flags_off, e.netns_off), (24, 32));
    let d = cfg(&l, Slot::Dequeue);
    assert_eq!((d.flags_off, d.netns_off), (24, 32));
    assert_eq!(l.generation, Generation::G66);
}

#[test]
fn busy_bit_comes_from_print_fmt() {
    let l = layout("busy-moved");
    assert_eq!(l.busy_mask, 1 << 3);
    assert_eq!(cfg(&l, Slot::Enqueue).drop_mask, 1 << 3);
}

#[test]
fn text_address_kernels_are_refused_naming_the_field() {
    let e = Layout::from_tracefs(&fixture("5.17-text")).unwrap_err();
    let msg = e.to_string();
    match &e {
        LiveError::UnsupportedFormat { event, field, .. } => {
            assert!(event.starts_with("svc_xprt_"), "{event}");
            assert_eq!(field.as_deref(), Some("client"));
        }
        other => panic!("expected UnsupportedFormat, got {other:?}"),
    }
    assert!(msg.contains("`client`") && msg.contains("5.17"), "{msg}");
    assert!(msg.contains("format"), "names the file: {msg}");
}

/// A scratch copy of a fixture tree that a test may change.
fn scratch(gen: &str, name: &str) -> PathBuf {
    let dst = std::env::temp_dir().join(format!("nfsdtop-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dst);
    copy_dir(&fixture(gen), &dst);
    dst
}

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), to).unwrap();
        }
    }
}

#[test]
fn unusable_field_type_names_event_and_field() {
    let t = scratch("6.6+", "badtype");
    let p = t.join("events/sunrpc/svc_xprt_dequeue/format");
    let text = std::fs::read_to_string(&p).unwrap().replace(
        "field:__data_loc unsigned char[] client;\toffset:12;\tsize:4;",
        "field:unsigned long client;\toffset:12;\tsize:8;",
    );
    std::fs::write(&p, text).unwrap();
    let e = Layout::from_tracefs(&t).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("svc_xprt_dequeue") && msg.contains("`client`"),
        "{msg}"
    );
    let _ = std::fs::remove_dir_all(&t);
}

#[test]
fn missing_optional_events_are_notes_not_errors() {
    let t = scratch("6.6+", "noaccept");
    std::fs::remove_dir_all(t.join("events/sunrpc/svc_xprt_accept")).unwrap();
    std::fs::remove_dir_all(t.join("events/sunrpc/svc_stats_latency")).unwrap();
    let l = Layout::from_tracefs(&t).unwrap();
    assert_eq!(cfg(&l, Slot::Accept).enabled, 0);
    assert_eq!(cfg(&l, Slot::StatsLatency).enabled, 0);
    assert!(l.notes.iter().any(|n| n.contains("svc_xprt_accept")));
    assert!(l.notes.iter().any(|n| n.contains("svc_stats_latency")));
    let _ = std::fs::remove_dir_all(&t);
}

#[test]
fn no_sunrpc_is_no_nfsd_and_wait_gives_up_after_its_time() {
    let t = std::env::temp_dir().join(format!("nfsdtop-test-{}-nosunrpc", std::process::id()));
    std::fs::create_dir_all(t.join("events/sched")).unwrap();
    let opts = LiveOptions {
        tracefs: Some(t.clone()),
        ..LiveOptions::default()
    };
    let e = live::probe(&opts).unwrap_err();
    assert!(e.is_no_nfsd(), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("modprobe nfsd") && msg.contains("--wait"),
        "{msg}"
    );

    let waiting = LiveOptions {
        wait_for_nfsd: Some(Duration::from_millis(300)),
        ..opts.clone()
    };
    let started = std::time::Instant::now();
    let e = live::probe(&waiting).unwrap_err();
    assert!(e.is_no_nfsd(), "{e}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(e.to_string().contains("waited"), "{e}");

    // The anyhow chain keeps the kind (the TUI's demo fallback relies on it).
    let any: anyhow::Error = anyhow::Error::new(e).context("opening");
    assert!(LiveError::chain_is_no_nfsd(&any));
    let _ = std::fs::remove_dir_all(&t);
}

#[test]
fn no_tracefs_at_an_explicit_path_says_how_to_mount() {
    let opts = LiveOptions {
        tracefs: Some(PathBuf::from("/nonexistent/tracing")),
        ..LiveOptions::default()
    };
    let e = live::probe(&opts).unwrap_err();
    assert!(!e.is_no_nfsd());
    assert!(e.to_string().contains("mount -t tracefs"), "{e}");
}

fn v4(ip: [u8; 4], port: u16) -> Endpoint {
    Endpoint::V4 { ip, port }
}

/// The ring item the BPF program writes for a hit of `slot` on a kernel
/// with layout `l`.
fn ring_item(l: &Layout, slot: Slot, f: TraceFields) -> [u8; Record::SIZE] {
    decode::kernel_record(&l.slots[slot as usize], slot, 1_000_000, &f).to_bytes()
}

fn decode_item(item: &[u8], l: &Layout) -> Option<nfsdtop_agent::model::Event> {
    decode::decode(&RecordView::new(item).unwrap(), l)
}

#[test]
fn decode_raw_record_bytes_to_events() {
    let l616 = layout("6.16+");
    let client = v4([10, 0, 0, 9], 801);
    let server = v4([10, 0, 0, 1], 2049);
    let base = TraceFields {
        netns: 4026531840,
        client,
        server,
        ..TraceFields::default()
    };

    // Dequeue with qtime (µs → ns), from raw bytes as the ring gives them.
    let item = ring_item(&l616, Slot::Dequeue, TraceFields { value: 250, ..base });
    let ev = decode_item(&item, &l616).unwrap();
    assert_eq!(ev.ts_ns, 1_000_000);
    assert_eq!(ev.xprt.netns, 4026531840);
    assert_eq!(ev.xprt.client.to_string(), "10.0.0.9:801");
    assert_eq!(ev.xprt.server.to_string(), "10.0.0.1:2049");
    assert_eq!(
        ev.kind,
        EventKind::Dequeue {
            qtime_ns: Some(250_000),
            class: None
        }
    );

    // Without qtime in the format, no qtime.
    let l66 = layout("6.6+");
    let item = ring_item(&l66, Slot::Dequeue, TraceFields { value: 250, ..base });
    assert_eq!(
        decode_item(&item, &l66).unwrap().kind,
        EventKind::Dequeue {
            qtime_ns: None,
            class: None
        }
    );

    // Kernel class.
    let lc = layout("class");
    let item = ring_item(
        &lc,
        Slot::Dequeue,
        TraceFields {
            value: 250,
            class: 0x8000_0003,
            ..base
        },
    );
    assert_eq!(
        decode_item(&item, &lc).unwrap().kind,
        EventKind::Dequeue {
            qtime_ns: Some(250_000),
            class: Some(0x8000_0003)
        }
    );

    // Enqueue: BUSY attempts are not enqueues on 6.6+, are on 5.18-6.5.
    let busy_conn = TraceFields {
        flags: 0x1 | 0x2,
        ..base
    };
    assert!(decode_item(&ring_item(&l66, Slot::Enqueue, busy_conn), &l66).is_none());
    let l518 = layout("5.18-6.5");
    assert_eq!(
        decode_item(&ring_item(&l518, Slot::Enqueue, busy_conn), &l518)
            .unwrap()
            .kind,
        EventKind::Enqueue { inflight: None }
    );
    let conn = TraceFields { flags: 0x2, ..base };
    assert_eq!(
        decode_item(&ring_item(&l66, Slot::Enqueue, conn), &l66)
            .unwrap()
            .kind,
        EventKind::Enqueue { inflight: None }
    );

    // Execution time µs → ns; IPv6 client and server (the longest record).
    let c6 = Endpoint::V6 {
        ip: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
        port: 700,
    };
    let s6 = Endpoint::V6 {
        ip: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        port: 2049,
    };
    let x = TraceFields {
        value: 1234,
        client: c6,
        server: s6,
        ..base
    };
    let ev = decode_item(&ring_item(&l66, Slot::StatsLatency, x), &l66).unwrap();
    assert_eq!(
        ev.kind,
        EventKind::Executed {
            exec_ns: 1_234_000,
            requests: 1,
            bytes: None,
            procedure: None,
        }
    );
    assert_eq!(ev.xprt.client.to_string(), "[fd00::2]:700");
    assert_eq!(ev.xprt.server.to_string(), "[fd00::1]:2049");

    // Listener: zero-length client.
    let a = TraceFields {
        client: Endpoint::None,
        ..base
    };
    let ev = decode_item(&ring_item(&l66, Slot::Accept, a), &l66).unwrap();
    assert_eq!(ev.kind, EventKind::Accepted);
    assert_eq!(ev.xprt.client, Endpoint::None);
    assert!(ev.xprt.peer().is_listener());

    assert_eq!(
        decode_item(&ring_item(&l66, Slot::Close, base), &l66)
            .unwrap()
            .kind,
        EventKind::Closed
    );
    // Unknown slot, garbage family, data beyond the copy, short buffers:
    // no event or no address, never a panic.
    let mut unknown = ring_item(&l66, Slot::Close, base);
    unknown[8] = 9;
    assert!(decode_item(&unknown, &l66).is_none());
    let d = &l66.slots[Slot::Dequeue as usize];
    let mut g = decode::kernel_record(&l66.slots[Slot::Dequeue as usize], Slot::Dequeue, 1, &base);
    let client_at = {
        let loc = u32::from_ne_bytes(g.raw[d.client_off as usize..][..4].try_into().unwrap());
        (loc & 0xffff) as usize
    };
    g.raw[client_at] = 0x7f;
    g.raw[client_at + 1] = 0x7f;
    assert_eq!(
        decode_item(&g.to_bytes(), &l66).unwrap().xprt.client,
        Endpoint::None
    );
    let loc = (200u32 << 16) | client_at as u32;
    g.raw[d.client_off as usize..][..4].copy_from_slice(&loc.to_ne_bytes());
    assert!(
        decode_item(&g.to_bytes(), &l66).is_none(),
        "an address past the copied bytes is not guessed at"
    );
    assert!(RecordView::new(&item[..40]).is_none());
}

/// Format files as Debian's kernels wrote them (captured in the VM tests):
/// 6.1 names flags `XPT_*` and writes `(1UL << 0)`, 6.12 and 7.2 write
/// `((((1UL))) << (0))`; 7.2 has `qtime`.
#[test]
fn real_debian_kernel_formats() {
    for (gen, want, flag, bit) in [
        ("debian-6.1", "5.18-6.5", "XPT_DEAD", 6),
        ("debian-6.12", "6.6+", "DEAD", 5),
        ("debian-7.2", "6.16+", "DEAD", 5),
    ] {
        let l = layout(gen);
        assert_eq!(l.label(), want, "{gen}");
        assert_eq!(l.busy_mask, 1, "{gen}");
        let e = cfg(&l, Slot::Enqueue);
        assert_eq!(
            (
                e.server_off,
                e.client_off,
                e.flags_off,
                e.flags_size,
                e.netns_off
            ),
            (8, 12, 16, 8, 24),
            "{gen}"
        );
        let d = cfg(&l, Slot::Dequeue);
        assert_eq!(
            (d.server_off, d.client_off, d.flags_off, d.netns_off),
            (8, 12, 16, 24),
            "{gen}"
        );
        assert_eq!(d.value_off != OFF_NONE, want == "6.16+", "{gen}");
        // Events the capture did not include are notes, not errors.
        assert_eq!(cfg(&l, Slot::StatsLatency).enabled, 0, "{gen}");
        let text =
            std::fs::read_to_string(fixture(gen).join("events/sunrpc/svc_xprt_dequeue/format"))
                .unwrap();
        let f = nfsdtop_agent::source::live::format::Format::parse(&text).unwrap();
        assert_eq!(
            f.print_flags("flags").get(flag),
            Some(&(1u64 << bit)),
            "{gen}"
        );
    }
    assert_eq!(cfg(&layout("debian-7.2"), Slot::Dequeue).value_off, 40);
}

#[test]
fn enqueue_records_without_work_flags_are_not_enqueues_on_6_6() {
    // On 6.6+ the tracepoint fires in svc_xprt_ready() before its tests: a
    // listener with no pending connection (LISTENER only) or a transport
    // with no data is not enqueued, and must not count as backlogged.
    for gen in ["6.6+", "debian-6.12", "debian-7.2"] {
        let l = layout(gen);
        let e = cfg(&l, Slot::Enqueue);
        assert_ne!(e.need_mask, 0, "{gen}");
        let with = |flags: u64| {
            ring_item(
                &l,
                Slot::Enqueue,
                TraceFields {
                    flags,
                    ..TraceFields::default()
                },
            )
        };
        let listener_bit = 1u64 << 9;
        assert_eq!(
            decode_item(&with(listener_bit), &l),
            None,
            "{gen}: LISTENER alone"
        );
        assert!(
            decode_item(&with(listener_bit | (e.need_mask & (1 << 1))), &l).is_some(),
            "{gen}: listener with CONN"
        );
        assert!(decode_item(&with(1 << 3), &l).is_some(), "{gen}: DATA");
        assert_eq!(decode_item(&with(1 | 1 << 3), &l), None, "{gen}: BUSY");
    }
}

/// The classic svc_stats_latency record names its request's procedure
/// (`proc=` in ftrace): a string after the two sockaddrs, read as the
/// kernel's name; a name cut by the copy's end is no procedure, never a
/// wrong one.
#[test]
fn classic_stats_latency_names_the_procedure() {
    let l = layout("6.16+");
    assert_eq!(l.procedure_loc, 32);
    let c = cfg(&l, Slot::StatsLatency);
    let f = TraceFields {
        value: 250,
        client: Endpoint::from_socket_addr("[fd00::7]:801".parse().unwrap()),
        server: Endpoint::from_socket_addr("[fd00::1]:2049".parse().unwrap()),
        ..TraceFields::default()
    };
    let mut rec = decode::kernel_record(&c, Slot::StatsLatency, 5, &f);
    // After the fixed fields (36 bytes) and two sockaddr_in6 (56), as the
    // kernel lays the record out.
    let (at, name) = (92usize, b"READDIRPLUS\0");
    rec.raw[at..at + name.len()].copy_from_slice(name);
    let loc = (name.len() as u32) << 16 | at as u32;
    rec.raw[32..36].copy_from_slice(&loc.to_ne_bytes());
    let bytes = rec.to_bytes();
    let view = RecordView::new(&bytes).unwrap();
    let named = |view: &RecordView, l: &Layout| {
        let mut ev = decode::decode(view, l).expect("an Executed event");
        decode::name_procedure(view, l, &mut ev);
        match ev.kind {
            EventKind::Executed {
                procedure,
                requests,
                exec_ns,
                ..
            } => (procedure.map(|p| p.to_string()), requests, exec_ns),
            k => panic!("{k:?}"),
        }
    };
    assert_eq!(
        named(&view, &l),
        (Some("READDIRPLUS".to_string()), 1, 250_000)
    );
    // A location past the copy: no procedure.
    let loc = 40u32 << 16 | 130;
    rec.raw[32..36].copy_from_slice(&loc.to_ne_bytes());
    let bytes = rec.to_bytes();
    let view = RecordView::new(&bytes).unwrap();
    assert_eq!(named(&view, &l), (None, 1, 250_000));
    // A format without the field: none either.
    let mut none = l.clone();
    none.procedure_loc = OFF_NONE;
    assert_eq!(named(&view, &none), (None, 1, 250_000));
}
