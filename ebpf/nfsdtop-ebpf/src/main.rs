//! nfsdtop's BPF programs. By default the raw-tracepoint programs watch
//! every event (free, accept, enqueue, dequeue, svc_stats_latency): they
//! get the tracepoint's arguments, drop enqueue attempts that found the
//! transport BUSY on the flags argument (6.6+) or its flags, read the few
//! fields nfsdtop needs at offsets from the kernel's BTF, and send a
//! transport's addresses and namespace once: later records of the same
//! `struct svc_xprt` are short. A known transport's svc_stats_latency
//! hits send nothing: their `execute` and request and reply lengths are
//! added to the transport's running totals in `EXEC_TOTALS`, which the agent reads from memory (see
//! `nfsdtop_common::exec`). The classic tracepoint programs (every
//! event with `--classic-tracepoints`, or where a raw program cannot be
//! used) copy the record the kernel built, its first `RAW_BYTES` in one
//! helper call; the agent finds the fields in the copy with the offsets it
//! parsed from the running kernel's format files.
//! Records go into the `EVENTS` ring buffer without waking the reader (the
//! agent drains on a timer). Every hit is counted per CPU once, by outcome
//! (submitted, lost, BUSY, disabled); every record that does not reach the
//! ring is counted as lost.
#![no_std]
#![no_main]
// The bpfel target has no atomic read-modify-write types; the intrinsic
// becomes BPF's atomic add (its result unused: `lock ... +=`).
#![feature(core_intrinsics)]
#![allow(internal_features)]

use aya_ebpf::{
    helpers::{
        bpf_get_current_pid_tgid, bpf_get_current_task, bpf_get_smp_processor_id, bpf_ktime_get_ns,
        bpf_probe_read_kernel, bpf_probe_read_kernel_buf,
    },
    macros::{map, raw_tracepoint, tracepoint},
    maps::{Array, PerCpuArray, RingBuf},
    programs::{RawTracePointContext, TracePointContext},
    EbpfContext,
};
use core::intrinsics::{atomic_xadd, AtomicOrdering};

use nfsdtop_common::{
    counter,
    exec::ExecTotals,
    not_enqueued,
    pools::{self, PoolConfig, PoolTotals},
    procs::{self, ProcProgram, ProcRow, ProcSlot},
    rawrec,
    scratch::{self, Runner},
    twin, xprt_table, RawConfig, Record, Slot, SlotConfig, RAW_BYTES,
};

/// `BPF_RB_NO_WAKEUP`: submit without waking the reader.
const RB_NO_WAKEUP: u64 = 1;

#[map]
static CONFIG: Array<SlotConfig> = Array::with_max_entries(Slot::COUNT as u32, 0);

/// The raw-tracepoint programs' offsets, one per slot.
#[map]
static RAWCONFIG: Array<RawConfig> = Array::with_max_entries(Slot::COUNT as u32, 0);

/// Per-CPU room for the transport's two addresses and lengths, read in one
/// helper call (too big for the 512-byte BPF stack with the rest), one
/// entry per program (`nfsdtop_common::scratch`).
#[map]
static SCRATCH: PerCpuArray<[u64; rawrec::ADDRS_SPAN / 8]> =
    PerCpuArray::with_max_entries(scratch::ENTRIES, 0);

/// Each thread's mark of its hit under way, per slot, where twin programs
/// run (`nfsdtop_common::twin`); one entry elsewhere (the agent sizes it
/// at load).
#[map]
static TWIN: Array<u64> = Array::with_max_entries(1, 0);

/// Hit counters, `counter::STRIDE` entries per possible CPU (the agent
/// sizes it at load), memory-mapped by the agent: it reads them with
/// loads, never a map syscall. A map syscall holds the CPU's
/// `bpf_prog_active` while it can be preempted (kernels with preemption
/// full or lazy), and a tracepoint program that fires on that CPU
/// meanwhile is skipped: reading per-CPU counters by syscall cost
/// dispatches on Debian's 7.x.
#[map]
static COUNTERS: Array<u64> = Array::with_max_entries(counter::STRIDE, BPF_F_MMAPABLE);

