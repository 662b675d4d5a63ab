//! Ring-buffer records → [`Event`]s. Pure functions, so raw records can be
//! tested without a kernel.

use nfsdtop_common::{rawrec, slot, Record, RecordView, SlotConfig, ADDR_MAX, OFF_NONE};
use rustc_hash::FxHashMap;

use super::layout::Layout;
use crate::model::{Endpoint, Event, EventKind, XprtKey};

const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

/// A kernel `struct sockaddr` as the tracepoint copied it (`len` bytes).
/// Empty (a listener or UDP transport), an unknown family or a short
/// address is [`Endpoint::None`].
#[inline]
pub fn sockaddr(raw: &[u8]) -> Endpoint {
    if raw.len() < 2 {
        return Endpoint::None;
    }
    let family = u16::from_ne_bytes([raw[0], raw[1]]);
    let port = || u16::from_be_bytes([raw[2], raw[3]]);
    match family {
        AF_INET if raw.len() >= 8 => Endpoint::V4 {
            ip: [raw[4], raw[5], raw[6], raw[7]],
            port: port(),
        },
        AF_INET6 if raw.len() >= 24 => {
            let mut ip = [0u8; 16];
            ip.copy_from_slice(&raw[8..24]);
            Endpoint::V6 { ip, port: port() }
        }
        _ => Endpoint::None,
    }
}

/// The address a `__data_loc` word at `off` points at; `Endpoint::None`
/// for an absent field or a zero length (a listener or UDP transport),
/// `None` if the bytes lie beyond the copy.
#[inline(always)]
fn endpoint_at(rec: &RecordView<'_>, off: u16) -> Option<Endpoint> {
    if off == OFF_NONE {
        return Some(Endpoint::None);
    }
    rec.data_loc(off).map(sockaddr)
}

/// Decode one ring record: its fields are where the slot's format put
/// them. `None` for records that are not events: an enqueue attempt that
/// found the transport BUSY or not ready (the BPF program drops these
/// already; this is the same rule, for safety), an unknown slot, or an
/// address whose bytes lie beyond the copy (never, for the formats
/// [`Layout`] accepts).
pub fn decode(rec: &RecordView<'_>, layout: &Layout) -> Option<Event> {
    let s = rec.slot();
    let cfg = layout.slots.get(s as usize)?;
    let kind = kind(rec, s, cfg, layout)?;
    Some(Event {
        ts_ns: rec.ts_ns(),
        xprt: XprtKey {
            netns: rec.field(cfg.netns_off, cfg.netns_size).unwrap_or(0) as u32,
            server: endpoint_at(rec, cfg.server_off)?,
            client: endpoint_at(rec, cfg.client_off)?,
        },
        kind,
    })
}

/// What a record of slot `s` says happened; `None` for an enqueue attempt
/// that did not enqueue, or an unknown slot.
#[inline(always)]
fn kind(rec: &RecordView<'_>, s: u8, cfg: &SlotConfig, layout: &Layout) -> Option<EventKind> {
    Some(match s {
        slot::ENQUEUE => {
            if let Some(f) = rec.field(cfg.flags_off, cfg.flags_size) {
                if nfsdtop_common::not_enqueued(f, cfg.drop_mask, cfg.need_mask) {
                    return None;
                }
            }
            EventKind::Enqueue
        }
        slot::DEQUEUE => EventKind::Dequeue {
            qtime_ns: if layout.qtime {
                rec.field(cfg.value_off, cfg.value_size)
                    .map(|v| v.saturating_mul(1000))
            } else {
                None
            },
            class: if layout.kernel_class {
                rec.field(cfg.class_off, cfg.class_size).map(|c| c as u32)
            } else {
                None
            },
        },
        slot::STATS_LATENCY => EventKind::Executed {
            exec_ns: rec
                .field(cfg.value_off, cfg.value_size)
                .unwrap_or(0)
                .saturating_mul(1000),
        },
        slot::ACCEPT => EventKind::Accepted,
        slot::CLOSE => EventKind::Closed,
        _ => return None,
    })
}

/// The transports the raw programs have sent in full, by their `struct
/// svc_xprt` pointer: a short record (`rawrec::SHORT`) names its transport
/// by pointer only. A raw svc_xprt_free record forgets the pointer; the
/// BPF side forgets it at the free and again at svc_xprt_accept, so a
/// transport at a reused address starts with a full record, which
/// replaces the old one here.
#[derive(Default)]
pub struct KnownXprts {
    keys: FxHashMap<u64, XprtKey>,
    /// Short records whose pointer was never sent in full, per slot (never
    /// expected: counted as lost events, not guessed at).
    pub unknown: [u64; slot::COUNT],
}

impl KnownXprts {
    /// Decode a raw program's record (full or short) with the raw layout.
    pub fn decode(&mut self, rec: &RecordView<'_>, layout: &Layout) -> Option<Event> {
        let ptr = rec.field(rawrec::XPRT, 8).unwrap_or(0);
        if rec.raw_kind() == rawrec::SHORT {
            let s = rec.slot();
            let cfg = layout.slots.get(s as usize)?;
            let Some(key) = self.keys.get(&ptr) else {
                if let Some(n) = self.unknown.get_mut(s as usize) {
                    *n += 1;
                }
                return None;
            };
            return Some(Event {
                ts_ns: rec.ts_ns(),
                xprt: *key,
                kind: kind(rec, s, cfg, layout)?,
            });
        }
        let ev = decode(rec, layout)?;
        if ptr != 0 {
            if ev.kind == EventKind::Closed {
                self.keys.remove(&ptr);
            } else {
                self.keys.insert(ptr, ev.xprt);
            }
        }
        Some(ev)
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// Build the sockaddr bytes the kernel would put in a record (tests and
/// the socket-table seeding share the decoder's view of addresses).
pub fn sockaddr_bytes(e: &Endpoint) -> ([u8; ADDR_MAX], u8) {
    let mut b = [0u8; ADDR_MAX];
    match *e {
        Endpoint::None => (b, 0),
        Endpoint::V4 { ip, port } => {
            b[0..2].copy_from_slice(&AF_INET.to_ne_bytes());
            b[2..4].copy_from_slice(&port.to_be_bytes());
            b[4..8].copy_from_slice(&ip);
            (b, 16)
        }
        Endpoint::V6 { ip, port } => {
            b[0..2].copy_from_slice(&AF_INET6.to_ne_bytes());
            b[2..4].copy_from_slice(&port.to_be_bytes());
            b[8..24].copy_from_slice(&ip);
            (b, 28)
        }
    }
}

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
/// out a record. The inverse of [`decode`], for tests and benchmarks.
pub fn kernel_record(cfg: &SlotConfig, slot: u8, ts_ns: u64, f: &TraceFields) -> Record {
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
