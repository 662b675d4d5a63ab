//! The BPF side of the live source on this machine's real kernel, without
//! nfsd: the programs are attached to `sched/sched_process_exec` (which has
//! a `__data_loc` field and two 4-byte fields) with a hand-made slot
//! config, and the test checks what reaches the ring, the decoder's view
//! of a record, and that every hit is accounted for (submitted, lost when
//! the ring is full, or dropped as BUSY).
//!
//! Needs root and tracefs. Where tracefs is not mounted, the test re-runs
//! itself in a private mount namespace (`unshare -m`) with tracefs mounted
//! there, so the host's mounts are never touched.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use nfsdtop_agent::model::{Endpoint, EventKind, SourceKind, Tracepoint, WaitSource};
use nfsdtop_agent::source::live::{
    bpf, drain, format::Format, host, BenchSource, BenchStage, Layout, LiveOptions, LiveSource,
    Tracepoints,
};
use nfsdtop_agent::source::Source;
use nfsdtop_common::{Record, RecordView, Slot, SlotConfig, OFF_NONE};

const TRACEFS: &str = "/sys/kernel/tracing";
const EVENT: &str = "events/sched/sched_process_exec/format";
const REEXEC: &str = "NFSDTOP_TEST_IN_PRIVATE_MOUNTNS";

/// True: run the test body here. False: skipped (reason printed) or run
/// in a child process (whose result was asserted).
fn ready(test: &str) -> bool {
    if !host::Caps::current().sufficient() {
        nfsdtop_agent::testing::skip("needs CAP_BPF+CAP_PERFMON or CAP_SYS_ADMIN");
        return false;
    }
    if Path::new(TRACEFS).join(EVENT).exists() {
        return true;
    }
    if std::env::var_os(REEXEC).is_some() {
        nfsdtop_agent::testing::skip("tracefs could not be mounted in a private mount namespace");
        return false;
    }
    if !Path::new(TRACEFS).is_dir() {
        nfsdtop_agent::testing::skip(&format!("{TRACEFS} does not exist on this host"));
        return false;
    }
    let exe = std::env::current_exe().expect("test binary path");
    let out = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount -t tracefs nodev {TRACEFS} && exec \"$0\" {test} --exact --nocapture --test-threads=1"
        ))
        .arg(&exe)
        .env(REEXEC, "1")
        .output();
    match out {
        Ok(o) => {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            println!("(ran in a private mount namespace)\n{text}");
            if text.contains("mount: ") && !o.status.success() && !text.contains("test result") {
                nfsdtop_agent::testing::skip("cannot mount tracefs here");
                return false;
            }
            assert!(
                o.status.success(),
                "the test failed in its mount namespace:\n{text}"
            );
        }
        Err(e) => nfsdtop_agent::testing::skip(&format!("cannot run unshare ({e})")),
    }
    false
}

/// A slot config reading sched_process_exec: `filename` as the client
/// address, `pid` as netns and value, `old_pid` as flags.
fn exec_config(drop_mask: u64) -> SlotConfig {
    let text = std::fs::read_to_string(Path::new(TRACEFS).join(EVENT)).unwrap();
    let f = Format::parse(&text).unwrap();
    let filename = f.field("filename").unwrap();
    let pid = f.field("pid").unwrap();
    let old_pid = f.field("old_pid").unwrap();
    assert!(filename.data_loc);
    SlotConfig {
        enabled: 1,
        server_off: OFF_NONE,
        client_off: filename.offset as u16,
        flags_off: old_pid.offset as u16,
        flags_size: old_pid.size as u16,
        netns_off: pid.offset as u16,
        netns_size: pid.size as u16,
        value_off: pid.offset as u16,
        value_size: pid.size as u16,
        class_off: OFF_NONE,
        class_size: 0,
        drop_mask,
        need_mask: 0,
    }
}

fn spawn_true(n: usize) -> BTreeSet<u32> {
    (0..n)
        .map(|_| {
            let mut c = Command::new("/bin/true").spawn().expect("spawn /bin/true");
            let pid = c.id();
            c.wait().unwrap();
            pid
        })
        .collect()
}

