//! The raw plan per kernel generation and BTF, and raw records decoded
//! like classic ones (fixture formats, a hand-built BTF).

use super::*;
use crate::model::{Endpoint, EventKind};
use crate::source::live::btf::tests::Builder;
use crate::source::live::decode::{self, TraceFields};
use nfsdtop_common::RecordView;

pub(super) fn fixture(gen: &str) -> Layout {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/formats");
    Layout::from_tracefs(&dir.join(gen)).unwrap()
}

fn ptr(name: &str) -> Arg {
    Arg::Ptr(name.into())
}

/// The raw tracepoints' arguments as 6.1 declares them (and `btf`).
fn args_61() -> [Option<Vec<Arg>>; Slot::COUNT] {
    let (x, r) = (ptr("svc_xprt"), ptr("svc_rqst"));
    [
        Some(vec![x.clone(), r.clone()]),
        Some(vec![r.clone()]),
        Some(vec![r]),
        Some(vec![x.clone(), x.clone()]),
        Some(vec![x]),
    ]
}

/// A kernel's BTF as the test needs it: svc_xprt with the address
/// block at `local`, svc_rqst, net with ns.inum.
pub(super) fn btf(local: u32, remote_rel: u32, qtime: bool) -> Btf {
    let mut b = Builder::new();
    let u32t = b.int("unsigned int", 4);
    let u64t = b.int("long unsigned int", 8);
    let ns = b.composite(false, "ns_common", 24, false, &[("inum", u32t, 8 * 16)]);
    let net = b.composite(false, "net", 200, false, &[("ns", ns, 8 * 120)]);
    let netp = b.ptr(net);
    let mut xprt_members = vec![
        ("xpt_flags", u64t, 8 * 72),
        ("xpt_local", u64t, 8 * local),
        ("xpt_locallen", u64t, 8 * (local + 128)),
        ("xpt_remote", u64t, 8 * (local + remote_rel)),
        ("xpt_remotelen", u64t, 8 * (local + 264)),
        ("xpt_net", netp, 8 * 700),
        ("xpt_nr_rqsts", u32t, 8 * 48),
    ];
    if qtime {
        xprt_members.push(("xpt_qtime", u64t, 8 * 24));
    }
    let xprt = b.composite(false, "svc_xprt", 800, false, &xprt_members);
    let xprtp = b.ptr(xprt);
    let xdr_buf = b.composite(false, "xdr_buf", 72, false, &[("len", u32t, 8 * 64)]);
    let rqst = b.composite(
        false,
        "svc_rqst",
        900,
        false,
        &[
            ("rq_xprt", xprtp, 8 * 40),
            ("rq_stime", u64t, 8 * 300),
            ("rq_arg", xdr_buf, 8 * 400),
            ("rq_res", xdr_buf, 8 * 600),
            ("rq_prog", u32t, 8 * 800),
            ("rq_vers", u32t, 8 * 804),
            ("rq_proc", u32t, 8 * 808),
        ],
    );
    let rqstp = b.ptr(rqst);
    // The raw tracepoints' prototypes, as 6.1 declares them.
    b.tracepoint("svc_xprt_enqueue", &[xprtp, rqstp]);
    b.tracepoint("svc_xprt_dequeue", &[rqstp]);
    b.tracepoint("svc_stats_latency", &[rqstp]);
    b.tracepoint("svc_xprt_accept", &[xprtp, xprtp]);
    b.tracepoint("svc_xprt_free", &[xprtp]);
    Btf::parse(&b.build(), None).unwrap()
}

#[test]
fn offsets_from_btf_and_the_address_block_check() {
    let k = KernelOffsets::from_btf(&btf(160, 136, true)).unwrap();
    assert_eq!(
        k,
        KernelOffsets {
            rq_xprt: 40,
            rq_stime: 300,
            xpt_flags: 72,
            xpt_net: 700,
            net_ns_inum: 136,
            xpt_local: 160,
            xpt_qtime: Some(24),
            xpt_nr_rqsts: Some(48),
            rq_lens: Some((464, 664)),
            rq_procs: Some([800, 804, 808]),
            thread: None,
            args: args_61(),
        }
    );
    assert_eq!(
        KernelOffsets::from_btf(&btf(160, 136, false))
            .unwrap()
            .xpt_qtime,
        None
    );
    let e = KernelOffsets::from_btf(&btf(160, 144, true)).unwrap_err();
    assert!(e.contains("xpt_remote is at byte 304"), "{e}");
    let empty = Builder::new();
    let e = KernelOffsets::from_btf(&Btf::parse(&empty.build(), None).unwrap()).unwrap_err();
    assert!(e.contains("no svc_xprt.xpt_local"), "{e}");
}

