//! The raw-tracepoint programs on this machine's real kernel, without
//! nfsd: fields read at offsets from the kernel's BTF, drops on the flags
//! argument, short records once a pointer was sent in full, a forgotten
//! transport sent in full again. Folded execution times and per-pool
//! totals are live_folded.rs, the classic programs and the ring
//! live_ring.rs; what they share is in ring/.
//!
//! Needs root, tracefs and /sys/kernel/btf/vmlinux (see live_ring.rs for
//! the private mount namespace).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use nfsdtop_agent::source::live::{bpf, drain};
use nfsdtop_common::{rawrec, Record, RecordView, Slot};

mod ring;
use ring::{ready, spawn_true, stable, task_btf, task_offset};

/// The raw-tracepoint programs on this machine's kernel, without nfsd:
/// attached to the raw tracepoint `sched_process_exec` (argument 0: the
/// task, argument 1: its pid before the exec), with offsets into `struct
/// task_struct` from this kernel's BTF standing in for nfsd's: "flags" =
/// the task's pid, "netns" = its parent's (the forking thread's) pid
/// through `real_parent`, as the program goes through `xpt_net`, the
/// "address block" = from its `comm`.
struct ExecRun {
    /// Pid → (flags field, netns field, comm bytes, value word) of each
    /// record of one of the spawned children.
    records: std::collections::BTreeMap<u32, (u64, u64, Vec<u8>, u64)>,
    spawned: BTreeSet<u32>,
    parent: u64,
    counters: SlotCounters,
}

type SlotCounters = nfsdtop_agent::source::live::bpf::SlotCounts;

/// `keeps`: which children's execs should become records.
fn exec_run(
    s: Slot,
    flags_arg: bool,
    drop_mask: u64,
    children: usize,
    keeps: impl Fn(u32) -> bool,
) -> Option<ExecRun> {
    use nfsdtop_common::RawConfig;
    let task = task_btf()?;
    let off = |path: &[&str]| task_offset(&task, path);
    let mut ebpf =
        bpf::open(1 << 20, Default::default(), bpf::Hosting::None).expect("load the BPF object");
    let counters = bpf::Counters::map(&ebpf).unwrap();
    let drain = drain::Drain::start(&mut ebpf, Duration::from_millis(10), 1 << 20).unwrap();
    let mut raw = [RawConfig::default(); Slot::COUNT];
    raw[s as usize] = RawConfig {
        enabled: 1,
        xpt_flags: off(&["pid"]),
        xpt_net: off(&["real_parent"]),
        net_ns_inum: off(&["pid"]),
        xpt_local: off(&["comm"]),
        flags_arg: u32::from(flags_arg),
        drop_mask,
        // Any bit: the program reads the "flags" (a slot that drops
        // nothing on them skips the read).
        need_mask: u64::MAX,
        // The enqueue's depth word: "xpt_nr_rqsts" = the task's tgid.
        value: if s == Slot::Enqueue {
            rawrec::VALUE_INFLIGHT
        } else {
            rawrec::VALUE_NONE
        },
        xpt_nr_rqsts: off(&["tgid"]),
        ..RawConfig::default()
    };
    bpf::write_raw_config(&mut ebpf, &raw).unwrap();
    bpf::attach_raw(&mut ebpf, s, "sched_process_exec").unwrap();

    // The forking thread is the children's real_parent: its tid.
    let parent: u64 = std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name()?.to_str()?.parse().ok())
        .expect("/proc/thread-self names this thread");
    let spawned = spawn_true(children);
    // The children have exec'd (spawn_true waited for each): every exec
    // was a record or a counted drop by now. Records in the ring are in
    // the order of the execs, so once the last expected one is in, any
    // record that should have been dropped would be in too.
    let want: BTreeSet<u32> = spawned.iter().copied().filter(|&p| keeps(p)).collect();
    let mut records = std::collections::BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !want.iter().all(|p| records.contains_key(p)) && Instant::now() < deadline {
        let Ok(chunk) = drain.recv_timeout(Duration::from_millis(100)) else {
            continue;
        };
        for item in chunk.chunks_exact(Record::SIZE) {
            let r = RecordView::new(item).unwrap();
            assert!(r.is_raw(), "written by the raw program");
            assert_eq!(r.slot(), Some(s));
            let pid = r.field(16, 4).unwrap() as u32;
            if spawned.contains(&pid) {
                records.insert(
                    pid,
                    (
                        r.field(16, 8).unwrap(),
                        r.field(24, 4).unwrap(),
                        r.raw()[40..45].to_vec(),
                        r.field(rawrec::VALUE, 8).unwrap(),
                    ),
                );
            }
        }
    }
    Some(ExecRun {
        records,
        spawned,
        parent,
        counters: stable(|| counters.read())[s as usize],
    })
}

