//! The BPF side of the live source on this machine's real kernel, without
//! nfsd: the classic programs are attached to `sched/sched_process_exec`
//! (which has a `__data_loc` field and two 4-byte fields) with a hand-made
//! slot config, and the tests check what reaches the ring, the decoder's
//! view of a record, and that every hit is accounted for (submitted, lost
//! when the ring is full, or dropped as BUSY). The raw programs' tests are
//! in live_raw.rs; what both share in ring/.
//!
//! Needs root and tracefs. Where tracefs is not mounted, the test re-runs
//! itself in a private mount namespace (`unshare -m`) with tracefs mounted
//! there, so the host's mounts are never touched.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use nfsdtop_agent::model::{Endpoint, EventKind, SourceKind, Tracepoint, WaitSource};
use nfsdtop_agent::source::live::{
    bpf, drain, host, BenchSource, BenchStage, LiveOptions, LiveSource, Tracepoints,
};
use nfsdtop_agent::source::Source;
use nfsdtop_common::{Record, RecordView, Slot, SlotConfig};

mod ring;
use ring::{exec_config, exec_layout, ready, spawn_true, stable, TRACEFS};

#[test]
fn records_reach_the_ring_and_busy_attempts_are_only_counted() {
    if !ready("records_reach_the_ring_and_busy_attempts_are_only_counted") {
        return;
    }
    let mut ebpf =
        bpf::open(1 << 20, Default::default(), bpf::Hosting::None).expect("load the BPF object");
    let counters = bpf::Counters::map(&ebpf).unwrap();
    let drain = drain::Drain::start(&mut ebpf, Duration::from_millis(10), 1 << 20).unwrap();
    let mut slots = [SlotConfig::DISABLED; Slot::COUNT];
    // Enqueue: every record "BUSY" (old_pid is never 0): counted, dropped.
    slots[Slot::Enqueue as usize] = exec_config(u64::MAX);
    slots[Slot::Dequeue as usize] = exec_config(0);
    bpf::write_config(&mut ebpf, &slots).unwrap();
    for s in [Slot::Enqueue, Slot::Dequeue, Slot::StatsLatency] {
        bpf::attach_slot(&mut ebpf, s, "sched", "sched_process_exec").unwrap();
    }

    let t0 = host::monotonic_ns();
    let pids = spawn_true(20);
    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.len() < pids.len() && Instant::now() < deadline {
        let Ok(chunk) = drain.recv_timeout(Duration::from_millis(100)) else {
            continue;
        };
        for raw in chunk.chunks_exact(Record::SIZE) {
            let r = RecordView::new(raw).unwrap();
            assert_eq!(
                r.slot(),
                Some(Slot::Dequeue),
                "only the dequeue slot streams"
            );
            let cfg = exec_config(0);
            let pid = r.field(cfg.netns_off, cfg.netns_size).unwrap() as u32;
            if !pids.contains(&pid) {
                continue; // another process exec'd meanwhile
            }
            assert_eq!(r.field(cfg.value_off, cfg.value_size), Some(pid as u64));
            assert_eq!(&r.raw()[..8], &[0; 8], "common fields are not copied");
            let filename = r.data_loc(cfg.client_off).unwrap();
            assert_eq!(filename, b"/bin/true\0", "the whole __data_loc string");
            // The same clock as host::monotonic_ns().
            assert!(
                r.ts_ns() >= t0 && r.ts_ns() <= host::monotonic_ns(),
                "{} vs {t0}",
                r.ts_ns()
            );
            seen.insert(pid);
        }
    }
    assert_eq!(seen, pids, "every exec reached the ring");

    let c = stable(|| counters.read());
    let enq = c[Slot::Enqueue as usize];
    let deq = c[Slot::Dequeue as usize];
    assert!(
        enq.busy >= 20 && enq.submitted == 0 && enq.lost == 0,
        "{enq:?}"
    );
    assert!(deq.seen >= 20 && deq.lost == 0 && deq.busy == 0, "{deq:?}");
    assert!(deq.submitted >= 20, "{deq:?}");
    assert_eq!(enq.seen, enq.busy, "{enq:?}");
    let stats = c[Slot::StatsLatency as usize];
    assert_eq!(
        stats.submitted, 0,
        "a disabled slot streams nothing: {stats:?}"
    );
}