/// Transports whose addresses the raw programs have sent (`struct svc_xprt`
/// pointers), direct-mapped by pointer bits: their later records are
/// short. A plain array, not a hash map: its lookup is a few inlined
/// instructions on every hit. A pointer that shares its entry with
/// another transport's only costs more full records; the raw
/// svc_xprt_free program clears a freed pointer's entry before the memory
/// can be reused.
#[map]
static KNOWN_XPRTS: Array<u64> = Array::with_max_entries(xprt_table::SLOTS, 0);

/// Known transports' running execution totals, at the same entry as in
/// KNOWN_XPRTS (see `nfsdtop_common::exec`); memory-mapped by the agent.
#[map]
static EXEC_TOTALS: Array<ExecTotals> = Array::with_max_entries(xprt_table::SLOTS, BPF_F_MMAPABLE);
const BPF_F_MMAPABLE: u32 = 1 << 10;

/// Where a request's pool is (one entry; see `nfsdtop_common::pools`).
#[map]
static POOLCONFIG: Array<PoolConfig> = Array::with_max_entries(1, 0);

/// Each pool's running execution totals, and the unattributed entry last;
/// memory-mapped by the agent.
#[map]
static POOL_TOTALS: Array<PoolTotals> = Array::with_max_entries(pools::ENTRIES, BPF_F_MMAPABLE);

/// The (program, version)s whose procedures are folded by index (see
/// `nfsdtop_common::procs`); written by the agent.
#[map]
static PROC_PROGRAMS: Array<ProcProgram> = Array::with_max_entries(procs::PROGRAM_ENTRIES, 0);

/// Known transports' requests per procedure; rows claimed by the agent
/// (its only writer of `owner` and `gen`), memory-mapped by it.
#[map]
static PROC_ROWS: Array<ProcRow> = Array::with_max_entries(procs::ROWS, BPF_F_MMAPABLE);

/// Resized by the agent at load time (`EbpfLoader::set_max_entries`).
#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(256 * 1024, 0);

#[inline(always)]
fn bump(slot: Slot, c: u32) {
    // SAFETY: a helper without arguments.
    let cpu = unsafe { bpf_get_smp_processor_id() };
    let idx = cpu.wrapping_mul(counter::STRIDE) + slot as u32 * counter::COUNT + c;
    if let Some(p) = COUNTERS.get_ptr_mut(idx) {
        // SAFETY: an aligned array value this CPU owns; atomic so that a preempted program on it cannot lose an add.
        unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(p, 1) };
    }
}

/// The low 32 bits of the transport flags at byte `off` of the record
/// (the BUSY and ready bits are all below 32).
///
/// Most enqueue hits are dropped on these flags, so their read is worth a
/// plain load: the context may be loaded only at constant offsets, and
/// only up to the end of the tracepoint's fixed fields (the kernel refuses
/// to attach a program whose loads reach further: EACCES), hence one arm
/// per offset, none ending past byte 20. Every sunrpc enqueue record has
/// its flags at 16 and ends at 28 or later. Other offsets take the helper.
#[inline(always)]
fn flags_at(ctx: &TracePointContext, off: u16) -> Option<u32> {
    // All three loads happen whatever `off` is: with one load per match
    // arm, LLVM merged them into one load at a computed offset, which the
    // verifier refuses for the context.
    let words = ctx.as_ptr() as *const u32;
    // SAFETY: loads from the tracepoint record at constant, 4-aligned offsets ending by byte 20, bounds-checked by the verifier.
    let (at8, at12, at16) = unsafe {
        (
            core::ptr::read_volatile(words.add(2)),
            core::ptr::read_volatile(words.add(3)),
            core::ptr::read_volatile(words.add(4)),
        )
    };
    match off {
        8 => return Some(at8),
        12 => return Some(at12),
        16 => return Some(at16),
        _ => {}
    }
    if off as usize >= RAW_BYTES {
        return None;
    }
    // SAFETY: read_at is bpf_probe_read_kernel, which faults safely at any offset.
    unsafe { ctx.read_at::<u32>(off as usize) }.ok()
}

