//! The typed svc_stats_latency program (`tp_btf`; see
//! `nfsdtop_common::typed`): the raw program's work for a request, its
//! lengths, start time and procedure read with plain loads through the
//! typed request pointer at the offsets of `TYPED_RQST`. The transport
//! pointer is still read with a helper: the rest of the path hashes it,
//! and the verifier allows no arithmetic but adding on a typed pointer.

use aya_ebpf::{macros::btf_tracepoint, programs::BtfTracePointContext};
use nfsdtop_common::{counter, typed::RqstOffsets, Slot};

use crate::{bump, fold_pool, kread, ktime_ns, proc_index, send::send, RAWCONFIG};

/// Set by the agent before the object is loaded (a frozen, read-only
/// map: the verifier reads the values as constants).
#[unsafe(no_mangle)]
static TYPED_RQST: RqstOffsets = RqstOffsets {
    rq_stime: 0,
    rq_arg_len: 0,
    rq_res_len: 0,
    rq_prog: 0,
    rq_vers: 0,
    rq_proc: 0,
};

/// The `T` at byte `*off` of the request `rqst`.
#[inline(always)]
fn field<T: Copy>(rqst: *const u8, off: &u64) -> T {
    // SAFETY: `off` is read from the frozen global (a constant to the
    // verifier), and the verifier checks the load against the kernel's
    // BTF for struct svc_rqst; a faulting load reads zero.
    unsafe {
        let at = core::ptr::read_volatile(off) as usize;
        core::ptr::read_volatile(rqst.add(at) as *const T)
    }
}

#[btf_tracepoint(function = "svc_stats_latency")]
pub fn typed_svc_stats_latency(ctx: BtfTracePointContext) -> i32 {
    let slot = Slot::StatsLatency;
    // Disabled: the slot was handed over to its classic program.
    let cfg = match RAWCONFIG.get(slot as u32) {
        Some(c) if c.enabled == 1 => c,
        _ => return 0,
    };
    let rqst: *const u8 = ctx.arg(0);
    // Also what lets the verifier add offsets to it where the kernel
    // marks tracepoint arguments as possibly null.
    if rqst.is_null() {
        bump(slot, counter::LOST);
        return 0;
    }
    let o = &TYPED_RQST;
    let xprt = kread::<u64>(rqst as u64 + cfg.rq_xprt as u64).unwrap_or(0);
    if xprt == 0 {
        bump(slot, counter::LOST);
        return 0;
    }
    let flags = if cfg.rq_arg_len != 0 {
        let arg: u32 = field(rqst, &o.rq_arg_len);
        let res: u32 = field(rqst, &o.rq_res_len);
        arg as u64 | (res as u64) << 32
    } else {
        0
    };
    let now = ktime_ns();
    let since: u64 = field(rqst, &o.rq_stime);
    let value_us = now.saturating_sub(since) / 1000;
    fold_pool(Some(rqst as u64), value_us);
    let procedure = if cfg.rq_prog != 0 {
        proc_index(
            field(rqst, &o.rq_prog),
            field(rqst, &o.rq_vers),
            field(rqst, &o.rq_proc),
        )
    } else {
        0
    };
    send(cfg, slot, xprt, flags, now, value_us, procedure);
    0
}