#[test]
fn a_full_ring_counts_every_lost_record() {
    if !ready("a_full_ring_counts_every_lost_record") {
        return;
    }
    // One page of ring (about 26 records) and nobody draining it.
    let mut ebpf =
        bpf::open(4096, Default::default(), bpf::Hosting::None).expect("load the BPF object");
    let counters = bpf::Counters::map(&ebpf).unwrap();
    let mut slots = [SlotConfig::DISABLED; Slot::COUNT];
    slots[Slot::Dequeue as usize] = exec_config(0);
    bpf::write_config(&mut ebpf, &slots).unwrap();
    bpf::attach_slot(&mut ebpf, Slot::Dequeue, "sched", "sched_process_exec").unwrap();
    spawn_true(100);
    let d = stable(|| counters.read())[Slot::Dequeue as usize];
    assert!(d.lost > 0, "a 4 KiB ring cannot hold 100 records: {d:?}");
    assert!(d.submitted > 0 && d.submitted < 100, "{d:?}");
    assert!(
        d.submitted + d.lost >= 100 && d.busy == 0,
        "every exec is a record or counted lost: {d:?}"
    );
}

#[test]
fn live_source_polls_decoded_events() {
    if !ready("live_source_polls_decoded_events") {
        return;
    }
    let opts = LiveOptions {
        kernel_stats: true,
        ..LiveOptions::default()
    };
    let mut src = LiveSource::start(&opts, TRACEFS.into(), exec_layout(), "sched").unwrap();
    // Off the sunrpc category nothing goes raw, and nothing is handed over.
    let r = src.report();
    assert_eq!((r.asked, r.raw.as_slice()), (Tracepoints::Raw, &[][..]));
    assert!(
        r.kept_classic.is_empty() && r.hand_overs.is_empty(),
        "{r:?}"
    );
    assert!(!r.folds_exec, "{r:?}");
    let info = src.info();
    assert_eq!(info.kind, SourceKind::Live);
    assert_eq!(info.generation, "6.6+");
    assert_eq!(info.wait_source, WaitSource::EnqueueDequeue);
    assert!(!src.is_virtual());
    let t0 = src.now_ns();

    let pids = spawn_true(20);
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.len() < pids.len() && Instant::now() < deadline {
        out.clear();
        src.poll(0, &mut out).unwrap();
        for e in &out {
            if let EventKind::Dequeue { qtime_ns, class } = e.kind {
                assert_eq!((qtime_ns, class), (None, None));
                if pids.contains(&e.xprt.netns) {
                    assert!(e.ts_ns >= t0);
                    // "/bin/true" is no sockaddr: no address, no panic.
                    assert_eq!(e.xprt.client, Endpoint::None);
                    seen.insert(e.xprt.netns);
                }
            }
        }
        if out.is_empty() {
            // Returns when the ring reader hands records over.
            src.wait(Duration::from_millis(100));
        }
    }
    assert_eq!(seen, pids);

    let stats = src.bpf_stats();
    assert_eq!(stats.len(), 1, "{stats:?}");
    let s = &stats[0];
    assert_eq!(s.program, "sched_process_exec");
    assert!(
        s.hits >= 20 && s.records >= 20 && s.lost == 0 && s.busy_dropped == 0,
        "{s:?}"
    );
    // Kernel run statistics are on while the source lives (root here,
    // and asked for: they are off by default).
    assert!(s.runs >= s.hits && s.run_time_ns > 0, "{s:?}");
}

#[test]
fn live_source_reports_ring_overflow_as_lost_events() {
    if !ready("live_source_reports_ring_overflow_as_lost_events") {
        return;
    }
    // A one-page ring that is drained once an hour: it overflows.
    let opts = LiveOptions {
        ring_bytes: 4096,
        drain_period: Duration::from_secs(3600),
        ..LiveOptions::default()
    };
    let mut src = LiveSource::start(&opts, TRACEFS.into(), exec_layout(), "sched").unwrap();
    spawn_true(100);
    let mut out = Vec::new();
    src.poll(0, &mut out).unwrap();
    let lost: u64 = out
        .iter()
        .map(|e| match e.kind {
            EventKind::Lost {
                tracepoint: Tracepoint::Dequeue,
                count,
            } => count,
            EventKind::Lost { .. } => panic!("loss on a slot that is not in use: {e:?}"),
            _ => 0,
        })
        .sum();
    let c = stable(|| src.counts())[Slot::Dequeue as usize];
    assert!(lost > 0, "{c:?}");
    // Others may exec after the poll: the counter only grows.
    assert!(lost <= c.lost, "{lost} {c:?}");
    assert!(c.submitted + c.lost >= 100 && c.busy == 0, "{c:?}");
    let mut more = Vec::new();
    src.poll(0, &mut more).unwrap();
    let later: u64 = more
        .iter()
        .map(|e| match e.kind {
            EventKind::Lost { count, .. } => count,
            _ => 0,
        })
        .sum();
    // Lost events are deltas: together they never count a loss twice.
    assert!(lost + later <= stable(|| src.counts())[Slot::Dequeue as usize].lost);
    // Dropping the source stops the drain thread at once.
    let t = Instant::now();
    drop(src);
    assert!(t.elapsed() < Duration::from_secs(5));
}