#[test]
fn plan_per_generation() {
    let k = KernelOffsets::from_btf(&btf(160, 136, true)).unwrap();
    // 6.6+: every slot raw; with free raw, every raw slot sends short
    // records.
    let l = fixture("6.6+");
    let p = plan(&l, &k, Tracepoints::Raw);
    assert_eq!(attach_order().count(), Slot::COUNT);
    for s in attach_order() {
        assert!(p.is_raw(s), "{s:?}");
        assert_eq!(p.configs[s as usize].short_records, 1, "{s:?}");
    }
    for s in [Slot::Close, Slot::Accept] {
        let c = p.configs[s as usize];
        assert_eq!((c.arg_is_rqst, c.value), (0, rawrec::VALUE_NONE), "{s:?}");
    }
    // The enqueue reads its transport's requests in flight into the
    // value word, which the decoder then reads; without the field, not.
    let c = p.configs[Slot::Enqueue as usize];
    assert_eq!((c.value, c.xpt_nr_rqsts), (rawrec::VALUE_INFLIGHT, 48));
    let d = p.decode.slots[Slot::Enqueue as usize];
    assert_eq!((d.value_off, d.value_size), (rawrec::VALUE, 8));
    let mut without = k.clone();
    without.xpt_nr_rqsts = None;
    let p0 = plan(&l, &without, Tracepoints::Raw);
    assert_eq!(p0.configs[Slot::Enqueue as usize].value, rawrec::VALUE_NONE);
    assert_eq!(p0.decode.slots[Slot::Enqueue as usize].value_size, 0);
    // A prototype that is not what the raw program reads (here a
    // dequeue taking the pool first): that slot stays classic.
    let mut odd = k.clone();
    odd.args[Slot::Dequeue as usize] = Some(vec![ptr("svc_pool"), ptr("svc_rqst")]);
    let q = plan(&l, &odd, Tracepoints::Raw);
    assert!(!q.is_raw(Slot::Dequeue) && q.is_raw(Slot::StatsLatency));
    assert!(
        q.kept_classic[0].contains("struct svc_rqst"),
        "{:?}",
        q.kept_classic
    );
    // svc_xprt_free back on its classic tracepoint (its attach
    // failed) turns short records off.
    let mut q = p.clone();
    q.revert(Slot::Close, &l, "test".into());
    assert!(q.configs.iter().all(|c| c.short_records == 0));
    assert!(q.is_raw(Slot::Dequeue));
    let enq = p.configs[Slot::Enqueue as usize];
    assert_eq!((enq.arg_is_rqst, enq.value), (0, rawrec::VALUE_INFLIGHT));
    assert_eq!(enq.drop_mask, l.slots[Slot::Enqueue as usize].drop_mask);
    assert_ne!(enq.need_mask, 0);
    assert_eq!(p.configs[Slot::Dequeue as usize].value, rawrec::VALUE_NONE);
    assert_eq!(
        p.configs[Slot::StatsLatency as usize].value,
        rawrec::VALUE_EXECUTE
    );
    // 6.16+: dequeue's qtime from xpt_qtime; without it, classic.
    let l = fixture("6.16+");
    assert_eq!(
        plan(&l, &k, Tracepoints::Raw).configs[Slot::Dequeue as usize].value,
        rawrec::VALUE_QTIME
    );
    let no_qtime = KernelOffsets {
        xpt_qtime: None,
        ..k.clone()
    };
    let p = plan(&l, &no_qtime, Tracepoints::Raw);
    assert!(!p.is_raw(Slot::Dequeue));
    assert!(
        p.kept_classic[0].contains("xpt_qtime"),
        "{:?}",
        p.kept_classic
    );
    // The proposed class field exists only in the record: classic.
    assert!(!plan(&fixture("class"), &k, Tracepoints::Raw).is_raw(Slot::Dequeue));
}