/// Adds a request's `us` of execution to its thread's pool's totals. The
/// request is `rqst` (raw programs), or else the one the current nfsd
/// thread runs (its kthread's `data`).
#[inline(always)]
fn fold_pool(rqst: Option<u64>, us: u64) {
    let Some(c) = POOLCONFIG.get(0) else { return };
    if c.enabled == 0 {
        return;
    }
    let rqst = rqst.or_else(|| thread_rqst(c.task_kthread, c.kthread_data));
    let id = rqst
        .filter(|&r| r != 0)
        .and_then(|r| kread::<u64>(r + c.rq_pool as u64))
        .filter(|&p| p != 0)
        .and_then(|p| kread::<u32>(p + c.sp_id as u64))
        .map_or(pools::SLOTS, pools::entry);
    if let Some(t) = POOL_TOTALS.get_ptr_mut(id) {
        // SAFETY: an aligned array value; other CPUs add to it too, hence the atomic adds.
        unsafe {
            atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(&raw mut (*t).us, us);
            atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(&raw mut (*t).count, 1);
        }
    }
}

/// The request the current RPC service thread runs: its kthread's
/// `data`, at these offsets (0: not known).
#[inline(always)]
fn thread_rqst(task_kthread: u32, kthread_data: u32) -> Option<u64> {
    if task_kthread == 0 {
        return None;
    }
    // SAFETY: a helper without arguments; the task is only read through bpf_probe_read_kernel.
    let task = unsafe { bpf_get_current_task() };
    let kthread = kread::<u64>(task + task_kthread as u64).filter(|&k| k != 0)?;
    kread::<u64>(kthread + kthread_data as u64).filter(|&r| r != 0)
}

#[inline(always)]
fn handle(ctx: &TracePointContext, slot: Slot) -> u32 {
    // While the slot's raw program owns it, this one (attached only while
    // the agent hands the slot over to it) does nothing: one map word
    // decides, for every hit, which of the two records it.
    if RAWCONFIG.get(slot as u32).is_some_and(|r| r.enabled == 1) {
        return 0;
    }
    let cfg = match CONFIG.get(slot as u32) {
        Some(c) => c,
        None => {
            bump(slot, counter::DISABLED);
            return 0;
        }
    };
    if cfg.enabled == 0 {
        bump(slot, counter::DISABLED);
        return 0;
    }
    if matches!(slot, Slot::StatsLatency) && cfg.value_size == 8 {
        // SAFETY: read_at is bpf_probe_read_kernel, which faults safely at any offset.
        if let Ok(us) = unsafe { ctx.read_at::<u64>(cfg.value_off as usize) } {
            fold_pool(None, us);
        }
    }
    // On 6.6+ most enqueue hits are BUSY attempts: decide before a ring
    // slot is reserved.
    if cfg.drop_mask != 0 || cfg.need_mask != 0 {
        if let Some(f) = flags_at(ctx, cfg.flags_off) {
            if !enqueued(slot, f as u64, cfg.drop_mask, cfg.need_mask) {
                return 0;
            }
        }
    }
    let Some(mut entry) = EVENTS.reserve::<Record>(0) else {
        bump(slot, counter::LOST);
        return 0;
    };
    // Written as 8-byte words: field by field, the 7 padding bytes became
    // a call to a memset subprogram.
    let words = entry.as_mut_ptr() as *mut u64;
    // SAFETY: `words` is this program's reserved ring slot, size_of::<Record>() bytes, 8-aligned.
    let copied = unsafe {
        words.write(ktime_ns());
        // bpfel: the slot is byte 8 of the record, its padding zero.
        words.add(1).write(slot as u64);
        let raw = words.add(Record::RAW_AT / 8) as *mut u8;
        (raw as *mut u64).write(0);
        // One helper call for the whole record after the common fields
        // (which hold a pt_regs pointer here). A short record is followed
        // by the rest of the kernel's per-CPU trace buffer (8 KiB), so the
        // read stays in mapped memory; the agent ignores those bytes.
        let src = (ctx.as_ptr() as *const u8).add(8);
        let dst = core::slice::from_raw_parts_mut(raw.add(8), RAW_BYTES - 8);
        bpf_probe_read_kernel_buf(src, dst).is_ok()
    };
    if copied {
        entry.submit(RB_NO_WAKEUP);
        bump(slot, counter::SUBMITTED);
    } else {
        entry.discard(RB_NO_WAKEUP);
        bump(slot, counter::LOST);
    }
    0
}

