//! The agent's cost per ring record, without a kernel: records laid out
//! as a 6.6+ kernel's classic tracepoints lay them out (the format files
//! in tests/fixtures), or as the default raw programs write them, for 16
//! clients with 4 connections each, in the order a loaded nfsd produces
//! them (enqueue, dequeue, svc_stats_latency per request), decoded and
//! aggregated as the live source's poll and the pipeline do. Prints ns per
//! record; under `valgrind --tool=callgrind` (DECODE_PASSES=N,
//! DECODE_ONLY=classic) it gives instructions per record, which is what
//! the agent costs in the benchmark guest (its clock counts
//! instructions). `-- --quick`: a short run (the test suite checks it
//! still works).

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use nfsdtop_agent::aggregate::Aggregator;
use nfsdtop_agent::model::{Endpoint, Event};
use nfsdtop_agent::source::live::btf::Arg;
use nfsdtop_agent::source::live::decode::{self, KnownXprts, TraceFields};
use nfsdtop_agent::source::live::raw::{self, KernelOffsets};
use nfsdtop_agent::source::live::{Layout, Tracepoints};
use nfsdtop_common::{rawrec, Record, RecordView, Slot};

/// 4095 ring records (one chunk) as a loaded nfsd produces them:
/// per request an enqueue, a dequeue and a svc_stats_latency, over 64
/// transports in turn. `raw`: as the default raw programs write them (the
/// first record of each transport in full, then short ones).
fn chunk(layout: &Layout, raw: bool) -> Vec<u8> {
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
                for s in [Slot::Enqueue, Slot::Dequeue, Slot::StatsLatency] {
                    ts += 1_000;
                    let cfg = &layout.slots[s as usize];
                    let mut r = decode::kernel_record(cfg, s, ts, &f);
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
                    if n == 4095 {
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
        rq_lens: Some((56, 64)),
        rq_procs: Some([72, 76, 80]),
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
    println!("| records | ns per record (decode + aggregate) |\n|---|---|");
    for (name, layout, is_raw) in [("classic", &classic, false), ("raw (default)", &raw, true)] {
        if std::env::var("DECODE_ONLY").is_ok_and(|o| o != name) {
            continue;
        }
        let chunk = chunk(layout, is_raw);
        let mut agg = Aggregator::default();
        let mut known = KnownXprts::default();
        let mut buf: Vec<Event> = Vec::with_capacity(64 * 1024);
        let t0 = Instant::now();
        for _ in 0..passes {
            buf.clear();
            // As LiveSource::poll does.
            for item in chunk.chunks_exact(Record::SIZE) {
                let Some(r) = RecordView::new(item) else {
                    continue;
                };
                if r.is_raw() {
                    known.decode(&r, layout, &mut buf);
                } else if let Some(ev) = decode::decode(&r, layout) {
                    buf.push(ev);
                }
            }
            agg.ingest_all(black_box(&buf));
        }
        let el = t0.elapsed();
        let records = chunk.len() as u64 / Record::SIZE as u64 * passes;
        assert_eq!(
            agg.dispatches(),
            records / 3,
            "every dequeue record counted"
        );
        println!(
            "| {name}: {records} | {:.1} |",
            el.as_nanos() as f64 / records as f64
        );
    }
}
