//! What the raw programs fold in the kernel, on this machine's real kernel
//! without nfsd: execution times, request lengths and procedures folded
//! per transport reaching the agent once, and per-pool totals. Stand-ins
//! for nfsd's structs are this kernel's `struct task_struct` (ring/).
//!
//! Needs root, tracefs and /sys/kernel/btf/vmlinux (see live_ring.rs for
//! the private mount namespace).

use std::time::{Duration, Instant};

use nfsdtop_agent::model::EventKind;
use nfsdtop_agent::source::live::{bpf, drain};
use nfsdtop_common::{Record, RecordView, Slot, SlotConfig};

mod ring;
use ring::{exec_layout, ready, spawn_true, stable, task_btf, task_offset};

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
    // Wake-ups of our own, known whatever else the host runs: a thread at
    // normal priority (its wake-ups are NULL) and one at nice 5 (prio 125:
    // `(other)`), each woken by its timer at least OWN_WAKEUPS times, and
    // on until 2,000 hits were folded. On a busy host other tasks' full
    // records take over table entries, so fewer of ours fold: they go on
    // waking rather than the test counting on the host's wake-ups.
    let enough = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sleeper = |nice: i32| {
        let enough = enough.clone();
        std::thread::spawn(move || {
            if nice != 0 {
                let me = rustix::thread::gettid();
                rustix::process::setpriority_process(Some(me), nice).expect("renice a thread");
            }
            let mut woken = 0;
            while woken < OWN_WAKEUPS || !enough.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
                woken += 1;
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
        if counters.read()[s as usize].folded >= 2_000 {
            enough.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        if let Ok(chunk) = drain.recv_timeout(Duration::from_millis(50)) {
            decoded = take(chunk, &mut known, &mut events);
        }
        known.procs.claim(exec, 0, &mut events);
        known.sweep(|i| totals.read(i), &layout, 0, &mut events);
        known.procs.sweep(exec, 0, &mut events);
    }
    enough.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in own {
        t.join().expect("a sleeping thread");
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
    // Each of our threads' wake-ups is named by its class: the count
    // above is exact in sum, so a class is judged by most of its wake-ups.
    // A few may be missing from a class on a busy host: a wake-up the
    // kernel's recursion guard kept from the program (an interrupt inside
    // it, or a task preempted in it where tracepoints are preemptible) or
    // one whose fold raced its row's takeover. A naming that is wrong
    // would move all of a class.
    let lost = sent - procedures;
    let skipped = bpf::raw_program_name(s)
        .and_then(|name| bpf::recursion_misses(&ebpf, name))
        .unwrap_or(0);
    println!("{skipped} wake-ups skipped by the recursion guard");
    let null = by_name.get("NULL").copied().unwrap_or_default();
    let other = by_name.get("(other)").copied().unwrap_or_default();
    let most = OWN_WAKEUPS - OWN_WAKEUPS / 100;
    assert!(
        null.0 + lost + skipped >= most && other.0 + lost + skipped >= most,
        "normal tasks' wake-ups are NULL, nice 5's (other), {OWN_WAKEUPS} of each ours \
         ({lost} lost, {skipped} skipped by the recursion guard): {by_name:?}"
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
