//! The types that cross the kernel boundary between nfsdtop's BPF programs
//! (`ebpf/nfsdtop-ebpf`) and the agent (`agent/src/source/live`).
//!
//! Everything here is `#[repr(C)]`, fixed-size and plain old data: the BPF
//! programs write [`Record`]s into a ring buffer, the agent reads them back
//! as bytes; the agent writes one [`SlotConfig`] per tracepoint into the
//! `CONFIG` array map before attaching, the programs read it on every hit.
//!
//! Which tracepoints there are, and every name they go by, is the
//! tracepoint table of [`Slot`] (`slot.rs`).
//!
//! Classic tracepoint records have no CO-RE relocations from Rust BPF, so
//! every field offset comes from the running kernel's format file
//! (`/sys/kernel/tracing/events/sunrpc/<event>/format`), parsed by the agent.
#![cfg_attr(not(test), no_std)]

/// Bytes of a socket address kept per endpoint: a `sockaddr_in6` is 28
/// bytes, a `sockaddr_in` 16; 0 is a listener or UDP transport.
pub const ADDR_MAX: usize = 28;

pub mod nfs4ops;
pub mod procs;
mod slot;
pub mod threads;
pub mod typed;
pub use slot::{RawArg, RawProgram, Slot, SlotInfo, SLOTS};

/// One of nfsd's own tracepoints (category `nfsd`, not a [`Slot`]) and
/// the program nfsdtop attaches to it: [`nfs4ops`]'s and [`threads`]'s.
pub struct NfsdTracepoint {
    pub event: &'static str,
    pub program: &'static str,
}

/// Per-slot counters in the per-CPU `COUNTERS` array, at
/// `slot * counter::COUNT + counter::X`. Every hit a program handles lands
/// in exactly one of them, so their sum is the hits (not counted apart:
/// one more map update on every hit). Loss is always counted: every record
/// either reaches the ring or is counted in `LOST`.
pub mod counter {
    /// Records submitted to the ring.
    pub const SUBMITTED: u32 = 0;
    /// Ring reservations that failed (ring full) or records that could
    /// not be read: records the agent never sees.
    pub const LOST: u32 = 1;
    /// Enqueue attempts dropped in the kernel because the transport was
    /// already BUSY (6.6+ kernels): counted, never streamed.
    pub const BUSY: u32 = 2;
    /// Hits ignored because the slot was not configured (disabled).
    pub const DISABLED: u32 = 3;
    /// svc_stats_latency hits added to their transport's running totals
    /// in the `EXEC_TOTALS` map instead of sent (see [`super::exec`]).
    pub const FOLDED: u32 = 4;
    /// Hits the kernel skipped for a slot's program that its rescue
    /// program handled instead (see [`super::twin`]); also counted in the
    /// outcome the work had, so not part of the sum of hits.
    pub const RESCUED: u32 = 5;
    pub const COUNT: u32 = 6;
    /// Counters of one CPU (every slot's [`COUNT`]).
    pub const ENTRIES: u32 = super::Slot::COUNT as u32 * COUNT;
    /// Entries each CPU owns in the `COUNTERS` array: [`ENTRIES`] padded
    /// to whole 64-byte lines, so that no two CPUs write one line. The
    /// array holds `STRIDE` entries per possible CPU (sized at load).
    pub const STRIDE: u32 = 32;
    const _: () = assert!(ENTRIES <= STRIDE && (STRIDE * 8).is_multiple_of(64));
}

/// A field offset of [`OFF_NONE`] means "this event has no such field".
pub const OFF_NONE: u16 = u16::MAX;

