//! nfsd's threads as they come and go (see `nfsdtop_common::threads`):
//! one classic program per tracepoint copies the record the kernel built
//! and counts the hit. The hits are rare (a thread's start or exit) and
//! serialised by `nfsd_mutex`; perf tracepoint programs run with
//! preemption disabled, so none is skipped for another under way.

use aya_ebpf::{
    helpers::bpf_probe_read_kernel_buf,
    macros::{map, tracepoint},
    maps::Array,
    programs::TracePointContext,
    EbpfContext,
};
use core::intrinsics::{atomic_xadd, AtomicOrdering};

use nfsdtop_common::{
    threads::{self, counter},
    Record,
};

use crate::{ktime_ns, BPF_F_MMAPABLE, EVENTS, RB_NO_WAKEUP};

/// Starts, exits and lost records ([`counter`]), memory-mapped by the agent.
#[map]
static THREAD_COUNTS: Array<u64> = Array::with_max_entries(counter::ENTRIES, BPF_F_MMAPABLE);

#[inline(always)]
fn count(c: u32) {
    if let Some(p) = THREAD_COUNTS.get_ptr_mut(c) {
        // SAFETY: an aligned array value; atomic because two pools' hits may come on two CPUs at once.
        unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(p, 1) };
    }
}

#[inline(always)]
fn record(ctx: &TracePointContext, which: u8) -> u32 {
    count(if which == threads::START {
        counter::STARTS
    } else {
        counter::EXITS
    });
    let Some(mut entry) = EVENTS.reserve::<Record>(0) else {
        count(counter::LOST);
        return 0;
    };
    let words = entry.as_mut_ptr() as *mut u64;
    // SAFETY: `words` is this program's reserved ring slot, size_of::<Record>() bytes, 8-aligned.
    let copied = unsafe {
        words.write(ktime_ns());
        // bpfel: the slot byte (which tracepoint) is byte 8, raw_kind 9.
        words
            .add(1)
            .write(which as u64 | (threads::RECORD_KIND as u64) << 8);
        let raw = words.add(Record::RAW_AT / 8) as *mut u8;
        (raw as *mut u64).write(0);
        let src = (ctx.as_ptr() as *const u8).add(8);
        let dst = core::slice::from_raw_parts_mut(raw.add(8), threads::COPIED_END - 8);
        bpf_probe_read_kernel_buf(src, dst).is_ok()
    };
    if copied {
        entry.submit(RB_NO_WAKEUP);
    } else {
        entry.discard(RB_NO_WAKEUP);
        count(counter::LOST);
    }
    0
}

#[tracepoint]
pub fn nfsd_dynthread_start(ctx: TracePointContext) -> u32 {
    record(&ctx, threads::START)
}

#[tracepoint]
pub fn nfsd_dynthread_kill(ctx: TracePointContext) -> u32 {
    record(&ctx, threads::EXIT)
}
