//! nfsdtop's BPF programs: one classic tracepoint program per sunrpc event,
//! all sharing one handler that reads the record at the offsets the agent
//! parsed from the running kernel's format files (`CONFIG`, one
//! [`SlotConfig`] per slot) and streams a compact [`Record`] into the
//! `EVENTS` ring buffer without waking the reader (the agent drains on a
//! timer). Every hit is counted per CPU; every record that does not reach
//! the ring is counted as lost; enqueue attempts that found the transport
//! BUSY are counted and dropped here.
#![no_std]
#![no_main]

use aya_ebpf::{
    helpers::{bpf_ktime_get_ns, bpf_probe_read_kernel_buf},
    macros::{map, tracepoint},
    maps::{Array, PerCpuArray, RingBuf},
    programs::TracePointContext,
    EbpfContext,
};
use nfsdtop_common::{counter, rflag, slot, Record, SlotConfig, ADDR_MAX, OFF_NONE};

/// `BPF_RB_NO_WAKEUP`: submit without waking the reader.
const RB_NO_WAKEUP: u64 = 1;

#[map]
static CONFIG: Array<SlotConfig> = Array::with_max_entries(slot::COUNT as u32, 0);

#[map]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counter::ENTRIES, 0);

/// Resized by the agent at load time (`EbpfLoader::set_max_entries`).
#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(256 * 1024, 0);

#[inline(always)]
fn bump(slot: u8, c: u32) {
    let idx = slot as u32 * counter::COUNT + c;
    if let Some(p) = COUNTERS.get_ptr_mut(idx) {
        // SAFETY: this CPU's per-CPU slot; tracepoint programs run non-preemptibly and never nest.
        unsafe { *p += 1 };
    }
}

/// A field of `size` bytes at `off`, widened to u64 (None if absent or
/// unreadable).
#[inline(always)]
fn read_sized(ctx: &TracePointContext, off: u16, size: u16) -> Option<u64> {
    if off == OFF_NONE {
        return None;
    }
    let o = off as usize;
    // SAFETY: read_at is bpf_probe_read_kernel, which faults safely at any offset.
    unsafe {
        match size {
            8 => ctx.read_at::<u64>(o).ok(),
            4 => ctx.read_at::<u32>(o).ok().map(u64::from),
            2 => ctx.read_at::<u16>(o).ok().map(u64::from),
            1 => ctx.read_at::<u8>(o).ok().map(u64::from),
            _ => None,
        }
    }
}

/// Copy a `__data_loc` sockaddr (low 16 bits: offset from the record
/// start; high 16: length). Length 0 (listener, UDP) is valid and copies
/// nothing. The copy is always a constant ADDR_MAX (or 16) bytes, so the
/// verifier has nothing variable to check; the agent uses only `len` bytes.
#[inline(always)]
fn read_addr(
    ctx: &TracePointContext,
    off: u16,
    dst: &mut [u8; ADDR_MAX],
    len_out: &mut u8,
) -> bool {
    if off == OFF_NONE {
        return true;
    }
    // SAFETY: bpf_probe_read_kernel of the 4-byte __data_loc word.
    let loc = match unsafe { ctx.read_at::<u32>(off as usize) } {
        Ok(v) => v,
        Err(_) => return false,
    };
    let len = loc >> 16;
    let at = (loc & 0xffff) as usize;
    *len_out = if len > 255 { 255 } else { len as u8 };
    if len == 0 {
        return true;
    }
    // SAFETY: only an address computation; it is read with bpf_probe_read_kernel below.
    let src = unsafe { (ctx.as_ptr() as *const u8).add(at) };
    // SAFETY: bpf_probe_read_kernel faults safely; the destination is a fixed-size buffer.
    if unsafe { bpf_probe_read_kernel_buf(src, &mut dst[..]) }.is_ok() {
        return true;
    }
    // The full-size read can only fail at the end of a mapping: retry
    // with the size of an IPv4 sockaddr.
    if len >= 16 {
        // SAFETY: as above, 16 constant bytes.
        return unsafe { bpf_probe_read_kernel_buf(src, &mut dst[..16]) }.is_ok();
    }
    false
}

#[inline(always)]
fn handle(ctx: &TracePointContext, slot: u8) -> u32 {
    bump(slot, counter::SEEN);
    let cfg = match CONFIG.get(slot as u32) {
        Some(c) => c,
        None => return 0,
    };
    if cfg.enabled == 0 {
        bump(slot, counter::DISABLED);
        return 0;
    }
    // The BUSY check comes before the record is built: on 6.6+ most
    // enqueue hits are BUSY attempts, and zeroing the 88-byte record (a
    // memset subprogram) was a quarter of their cost.
    let flags = read_sized(ctx, cfg.flags_off, cfg.flags_size);
    if let Some(f) = flags {
        if f & cfg.drop_mask != 0 || (cfg.need_mask != 0 && f & cfg.need_mask == 0) {
            bump(slot, counter::BUSY);
            return 0;
        }
    }
    let mut rec = Record::zeroed();
    if let Some(f) = flags {
        rec.flags = f as u32;
    }
    rec.ts_ns = ktime_ns();
    rec.slot = slot;
    if let Some(n) = read_sized(ctx, cfg.netns_off, cfg.netns_size) {
        rec.netns = n as u32;
    }
    if let Some(v) = read_sized(ctx, cfg.value_off, cfg.value_size) {
        rec.value = v;
        rec.rflags |= rflag::HAS_VALUE;
    }
    if let Some(c) = read_sized(ctx, cfg.class_off, cfg.class_size) {
        rec.class = c as u32;
        rec.rflags |= rflag::HAS_CLASS;
    }
    let mut clen = 0u8;
    if !read_addr(ctx, cfg.client_off, &mut rec.client, &mut clen) {
        rec.rflags |= rflag::ADDR_FAULT;
        clen = 0;
    }
    rec.client_len = clen;
    let mut slen = 0u8;
    if !read_addr(ctx, cfg.server_off, &mut rec.server, &mut slen) {
        rec.rflags |= rflag::ADDR_FAULT;
        slen = 0;
    }
    rec.server_len = slen;
    match EVENTS.output::<Record>(&rec, RB_NO_WAKEUP) {
        Ok(()) => bump(slot, counter::SUBMITTED),
        Err(_) => bump(slot, counter::LOST),
    }
    0
}

#[inline(always)]
fn ktime_ns() -> u64 {
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    unsafe { bpf_ktime_get_ns() }
}

#[tracepoint]
pub fn svc_xprt_enqueue(ctx: TracePointContext) -> u32 {
    handle(&ctx, slot::ENQUEUE)
}

#[tracepoint]
pub fn svc_xprt_dequeue(ctx: TracePointContext) -> u32 {
    handle(&ctx, slot::DEQUEUE)
}

#[tracepoint]
pub fn svc_stats_latency(ctx: TracePointContext) -> u32 {
    handle(&ctx, slot::STATS_LATENCY)
}

#[tracepoint]
pub fn svc_xprt_accept(ctx: TracePointContext) -> u32 {
    handle(&ctx, slot::ACCEPT)
}

#[tracepoint]
pub fn svc_xprt_free(ctx: TracePointContext) -> u32 {
    handle(&ctx, slot::CLOSE)
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