/// Where a slot's fields are in its tracepoint record (from the format
/// file). Sizes are the format's (`flags` is 8 bytes on 64-bit kernels).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotConfig {
    /// 0: the program returns at once (the event is not used).
    pub enabled: u32,
    /// Offsets of the `server` and `client` `__data_loc` words.
    pub server_off: u16,
    pub client_off: u16,
    pub flags_off: u16,
    pub flags_size: u16,
    pub netns_off: u16,
    pub netns_size: u16,
    /// `qtime` (dequeue, 6.16+) or `execute` (svc_stats_latency).
    pub value_off: u16,
    pub value_size: u16,
    /// The proposed `class` field of svc_xprt_dequeue.
    pub class_off: u16,
    pub class_size: u16,
    /// Records whose flags have any of these bits are dropped (counted in
    /// `BUSY`): the BUSY bit on enqueue of 6.6+ kernels, 0 elsewhere.
    pub drop_mask: u64,
    /// Records whose flags have none of these bits are dropped too
    /// (counted in `BUSY`); 0 = no requirement. On 6.6+ the enqueue
    /// tracepoint fires in svc_xprt_ready() before its tests, so a record
    /// is a real enqueue only with CONN, CLOSE, HANDSHAKE, DATA or DEFERRED.
    pub need_mask: u64,
}

/// The enqueue rule, shared by the BPF programs and the agent's decoder:
/// true when a record whose transport flags are `flags` is not an enqueue
/// (a bit of `drop_mask` is set, or `need_mask` is given and none of its
/// bits is). See [`SlotConfig::drop_mask`] and [`SlotConfig::need_mask`].
#[inline(always)]
pub const fn not_enqueued(flags: u64, drop_mask: u64, need_mask: u64) -> bool {
    flags & drop_mask != 0 || (need_mask != 0 && flags & need_mask == 0)
}

impl SlotConfig {
    pub const DISABLED: SlotConfig = SlotConfig {
        enabled: 0,
        server_off: OFF_NONE,
        client_off: OFF_NONE,
        flags_off: OFF_NONE,
        flags_size: 0,
        netns_off: OFF_NONE,
        netns_size: 0,
        value_off: OFF_NONE,
        value_size: 0,
        class_off: OFF_NONE,
        class_size: 0,
        drop_mask: 0,
        need_mask: 0,
    };
}

/// The raw-tracepoint programs' side: they get the tracepoint's arguments
/// (pointers to nfsd's `struct svc_xprt` or `struct svc_rqst`) instead of
/// a record the kernel built, read the fields at offsets the agent found
/// in the kernel's BTF, and write a [`Record`] laid out as a tracepoint
/// record would be, at these offsets, so one decoder reads both kinds.
pub mod rawrec {
    /// `__data_loc` words of the server (local) and client (remote) address.
    pub const SERVER_LOC: u16 = 8;
    pub const CLIENT_LOC: u16 = 12;
    /// `xpt_flags`, 8 bytes. svc_stats_latency's records have no flags:
    /// there this word is [`LENS`].
    pub const FLAGS: u16 = 16;
    /// svc_stats_latency: the request's `rq_arg.len` (bytes received) in
    /// the low 32 bits and `rq_res.len` (bytes sent) in the high 32, both
    /// `unsigned int` in `struct xdr_buf`; 0 where the program was not
    /// given their offsets (the decoder's layout then has no such field).
    pub const LENS: u16 = FLAGS;
    /// The network namespace's inode number, 4 bytes.
    pub const NETNS: u16 = 24;
    /// svc_stats_latency: the request's procedure, 4 bytes (the high half
    /// of the [`NETNS`] word, in full and short records): [`PROC_MEASURED`]
    /// and the procedure's [`super::procs`] index in the low 8 bits; 0
    /// where the program does not read procedures.
    pub const PROC: u16 = 28;
    pub const PROC_MEASURED: u32 = 1 << 31;
    /// qtime or execute in µs (as the tracepoints give them), 8 bytes.
    pub const VALUE: u16 = 32;
    /// The sockaddrs themselves, `ADDR_MAX` bytes each.
    pub const SERVER_AT: u16 = 40;
    pub const CLIENT_AT: u16 = 68;
    /// The `struct svc_xprt` pointer, 8 bytes: the transport's identity
    /// between its first record and its svc_xprt_free.
    pub const XPRT: u16 = 96;
    /// Final execution totals ([`super::exec`]) carried by a raw full
    /// record: the owner's pointer (0: none; in the record's bytes 0..8,
    /// which a raw record does not otherwise use), its `gen`, µs and
    /// request count, 8 bytes each.
    pub const EXEC_OWNER: u16 = 0;
    pub const EXEC_GEN: u16 = 104;
    pub const EXEC_US: u16 = 112;
    pub const EXEC_COUNT: u16 = 120;
    /// The same owner's folded bytes received and sent, 8 bytes each.
    pub const EXEC_BYTES_IN: u16 = 128;
    pub const EXEC_BYTES_OUT: u16 = 136;
    /// [`super::Record::raw_kind`]: every field written.
    pub const FULL: u8 = 1;
    /// [`super::Record::raw_kind`]: a transport this program already sent
    /// in full (and not freed since): only [`FLAGS`], [`VALUE`] and
    /// [`XPRT`] (and [`PROC`]) are written; the agent has the addresses
    /// and namespace.
    pub const SHORT: u8 = 2;
    /// What `RawConfig::value` asks for.
    pub const VALUE_NONE: u32 = 0;
    /// now - `xprt->xpt_qtime` (svc_xprt_dequeue's `qtime`, 6.16+).
    pub const VALUE_QTIME: u32 = 1;
    /// now - `rqst->rq_stime` (svc_stats_latency's `execute`).
    pub const VALUE_EXECUTE: u32 = 2;
    /// The transport's requests in flight, `xprt->xpt_nr_rqsts` (an
    /// `atomic_t`), at svc_xprt_enqueue; [`INFLIGHT_UNREAD`] where the
    /// read failed.
    pub const VALUE_INFLIGHT: u32 = 3;
    pub const INFLIGHT_UNREAD: u64 = u64::MAX;
    /// `struct svc_xprt` has `xpt_local`, `xpt_locallen`, `xpt_remote`,
    /// `xpt_remotelen` in a row (two `sockaddr_storage` and two `size_t`):
    /// one read of this many bytes from `xpt_local` gets all four.
    pub const ADDRS_SPAN: usize = 272;
    pub const LOCALLEN_REL: usize = 128;
    pub const REMOTE_REL: usize = 136;
    pub const REMOTELEN_REL: usize = 264;
}