#[inline(always)]
fn ktime_ns() -> u64 {
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    unsafe { bpf_ktime_get_ns() }
}

/// One classic program per row of the tracepoint table
/// (`nfsdtop_common::SLOTS`), named as its `program` says, passing its slot.
macro_rules! classic_programs {
    ($($name:ident => $slot:ident),* $(,)?) => {$(
        #[tracepoint]
        pub fn $name(ctx: TracePointContext) -> u32 {
            handle(&ctx, Slot::$slot)
        }
    )*};
}

classic_programs! {
    svc_xprt_enqueue => Enqueue,
    svc_xprt_dequeue => Dequeue,
    svc_stats_latency => StatsLatency,
    svc_xprt_accept => Accept,
    svc_xprt_free => Close,
}

/// A kernel value of type `T` at `addr` (None if unreadable).
#[inline(always)]
fn kread<T>(addr: u64) -> Option<T> {
    // SAFETY: bpf_probe_read_kernel faults safely at any address.
    unsafe { bpf_probe_read_kernel(addr as *const T) }.ok()
}

/// The request's procedure as `rawrec::PROC` carries it: measured, and its
/// `nfsdtop_common::procs` index (`procs::OTHER` if not in the table).
#[inline(always)]
fn proc_word(rqst: u64, cfg: &RawConfig) -> u32 {
    // rq_prog, rq_vers and rq_proc are adjacent in every svc_rqst so far:
    // one helper call for the three, three where a kernel moved them.
    let words = if cfg.rq_vers == cfg.rq_prog + 4 && cfg.rq_proc == cfg.rq_prog + 8 {
        kread::<[u32; 3]>(rqst + cfg.rq_prog as u64)
    } else {
        let read = |off: u32| kread::<u32>(rqst + off as u64);
        match (read(cfg.rq_prog), read(cfg.rq_vers), read(cfg.rq_proc)) {
            (Some(a), Some(b), Some(c)) => Some([a, b, c]),
            _ => None,
        }
    };
    match words {
        Some([prog, vers, proc]) => proc_index(prog, vers, proc),
        None => rawrec::PROC_MEASURED | procs::OTHER,
    }
}

/// The procedure word (`rawrec::PROC`) of a request of RPC program `prog`,
/// version `vers`, procedure `proc`: its index in the table the agent
/// wrote, `procs::OTHER` if it is not there.
#[inline(always)]
fn proc_index(prog: u32, vers: u32, proc: u32) -> u32 {
    for i in 0..procs::PROGRAM_ENTRIES {
        let Some(p) = PROC_PROGRAMS.get(i) else { break };
        if p.prog == 0 {
            break;
        }
        if p.prog == prog && p.vers == vers && proc < p.count {
            return rawrec::PROC_MEASURED | (p.base + proc) & 0xff;
        }
    }
    rawrec::PROC_MEASURED | procs::OTHER
}

/// Where the request of procedure word `word` of transport `xprt` (at
/// `xprt_table` entry `entry`, its `EXEC_TOTALS` claim `gen`) is folded:
/// its row's slot, if the agent claimed that row for this claim.
#[inline(always)]
fn proc_slot(entry: u32, xprt: u64, gen: u64, word: u32) -> Option<*mut ProcSlot> {
    let idx = word & 0xff;
    if idx as usize >= procs::ROW_SLOTS {
        return None;
    }
    let row = PROC_ROWS.get_ptr_mut(procs::row(entry))?;
    // SAFETY: an aligned array value; owner and gen are written by the agent only, read once each.
    unsafe {
        if core::ptr::read_volatile(&raw const (*row).owner) != xprt
            || core::ptr::read_volatile(&raw const (*row).gen) != gen
        {
            return None;
        }
        Some(
            (&raw mut (*row).slots)
                .cast::<ProcSlot>()
                .add(idx as usize & (procs::ROW_SLOTS - 1)),
        )
    }
}