#[test]
fn raw_program_reads_fields_at_btf_offsets() {
    if !ready("raw_program_reads_fields_at_btf_offsets") {
        return;
    }
    let Some(run) = exec_run(Slot::Dequeue, false, 0, 10, |_| true) else {
        return;
    };
    assert_eq!(
        run.records.keys().copied().collect::<BTreeSet<_>>(),
        run.spawned,
        "every exec reached the ring"
    );
    for (pid, (flags, netns, comm, _)) in &run.records {
        // Eight bytes read at `pid`: the pid, then the tgid.
        assert_eq!(
            *flags as u32, *pid,
            "xpt_flags: the pid, read from the task"
        );
        assert_eq!(*netns, run.parent, "the parent's pid, two reads deep");
        assert_eq!(comm, b"true\0", "comm, from the address block");
    }
    let d = run.counters;
    assert_eq!(d.lost, 0, "{d:?}");
    assert!(d.submitted >= 10, "{d:?}");
}

#[test]
fn raw_enqueue_drops_on_its_flags_argument() {
    if !ready("raw_enqueue_drops_on_its_flags_argument") {
        return;
    }
    let Some(run) = exec_run(Slot::Enqueue, true, 1, 24, |p| p % 2 == 0) else {
        return;
    };
    let even: BTreeSet<u32> = run.spawned.iter().copied().filter(|p| p % 2 == 0).collect();
    let odd = run.spawned.len() - even.len();
    assert_eq!(
        run.records.keys().copied().collect::<BTreeSet<_>>(),
        even,
        "records for the even pids only ({} spawned)",
        run.spawned.len()
    );
    for (pid, (flags, netns, comm, depth)) in &run.records {
        assert_eq!(*flags, u64::from(*pid), "flags: argument 1");
        assert_eq!(*netns, run.parent, "the task was read for a kept record");
        assert_eq!(comm, b"true\0");
        // The depth at enqueue, read at its offset into the value word:
        // here the child's tgid, its pid.
        assert_eq!(*depth, u64::from(*pid), "xpt_nr_rqsts: the value word");
    }
    let d = run.counters;
    assert!(
        d.busy >= odd as u64,
        "odd pids dropped and counted: {d:?} ({odd} odd)"
    );
    assert!(d.submitted >= even.len() as u64, "{d:?}");
}

/// Short records, on this machine's kernel: the "dequeue" raw program on
/// the raw tracepoint `sched_wakeup` (argument 0, the woken task, stands
/// in for the transport: the ring reader's thread is woken every 5 ms)
/// sends a pointer in full once, then short records; with the
/// "svc_xprt_free" program on `sched_waking` (fired for the same task just
/// before) forgetting the pointer, every record is full again.
#[test]
fn raw_records_are_short_once_a_pointer_was_sent_in_full() {
    if !ready("raw_records_are_short_once_a_pointer_was_sent_in_full") {
        return;
    }
    use nfsdtop_common::RawConfig;
    for forget in [false, true] {
        let mut ebpf = bpf::open(4 << 20, Default::default(), bpf::Hosting::None)
            .expect("load the BPF object");
        let drain = drain::Drain::start(&mut ebpf, Duration::from_millis(5), 4 << 20).unwrap();
        let mut raw = [RawConfig::default(); Slot::COUNT];
        let cfg = RawConfig {
            enabled: 1,
            short_records: 1,
            ..RawConfig::default()
        };
        raw[Slot::Dequeue as usize] = cfg;
        raw[Slot::Close as usize] = cfg;
        bpf::write_raw_config(&mut ebpf, &raw).unwrap();
        // The forgetting program first, as nfsdtop attaches svc_xprt_free
        // first: a pointer known before it watched would never be forgotten.
        if forget {
            bpf::attach_raw(&mut ebpf, Slot::Close, "sched_waking").unwrap();
        }
        bpf::attach_raw(&mut ebpf, Slot::Dequeue, "sched_wakeup").unwrap();
        let mut seen = Seen::new();
        take(&drain, &mut seen, Duration::from_secs(2), &|_| false);
        assert!(!seen.is_empty(), "records from sched_wakeup");
        for (ptr, (full, short)) in &seen {
            assert!(
                full.first()
                    .is_some_and(|f| short.first().is_none_or(|s| f <= s)),
                "{ptr:#x}: the first record of a pointer is full"
            );
        }
        let counts = |v: &(Vec<u64>, Vec<u64>)| (v.0.len() as u64, v.1.len() as u64);
        let shorts: u64 = seen.values().map(|v| v.1.len() as u64).sum();
        let busiest = seen.values().map(counts).max_by_key(|v| v.0 + v.1).unwrap();
        if forget {
            // sched_waking does not precede every sched_wakeup of a task
            // the way svc_xprt_free ends a transport (a few wake-ups are
            // seen twice here), so a few short records remain: without the
            // forgetting program, all but the first of each task's are.
            let fulls: u64 = seen.values().map(|v| v.0.len() as u64).sum();
            assert!(
                shorts * 20 <= fulls,
                "forgotten before (nearly) every wake-up: {shorts} short, {fulls} full"
            );
            assert!(busiest.0 >= 100, "the reader's wake-ups: {busiest:?}");
        } else {
            assert!(
                busiest.0 + busiest.1 >= 100,
                "the reader's wake-ups: {busiest:?}"
            );
            assert_eq!(
                busiest.0, 1,
                "one full record, then short ones: {busiest:?}"
            );
        }
    }
}