/// The raw programs' direct-mapped per-transport tables (`KNOWN_XPRTS`,
/// `EXEC_TOTALS`): entries, and a transport's entry.
pub mod xprt_table {
    pub const SLOTS: u32 = 1 << 16;

    /// The entry of the `struct svc_xprt` at `xprt`: it lives inside a
    /// larger per-transport allocation (svc_sock, svc_rdma_xprt), so the
    /// low bits say little.
    #[inline(always)]
    pub const fn slot(xprt: u64) -> u32 {
        ((xprt >> 6) ^ (xprt >> 22)) as u32 & (SLOTS - 1)
    }
}

pub mod exec;

pub mod pools;

/// Where the raw-tracepoint program of one slot finds its fields (byte
/// offsets from the kernel's BTF).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawConfig {
    /// 0: the program returns at once (its classic program records the
    /// slot, if any does); 1: the raw (or typed) program records it.
    pub enabled: u32,
    /// 1: argument 0 is a `struct svc_rqst *` (dequeue, svc_stats_latency);
    /// 0: a `struct svc_xprt *`.
    pub arg_is_rqst: u32,
    pub rq_xprt: u32,
    pub rq_stime: u32,
    pub xpt_flags: u32,
    pub xpt_net: u32,
    /// `ns.inum` inside `struct net`.
    pub net_ns_inum: u32,
    pub xpt_local: u32,
    pub xpt_qtime: u32,
    /// `rawrec::VALUE_*`.
    pub value: u32,
    /// 1: the tracepoint's argument 1 is the transport's flags word as the
    /// kernel tested it (svc_xprt_enqueue on 6.6+), so a BUSY attempt is
    /// dropped without reading the transport at all.
    pub flags_arg: u32,
    /// 1: send a transport's addresses once, then short records (see
    /// [`rawrec::SHORT`]); only while svc_xprt_free is watched by its raw
    /// program, which forgets a freed transport's pointer.
    pub short_records: u32,
    /// 1 (svc_stats_latency, with short records): fold a known transport's
    /// `execute` into `EXEC_TOTALS` instead of sending a record. Every
    /// raw slot's full records claim and settle `EXEC_TOTALS` entries
    /// whenever short records are on.
    pub fold_exec: u32,
    /// svc_stats_latency: `svc_rqst.rq_arg.len` and `rq_res.len`, read
    /// into [`rawrec::LENS`] and folded with the execution time; 0: not
    /// read (the kernel's BTF lacks them).
    pub rq_arg_len: u32,
    /// As [`SlotConfig::drop_mask`] and [`SlotConfig::need_mask`].
    pub drop_mask: u64,
    pub need_mask: u64,
    pub rq_res_len: u32,
    /// svc_stats_latency: `svc_rqst.rq_prog`, `rq_vers`, `rq_proc`, read
    /// for the request's procedure ([`procs`]); 0: procedures not read.
    pub rq_prog: u32,
    pub rq_vers: u32,
    pub rq_proc: u32,
    /// 1 (with `fold_exec`): a request is folded only where its
    /// procedure can be too (into its transport's `PROC_ROWS` row).
    pub fold_procs: u32,
    /// 1: the slot's program marks each hit in `TWIN`, and its rescue
    /// program does the work of a hit the kernel skipped it for (see
    /// [`twin`]).
    pub twin: u32,
    /// `svc_xprt.xpt_nr_rqsts`, read where `value` is
    /// [`rawrec::VALUE_INFLIGHT`].
    pub xpt_nr_rqsts: u32,
}