/// The raw-tracepoint programs: no record is built by the kernel; the
/// program reads the transport's fields itself and writes, at the `rawrec`
/// offsets, the record a classic program would have copied (with the
/// transport's pointer), or a short one for a transport it already sent.
///
/// `FLAGS_ARG`: the program may read argument 1 (only the enqueue one: the
/// kernel refuses to attach a program that reads past the tracepoint's
/// arguments, and dequeue and svc_stats_latency have one).
#[inline(always)]
fn raw_handle<const FLAGS_ARG: bool>(
    ctx: &RawTracePointContext,
    slot: Slot,
    runner: Runner,
) -> u32 {
    // Disabled: the slot was handed over to its classic program, which
    // counts the hits from then on.
    let cfg = match RAWCONFIG.get(slot as u32) {
        Some(c) if c.enabled == 1 => c,
        _ => return 0,
    };
    if cfg.twin != 0 && !twin_turn(slot, runner) {
        return 0;
    }
    // Where the kernel passes the flags it tested (svc_xprt_enqueue on
    // 6.6+, which fires on every attempt, most of them BUSY), an attempt
    // is dropped on an argument: no read of the transport, no record.
    let flags_arg = if FLAGS_ARG && cfg.flags_arg != 0 {
        let f: u64 = ctx.arg(1);
        if !enqueued(slot, f, cfg.drop_mask, cfg.need_mask) {
            return 0;
        }
        Some(f)
    } else {
        None
    };
    let arg0: u64 = ctx.arg(0);
    let xprt = if cfg.arg_is_rqst != 0 {
        kread::<u64>(arg0 + cfg.rq_xprt as u64).unwrap_or(0)
    } else {
        arg0
    };
    raw_from_xprt(cfg, slot, runner, arg0, xprt, flags_arg)
}

/// Whether flags `f`, as the kernel tested them, say the transport was
/// enqueued; an attempt that was not is counted as BUSY (and its hit
/// ends there).
#[inline(always)]
fn enqueued(slot: Slot, f: u64, drop_mask: u64, need_mask: u64) -> bool {
    let yes = !not_enqueued(f, drop_mask, need_mask);
    if !yes {
        bump(slot, counter::BUSY);
    }
    yes
}

/// The flags a raw or typed program records where the kernel did not
/// pass them: 0 where nothing is dropped on them (dequeue,
/// svc_stats_latency, free: the agent does not read them), else the
/// transport's own, from `read`; None where they say it was not enqueued
/// (counted as BUSY).
#[inline(always)]
fn transport_flags(slot: Slot, cfg: &RawConfig, read: impl FnOnce() -> u64) -> Option<u64> {
    if cfg.drop_mask == 0 && cfg.need_mask == 0 {
        return Some(0);
    }
    let f = read();
    enqueued(slot, f, cfg.drop_mask, cfg.need_mask).then_some(f)
}

/// Where twin programs run (`nfsdtop_common::twin`), whether program
/// `runner` of slot `slot` does this hit's work: the slot's own program
/// always (it marks the hit first), its rescue program only where the
/// thread's entry says the first did not run for this hit.
#[inline(always)]
fn twin_turn(slot: Slot, runner: Runner) -> bool {
    let rescue = matches!(runner, Runner::Rescue);
    let tid = bpf_get_current_pid_tgid() as u32;
    let Some(entry) = twin::index(slot, tid).and_then(|i| TWIN.get_ptr_mut(i)) else {
        return !rescue;
    };
    // SAFETY: an aligned array value; only this thread writes its own mark (one word, so a thread sharing the entry can only replace it whole).
    unsafe {
        if !rescue {
            core::ptr::write_volatile(entry, twin::mark(tid, true));
            return true;
        }
        let word = core::ptr::read_volatile(entry);
        if word == twin::mark(tid, true) {
            core::ptr::write_volatile(entry, twin::mark(tid, false));
            return false;
        }
        if word != twin::mark(tid, false) && word != 0 {
            // Another thread's mark: whether the first ran is not known,
            // and doing the work twice is worse than losing the hit (the
            // loss is counted: a miss of the first, not rescued).
            return false;
        }
    }
    bump(slot, counter::RESCUED);
    true
}

