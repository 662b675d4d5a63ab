//! What svc_stats_latency's classic program takes from the kernel's own
//! record of the hit when it does its raw program's work
//! (`nfsdtop_common::HOSTED`): the request's `execute`, and the
//! transport's identity as the record names it (its addresses' bytes and
//! its namespace), which a known pointer must still have to count as the
//! transport it was claimed for. The kernel built the record anyway: one
//! copy of it replaces three reads from the request and the transport
//! (`rq_stime`, `xpt_net`, the addresses), a helper call each.

use aya_ebpf::{helpers::bpf_probe_read_kernel_buf, macros::map, maps::PerCpuArray, EbpfContext};
use nfsdtop_common::{xprt_table, SlotConfig, ADDR_MAX, RAW_BYTES};

use aya_ebpf::programs::TracePointContext;

/// Per-CPU room for the hit's record (programs do not nest on a CPU).
#[map]
static RECORD: PerCpuArray<[u64; RAW_BYTES / 8]> = PerCpuArray::with_max_entries(1, 0);

/// Where an address may start in the copy: its [`ADDR_MAX`] bytes fit.
const ADDR_LIMIT: u32 = (RAW_BYTES - ADDR_MAX) as u32;

/// The copied record of one hit, and where its fields are.
pub(crate) struct Seen {
    rec: *const u8,
    /// None where the format's `execute` is not 8 bytes (the program
    /// then times the request itself).
    pub execute_us: Option<u64>,
    netns: u32,
    /// Each address's start in the copy and its length (at most
    /// [`ADDR_MAX`]).
    server: (u32, u32),
    client: (u32, u32),
}

impl Seen {
    /// Copies the record of `ctx` at the format's offsets in `cfg`; None
    /// where a field it needs lies beyond the copy.
    #[inline(always)]
    pub fn copy(ctx: &TracePointContext, cfg: &SlotConfig) -> Option<Seen> {
        let rec = RECORD.get_ptr_mut(0)? as *mut u8;
        // SAFETY: this CPU's RECORD value, RAW_BYTES long; the helper faults safely on the source, which the kernel's per-CPU trace buffer continues past a short record.
        let copied = unsafe {
            let dst = core::slice::from_raw_parts_mut(rec.add(8), RAW_BYTES - 8);
            bpf_probe_read_kernel_buf((ctx.as_ptr() as *const u8).add(8), dst).is_ok()
        };
        if !copied {
            return None;
        }
        let rec = rec as *const u8;
        let execute_us = match cfg.value_size {
            8 => read::<u64>(rec, cfg.value_off as u32, (RAW_BYTES - 8) as u32),
            _ => None,
        };
        // A format without the namespace names none (0), as the agent reads it.
        let netns = match cfg.netns_size {
            4 => read::<u32>(rec, cfg.netns_off as u32, (RAW_BYTES - 4) as u32)?,
            _ => 0,
        };
        Some(Seen {
            rec,
            execute_us,
            netns,
            server: address(rec, cfg.server_off)?,
            client: address(rec, cfg.client_off)?,
        })
    }

    /// Word `i` of the transport's [`xprt_table::Identity`]: its
    /// namespace, the two addresses' lengths, then each address's first
    /// [`ADDR_MAX`] bytes as 4-byte words (0 past its length).
    #[inline(always)]
    fn word(&self, i: usize) -> u32 {
        const SERVER: usize = 2;
        const CLIENT: usize = SERVER + ADDR_MAX / 4;
        match i {
            0 => self.netns,
            1 => self.server.1 | self.client.1 << 16,
            SERVER..CLIENT => self.address_word(self.server, i - SERVER),
            _ => self.address_word(self.client, i - CLIENT),
        }
    }

    #[inline(always)]
    fn address_word(&self, (at, len): (u32, u32), k: usize) -> u32 {
        let k = k as u32;
        if k * 4 >= len || at > ADDR_LIMIT || k >= (ADDR_MAX / 4) as u32 {
            return 0;
        }
        read::<u32>(self.rec, at + k * 4, (RAW_BYTES - 4) as u32).unwrap_or(0)
    }

    /// Whether `id` (a known transport's, as [`Seen::store`] wrote it) is
    /// this transport's.
    #[inline(always)]
    pub fn same_as(&self, id: &xprt_table::Identity) -> bool {
        let mut differ = 0;
        for (i, want) in id.iter().enumerate() {
            differ |= self.word(i) ^ want;
        }
        differ == 0
    }

    /// Writes this transport's identity into `id`.
    #[inline(always)]
    pub fn store(&self, id: &mut xprt_table::Identity) {
        for (i, word) in id.iter_mut().enumerate() {
            *word = self.word(i);
        }
    }
}

/// Where the address whose `__data_loc` word is at `off` lies in the copy,
/// and how long it is (cut at [`ADDR_MAX`]); (0, 0) for a format without
/// it, None where it lies beyond the copy.
#[inline(always)]
fn address(rec: *const u8, off: u16) -> Option<(u32, u32)> {
    if off == nfsdtop_common::OFF_NONE {
        return Some((0, 0));
    }
    let loc = read::<u32>(rec, off as u32, (RAW_BYTES - 4) as u32)?;
    let (at, len) = (loc & 0xffff, loc >> 16);
    if at > ADDR_LIMIT {
        return None;
    }
    Some((at, len.min(ADDR_MAX as u32)))
}

/// The `T` at byte `off` of the copy, if `off` is at most `limit`.
#[inline(always)]
fn read<T: Copy>(rec: *const u8, off: u32, limit: u32) -> Option<T> {
    if off > limit {
        return None;
    }
    // SAFETY: `off` is checked to keep the read inside the RAW_BYTES copy (limit is RAW_BYTES - size_of::<T>()).
    Some(unsafe { core::ptr::read_unaligned(rec.add(off as usize) as *const T) })
}