/// svc_stats_latency's raw program reads rq_arg.len and rq_res.len where
/// the BTF has them, and the decoder's layout has their word; without
/// them (or on classic tracepoints) bytes are not measured.
#[test]
fn plan_measures_bytes_only_with_their_offsets() {
    let k = KernelOffsets::from_btf(&btf(160, 136, true)).unwrap();
    let l = fixture("6.6+");
    let i = Slot::StatsLatency as usize;
    let p = plan(&l, &k, Tracepoints::Raw);
    assert_eq!(
        (p.configs[i].rq_arg_len, p.configs[i].rq_res_len),
        (464, 664)
    );
    assert!(p.measures_bytes());
    assert_eq!(p.decode.slots[i].flags_off, rawrec::LENS);
    let c = &p.configs[i];
    assert_eq!(
        (c.rq_prog, c.rq_vers, c.rq_proc, c.fold_procs),
        (800, 804, 808, 1)
    );
    assert!(p.measures_procedures());
    let no_procs = KernelOffsets {
        rq_procs: None,
        ..k.clone()
    };
    let q = plan(&l, &no_procs, Tracepoints::Raw);
    let c = &q.configs[i];
    assert_eq!((c.rq_prog, c.fold_procs, c.fold_exec), (0, 0, 1));
    assert!(!q.measures_procedures());
    let no_lens = KernelOffsets {
        rq_lens: None,
        ..k.clone()
    };
    let q = plan(&l, &no_lens, Tracepoints::Raw);
    assert!(q.is_raw(Slot::StatsLatency) && !q.measures_bytes());
    assert_eq!(q.configs[i].rq_arg_len, 0);
    assert_eq!(q.decode.slots[i].flags_off, OFF_NONE);
    assert!(!plan(&l, &k, Tracepoints::Classic).measures_bytes());
    // The classic record has no such word either.
    assert_eq!(l.slots[i].flags_off, OFF_NONE);
}

/// svc_xprt_enqueue's BUSY attempts are dropped on the flags argument
/// where the prototype has one (6.6+), read from the transport before.
#[test]
fn enqueue_flags_argument_by_prototype() {
    let old = KernelOffsets::from_btf(&btf(160, 136, true)).unwrap();
    assert!(!old.flags_arg(Slot::Enqueue));
    let mut k = old.clone();
    k.args[Slot::Enqueue as usize] = Some(vec![ptr("svc_xprt"), Arg::Int(8)]);
    assert!(k.flags_arg(Slot::Enqueue));
    for gen in ["6.6+", "6.16+", "debian-6.12", "debian-7.2"] {
        let p = plan(&fixture(gen), &k, Tracepoints::Raw);
        let enq = p.configs[Slot::Enqueue as usize];
        assert_eq!(
            (enq.enabled, enq.flags_arg, enq.arg_is_rqst),
            (1, 1, 0),
            "{gen}"
        );
        assert_ne!(enq.drop_mask, 0, "{gen}");
        assert_eq!(p.configs[Slot::Dequeue as usize].flags_arg, 0, "{gen}");
    }
    // 5.18-6.5: enqueue fires only on real enqueues, (xprt, rqst).
    for gen in ["5.18-6.5", "debian-6.1"] {
        let p = plan(&fixture(gen), &old, Tracepoints::Raw);
        let enq = p.configs[Slot::Enqueue as usize];
        assert_eq!((enq.enabled, enq.flags_arg), (1, 0), "{gen}");
    }
    // --classic-tracepoints: nothing raw, the kernel's layout as is.
    let p = plan(&fixture("6.6+"), &k, Tracepoints::Classic);
    assert!(Slot::ALL.iter().all(|&s| !p.is_raw(s)));
    assert_eq!(p.decode, fixture("6.6+"));
}

