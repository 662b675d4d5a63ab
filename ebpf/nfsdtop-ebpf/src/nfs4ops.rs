//! NFSv4 operations per client (`--nfs4-ops`; see `nfsdtop_common::nfs4ops`):
//! the raw `nfsd_compound` program remembers the thread's request and its
//! decoded operations, the raw `nfsd_compound_status` program lists each
//! operation's number and sends the list with the transport's addresses
//! when the COMPOUND ends (or the list is full). One record per COMPOUND
//! for a typical one; nothing when not enabled.
//!
//! The addresses are read straight into the ring record (no per-CPU
//! scratch): on a preemptible kernel another program may run on this CPU
//! between two of this one's instructions.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_get_smp_processor_id, bpf_probe_read_kernel_buf},
    macros::{map, raw_tracepoint},
    maps::{Array, LruHashMap},
    programs::RawTracePointContext,
};
use core::intrinsics::{atomic_xadd, AtomicOrdering};

use nfsdtop_common::{
    nfs4ops::{self, counter, OpsConfig, ThreadCompound, OPS_PER_RECORD},
    rawrec, Record, ADDR_MAX,
};

use crate::{kread, ktime_ns, BPF_F_MMAPABLE, EVENTS, RB_NO_WAKEUP};

#[map]
static OPSCONFIG: Array<OpsConfig> = Array::with_max_entries(1, 0);

/// Each nfsd thread's COMPOUND in progress, by thread id (LRU: threads
/// that exited are forgotten as new ones need room).
#[map]
static OPS_THREADS: LruHashMap<u32, ThreadCompound> = LruHashMap::with_max_entries(8192, 0);

/// Operations sent and lost, `counter::STRIDE` per possible CPU (sized by
/// the agent at load), memory-mapped by it.
#[map]
static OPS_COUNTERS: Array<u64> = Array::with_max_entries(counter::STRIDE, BPF_F_MMAPABLE);

#[inline(always)]
fn count(c: u32, n: u64) {
    // SAFETY: a helper without arguments.
    let cpu = unsafe { bpf_get_smp_processor_id() };
    if let Some(p) = OPS_COUNTERS.get_ptr_mut(cpu.wrapping_mul(counter::STRIDE) + c) {
        // SAFETY: an aligned array value this CPU owns; atomic so that a preempted program on it cannot lose an add.
        unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(p, n) };
    }
}

#[inline(always)]
fn config() -> Option<&'static OpsConfig> {
    OPSCONFIG.get(0).filter(|c| c.enabled == 1)
}

#[inline(always)]
fn thread() -> u32 {
    bpf_get_current_pid_tgid() as u32
}

/// Send the operations `tc` lists, with its request's transport.
#[inline(always)]
fn send(cfg: &OpsConfig, tc: &ThreadCompound) {
    let n = tc.count as u64;
    if n == 0 {
        return;
    }
    let xprt = kread::<u64>(tc.rqst + cfg.rq_xprt as u64).unwrap_or(0);
    if xprt == 0 {
        count(counter::LOST, n);
        return;
    }
    let netns = kread::<u64>(xprt + cfg.xpt_net as u64)
        .and_then(|net| kread::<u32>(net + cfg.net_ns_inum as u64))
        .unwrap_or(0);
    let local = xprt + cfg.xpt_local as u64;
    let clamp = |len: Option<u64>| len.unwrap_or(0).min(ADDR_MAX as u64);
    let local_len = clamp(kread::<u64>(local + rawrec::LOCALLEN_REL as u64));
    let remote_len = clamp(kread::<u64>(local + rawrec::REMOTELEN_REL as u64));
    let Some(mut entry) = EVENTS.reserve::<Record>(0) else {
        count(counter::LOST, n);
        return;
    };
    let rec = entry.as_mut_ptr() as *mut u8;
    // SAFETY: `rec` is this program's reserved ring slot of size_of::<Record>() bytes, 8-aligned; the agent reads only the bytes written here.
    unsafe {
        let words = rec as *mut u64;
        words.write(ktime_ns());
        words
            .add(1)
            .write(0xff | (nfs4ops::RECORD_KIND as u64) << 8);
        let raw = rec.add(Record::RAW_AT);
        let raw_words = raw as *mut u64;
        let server_loc = (local_len << 16) | rawrec::SERVER_AT as u64;
        let client_loc = (remote_len << 16) | rawrec::CLIENT_AT as u64;
        raw_words.add(1).write(server_loc | (client_loc << 32));
        raw_words
            .add(rawrec::NETNS as usize / 8)
            .write(netns as u64);
        let server = core::slice::from_raw_parts_mut(raw.add(rawrec::SERVER_AT as usize), ADDR_MAX);
        let client = core::slice::from_raw_parts_mut(raw.add(rawrec::CLIENT_AT as usize), ADDR_MAX);
        if bpf_probe_read_kernel_buf(local as *const u8, server).is_err()
            || bpf_probe_read_kernel_buf((local + rawrec::REMOTE_REL as u64) as *const u8, client)
                .is_err()
        {
            entry.discard(0);
            count(counter::LOST, n);
            return;
        }
        raw_words.add(nfs4ops::COUNT_AT as usize / 8).write(n);
        let list = raw.add(nfs4ops::OPS_AT as usize) as *mut u64;
        let src = tc.list.as_ptr() as *const u64;
        for i in 0..OPS_PER_RECORD / 8 {
            list.add(i).write(src.add(i).read_unaligned());
        }
    }
    entry.submit(RB_NO_WAKEUP);
    count(counter::SENT, n);
}

