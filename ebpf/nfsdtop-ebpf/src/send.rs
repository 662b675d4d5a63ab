//! What a raw or typed program does once it has read a hit's transport,
//! flags (or a request's lengths), time and procedure: fold a known
//! transport's request into its running totals, or send a short record
//! for a known transport, or a full one (addresses and namespace, read
//! here) for a new one; and keep `KNOWN_XPRTS` and `EXEC_TOTALS` in step.

use aya_ebpf::helpers::bpf_probe_read_kernel_buf;
use core::intrinsics::{atomic_xadd, AtomicOrdering};
use nfsdtop_common::{
    counter,
    exec::ExecTotals,
    rawrec,
    scratch::{self, Runner},
    xprt_table, RawConfig, Record, Slot, ADDR_MAX,
};

use crate::{bump, kread, proc_slot, EVENTS, EXEC_TOTALS, KNOWN_XPRTS, RB_NO_WAKEUP, SCRATCH};

/// Record or fold hit `slot` of transport `xprt` (a kernel pointer, read
/// as a number), at `now`, as `cfg` says; `runner` is the program doing
/// it (its own scratch room).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn send(
    cfg: &RawConfig,
    slot: Slot,
    runner: Runner,
    xprt: u64,
    flags: u64,
    now: u64,
    value_us: u64,
    procedure: u32,
) -> u32 {
    let short = cfg.short_records != 0;
    let room = scratch::entry(slot, runner);
    let is_close = matches!(slot, Slot::Close);
    let entry_idx = xprt_table::slot(xprt);
    let known = KNOWN_XPRTS.get_ptr_mut(entry_idx);
    if is_close || matches!(slot, Slot::Accept) {
        // Forgotten when it is freed, before the memory can be reused for
        // another transport, and again when a transport is accepted at that
        // address (in case the kernel skipped this program at the free).
        if let Some(k) = known {
            // SAFETY: an 8-byte aligned array value; a racing writer can only make a later record full.
            unsafe {
                if *k == xprt {
                    *k = 0;
                }
            }
        }
    // SAFETY: an 8-byte aligned array value, read once.
    } else if short && known.is_some_and(|k| unsafe { *k } == xprt) {
        // Sent in full before: the agent has its addresses and namespace.
        if cfg.fold_exec != 0 {
            if let Some(t) = EXEC_TOTALS.get_ptr_mut(entry_idx) {
                // SAFETY: an aligned array value; other CPUs add to it too, hence the atomic adds.
                unsafe {
                    let per_proc = if cfg.fold_procs != 0 && (*t).owner == xprt {
                        proc_slot(entry_idx, xprt, (*t).gen, procedure)
                    } else {
                        None
                    };
                    if (*t).owner == xprt && (cfg.fold_procs == 0 || per_proc.is_some()) {
                        if let Some(p) = per_proc {
                            atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(
                                &raw mut (*p).count,
                                1,
                            );
                            atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(
                                &raw mut (*p).us,
                                value_us,
                            );
                        }
                        atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(
                            &raw mut (*t).us,
                            value_us,
                        );
                        atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(
                            &raw mut (*t).count,
                            1,
                        );
                        atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(
                            &raw mut (*t).bytes_in,
                            flags & 0xffff_ffff,
                        );
                        atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(
                            &raw mut (*t).bytes_out,
                            flags >> 32,
                        );
                        bump(slot, counter::FOLDED);
                        return 0;
                    }
                }
            }
        }
        let Some(mut entry) = EVENTS.reserve::<Record>(0) else {
            bump(slot, counter::LOST);
            return 0;
        };
        let words = entry.as_mut_ptr() as *mut u64;
        // SAFETY: `words` is this program's reserved ring slot of size_of::<Record>() bytes, 8-aligned; the agent reads only these words of a short record.
        unsafe {
            words.write(now);
            words
                .add(1)
                .write(slot as u64 | (rawrec::SHORT as u64) << 8);
            let raw = words.add(Record::RAW_AT / 8);
            raw.add(rawrec::FLAGS as usize / 8).write(flags);
            raw.add(rawrec::VALUE as usize / 8).write(value_us);
            raw.add(rawrec::XPRT as usize / 8).write(xprt);
            raw.add(rawrec::NETNS as usize / 8)
                .write((procedure as u64) << 32);
        }
        entry.submit(RB_NO_WAKEUP);
        bump(slot, counter::SUBMITTED);
        return 0;
    }
    let net = kread::<u64>(xprt + cfg.xpt_net as u64).unwrap_or(0);
    let netns = kread::<u32>(net + cfg.net_ns_inum as u64).unwrap_or(0);
    let Some(scratch) = SCRATCH.get_ptr_mut(room) else {
        bump(slot, counter::LOST);
        return 0;
    };
    // SAFETY: this CPU's scratch slot (programs do not nest); the helper faults safely.
    let span = unsafe { &mut *scratch };
    // SAFETY: a byte view of the same fixed-size scratch buffer.
    let bytes = unsafe {
        core::slice::from_raw_parts_mut(span.as_mut_ptr() as *mut u8, rawrec::ADDRS_SPAN)
    };
    // SAFETY: bpf_probe_read_kernel into a fixed-size buffer.
    if unsafe { bpf_probe_read_kernel_buf((xprt + cfg.xpt_local as u64) as *const u8, bytes) }
        .is_err()
    {
        bump(slot, counter::LOST);
        return 0;
    }
    let clamp = |n: u64| {
        if n > ADDR_MAX as u64 {
            ADDR_MAX as u64
        } else {
            n
        }
    };
    let local_len = clamp(span[rawrec::LOCALLEN_REL / 8]);
    let remote_len = clamp(span[rawrec::REMOTELEN_REL / 8]);
    // With short records, a full record settles the entry's execution
    // totals (the previous owner's) and claims the entry for this
    // transport; a free settles and releases only its own transport's.
    let totals = if short {
        // SAFETY: an aligned array value, its owner read once.
        EXEC_TOTALS
            .get_ptr_mut(entry_idx)
            .filter(|t| !is_close || unsafe { (**t).owner } == xprt)
    } else {
        None
    };
    // An unowned entry settles nothing: the agent reads the totals only
    // with a non-zero owner.
    // SAFETY: an aligned array value; a fold racing this read is lost only when two live transports share the entry.
    let settled = totals.map_or(ExecTotals::default(), |t| unsafe { *t });
    let Some(mut entry) = EVENTS.reserve::<Record>(0) else {
        bump(slot, counter::LOST);
        return 0;
    };
    let rec = entry.as_mut_ptr() as *mut u8;
    // SAFETY: `rec` is this program's reserved ring slot of size_of::<Record>() bytes, 8-aligned; every byte is written before submit.
    unsafe {
        let words = rec as *mut u64;
        words.write(now);
        // The slot, and raw_kind (byte 9).
        words.add(1).write(slot as u64 | (rawrec::FULL as u64) << 8);
        let raw = rec.add(Record::RAW_AT);
        let raw_words = raw as *mut u64;
        raw_words.write(settled.owner);
        let server_loc = (local_len << 16) | rawrec::SERVER_AT as u64;
        let client_loc = (remote_len << 16) | rawrec::CLIENT_AT as u64;
        raw_words.add(1).write(server_loc | (client_loc << 32));
        raw_words.add(2).write(flags);
        raw_words
            .add(3)
            .write(netns as u64 | (procedure as u64) << 32);
        raw_words.add(4).write(value_us);
        // The two sockaddrs, 28 bytes each, as 4-byte words (the server's
        // lands 8-aligned, the client's 4-aligned).
        let src = span.as_ptr() as *const u32;
        let dst = raw as *mut u32;
        let (server, client) = (
            rawrec::SERVER_AT as usize / 4,
            rawrec::CLIENT_AT as usize / 4,
        );
        let remote = rawrec::REMOTE_REL / 4;
        for i in 0..ADDR_MAX / 4 {
            dst.add(server + i).write(src.add(i).read());
            dst.add(client + i).write(src.add(remote + i).read());
        }
        raw_words.add(rawrec::XPRT as usize / 8).write(xprt);
        raw_words
            .add(rawrec::EXEC_GEN as usize / 8)
            .write(settled.gen);
        raw_words
            .add(rawrec::EXEC_US as usize / 8)
            .write(settled.us);
        raw_words
            .add(rawrec::EXEC_COUNT as usize / 8)
            .write(settled.count);
        raw_words
            .add(rawrec::EXEC_BYTES_IN as usize / 8)
            .write(settled.bytes_in);
        raw_words
            .add(rawrec::EXEC_BYTES_OUT as usize / 8)
            .write(settled.bytes_out);
    }
    entry.submit(RB_NO_WAKEUP);
    bump(slot, counter::SUBMITTED);
    if let Some(t) = totals {
        // Cleared before the new owner is written, so a reader never
        // pairs this transport with the last owner's numbers.
        // SAFETY: an aligned array value; only full records write owner and gen.
        unsafe {
            core::ptr::write_volatile(&raw mut (*t).owner, 0);
            core::ptr::write_volatile(&raw mut (*t).us, 0);
            core::ptr::write_volatile(&raw mut (*t).count, 0);
            core::ptr::write_volatile(&raw mut (*t).bytes_in, 0);
            core::ptr::write_volatile(&raw mut (*t).bytes_out, 0);
            if !is_close {
                core::ptr::write_volatile(&raw mut (*t).gen, now);
                core::ptr::write_volatile(&raw mut (*t).owner, xprt);
            }
        }
    }
    // Known from now on (not before: a record that never reached the ring
    // must not leave the agent without the addresses).
    if short && !is_close {
        if let Some(k) = known {
            // SAFETY: an 8-byte aligned array value; a racing writer can only make a later record full.
            unsafe { *k = xprt };
        }
    }
    0
}