pub mod twin;

pub mod scratch;

/// Bytes of the tracepoint record copied into every [`Record`]. The
/// sunrpc records nfsdtop reads end by byte 96 at most (40 fixed bytes,
/// then two `sockaddr_in6`, then strings it does not read); the agent
/// refuses a format whose fields it needs lie beyond this. The raw
/// programs' full records use all of it (see [`rawrec`]).
pub const RAW_BYTES: usize = 144;
/// [`RAW_BYTES`] in 8-byte words.
pub const RAW_WORDS: usize = RAW_BYTES / 8;

/// One ring-buffer record (160 bytes, 8-aligned): the first [`RAW_BYTES`]
/// of the tracepoint's own record, copied with plain loads, and the time.
///
/// Why raw: a helper call (`bpf_probe_read_kernel`) per field and per
/// address was most of the programs' cost; sixteen constant-offset loads
/// from the tracepoint context are not. The agent finds the fields with the
/// offsets it parsed from the format files, exactly as it would have told
/// the program to.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// `bpf_ktime_get_ns()`: CLOCK_MONOTONIC.
    pub ts_ns: u64,
    /// Which program wrote it ([`Slot`] number).
    pub slot: u8,
    /// 0: a copy of the tracepoint's own record; [`rawrec::FULL`] or
    /// [`rawrec::SHORT`]: written by a raw-tracepoint program (fields at
    /// the `rawrec` offsets).
    pub raw_kind: u8,
    pub _pad: [u8; 6],
    /// The tracepoint record's bytes `0..RAW_BYTES`, at their own offsets.
    /// Bytes 0..8 (the common fields, which a BPF program may not read)
    /// are zero. Past the end of a short record the bytes are whatever the
    /// kernel's per-CPU trace buffer held; the agent reads only what the
    /// record's own `__data_loc` words and the format's offsets point at.
    pub raw: [u8; RAW_BYTES],
}

impl Record {
    pub const SIZE: usize = core::mem::size_of::<Record>();
    /// Byte offset of `raw` in a record.
    pub const RAW_AT: usize = 16;

    pub const fn new(ts_ns: u64, slot: Slot) -> Record {
        Record {
            ts_ns,
            slot: slot as u8,
            raw_kind: 0,
            _pad: [0; 6],
            raw: [0; RAW_BYTES],
        }
    }

    /// Serialise in the in-memory layout: the agent's tests build ring
    /// items with it.
    pub fn to_bytes(&self) -> [u8; Record::SIZE] {
        let mut b = [0u8; Record::SIZE];
        b[0..8].copy_from_slice(&self.ts_ns.to_ne_bytes());
        b[8] = self.slot;
        b[9] = self.raw_kind;
        b[Record::RAW_AT..].copy_from_slice(&self.raw);
        b
    }
}

