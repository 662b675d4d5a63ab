//! The raw-tracepoint programs on this machine's real kernel, without
//! nfsd: fields read at offsets from the kernel's BTF, drops on the flags
//! argument, short records once a pointer was sent in full, and execution
//! times and request lengths folded in the kernel reaching the agent once.
//! The classic programs and the ring are live_ring.rs; what both share is
//! in ring/.
//!
//! Needs root, tracefs and /sys/kernel/btf/vmlinux (see live_ring.rs for
//! the private mount namespace).

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use nfsdtop_agent::model::EventKind;
use nfsdtop_agent::source::live::btf::Btf;
use nfsdtop_agent::source::live::{bpf, drain};
use nfsdtop_common::{Record, RecordView, Slot, SlotConfig};

mod ring;
use ring::{exec_layout, ready, spawn_true, stable};

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

/// This kernel's BTF, whose `struct task_struct` stands in for nfsd's
/// structs here; None (a skip, which fails where BPF is required) without
/// /sys/kernel/btf/vmlinux.
fn task_btf() -> Option<Btf> {
    let dir = Path::new("/sys/kernel/btf");
    if !dir.join("vmlinux").exists() {
        nfsdtop_agent::testing::skip("no /sys/kernel/btf/vmlinux");
        return None;
    }
    Some(Btf::load(dir, None).expect("this kernel's BTF"))
}