/// Short records name their transport by pointer: known after its
/// full record, forgotten at its svc_xprt_free, never guessed.
#[test]
fn short_records_need_a_full_one_first() {
    let k = KernelOffsets::from_btf(&btf(160, 136, true)).unwrap();
    let l = fixture("6.16+");
    let p = plan(&l, &k, Tracepoints::Raw);
    let f = TraceFields {
        flags: 1 << 3,
        netns: 7,
        value: 250,
        class: 0,
        client: Endpoint::V4 {
            ip: [10, 0, 0, 2],
            port: 700,
        },
        server: Endpoint::V4 {
            ip: [10, 0, 0, 1],
            port: 2049,
        },
    };
    let ptr: u64 = 0xffff_8880_1234_5600;
    let full = |s: Slot, ts: u64| {
        let mut r = decode::kernel_record(&p.decode.slots[s as usize], s, ts, &f);
        r.raw_kind = rawrec::FULL;
        r.raw[rawrec::XPRT as usize..][..8].copy_from_slice(&ptr.to_ne_bytes());
        r.to_bytes()
    };
    let short = |s: Slot, ts: u64, value: u64| {
        let mut r = nfsdtop_common::Record::new(ts, s);
        r.raw_kind = rawrec::SHORT;
        r.raw[rawrec::FLAGS as usize..][..8].copy_from_slice(&f.flags.to_ne_bytes());
        r.raw[rawrec::VALUE as usize..][..8].copy_from_slice(&value.to_ne_bytes());
        r.raw[rawrec::XPRT as usize..][..8].copy_from_slice(&ptr.to_ne_bytes());
        r.to_bytes()
    };
    let mut known = decode::KnownXprts::default();
    let mut run = |b: [u8; nfsdtop_common::Record::SIZE]| {
        let mut out = Vec::new();
        known.decode(&RecordView::new(&b).unwrap(), &p.decode, &mut out);
        assert!(out.len() <= 1, "{out:?}");
        out.pop()
    };
    // Unknown pointer: no event (counted by the caller as lost).
    assert_eq!(run(short(Slot::Dequeue, 1, 9)), None);
    let enq = run(full(Slot::Enqueue, 2)).unwrap();
    assert_eq!(
        enq.kind,
        EventKind::Enqueue {
            inflight: Some(250)
        }
    );
    // A short enqueue carries its depth too; a failed read is none.
    let again = run(short(Slot::Enqueue, 2, 3)).unwrap();
    assert_eq!(again.kind, EventKind::Enqueue { inflight: Some(3) });
    let unread = run(short(Slot::Enqueue, 2, rawrec::INFLIGHT_UNREAD)).unwrap();
    assert_eq!(unread.kind, EventKind::Enqueue { inflight: None });
    let deq = run(short(Slot::Dequeue, 3, 40)).unwrap();
    assert_eq!(deq.xprt, enq.xprt, "the transport of the full record");
    assert_eq!(
        deq.kind,
        EventKind::Dequeue {
            qtime_ns: Some(40_000),
            class: None
        }
    );
    assert_eq!(deq.ts_ns, 3);
    // svc_stats_latency's flags word holds the request's lengths.
    let mut stats = short(Slot::StatsLatency, 4, 12);
    let lens = 300u64 | 70_000 << 32;
    stats[nfsdtop_common::Record::RAW_AT + rawrec::LENS as usize..][..8]
        .copy_from_slice(&lens.to_ne_bytes());
    let exec = run(stats).unwrap();
    assert_eq!(
        exec.kind,
        EventKind::Executed {
            exec_ns: 12_000,
            requests: 1,
            bytes: Some(crate::model::Bytes {
                received: 300,
                sent: 70_000
            }),
            procedure: None,
        }
    );
    // A BUSY attempt is not an enqueue, short or not.
    let mut busy = short(Slot::Enqueue, 5, 0);
    busy[nfsdtop_common::Record::RAW_AT + rawrec::FLAGS as usize] |= 1;
    assert_eq!(run(busy), None);
    let closed = run(full(Slot::Close, 6)).unwrap();
    assert_eq!((closed.kind, closed.xprt), (EventKind::Closed, enq.xprt));
    assert_eq!(run(short(Slot::Dequeue, 7, 1)), None, "forgotten at free");
    assert_eq!(known.unknown[Slot::Dequeue as usize], 2);
    assert!(known.is_empty());
}

