//! The inverse of the decoder, for tests and benchmarks (the `testing`
//! feature): the ring record a BPF program writes for a tracepoint hit.

use nfsdtop_common::{Record, Slot, SlotConfig, OFF_NONE};

use super::sockaddr_bytes;
use crate::model::Endpoint;

/// The fields of one tracepoint hit, for [`kernel_record`].
#[derive(Clone, Copy, Debug, Default)]
pub struct TraceFields {
    pub flags: u64,
    pub netns: u32,
    pub value: u64,
    pub class: u32,
    pub client: Endpoint,
    pub server: Endpoint,
}

/// The ring record the BPF program writes for a hit of a tracepoint laid
/// out as `cfg` says: each field at its offset, the two sockaddrs after
/// the fixed fields behind their `__data_loc` words, as the kernel lays
/// out a record. The inverse of [`super::decode`].
pub fn kernel_record(cfg: &SlotConfig, slot: Slot, ts_ns: u64, f: &TraceFields) -> Record {
    let mut r = Record::new(ts_ns, slot);
    let mut put = |off: u16, size: u16, v: u64| {
        if off == OFF_NONE {
            return;
        }
        let (at, n) = (off as usize, size as usize);
        if let Some(dst) = r.raw.get_mut(at..at + n) {
            dst.copy_from_slice(&v.to_ne_bytes()[..n]);
        }
    };
    put(cfg.flags_off, cfg.flags_size, f.flags);
    put(cfg.netns_off, cfg.netns_size, u64::from(f.netns));
    put(cfg.value_off, cfg.value_size, f.value);
    put(cfg.class_off, cfg.class_size, u64::from(f.class));
    let fixed_end = [
        (cfg.server_off, 4),
        (cfg.client_off, 4),
        (cfg.flags_off, cfg.flags_size),
        (cfg.netns_off, cfg.netns_size),
        (cfg.value_off, cfg.value_size),
        (cfg.class_off, cfg.class_size),
    ]
    .iter()
    .filter(|(o, _)| *o != OFF_NONE)
    .map(|(o, n)| *o as usize + *n as usize)
    .max()
    .unwrap_or(8);
    let mut at = fixed_end.next_multiple_of(4);
    for (off, ep) in [(cfg.server_off, f.server), (cfg.client_off, f.client)] {
        if off == OFF_NONE {
            continue;
        }
        let (bytes, len) = sockaddr_bytes(&ep);
        let len = len as usize;
        let loc = ((len as u32) << 16) | at as u32;
        r.raw[off as usize..off as usize + 4].copy_from_slice(&loc.to_ne_bytes());
        if let Some(dst) = r.raw.get_mut(at..at + len) {
            dst.copy_from_slice(&bytes[..len]);
        }
        at += len;
    }
    r
}
