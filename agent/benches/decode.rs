//! The agent's cost per ring record, without a kernel: records laid out
//! as a 6.6+ kernel's classic tracepoints lay them out (the format files
//! in tests/fixtures), or as the default raw programs write them, for 16
//! clients with 4 connections each, in the order a loaded nfsd produces
//! them (enqueue, dequeue, svc_stats_latency per request), decoded and
//! aggregated as the live source's poll and the pipeline do. A third case
//! is 6.16+ on classic tracepoints without enqueue hooks (7.x with
//! `--classic-tracepoints`): per request a dequeue carrying `qtime` and a
//! svc_stats_latency naming its procedure, through the reorder buffer
//! that rebuilds the ready queue, at the benchmark guest's rate (12.7 k
//! dispatches a second of event time); the fourth is 7.x's default, where
//! the raw (typed) svc_stats_latency program folds the requests in the
//! kernel: a raw dequeue record per request, short once its transport was
//! sent in full, through the reorder buffer. Prints ns per record; under
//! `valgrind --tool=callgrind` (DECODE_PASSES=N, DECODE_ONLY=classic) it
//! gives instructions per record, which is what the agent costs in the
//! benchmark guest (its clock counts instructions). `-- --quick`: a short
//! run (the test suite checks it still works).

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use nfsdtop_agent::aggregate::Aggregator;
use nfsdtop_agent::model::{Endpoint, Event};
use nfsdtop_agent::source::live::btf::Arg;
use nfsdtop_agent::source::live::decode::{self, KnownXprts, TraceFields};
use nfsdtop_agent::source::live::intake::Intake;
use nfsdtop_agent::source::live::raw::{self, KernelOffsets};
use nfsdtop_agent::source::live::rebuild::WINDOW_NS;
use nfsdtop_agent::source::live::{Layout, Tracepoints};
use nfsdtop_common::{rawrec, Record, RecordView, Slot};

/// How a case's chunk is made and decoded.
#[derive(Clone, Copy, PartialEq)]
enum Case {
    /// 6.6+ classic tracepoints: enqueue, dequeue, svc_stats_latency.
    Classic,
    /// 6.6+ raw programs: the same, the first record of a transport in
    /// full, then short ones.
    Raw,
    /// 6.16+ classic, no enqueue hook: dequeue (with qtime), and
    /// svc_stats_latency with its procedure, through the reorder buffer
    /// (`--classic-tracepoints` on 7.x).
    DequeuesOnly,
    /// 6.16+ on raw (typed) programs, each request folded in the kernel
    /// by the svc_stats_latency program (7.x's default): a raw dequeue
    /// record per request, through the reorder buffer.
    DequeuesFolded,
}

impl Case {
    fn slots(self) -> &'static [Slot] {
        match self {
            Case::DequeuesOnly => &[Slot::Dequeue, Slot::StatsLatency],
            Case::DequeuesFolded => &[Slot::Dequeue],
            _ => &[Slot::Enqueue, Slot::Dequeue, Slot::StatsLatency],
        }
    }

    /// Event time between records: 1 µs, or the benchmark guest's rate
    /// where the reorder buffer holds a window of them.
    fn step_ns(self) -> u64 {
        match self {
            Case::DequeuesOnly => 39_000,
            Case::DequeuesFolded => 78_000,
            _ => 1_000,
        }
    }

    /// Through the reorder buffer (6.16+ without enqueue hooks).
    fn rebuilds(self) -> bool {
        matches!(self, Case::DequeuesOnly | Case::DequeuesFolded)
    }

    /// Written by raw programs: a transport's first record in full, then
    /// short ones.
    fn raw_records(self) -> bool {
        matches!(self, Case::Raw | Case::DequeuesFolded)
    }
}

/// The procedure string a svc_stats_latency record names, behind its
/// `__data_loc` word, at the end of the copied bytes.
fn put_procedure(r: &mut Record, layout: &Layout) {
    let name = b"READ\0";
    let at = nfsdtop_common::RAW_BYTES - name.len();
    let loc = ((name.len() as u32) << 16) | at as u32;
    let off = layout.procedure_loc as usize;
    r.raw[off..off + 4].copy_from_slice(&loc.to_ne_bytes());
    r.raw[at..].copy_from_slice(name);
}

/// 4095 ring records (one chunk) as a loaded nfsd produces them: per
/// request the case's records, over 64 transports in turn.
fn chunk(layout: &Layout, case: Case) -> Vec<u8> {
    let raw = case.raw_records();
    let server = Endpoint::V4 {
        ip: [10, 0, 0, 1],
        port: 2049,
    };
    let mut chunk = Vec::new();
    let mut ts = 1_000_000u64;
    let mut sent = std::collections::BTreeSet::new();
    let mut n = 0;
    'fill: loop {
        for peer in 0..16u8 {
            for conn in 0..4u16 {
                let f = TraceFields {
                    flags: 1 << 2,
                    netns: 4026531840,
                    value: 40,
                    class: 0,
                    client: Endpoint::V4 {
                        ip: [10, 1, 0, peer],
                        port: 700 + conn,
                    },
                    server,
                };
                let ptr = 0xffff_8880_0000_0000u64 + (u64::from(peer) << 12) + u64::from(conn);
                for &s in case.slots() {
                    ts += case.step_ns();
                    let mut cfg = layout.slots[s as usize];
                    let named = case == Case::DequeuesOnly && s == Slot::StatsLatency;
                    if named {
                        // The encoder lays the addresses out after the
                        // fixed fields it knows: the procedure's word is one.
                        (cfg.class_off, cfg.class_size) = (layout.procedure_loc, 4);
                    }
                    let mut r = decode::kernel_record(&cfg, s, ts, &f);
                    if named {
                        put_procedure(&mut r, layout);
                    }
                    if raw {
                        let at = rawrec::XPRT as usize;
                        if sent.insert(ptr) {
                            r.raw_kind = rawrec::FULL;
                        } else {
                            r = Record::new(ts, s);
                            r.raw_kind = rawrec::SHORT;
                            let v = rawrec::VALUE as usize;
                            r.raw[v..v + 8].copy_from_slice(&f.value.to_ne_bytes());
                            let fl = rawrec::FLAGS as usize;
                            r.raw[fl..fl + 8].copy_from_slice(&f.flags.to_ne_bytes());
                        }
                        r.raw[at..at + 8].copy_from_slice(&ptr.to_ne_bytes());
                    }
                    chunk.extend_from_slice(&r.to_bytes());
                    n += 1;
                    if n == 4095 / case.slots().len() * case.slots().len() {
                        break 'fill;
                    }
                }
            }
        }
    }
    chunk
}