/// Execution times folded in the kernel reach the agent once each:
/// swept from the running totals of the claim the agent knows,
/// settled by the record that ends the claim, never from a claim
/// whose full record it has not decoded, and counted lost for one it
/// never saw.
#[test]
fn folded_execution_totals_are_reported_once() {
    use nfsdtop_common::exec::ExecTotals;
    let k = KernelOffsets::from_btf(&btf(160, 136, false)).unwrap();
    let l = fixture("6.6+");
    let p = plan(&l, &k, Tracepoints::Raw);
    assert!(p.folds_exec());
    let client = |port| TraceFields {
        flags: 1 << 3,
        netns: 7,
        client: Endpoint::V4 {
            ip: [10, 0, 0, 2],
            port,
        },
        ..TraceFields::default()
    };
    let (a, b): (u64, u64) = (0xffff_8880_1234_5600, 0xffff_8880_9999_5600);
    // A full record of `ptr`, settling `settled`.
    let full = |s: Slot, ts: u64, ptr: u64, port: u16, settled: ExecTotals| {
        let mut r = decode::kernel_record(&p.decode.slots[s as usize], s, ts, &client(port));
        r.raw_kind = rawrec::FULL;
        let mut put = |off: u16, v: u64| {
            r.raw[off as usize..][..8].copy_from_slice(&v.to_ne_bytes());
        };
        put(rawrec::XPRT, ptr);
        put(rawrec::EXEC_OWNER, settled.owner);
        put(rawrec::EXEC_GEN, settled.gen);
        put(rawrec::EXEC_US, settled.us);
        put(rawrec::EXEC_COUNT, settled.count);
        put(rawrec::EXEC_BYTES_IN, settled.bytes_in);
        put(rawrec::EXEC_BYTES_OUT, settled.bytes_out);
        r.to_bytes()
    };
    // Every request here received 100 bytes and sent 1000.
    let totals = |owner, gen, us, count: u64| ExecTotals {
        owner,
        gen,
        us,
        count,
        bytes_in: count * 100,
        bytes_out: count * 1000,
    };
    let exec = |ev: &crate::model::Event| match ev.kind {
        EventKind::Executed {
            exec_ns,
            requests,
            bytes,
            ..
        } => {
            let b = bytes.expect("bytes measured");
            (
                ev.xprt.client.port(),
                exec_ns,
                requests,
                (b.received, b.sent),
            )
        }
        _ => panic!("not an execution: {ev:?}"),
    };
    let mut known = decode::KnownXprts::default();
    let mut out = Vec::new();
    let decode = |known: &mut decode::KnownXprts, b: [u8; nfsdtop_common::Record::SIZE]| {
        let mut out = Vec::new();
        known.decode(&RecordView::new(&b).unwrap(), &p.decode, &mut out);
        out
    };
    // A's first record claims its entry (gen = the record's time).
    let ev = decode(
        &mut known,
        full(Slot::Dequeue, 2, a, 700, ExecTotals::default()),
    );
    assert_eq!(ev.len(), 1);
    let entry = std::cell::Cell::new(totals(a, 2, 30, 2));
    let read = |i: u32| (i == nfsdtop_common::xprt_table::slot(a)).then(|| entry.get());
    known.sweep(read, &p.decode, 10, &mut out);
    assert_eq!(
        out.iter().map(exec).collect::<Vec<_>>(),
        [(700, 30_000, 2, (200, 2000))]
    );
    out.clear();
    known.sweep(read, &p.decode, 11, &mut out);
    assert!(out.is_empty(), "nothing grew: {out:?}");
    // A claim whose full record is not decoded yet waits.
    entry.set(totals(a, 99, 500, 9));
    known.sweep(read, &p.decode, 12, &mut out);
    assert!(out.is_empty(), "{out:?}");
    entry.set(totals(a, 2, 50, 3));
    known.sweep(read, &p.decode, 13, &mut out);
    assert_eq!(
        out.iter().map(exec).collect::<Vec<_>>(),
        [(700, 20_000, 1, (100, 1000))]
    );
    // B claims the entry: its full record settles A's claim first.
    let ev = decode(
        &mut known,
        full(Slot::Enqueue, 20, b, 701, totals(a, 2, 80, 5)),
    );
    assert_eq!(
        ev.iter().take(1).map(exec).collect::<Vec<_>>(),
        [(700, 30_000, 2, (200, 2000))]
    );
    // (The record's value word, 0 here, is its depth at enqueue.)
    assert_eq!(
        (ev.len(), ev[1].kind),
        (2, EventKind::Enqueue { inflight: Some(0) })
    );
    // B is freed: its free settles its own claim, then closes it.
    let ev = decode(
        &mut known,
        full(Slot::Close, 30, b, 701, totals(b, 20, 7, 1)),
    );
    assert_eq!(
        ev.iter().take(1).map(exec).collect::<Vec<_>>(),
        [(701, 7_000, 1, (100, 1000))]
    );
    assert_eq!((ev.len(), ev[1].kind), (2, EventKind::Closed));
    // Totals of a claim never seen: counted as lost requests.
    let ev = decode(
        &mut known,
        full(Slot::Enqueue, 40, a, 700, totals(b, 20, 9, 4)),
    );
    assert_eq!(ev.len(), 1);
    assert_eq!(known.unknown[Slot::StatsLatency as usize], 4);
    // Two full records of A raced (a program preempted between reserving
    // its record and claiming the entry): the entry can end with the
    // earlier claim, whose totals are still A's.
    decode(
        &mut known,
        full(Slot::Dequeue, 41, a, 700, ExecTotals::default()),
    );
    entry.set(totals(a, 40, 10, 1));
    out.clear();
    known.sweep(read, &p.decode, 42, &mut out);
    assert_eq!(
        out.iter().map(exec).collect::<Vec<_>>(),
        [(700, 10_000, 1, (100, 1000))]
    );
    let ev = decode(
        &mut known,
        full(Slot::Close, 50, a, 700, totals(a, 40, 30, 3)),
    );
    assert_eq!(
        ev.iter().take(1).map(exec).collect::<Vec<_>>(),
        [(700, 20_000, 2, (200, 2000))]
    );
    assert_eq!(known.unknown[Slot::StatsLatency as usize], 4);
    // Not across transports: a new transport at A's address does not
    // take the old one's claim.
    decode(
        &mut known,
        full(Slot::Dequeue, 60, a, 702, ExecTotals::default()),
    );
    decode(
        &mut known,
        full(Slot::Dequeue, 61, a, 703, ExecTotals::default()),
    );
    entry.set(totals(a, 60, 10, 1));
    out.clear();
    known.sweep(read, &p.decode, 62, &mut out);
    assert!(out.is_empty(), "{out:?}");
}