/// The rest of a raw (or typed) program's work once it has the hit's
/// argument 0 (`arg0`: a transport, or a request) and transport (`xprt`;
/// 0 if it could not be read), and the flags argument if it took one.
#[inline(always)]
fn raw_from_xprt(
    cfg: &RawConfig,
    slot: Slot,
    runner: Runner,
    arg0: u64,
    xprt: u64,
    flags_arg: Option<u64>,
) -> u32 {
    if xprt == 0 {
        bump(slot, counter::LOST);
        return 0;
    }
    let flags = match flags_arg {
        Some(f) => f,
        // svc_stats_latency: the flags word carries the request's lengths
        // (`rawrec::LENS`), set by svc_send before the tracepoint fires.
        None if cfg.rq_arg_len != 0 => {
            let arg = kread::<u32>(arg0 + cfg.rq_arg_len as u64).unwrap_or(0);
            let res = kread::<u32>(arg0 + cfg.rq_res_len as u64).unwrap_or(0);
            arg as u64 | (res as u64) << 32
        }
        None => match transport_flags(slot, cfg, || {
            kread::<u64>(xprt + cfg.xpt_flags as u64).unwrap_or(0)
        }) {
            Some(f) => f,
            None => return 0,
        },
    };
    let now = ktime_ns();
    let since = match cfg.value {
        rawrec::VALUE_QTIME => kread::<u64>(xprt + cfg.xpt_qtime as u64),
        rawrec::VALUE_EXECUTE => kread::<u64>(arg0 + cfg.rq_stime as u64),
        _ => None,
    };
    let value_us = match cfg.value {
        rawrec::VALUE_INFLIGHT => kread::<u32>(xprt + cfg.xpt_nr_rqsts as u64)
            .map_or(rawrec::INFLIGHT_UNREAD, u64::from),
        _ => since.map_or(0, |t| now.saturating_sub(t) / 1000),
    };
    let mut procedure = 0u32;
    if matches!(slot, Slot::StatsLatency) {
        fold_pool(Some(arg0), value_us);
        if cfg.rq_prog != 0 {
            procedure = proc_word(arg0, cfg);
        }
    }
    send::send(cfg, slot, runner, xprt, flags, now, value_us, procedure)
}

/// Raw programs, each doing `raw_handle`'s work for its slot as its runner.
/// The agent attaches each by its name to the raw tracepoint of the slot's
/// event (the event here only names the object's section); whether it may
/// read argument 1 comes from the slot's row.
macro_rules! raw_programs {
    ($($name:ident: $event:tt => $slot:ident by $runner:ident),* $(,)?) => {$(
        #[raw_tracepoint(tracepoint = $event)]
        pub fn $name(ctx: RawTracePointContext) -> i32 {
            raw_handle::<{ Slot::$slot.raw_flags_arg() }>(&ctx, Slot::$slot, Runner::$runner);
            0
        }
    )*};
}

// One raw program per row that has one, named as its `raw.name` says; and
// the rescue programs (`nfsdtop_common::twin`), named as the rows'
// `raw.rescue` say, attached after the slot's own program where the
// kernel can preempt it.
raw_programs! {
    raw_svc_xprt_enqueue: "svc_xprt_enqueue" => Enqueue by Main,
    raw_svc_xprt_dequeue: "svc_xprt_dequeue" => Dequeue by Main,
    raw_svc_stats_latency: "svc_stats_latency" => StatsLatency by Main,
    raw_svc_xprt_accept: "svc_xprt_accept" => Accept by Main,
    raw_svc_xprt_free: "svc_xprt_free" => Close by Main,
    rescue_svc_xprt_dequeue: "svc_xprt_dequeue" => Dequeue by Rescue,
    rescue_svc_stats_latency: "svc_stats_latency" => StatsLatency by Rescue,
    rescue_svc_xprt_accept: "svc_xprt_accept" => Accept by Rescue,
    rescue_svc_xprt_free: "svc_xprt_free" => Close by Rescue,
}

mod nfs4ops;
mod threads;
mod send;
mod typed;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