#[raw_tracepoint(tracepoint = "nfsd_compound")]
pub fn nfsd_compound(ctx: RawTracePointContext) -> i32 {
    let Some(cfg) = config() else { return 0 };
    let tid = thread();
    let rqst: u64 = ctx.arg(0);
    let ops = kread::<u64>(rqst + cfg.rq_argp as u64)
        .and_then(|args| kread::<u64>(args + cfg.args_ops as u64))
        .unwrap_or(0);
    // The thread's entry is rewritten in place: an insert would take a
    // new element from the map's free list on every COMPOUND.
    if let Some(prev) = OPS_THREADS.get_ptr_mut(tid) {
        // SAFETY: this thread's own entry; no other thread writes it.
        let prev = unsafe { &mut *prev };
        // A COMPOUND of this thread whose end was not seen: what it listed.
        send(cfg, prev);
        prev.rqst = rqst;
        prev.ops = ops;
        prev.count = 0;
        return 0;
    }
    let tc = ThreadCompound {
        rqst,
        ops,
        count: 0,
        _pad: 0,
        list: [0; OPS_PER_RECORD],
    };
    let _ = OPS_THREADS.insert(tid, tc, 0);
    0
}

#[raw_tracepoint(tracepoint = "nfsd_compound_status")]
pub fn nfsd_compound_status(ctx: RawTracePointContext) -> i32 {
    let Some(cfg) = config() else { return 0 };
    let Some(tc) = OPS_THREADS.get_ptr_mut(thread()) else {
        count(counter::LOST, 1);
        return 0;
    };
    // SAFETY: this thread's own entry; no other thread writes it.
    let tc = unsafe { &mut *tc };
    let (args_opcnt, resp_opcnt, status) = (
        ctx.arg::<u64>(0) as u32,
        ctx.arg::<u64>(1) as u32,
        ctx.arg::<u64>(2) as u32,
    );
    if tc.ops == 0 || resp_opcnt == 0 {
        count(counter::LOST, 1);
        return 0;
    }
    let at = tc.ops + u64::from(resp_opcnt - 1) * u64::from(cfg.op_size) + u64::from(cfg.op_opnum);
    let op = match kread::<u32>(at) {
        Some(n) if (n as usize) < nfs4ops::NAMES.len() => n as u8,
        _ => nfs4ops::OP_UNKNOWN,
    };
    if let Some(slot) = tc.list.get_mut(tc.count as usize) {
        *slot = op;
        tc.count += 1;
    }
    // The COMPOUND ends at its last operation or at the first that fails.
    if tc.count as usize >= OPS_PER_RECORD || status != 0 || resp_opcnt >= args_opcnt {
        send(cfg, tc);
        tc.count = 0;
    }
    0
}