/// A ring item read in place (no copy): what the agent decodes.
#[derive(Clone, Copy, Debug)]
pub struct RecordView<'a>(&'a [u8]);

impl<'a> RecordView<'a> {
    /// `None` if `b` is not exactly one record.
    #[inline]
    pub fn new(b: &'a [u8]) -> Option<RecordView<'a>> {
        (b.len() == Record::SIZE).then_some(RecordView(b))
    }

    #[inline]
    pub fn ts_ns(&self) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&self.0[0..8]);
        u64::from_ne_bytes(a)
    }

    /// The slot that wrote it (None for a number no slot has).
    #[inline]
    pub fn slot(&self) -> Option<Slot> {
        Slot::from_u8(self.0[8])
    }
    /// The record's slot byte as written (records that are not a slot's
    /// use it for their own kind: see [`threads`]).
    #[inline]
    pub fn slot_byte(&self) -> u8 {
        self.0[8]
    }

    /// Written by a raw-tracepoint program (see [`Record::raw_kind`]).
    #[inline]
    pub fn is_raw(&self) -> bool {
        self.0[9] != 0
    }

    /// [`Record::raw_kind`].
    #[inline]
    pub fn raw_kind(&self) -> u8 {
        self.0[9]
    }

    /// The tracepoint record's first [`RAW_BYTES`] bytes.
    #[inline]
    pub fn raw(&self) -> &'a [u8] {
        &self.0[Record::RAW_AT..]
    }

    /// An unsigned field of 1, 2, 4 or 8 bytes at `off` of the tracepoint
    /// record, widened; `None` if absent ([`OFF_NONE`]), of another size,
    /// or beyond the copied bytes.
    #[inline(always)]
    pub fn field(&self, off: u16, size: u16) -> Option<u64> {
        // Size first, then one bounds check of a fixed width: the agent
        // reads several fields of every record. An absent field
        // (`OFF_NONE`, 65535) fails that check too.
        let (raw, at) = (self.raw(), off as usize);
        match size {
            4 => raw
                .get(at..at + 4)
                .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as u64),
            8 => raw
                .get(at..at + 8)
                .map(|b| u64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])),
            2 => raw
                .get(at..at + 2)
                .map(|b| u16::from_ne_bytes([b[0], b[1]]) as u64),
            1 => raw.get(at).map(|b| *b as u64),
            _ => None,
        }
    }

    /// The bytes a `__data_loc` word at `off` points at (low 16 bits:
    /// offset from the record start; high 16: length). `Some(&[])` for a
    /// length of 0 (a listener or UDP transport); `None` if the word is
    /// absent or the data lies beyond the copied bytes.
    #[inline(always)]
    pub fn data_loc(&self, off: u16) -> Option<&'a [u8]> {
        let loc = self.field(off, 4)? as u32;
        let len = (loc >> 16) as usize;
        if len == 0 {
            return Some(&[]);
        }
        let at = (loc & 0xffff) as usize;
        self.raw().get(at..at + len)
    }
}

// The layout is part of the kernel/user contract: fail the build, not the
// decoder, if it drifts.
const _: () = assert!(Record::SIZE == 16 + RAW_BYTES);
const _: () = assert!(core::mem::offset_of!(Record, raw) == Record::RAW_AT);
const _: () = assert!(core::mem::size_of::<SlotConfig>() == 40);
const _: () = assert!(core::mem::size_of::<RawConfig>() == 104);
const _: () = assert!(core::mem::size_of::<procs::ProcProgram>() == 16);
const _: () = assert!(core::mem::size_of::<procs::ProcRow>() == procs::ROW_WORDS * 8);
const _: () = assert!(core::mem::size_of::<exec::ExecTotals>() == 48);
const _: () = assert!(core::mem::size_of::<pools::PoolConfig>() == 24);
const _: () = assert!(core::mem::size_of::<nfs4ops::OpsConfig>() == 40);
const _: () =
    assert!(core::mem::size_of::<nfs4ops::ThreadCompound>() == 24 + nfs4ops::OPS_PER_RECORD);