fn ptr(name: &str) -> Arg {
    Arg::Ptr(name.into())
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/formats/6.6+");
    let classic = Layout::from_tracefs(&dir).expect("the 6.6+ fixture");
    // The raw programs' layout, at made-up offsets (they only matter to
    // the BPF side).
    let k = KernelOffsets {
        rq_xprt: 8,
        rq_stime: 16,
        xpt_flags: 24,
        xpt_net: 32,
        net_ns_inum: 40,
        xpt_local: 48,
        xpt_qtime: None,
        xpt_nr_rqsts: Some(88),
        rq_lens: Some((56, 64)),
        rq_procs: Some([72, 76, 80]),
        thread: None,
        // The 6.6+ prototypes.
        args: [
            vec![ptr("svc_xprt"), Arg::Int(8)],
            vec![ptr("svc_rqst")],
            vec![ptr("svc_rqst")],
            vec![ptr("svc_xprt"), ptr("")],
            vec![ptr("svc_xprt")],
        ]
        .map(Some),
    };
    let raw = raw::plan(&classic, &k, Tracepoints::Raw).decode;
    let passes = std::env::var("DECODE_PASSES")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(if quick { 20 } else { 2_000 });
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/formats");
    let dequeues_only = Layout::from_tracefs(&fixtures.join("6.16+")).expect("the 6.16+ fixture");
    assert!(dequeues_only.qtime, "the 6.16+ fixture's dequeue has qtime");
    let with_qtime = KernelOffsets {
        xpt_qtime: Some(88),
        ..k
    };
    let mut raw_dequeues = raw::plan(&dequeues_only, &with_qtime, Tracepoints::Raw).decode;
    raw_dequeues.unhook(Slot::Enqueue);
    println!("| records | ns per record (decode + aggregate) |\n|---|---|");
    for (name, layout, case) in [
        ("classic", &classic, Case::Classic),
        ("raw (default)", &raw, Case::Raw),
        ("6.16+ dequeues only", &dequeues_only, Case::DequeuesOnly),
        ("6.16+ requests folded", &raw_dequeues, Case::DequeuesFolded),
    ] {
        if std::env::var("DECODE_ONLY").is_ok_and(|o| o != name) {
            continue;
        }
        let chunk = chunk(layout, case);
        let records_per_chunk = (chunk.len() / Record::SIZE) as u64;
        // Each pass's events come after the last pass's.
        let span_ns = records_per_chunk * case.step_ns();
        let mut agg = Aggregator::default();
        let mut known = KnownXprts::default();
        let mut intake = Intake::new(case.rebuilds(), 0);
        let mut buf: Vec<Event> = Vec::with_capacity(64 * 1024);
        let mut released: Vec<Event> = Vec::with_capacity(64 * 1024);
        let t0 = Instant::now();
        for pass in 0..passes {
            buf.clear();
            // As LiveSource::poll does.
            for item in chunk.chunks_exact(Record::SIZE) {
                let Some(r) = RecordView::new(item) else {
                    continue;
                };
                if r.is_raw() {
                    known.decode(&r, layout, &mut buf);
                } else if let Some(mut ev) = decode::decode(&r, layout) {
                    decode::name_procedure(&r, layout, &mut ev);
                    buf.push(ev);
                }
            }
            // As LiveSource::poll: the records read (the ring found empty
            // a moment after the pass's last one), then held where the
            // case rebuilds the queue.
            let shift = pass * span_ns;
            let now = shift + span_ns + WINDOW_NS / 100;
            if case.rebuilds() {
                released.clear();
                for ev in &mut buf {
                    ev.ts_ns += shift;
                }
                intake.read(&buf, now, now);
                intake.release(&mut buf, u64::MAX, &mut released);
                agg.ingest_all(black_box(&released));
            } else {
                intake.read(&buf, now, now);
                agg.ingest_all(black_box(&buf));
            }
        }
        let el = t0.elapsed();
        released.clear();
        intake.read(&[], u64::MAX, u64::MAX);
        intake.release(&mut buf, u64::MAX, &mut released);
        agg.ingest_all(&released);
        let records = records_per_chunk * passes;
        let per_dispatch = case.slots().len() as u64;
        assert_eq!(
            agg.dispatches(),
            records / per_dispatch,
            "every dequeue record counted"
        );
        assert_eq!(
            intake.rebuild().map_or(0, |r| r.late),
            0,
            "no event released late"
        );
        assert_eq!(agg.transports(), 64, "each record found its transport");
        println!(
            "| {name}: {records} | {:.1} |",
            el.as_nanos() as f64 / records as f64
        );
    }
}