/// The benchmark's partial pipelines: `Hooked` attaches the program but
/// it records nothing (every hit counted as disabled); `Discard` streams
/// and drains the records but decodes none.
#[test]
fn bench_stages_stop_where_they_say() {
    if !ready("bench_stages_stop_where_they_say") {
        return;
    }
    let hooked = LiveOptions {
        stage: BenchStage::Hooked,
        ..LiveOptions::default()
    };
    let src = BenchSource::start(&hooked, TRACEFS.into(), exec_layout(), "sched").unwrap();
    assert_eq!(src.stage(), BenchStage::Hooked);
    assert!(src
        .info()
        .detail
        .ends_with(" [benchmark: programs attached but idle]"));
    // Other tests exec too, also between the attach and the idling.
    let before = stable(|| src.counts())[Slot::Dequeue as usize];
    spawn_true(20);
    let c = stable(|| src.counts())[Slot::Dequeue as usize];
    assert!(
        c.seen >= before.seen + 20 && c.submitted == before.submitted && c.lost == 0,
        "{before:?} {c:?}"
    );
    drop(src);

    let discard = LiveOptions {
        stage: BenchStage::Discard,
        ..LiveOptions::default()
    };
    let mut src = BenchSource::start(&discard, TRACEFS.into(), exec_layout(), "sched").unwrap();
    spawn_true(20);
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while src.records_discarded() < 20 && Instant::now() < deadline {
        // Returns when the ring reader hands records over.
        src.wait(Duration::from_millis(100));
        src.poll(0, &mut out).unwrap();
    }
    let c = stable(|| src.counts())[Slot::Dequeue as usize];
    assert!(c.submitted >= 20, "{c:?}");
    assert!(src.records_discarded() >= 20, "{}", src.records_discarded());
    assert!(
        !out.iter()
            .any(|e| matches!(e.kind, EventKind::Dequeue { .. })),
        "discarded records were decoded: {out:?}"
    );
}

/// `NoWorkload` runs the whole pipeline but reads no procedure: a classic
/// svc_stats_latency record's procedure string (here sched_process_exec's
/// `filename`) becomes a procedure under the default and nothing under
/// this stage, while its execution still counts.
#[test]
fn the_no_workload_stage_decodes_no_procedure() {
    if !ready("the_no_workload_stage_decodes_no_procedure") {
        return;
    }
    let mut layout = exec_layout();
    let text = std::fs::read_to_string(std::path::Path::new(TRACEFS).join(ring::EVENT)).unwrap();
    let filename = nfsdtop_agent::source::live::format::Format::parse(&text)
        .unwrap()
        .field("filename")
        .unwrap()
        .offset as u16;
    layout.slots[Slot::StatsLatency as usize] = exec_config(0);
    layout.events[Slot::StatsLatency as usize] = Some("sched_process_exec".into());
    layout.procedure_loc = filename;
    let mut seen = Vec::new();
    for stage in [BenchStage::Full, BenchStage::NoWorkload] {
        let opts = LiveOptions {
            stage,
            ..LiveOptions::default()
        };
        let mut src = BenchSource::start(&opts, TRACEFS.into(), layout.clone(), "sched").unwrap();
        let pids = spawn_true(20);
        let mut out = Vec::new();
        let executed = |out: &[nfsdtop_agent::model::Event]| {
            out.iter()
                .filter(|e| matches!(e.kind, EventKind::Executed { .. }))
                .filter(|e| e.xprt.netns != 0 && pids.contains(&e.xprt.netns))
                .count()
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while executed(&out) < pids.len() && Instant::now() < deadline {
            src.wait(Duration::from_millis(100));
            src.poll(0, &mut out).unwrap();
        }
        assert_eq!(
            executed(&out),
            pids.len(),
            "{stage:?}: every exec's record decoded"
        );
        let procedures = out
            .iter()
            .filter(|e| {
                matches!(
                    e.kind,
                    EventKind::Procedure { .. }
                        | EventKind::Executed {
                            procedure: Some(_),
                            ..
                        }
                )
            })
            .filter(|e| pids.contains(&e.xprt.netns))
            .count();
        seen.push((stage, procedures));
    }
    assert_eq!(
        seen,
        [(BenchStage::Full, 20), (BenchStage::NoWorkload, 0)],
        "procedures decoded under each stage"
    );
}