/// Counters read twice in a row with the same result: other processes on
/// the machine exec too, and one read is several syscalls.
fn stable<T: PartialEq>(mut read: impl FnMut() -> T) -> T {
    let mut last = read();
    for _ in 0..1000 {
        let now = read();
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("the counters never held still");
}

#[test]
fn records_reach_the_ring_and_busy_attempts_are_only_counted() {
    if !ready("records_reach_the_ring_and_busy_attempts_are_only_counted") {
        return;
    }
    let mut ebpf = bpf::open(1 << 20).expect("load the BPF object");
    let counters = bpf::Counters::take(&mut ebpf).unwrap();
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
    let mut ebpf = bpf::open(4096).expect("load the BPF object");
    let counters = bpf::Counters::take(&mut ebpf).unwrap();
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

/// The fixture 6.6+ layout with only the dequeue slot in use, pointed at
/// sched_process_exec.
fn exec_layout() -> Layout {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/formats/6.6+");
    let mut l = Layout::from_tracefs(&fixture).unwrap();
    l.slots = [SlotConfig::DISABLED; Slot::COUNT];
    l.events = Default::default();
    l.slots[Slot::Dequeue as usize] = exec_config(0);
    l.events[Slot::Dequeue as usize] = Some("sched_process_exec".into());
    l
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

/// The raw-tracepoint programs on this machine's kernel, without nfsd:
/// attached to the raw tracepoint `sched_process_exec` (argument 0: the
/// task, argument 1: its pid before the exec), with offsets into `struct
/// task_struct` from this kernel's BTF standing in for nfsd's: "flags" =
/// the task's pid, "netns" = its parent's (the forking thread's) pid
/// through `real_parent`, as the program goes through `xpt_net`, the
/// "address block" = from its `comm`.
struct ExecRun {
    /// Pid → (flags field, netns field, comm bytes) of each record of one
    /// of the spawned children.
    records: std::collections::BTreeMap<u32, (u64, u64, Vec<u8>)>,
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
    use nfsdtop_agent::source::live::btf::Btf;
    use nfsdtop_common::RawConfig;
    let dir = Path::new("/sys/kernel/btf");
    if !dir.join("vmlinux").exists() {
        nfsdtop_agent::testing::skip("no /sys/kernel/btf/vmlinux");
        return None;
    }
    let btf = Btf::load(dir, None).expect("this kernel's BTF");
    let off = |path: &[&str]| {
        btf.offset_of("task_struct", path)
            .expect("task_struct field")
    };
    let mut ebpf = bpf::open(1 << 20).expect("load the BPF object");
    let counters = bpf::Counters::take(&mut ebpf).unwrap();
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
    for (pid, (flags, netns, comm)) in &run.records {
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

/// The enqueue program's drop on its flags argument (svc_xprt_enqueue's
/// `flags` on 6.6+): here argument 1 is the exec'ing task's pid, and the
/// "BUSY" bit 0 drops every odd pid before the task is read at all; even
/// pids become records carrying the argument as their flags.
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
    for (pid, (flags, netns, comm)) in &run.records {
        assert_eq!(*flags, u64::from(*pid), "flags: argument 1");
        assert_eq!(*netns, run.parent, "the task was read for a kept record");
        assert_eq!(comm, b"true\0");
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
    use nfsdtop_common::{rawrec, RawConfig};
    use std::collections::BTreeMap;
    for forget in [false, true] {
        let mut ebpf = bpf::open(4 << 20).expect("load the BPF object");
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
        // Per pointer: (full, short) records, and whether the first was full.
        let mut seen: BTreeMap<u64, (u64, u64, bool)> = BTreeMap::new();
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            let Ok(chunk) = drain.recv_timeout(Duration::from_millis(50)) else {
                continue;
            };
            for item in chunk.chunks_exact(Record::SIZE) {
                let r = RecordView::new(item).unwrap();
                if r.slot() != Some(Slot::Dequeue) {
                    continue;
                }
                let ptr = r.field(rawrec::XPRT, 8).unwrap();
                let e = seen
                    .entry(ptr)
                    .or_insert((0, 0, r.raw_kind() == rawrec::FULL));
                match r.raw_kind() {
                    rawrec::FULL => e.0 += 1,
                    rawrec::SHORT => e.1 += 1,
                    k => panic!("raw_kind {k}"),
                }
            }
        }
        assert!(!seen.is_empty(), "records from sched_wakeup");
        for (ptr, (_, _, first_full)) in &seen {
            assert!(
                first_full,
                "{ptr:#x}: the first record of a pointer is full"
            );
        }
        let shorts: u64 = seen.values().map(|v| v.1).sum();
        let busiest = *seen.values().max_by_key(|v| v.0 + v.1).unwrap();
        if forget {
            // sched_waking does not precede every sched_wakeup of a task
            // the way svc_xprt_free ends a transport (a few wake-ups are
            // seen twice here), so a few short records remain: without the
            // forgetting program, all but the first of each task's are.
            let fulls: u64 = seen.values().map(|v| v.0).sum();
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

/// Execution times folded in the kernel, on this machine's kernel: the
/// raw svc_stats_latency program on the raw tracepoint `sched_wakeup`
/// (argument 0, the woken task, stands in for the transport, its
/// `start_time` for `rq_stime`, so each hit's "execute" is the task's
/// age) sends each task in full once and then adds its hits to the task's
/// entry of the memory-mapped totals. Every hit reaches the agent exactly
/// once: as a record (a task's first), through the sweeps of the mapped
/// totals, or in the record that settles an entry another task's full
/// record claims.
#[test]
fn folded_execution_times_reach_the_agent_once() {
    if !ready("folded_execution_times_reach_the_agent_once") {
        return;
    }
    use nfsdtop_agent::source::live::btf::Btf;
    use nfsdtop_agent::source::live::decode::KnownXprts;
    use nfsdtop_agent::source::live::raw;
    use nfsdtop_common::{rawrec, RawConfig};
    let dir = Path::new("/sys/kernel/btf");
    if !dir.join("vmlinux").exists() {
        nfsdtop_agent::testing::skip("no /sys/kernel/btf/vmlinux");
        return;
    }
    let btf = Btf::load(dir, None).expect("this kernel's BTF");
    let off = |path: &[&str]| {
        btf.offset_of("task_struct", path)
            .expect("task_struct field")
    };
    let mut ebpf = bpf::open(16 << 20).expect("load the BPF object");
    let totals = bpf::ExecTotalsMap::map(&ebpf).expect("map EXEC_TOTALS");
    let counters = bpf::Counters::take(&mut ebpf).unwrap();
    let drain = drain::Drain::start(&mut ebpf, Duration::from_millis(5), 16 << 20).unwrap();
    let s = Slot::StatsLatency;
    let mut raw = [RawConfig::default(); Slot::COUNT];
    raw[s as usize] = RawConfig {
        enabled: 1,
        short_records: 1,
        fold_exec: 1,
        value: rawrec::VALUE_EXECUTE,
        rq_stime: off(&["start_time"]),
        xpt_flags: off(&["pid"]),
        xpt_net: off(&["real_parent"]),
        net_ns_inum: off(&["pid"]),
        xpt_local: off(&["comm"]),
        // The "request's lengths": the task's pid and tgid, the same on
        // every hit of one task, so a sum of n hits is n times them.
        rq_arg_len: off(&["pid"]),
        rq_res_len: off(&["tgid"]),
        ..RawConfig::default()
    };
    bpf::write_raw_config(&mut ebpf, &raw).unwrap();
    bpf::attach_raw(&mut ebpf, s, "sched_wakeup").unwrap();

    // The raw layout of the slot, as the live source decodes it.
    let mut layout = exec_layout();
    layout.slots[s as usize] = raw::raw_record_layout(&SlotConfig::DISABLED, true);
    let mut known = KnownXprts::default();
    let mut events = Vec::new();
    // Records decoded.
    let mut records = 0u64;
    let mut take = |chunk: Vec<u8>, known: &mut KnownXprts, events: &mut Vec<_>| {
        for item in chunk.chunks_exact(Record::SIZE) {
            known.decode(&RecordView::new(item).unwrap(), &layout, events);
            records += 1;
        }
        drain.recycle(chunk);
        records
    };
    // Wake-ups until enough hits were folded (the ring reader alone is
    // woken every 5 ms), sweeping as the live source does.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut decoded = 0;
    while counters.read()[s as usize].folded < 2_000 && Instant::now() < deadline {
        if let Ok(chunk) = drain.recv_timeout(Duration::from_millis(50)) {
            decoded = take(chunk, &mut known, &mut events);
        }
        known.sweep(|i| totals.read(i), &layout, 0, &mut events);
    }
    // Stop the program, then take what is left in the ring: every record
    // the counters say was submitted.
    raw[s as usize].enabled = 0;
    bpf::write_raw_config(&mut ebpf, &raw).unwrap();
    let c = stable(|| counters.read())[s as usize];
    let deadline = Instant::now() + Duration::from_secs(10);
    while decoded < c.submitted && Instant::now() < deadline {
        if let Ok(chunk) = drain.recv_timeout(Duration::from_millis(50)) {
            decoded = take(chunk, &mut known, &mut events);
        }
    }
    assert_eq!(decoded, c.submitted, "every submitted record decoded");
    known.sweep(|i| totals.read(i), &layout, 0, &mut events);

    let requests: u64 = events
        .iter()
        .map(|e| match e.kind {
            EventKind::Executed { requests, .. } => requests,
            _ => 0,
        })
        .sum();
    let folded_events = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Executed { requests, .. } if requests != 1))
        .count();
    println!("{c:?}: {requests} requests in {} events", events.len());
    assert!(c.folded >= 2_000 && c.lost == 0, "{c:?}");
    assert!(folded_events > 0, "some totals came as sums");
    assert_eq!(
        known.unknown[s as usize], 0,
        "every settled claim was known"
    );
    // Lengths folded with the times: each report of one task's hits
    // holds n times its pid and tgid (pids are at most 2^22), except
    // where a fold raced a takeover (below).
    let odd = events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Executed {
                requests, bytes, ..
            } => Some((requests, bytes)),
            _ => None,
        })
        .filter(|&(n, b)| {
            !b.is_some_and(|b| {
                n > 0
                    && b.received % n == 0
                    && b.sent % n == 0
                    && (1..=1 << 22).contains(&(b.received / n))
                    && (1..=1 << 22).contains(&(b.sent / n))
            })
        })
        .count() as u64;
    assert!(
        odd * 1000 <= events.len() as u64,
        "{odd} of {} reports have lengths that are not n × (pid, tgid)",
        events.len()
    );
    // A hit folded into an entry while another task's full record takes
    // it over can be lost (the program reads the totals, then resets
    // them): allow one in a thousand.
    let sent = c.submitted + c.folded;
    assert!(
        requests <= sent && requests * 1000 >= sent * 999,
        "hits {sent} (records {} + folded {}), reported {requests}",
        c.submitted,
        c.folded
    );
}
