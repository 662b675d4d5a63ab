//! The types that cross the kernel boundary between nfsdtop's BPF programs
//! (`ebpf/nfsdtop-ebpf`) and the agent (`agent/src/source/live`).
//!
//! Everything here is `#[repr(C)]`, fixed-size and plain old data: the BPF
//! programs write [`Record`]s into a ring buffer, the agent reads them back
//! as bytes; the agent writes one [`SlotConfig`] per tracepoint into the
//! `CONFIG` array map before attaching, the programs read it on every hit.
//!
//! Classic tracepoint records have no CO-RE relocations from Rust BPF, so
//! every field offset comes from the running kernel's format file
//! (`/sys/kernel/tracing/events/sunrpc/<event>/format`), parsed by the agent.
#![cfg_attr(not(test), no_std)]

/// Bytes of a socket address kept per endpoint: a `sockaddr_in6` is 28
/// bytes, a `sockaddr_in` 16; 0 is a listener or UDP transport.
pub const ADDR_MAX: usize = 28;

/// One program (and one tracepoint) per slot: the program cannot tell which
/// event fired (`common_type` is not valid from BPF), so each passes its own
/// slot number to the shared handler.
pub mod slot {
    pub const ENQUEUE: u8 = 0;
    pub const DEQUEUE: u8 = 1;
    pub const STATS_LATENCY: u8 = 2;
    pub const ACCEPT: u8 = 3;
    pub const CLOSE: u8 = 4;
    /// Number of slots; the `CONFIG` map has this many entries.
    pub const COUNT: usize = 5;
}

/// Per-slot counters in the per-CPU `COUNTERS` array, at
/// `slot * counter::COUNT + counter::X`. Loss is always counted: every
/// record either reaches the ring or is counted in `LOST`.
pub mod counter {
    /// Times the program ran (every tracepoint hit).
    pub const SEEN: u32 = 0;
    /// Records submitted to the ring.
    pub const SUBMITTED: u32 = 1;
    /// Ring reservations that failed (ring full) or records that could
    /// not be read: records the agent never sees.
    pub const LOST: u32 = 2;
    /// Enqueue attempts dropped in the kernel because the transport was
    /// already BUSY (6.6+ kernels): counted, never streamed.
    pub const BUSY: u32 = 3;
    /// Hits ignored because the slot was not configured (disabled).
    pub const DISABLED: u32 = 4;
    pub const COUNT: u32 = 5;
    /// Entries in the `COUNTERS` map.
    pub const ENTRIES: u32 = super::slot::COUNT as u32 * COUNT;
}

/// `Record::rflags` bits.
pub mod rflag {
    /// `value` holds the slot's value field (dequeue `qtime`, latency
    /// `execute`).
    pub const HAS_VALUE: u8 = 1 << 0;
    /// `class` holds the dequeue tracepoint's `class` field.
    pub const HAS_CLASS: u8 = 1 << 1;
    /// An address could not be read (kept, with length 0).
    pub const ADDR_FAULT: u8 = 1 << 2;
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

/// One ring-buffer record (88 bytes, 8-aligned).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// `bpf_ktime_get_ns()`: CLOCK_MONOTONIC.
    pub ts_ns: u64,
    /// The slot's value field as the kernel wrote it (µs for `qtime` and
    /// `execute`), valid when `rflags` has `HAS_VALUE`.
    pub value: u64,
    /// Low 32 bits of the transport's `xpt_flags`.
    pub flags: u32,
    /// The kernel's class word, valid when `rflags` has `HAS_CLASS`.
    pub class: u32,
    pub netns: u32,
    pub slot: u8,
    pub rflags: u8,
    /// Lengths the kernel gave the addresses (0 = none); only the first
    /// `min(len, ADDR_MAX)` bytes of `client`/`server` are meaningful.
    pub client_len: u8,
    pub server_len: u8,
    /// Raw `struct sockaddr` bytes (family in host order, port and address
    /// in network order).
    pub client: [u8; ADDR_MAX],
    pub server: [u8; ADDR_MAX],
}

