//! The typed programs (`tp_btf`; see `nfsdtop_common::typed`): the raw
//! programs' work, with the kernel's fields read by plain loads through
//! the typed argument at the offsets of `TYPED_OFFSETS` (the transport
//! pointer made a number on the way, see [`as_number`]):
//! svc_xprt_enqueue's flags and depth in flight, svc_xprt_dequeue's
//! transport, and svc_stats_latency's transport, lengths, start time and
//! procedure.

use aya_ebpf::{macros::btf_tracepoint, programs::BtfTracePointContext};
use nfsdtop_common::{
    counter, rawrec,
    scratch::{self, Runner},
    typed::TypedOffsets,
    RawConfig, Slot,
};

use crate::{
    bump, enqueued, fold_pool, ktime_ns, proc_index, raw_from_xprt, send::send, transport_flags, twin_turn, RAWCONFIG, SCRATCH,
};

/// Set by the agent before the object is loaded (a frozen, read-only
/// map: the verifier reads the values as constants).
#[unsafe(no_mangle)]
static TYPED_OFFSETS: TypedOffsets = TypedOffsets {
    rq_xprt: 0,
    rq_stime: 0,
    rq_arg_len: 0,
    rq_res_len: 0,
    rq_prog: 0,
    rq_vers: 0,
    rq_proc: 0,
    xpt_flags: 0,
    xpt_nr_rqsts: 0,
    enqueue_flags_arg: 0,
};

/// The `T` at byte `*off` of the typed pointer `base` (a request or a
/// transport).
#[inline(always)]
fn field<T: Copy>(base: *const u8, off: &u64) -> T {
    // SAFETY: `off` is read from the frozen global (a constant to the
    // verifier), and the verifier checks the load against the kernel's
    // BTF for the pointer's struct; a faulting load reads zero.
    unsafe {
        let at = core::ptr::read_volatile(off) as usize;
        core::ptr::read_volatile(base.add(at) as *const T)
    }
}

/// A value of the frozen global, as the verifier sees it: a constant.
#[inline(always)]
fn constant(v: &u64) -> u64 {
    // SAFETY: a read of the frozen global.
    unsafe { core::ptr::read_volatile(v) }
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
    let xprt = as_number(slot, field(rqst, &TYPED_OFFSETS.rq_xprt)).unwrap_or(0);
    Some((cfg, rqst, xprt))
}

#[btf_tracepoint(function = "svc_stats_latency")]
pub fn typed_svc_stats_latency(ctx: BtfTracePointContext) -> i32 {
    let slot = Slot::StatsLatency;
    let Some((cfg, rqst, xprt)) = request(&ctx, slot) else {
        return 0;
    };
    let o = &TYPED_OFFSETS;
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

/// svc_xprt_enqueue: what the raw program does (drop the attempts that
/// enqueue nothing, record the rest with the transport's requests in
/// flight), with the transport's flags and `xpt_nr_rqsts` read by plain
/// loads, not a helper call each: the depth at enqueue costs one load.
#[btf_tracepoint(function = "svc_xprt_enqueue")]
pub fn typed_svc_xprt_enqueue(ctx: BtfTracePointContext) -> i32 {
    let slot = Slot::Enqueue;
    let Some(cfg) = RAWCONFIG.get(slot as u32).filter(|c| c.enabled == 1) else {
        return 0;
    };
    if cfg.twin != 0 {
        twin_turn(slot, Runner::Main);
    }
    let o = &TYPED_OFFSETS;
    let flags = if constant(&o.enqueue_flags_arg) != 0 {
        let f: u64 = ctx.arg(1);
        if !enqueued(slot, f, cfg.drop_mask, cfg.need_mask) {
            return 0;
        }
        Some(f)
    } else {
        None
    };
    let xprt: *const u8 = ctx.arg(0);
    if xprt.is_null() {
        bump(slot, counter::LOST);
        return 0;
    }
    let flags = match flags.or_else(|| transport_flags(slot, cfg, || field(xprt, &o.xpt_flags))) {
        Some(f) => f,
        None => return 0,
    };
    let now = ktime_ns();
    let value = if cfg.value == rawrec::VALUE_INFLIGHT {
        u64::from(field::<u32>(xprt, &o.xpt_nr_rqsts))
    } else {
        0
    };
    let Some(number) = as_number(slot, xprt) else {
        bump(slot, counter::LOST);
        return 0;
    };
    send(cfg, slot, Runner::Main, number, flags, now, value, 0);
    0
}