/// The offset of `path` inside `struct task_struct`.
fn task_offset(btf: &Btf, path: &[&str]) -> u32 {
    btf.offset_of("task_struct", path)
        .expect("task_struct field")
}

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
    use nfsdtop_common::rawrec;
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
    use nfsdtop_agent::source::live::decode::KnownXprts;
    use nfsdtop_agent::source::live::raw;
    use nfsdtop_common::{rawrec, RawConfig};
    let Some(task) = task_btf() else {
        return;
    };
    let off = |path: &[&str]| task_offset(&task, path);
    let mut ebpf =
        bpf::open(16 << 20, Default::default(), bpf::Hosting::None).expect("load the BPF object");
    let totals = bpf::ExecTotalsMap::map(&ebpf).expect("map EXEC_TOTALS");
    let counters = bpf::Counters::map(&ebpf).unwrap();
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
        // The "procedure": program `prio`, version `static_prio` and
        // procedure `policy`; (120, 120) is the one program the table
        // below holds, so a normal task's wake-up is procedure 0 (named
        // NULL), a real-time task's is not in the table: `(other)`.
        rq_prog: off(&["prio"]),
        rq_vers: off(&["static_prio"]),
        rq_proc: off(&["policy"]),
        fold_procs: 1,
        ..RawConfig::default()
    };
    let mut programs = [nfsdtop_common::procs::ProcProgram::default(); 8];
    programs[0] = nfsdtop_common::procs::ProcProgram {
        prog: 120,
        vers: 120,
        base: 0,
        count: 64,
    };
    bpf::write_proc_programs(&mut ebpf, &programs).unwrap();
    bpf::write_raw_config(&mut ebpf, &raw).unwrap();
    bpf::attach_raw(&mut ebpf, s, "sched_wakeup").unwrap();
    let exec = |i| totals.claim(i);

    // The raw layout of the slot, as the live source decodes it.
    let mut layout = exec_layout();
    layout.slots[s as usize] = raw::raw_record_layout(&SlotConfig::DISABLED, true);
    let mut known = KnownXprts::default();
    known
        .procs
        .set_memory(nfsdtop_agent::source::live::procs::map_rows(&ebpf).expect("map PROC_ROWS"));
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
    // Wake-ups of our own, known whatever else the host runs (and
    // enough to fold 2,000 hits on a host that wakes little else): a
    // thread at normal priority (its wake-ups are NULL) and one at nice 5
    // (prio 125: `(other)`), each woken by its timer OWN_WAKEUPS times.
    let sleeper = |nice: i32| {
        std::thread::spawn(move || {
            if nice != 0 {
                let me = rustix::thread::gettid();
                rustix::process::setpriority_process(Some(me), nice).expect("renice a thread");
            }
            for _ in 0..OWN_WAKEUPS {
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let own = [sleeper(0), sleeper(5)];
    // Wake-ups until enough hits were folded (the ring reader alone is
    // woken every 5 ms) and ours are done, sweeping as the live source
    // does. The deadline only bounds a broken run.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut decoded = 0;
    while (counters.read()[s as usize].folded < 2_000 || own.iter().any(|t| !t.is_finished()))
        && Instant::now() < deadline
    {
        if let Ok(chunk) = drain.recv_timeout(Duration::from_millis(50)) {
            decoded = take(chunk, &mut known, &mut events);
        }
        known.procs.claim(exec, 0, &mut events);
        known.sweep(|i| totals.read(i), &layout, 0, &mut events);
        known.procs.sweep(exec, 0, &mut events);
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
    known.procs.sweep(exec, 0, &mut events);

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
    // Every request's procedure, once: from its record, or from its
    // transport's row where the agent had claimed it (folded together
    // with the time, so the same races apply).
    let mut by_name = std::collections::BTreeMap::<String, (u64, u64)>::new();
    for e in &events {
        if let EventKind::Procedure { name, requests, .. }
        | EventKind::Executed {
            procedure: Some(name),
            requests,
            ..
        } = e.kind
        {
            let n = by_name.entry(name.to_string()).or_default();
            n.0 += requests;
            n.1 += u64::from(requests > 1);
        }
    }
    let procedures: u64 = by_name.values().map(|n| n.0).sum();
    println!(
        "procedures: {by_name:?}; {} rows claimed",
        known.procs.claimed()
    );
    assert!(
        procedures <= sent && procedures * 1000 >= sent * 999,
        "hits {sent}, procedures {procedures}"
    );
    // Ours at least, less what the races above may have lost.
    assert!(own.iter().all(|t| t.is_finished()), "our wake-ups ended");
    let lost = sent - procedures;
    let null = by_name.get("NULL").copied().unwrap_or_default();
    let other = by_name.get("(other)").copied().unwrap_or_default();
    assert!(
        null.0 + lost >= OWN_WAKEUPS && other.0 + lost >= OWN_WAKEUPS,
        "normal tasks' wake-ups are NULL, nice 5's (other), {OWN_WAKEUPS} of each ours ({lost} lost): {by_name:?}"
    );
    assert!(null.1 > 0, "some came folded from a row: {by_name:?}");
}

/// Timer wake-ups of each of the test's own sleeping threads.
const OWN_WAKEUPS: u64 = 1_500;

/// Per-pool folding (`nfsdtop_common::pools`): the raw svc_stats_latency
/// program, on `sched_process_exec` (argument 0: the task, standing in
/// for the request), adds every hit to the entry its "pool" names. The
/// "pool" is the task's `real_parent` (`rq_pool`) and its id that
/// parent's `prio` (`sp_id`): for the children spawned here, this
/// thread's own priority. Other processes exec meanwhile, so the entry
/// holds at least the children's hits.
#[test]
fn pool_totals_add_each_request_to_its_pool() {
    if !ready("pool_totals_add_each_request_to_its_pool") {
        return;
    }
    use nfsdtop_agent::source::live::pools::PoolTotalsMap;
    use nfsdtop_common::{pools::PoolConfig, rawrec, RawConfig};
    let Some(task) = task_btf() else {
        return;
    };
    let off = |path: &[&str]| task_offset(&task, path);
    // This thread's prio: /proc's "priority" (field 18) is prio - 100.
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    let priority: i64 = after_comm.split(' ').nth(15).unwrap().parse().unwrap();
    let pool = u32::try_from(100 + priority).expect("a normal priority");

    let mut ebpf =
        bpf::open(1 << 20, Default::default(), bpf::Hosting::None).expect("load the BPF object");
    let totals = PoolTotalsMap::map(&ebpf).expect("map POOL_TOTALS");
    let _drain = drain::Drain::start(&mut ebpf, Duration::from_millis(10), 1 << 20).unwrap();
    bpf::write_pool_config(
        &mut ebpf,
        PoolConfig {
            enabled: 1,
            rq_pool: off(&["real_parent"]),
            sp_id: off(&["prio"]),
            ..PoolConfig::default()
        },
    )
    .unwrap();
    let s = Slot::StatsLatency;
    let mut raw = [RawConfig::default(); Slot::COUNT];
    raw[s as usize] = RawConfig {
        enabled: 1,
        value: rawrec::VALUE_EXECUTE,
        rq_stime: off(&["start_time"]),
        xpt_flags: off(&["pid"]),
        xpt_net: off(&["real_parent"]),
        net_ns_inum: off(&["pid"]),
        xpt_local: off(&["comm"]),
        ..RawConfig::default()
    };
    bpf::write_raw_config(&mut ebpf, &raw).unwrap();
    assert_eq!(totals.requests(pool), 0, "nothing before the attach");
    bpf::attach_raw(&mut ebpf, s, "sched_process_exec").unwrap();
    let children = 20;
    spawn_true(children);
    // Every exec ran the program before its child exited (and
    // spawn_true waited for each).
    raw[s as usize].enabled = 0;
    bpf::write_raw_config(&mut ebpf, &raw).unwrap();
    let requests = totals.requests(pool);
    assert!(
        requests >= children as u64,
        "pool {pool} holds {requests} requests, fewer than the {children} execs"
    );
}