impl Record {
    pub const SIZE: usize = core::mem::size_of::<Record>();

    pub const fn zeroed() -> Record {
        Record {
            ts_ns: 0,
            value: 0,
            flags: 0,
            class: 0,
            netns: 0,
            slot: 0,
            rflags: 0,
            client_len: 0,
            server_len: 0,
            client: [0; ADDR_MAX],
            server: [0; ADDR_MAX],
        }
    }

    /// Serialise in the in-memory (little-endian on BPF targets) layout:
    /// the agent's tests build raw records with it.
    pub fn to_bytes(&self) -> [u8; Record::SIZE] {
        let mut b = [0u8; Record::SIZE];
        b[0..8].copy_from_slice(&self.ts_ns.to_ne_bytes());
        b[8..16].copy_from_slice(&self.value.to_ne_bytes());
        b[16..20].copy_from_slice(&self.flags.to_ne_bytes());
        b[20..24].copy_from_slice(&self.class.to_ne_bytes());
        b[24..28].copy_from_slice(&self.netns.to_ne_bytes());
        b[28] = self.slot;
        b[29] = self.rflags;
        b[30] = self.client_len;
        b[31] = self.server_len;
        b[32..32 + ADDR_MAX].copy_from_slice(&self.client);
        b[32 + ADDR_MAX..32 + 2 * ADDR_MAX].copy_from_slice(&self.server);
        b
    }

    /// The inverse of [`Record::to_bytes`]; `None` if `b` is too short.
    /// Safe code only: ring items are byte slices of unknown alignment.
    pub fn from_bytes(b: &[u8]) -> Option<Record> {
        if b.len() < Record::SIZE {
            return None;
        }
        let u64_at = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[o..o + 8]);
            u64::from_ne_bytes(a)
        };
        let u32_at = |o: usize| {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[o..o + 4]);
            u32::from_ne_bytes(a)
        };
        let mut client = [0u8; ADDR_MAX];
        client.copy_from_slice(&b[32..32 + ADDR_MAX]);
        let mut server = [0u8; ADDR_MAX];
        server.copy_from_slice(&b[32 + ADDR_MAX..32 + 2 * ADDR_MAX]);
        Some(Record {
            ts_ns: u64_at(0),
            value: u64_at(8),
            flags: u32_at(16),
            class: u32_at(20),
            netns: u32_at(24),
            slot: b[28],
            rflags: b[29],
            client_len: b[30],
            server_len: b[31],
            client,
            server,
        })
    }
}

// The layout is part of the kernel/user contract: fail the build, not the
// decoder, if it drifts.
const _: () = assert!(Record::SIZE == 88);
const _: () = assert!(core::mem::size_of::<SlotConfig>() == 40);
const _: () = assert!(core::mem::align_of::<Record>() == 8);

#[cfg(feature = "user")]
mod user {
    // SAFETY: SlotConfig is repr(C), Copy, has no padding (asserted size 40
    // = sum of its fields) and every bit pattern is a valid value.
    unsafe impl aya::Pod for super::SlotConfig {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_matches_repr_c_layout() {
        let mut r = Record::zeroed();
        r.ts_ns = 0x0102_0304_0506_0708;
        r.value = 77;
        r.flags = 0x41;
        r.class = 3;
        r.netns = 4026531840;
        r.slot = slot::DEQUEUE;
        r.rflags = rflag::HAS_VALUE;
        r.client_len = 16;
        r.client[0] = 2;
        r.server[27] = 9;
        let b = r.to_bytes();
        assert_eq!(Record::from_bytes(&b), Some(r));
        assert_eq!(core::mem::offset_of!(Record, client), 32);
        assert_eq!(core::mem::offset_of!(Record, server), 32 + ADDR_MAX);
        assert_eq!(core::mem::offset_of!(Record, slot), 28);
        assert!(Record::from_bytes(&b[..87]).is_none());
    }
}
