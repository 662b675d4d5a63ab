//! The typed programs (`tp_btf`; see `nfsdtop_common::typed`) of the
//! slots whose argument is a request: the raw programs' work, with the
//! request's fields read by plain loads through the typed request pointer
//! at the offsets of `TYPED_RQST` (its transport pointer made a number on
//! the way, see [`as_number`]): svc_xprt_dequeue's transport, and
//! svc_stats_latency's transport, lengths, start time and procedure.

use aya_ebpf::{macros::btf_tracepoint, programs::BtfTracePointContext};
use nfsdtop_common::{
    counter,
    scratch::{self, Runner},
    typed::RqstOffsets,
    RawConfig, Slot,
};

use crate::{
    bump, fold_pool, ktime_ns, proc_index, raw_from_xprt, send::send, twin_turn, RAWCONFIG, SCRATCH,
};

/// Set by the agent before the object is loaded (a frozen, read-only
/// map: the verifier reads the values as constants).
#[unsafe(no_mangle)]
static TYPED_RQST: RqstOffsets = RqstOffsets {
    rq_xprt: 0,
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

/// A typed pointer as a number. The verifier allows no arithmetic on a
/// typed pointer but adding, and the rest of the path hashes the
/// transport's: stored to this CPU's scratch word and loaded back, it is
/// a number (the verifier does not follow values through map memory).
/// Storing a pointer there is allowed to programs loaded with
/// CAP_PERFMON, as nfsdtop's are.
#[inline(always)]
fn as_number(slot: Slot, p: *const u8) -> Option<u64> {
    let word = SCRATCH.get_ptr_mut(scratch::entry(slot, Runner::Main))? as *mut u64;
    // SAFETY: this CPU's scratch value (programs do not nest), 8-aligned;
    // its first word is free until `send` reads addresses into it.
    unsafe {
        core::ptr::write_volatile(word, p as u64);
        Some(core::ptr::read_volatile(word))
    }
}

/// What both programs start with: slot `slot`'s config while its typed
/// program owns it (None: handed over to its classic program), the
/// request, and its transport as a number (0 if unreadable). A null
/// request is counted as lost.
#[inline(always)]
fn request(ctx: &BtfTracePointContext, slot: Slot) -> Option<(&'static RawConfig, *const u8, u64)> {
    let cfg = RAWCONFIG.get(slot as u32).filter(|c| c.enabled == 1)?;
    if cfg.twin != 0 {
        twin_turn(slot, Runner::Main);
    }
    let rqst: *const u8 = ctx.arg(0);
    // Also what lets the verifier add offsets to it where the kernel
    // marks tracepoint arguments as possibly null.
    if rqst.is_null() {
        bump(slot, counter::LOST);
        return None;
    }
    let xprt = as_number(slot, field(rqst, &TYPED_RQST.rq_xprt)).unwrap_or(0);
    Some((cfg, rqst, xprt))
}

#[btf_tracepoint(function = "svc_stats_latency")]
pub fn typed_svc_stats_latency(ctx: BtfTracePointContext) -> i32 {
    let slot = Slot::StatsLatency;
    let Some((cfg, rqst, xprt)) = request(&ctx, slot) else {
        return 0;
    };
    let o = &TYPED_RQST;
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
    send(
        cfg,
        slot,
        Runner::Main,
        xprt,
        flags,
        now,
        value_us,
        procedure,
    );
    0
}

#[btf_tracepoint(function = "svc_xprt_dequeue")]
pub fn typed_svc_xprt_dequeue(ctx: BtfTracePointContext) -> i32 {
    let slot = Slot::Dequeue;
    let Some((cfg, rqst, xprt)) = request(&ctx, slot) else {
        return 0;
    };
    raw_from_xprt(cfg, slot, Runner::Main, rqst as u64, xprt, None);
    0
}