/// Per pointer: the times of its full and of its short records.
type Seen = std::collections::BTreeMap<u64, (Vec<u64>, Vec<u64>)>;

/// Records of the "dequeue" slot into `seen`, until `until` holds or
/// `limit` has passed.
fn take(drain: &drain::Drain, seen: &mut Seen, limit: Duration, until: &dyn Fn(&Seen) -> bool) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline && !until(seen) {
        let Ok(chunk) = drain.recv_timeout(Duration::from_millis(50)) else {
            continue;
        };
        for item in chunk.chunks_exact(Record::SIZE) {
            let r = RecordView::new(item).unwrap();
            if r.slot() != Some(Slot::Dequeue) {
                continue;
            }
            let e = seen.entry(r.field(rawrec::XPRT, 8).unwrap()).or_default();
            match r.raw_kind() {
                rawrec::FULL => e.0.push(r.ts_ns()),
                rawrec::SHORT => e.1.push(r.ts_ns()),
                k => panic!("raw_kind {k}"),
            }
        }
    }
}

/// Forgetting known transports (what nfsdtop does when a kept raw
/// program missed a svc_xprt_free or svc_xprt_accept hit), on this
/// machine's kernel: the "dequeue" raw program on `sched_wakeup` sends
/// the ring reader's thread in full once, then short records; once its
/// pointer is forgotten in `KNOWN_XPRTS`, a full record of it comes again.
#[test]
fn a_forgotten_transport_is_sent_in_full_again() {
    if !ready("a_forgotten_transport_is_sent_in_full_again") {
        return;
    }
    use nfsdtop_agent::source::live::host::monotonic_ns;
    use nfsdtop_common::RawConfig;
    let mut ebpf =
        bpf::open(4 << 20, Default::default(), bpf::Hosting::None).expect("load the BPF object");
    let drain = drain::Drain::start(&mut ebpf, Duration::from_millis(5), 4 << 20).unwrap();
    let mut raw = [RawConfig::default(); Slot::COUNT];
    raw[Slot::Dequeue as usize] = RawConfig {
        enabled: 1,
        short_records: 1,
        ..RawConfig::default()
    };
    bpf::write_raw_config(&mut ebpf, &raw).unwrap();
    bpf::attach_raw(&mut ebpf, Slot::Dequeue, "sched_wakeup").unwrap();
    let mut seen = Seen::new();
    take(&drain, &mut seen, Duration::from_secs(3), &|seen| {
        seen.values().any(|(_, short)| short.len() >= 20)
    });
    let (&busiest, (full, short)) = seen
        .iter()
        .max_by_key(|(_, (_, short))| short.len())
        .expect("records from sched_wakeup");
    assert_eq!(full.len(), 1, "sent in full once before: {full:?}");
    assert!(short.len() >= 20, "then short: {} records", short.len());
    let before = monotonic_ns();
    let cleared = bpf::forget_known(&mut ebpf, seen.keys().copied()).unwrap();
    assert!(
        (1..=seen.len()).contains(&cleared),
        "{cleared} entries cleared of {} pointers",
        seen.len()
    );
    let again = |seen: &Seen| seen[&busiest].0.iter().any(|&ts| ts >= before);
    take(&drain, &mut seen, Duration::from_secs(3), &again);
    assert!(
        again(&seen),
        "{busiest:#x}: no full record since it was forgotten (short since: {})",
        seen[&busiest].1.iter().filter(|&&ts| ts >= before).count()
    );
}