/// What a raw program writes decodes to the event the classic record
/// of the same hit does.
#[test]
fn raw_records_decode_like_classic_ones() {
    let k = KernelOffsets::from_btf(&btf(160, 136, true)).unwrap();
    let l = fixture("6.16+");
    let p = plan(&l, &k, Tracepoints::Raw);
    let f = TraceFields {
        flags: 1 << 3,
        netns: 4026531840,
        value: 250,
        class: 0,
        client: Endpoint::V6 {
            ip: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
            port: 700,
        },
        server: Endpoint::V4 {
            ip: [10, 0, 0, 1],
            port: 2049,
        },
    };
    for s in [Slot::Enqueue, Slot::Dequeue, Slot::StatsLatency] {
        let i = s as usize;
        let classic = decode::kernel_record(&l.slots[i], s, 7, &f).to_bytes();
        let raw = decode::kernel_record(&p.decode.slots[i], s, 7, &f).to_bytes();
        let a = decode::decode(&RecordView::new(&classic).unwrap(), &l);
        let mut b = decode::decode(&RecordView::new(&raw).unwrap(), &p.decode);
        if let Some(crate::model::Event {
            kind: EventKind::Enqueue { inflight },
            ..
        }) = b.as_mut()
        {
            // Only the raw record has the depth (the value word's 250).
            assert_eq!(inflight.take(), Some(250));
        }
        if let Some(crate::model::Event {
            kind: EventKind::Executed { bytes, .. },
            ..
        }) = b.as_mut()
        {
            // Only the raw record has lengths (here the flags word's 8).
            let want = crate::model::Bytes {
                received: 8,
                sent: 0,
            };
            assert_eq!(bytes.take(), Some(want));
        }
        assert_eq!(a, b, "{s:?}");
        assert!(a.is_some());
    }
    // The synthetic layout puts the addresses where the program does.
    let raw = decode::kernel_record(&p.decode.slots[1], Slot::Dequeue, 7, &f);
    let loc = u32::from_ne_bytes(raw.raw[8..12].try_into().unwrap());
    assert_eq!(loc & 0xffff, rawrec::SERVER_AT as u32);
    let ev = decode::decode(&RecordView::new(&raw.to_bytes()).unwrap(), &p.decode).unwrap();
    assert!(matches!(
        ev.kind,
        EventKind::Dequeue {
            qtime_ns: Some(250_000),
            ..
        }
    ));
}