const _: () = assert!(core::mem::size_of::<pools::PoolTotals>() == 16);
const _: () = assert!(rawrec::EXEC_BYTES_OUT as usize + 8 <= RAW_BYTES);
const _: () = assert!(rawrec::XPRT as usize + 8 <= rawrec::EXEC_GEN as usize);
const _: () = assert!(rawrec::CLIENT_AT as usize + ADDR_MAX <= rawrec::XPRT as usize);
const _: () = assert!(rawrec::XPRT as usize + 8 <= RAW_BYTES);
const _: () = assert!(rawrec::PROC == rawrec::NETNS + 4);
const _: () = assert!(core::mem::align_of::<Record>() == 8);
const _: () = assert!(RAW_BYTES.is_multiple_of(8));
const _: () = assert!(OFF_NONE as usize >= RAW_BYTES);

#[cfg(feature = "user")]
mod user {
    // SAFETY: SlotConfig is repr(C), Copy, has no padding (asserted size 40
    // = sum of its fields) and every bit pattern is a valid value.
    unsafe impl aya::Pod for super::SlotConfig {}
    // SAFETY: RawConfig is repr(C), Copy, has no padding (asserted size 96
    // = sum of its fields) and every bit pattern is a valid value.
    unsafe impl aya::Pod for super::RawConfig {}
    // SAFETY: PoolConfig is repr(C), Copy, has no padding (asserted size 24
    // = sum of its fields) and every bit pattern is a valid value.
    unsafe impl aya::Pod for super::pools::PoolConfig {}
    // SAFETY: OpsConfig is repr(C), Copy, ten u32 without padding (asserted size 40); every bit pattern is valid.
    unsafe impl aya::Pod for super::nfs4ops::OpsConfig {}
    // SAFETY: ProcProgram is repr(C), Copy, four u32 without padding (asserted size 16); every bit pattern is valid.
    unsafe impl aya::Pod for super::procs::ProcProgram {}
    // SAFETY: TypedOffsets is repr(C), Copy, seven u64 without padding (asserted size 56); every bit pattern is valid.
    unsafe impl aya::Pod for super::typed::TypedOffsets {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_reads_what_to_bytes_wrote() {
        let mut r = Record::new(0x0102_0304_0506_0708, Slot::Dequeue);
        r.raw[16..24].copy_from_slice(&0x41u64.to_ne_bytes());
        r.raw[24..28].copy_from_slice(&4026531840u32.to_ne_bytes());
        // server: 16 bytes at 40; client: none.
        r.raw[8..12].copy_from_slice(&((16u32 << 16) | 40).to_ne_bytes());
        r.raw[40] = 2;
        r.raw[55] = 9;
        let b = r.to_bytes();
        let v = RecordView::new(&b).unwrap();
        assert_eq!(v.ts_ns(), 0x0102_0304_0506_0708);
        assert_eq!(v.slot(), Some(Slot::Dequeue));
        assert_eq!(v.field(16, 8), Some(0x41));
        assert_eq!(v.field(24, 4), Some(4026531840));
        assert_eq!(v.field(OFF_NONE, 4), None);
        assert_eq!(v.field(142, 4), None, "beyond the copied bytes");
        assert_eq!(v.field(16, 3), None, "not a scalar size");
        let server = v.data_loc(8).unwrap();
        assert_eq!(server.len(), 16);
        assert_eq!((server[0], server[15]), (2, 9));
        assert_eq!(v.data_loc(12), Some(&[][..]), "length 0");
        assert!(RecordView::new(&b[..Record::SIZE - 1]).is_none());
    }

    #[test]
    fn data_loc_beyond_the_copy_is_none() {
        let mut r = Record::new(1, Slot::Enqueue);
        r.raw[8..12].copy_from_slice(&((28u32 << 16) | 130).to_ne_bytes());
        let b = r.to_bytes();
        assert_eq!(RecordView::new(&b).unwrap().data_loc(8), None);
    }
}
