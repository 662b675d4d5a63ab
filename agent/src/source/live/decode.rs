//! Ring-buffer records → [`Event`]s. Pure functions, so raw records can be
//! tested without a kernel.

use nfsdtop_common::exec::ExecTotals;
use nfsdtop_common::{
    rawrec, slot, xprt_table, Record, RecordView, SlotConfig, ADDR_MAX, OFF_NONE,
};
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
            requests: 1,
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
///
/// Also what has been reported of each transport's execution totals
/// folded in the kernel (`nfsdtop_common::exec`): the totals of the
/// entry a full record claimed (its `gen` is the record's time), read by
/// [`KnownXprts::sweep`] and settled by the record that ends the claim.
#[derive(Default)]
pub struct KnownXprts {
    keys: FxHashMap<u64, Known>,
    /// Short records whose pointer was never sent in full, and folded
    /// requests of a claim never seen, per slot (never expected: counted
    /// as lost events, not guessed at).
    pub unknown: [u64; slot::COUNT],
}

#[derive(Clone, Copy, Debug)]
struct Known {
    key: XprtKey,
    /// The time of the full record that claimed the transport's totals.
    gen: u64,
    /// Folded µs and requests reported so far for that claim.
    us: u64,
    count: u64,
}

impl Known {
    /// What grew of `t` (this claim's totals) since last reported.
    fn report(&mut self, t: &ExecTotals, ts_ns: u64, out: &mut Vec<Event>) {
        let (us, count) = (
            t.us.saturating_sub(self.us),
            t.count.saturating_sub(self.count),
        );
        self.us = self.us.max(t.us);
        self.count = self.count.max(t.count);
        if us > 0 || count > 0 {
            out.push(Event {
                ts_ns,
                xprt: self.key,
                kind: EventKind::Executed {
                    exec_ns: us.saturating_mul(1000),
                    requests: count,
                },
            });
        }
    }
}

impl KnownXprts {
    /// Decode a raw program's record (full or short) with the raw layout
    /// into `out`: its event, after the execution totals it settles.
    pub fn decode(&mut self, rec: &RecordView<'_>, layout: &Layout, out: &mut Vec<Event>) {
        let ptr = rec.field(rawrec::XPRT, 8).unwrap_or(0);
        if rec.raw_kind() == rawrec::SHORT {
            let s = rec.slot();
            let Some(cfg) = layout.slots.get(s as usize) else {
                return;
            };
            let Some(known) = self.keys.get(&ptr) else {
                if let Some(n) = self.unknown.get_mut(s as usize) {
                    *n += 1;
                }
                return;
            };
            if let Some(kind) = kind(rec, s, cfg, layout) {
                out.push(Event {
                    ts_ns: rec.ts_ns(),
                    xprt: known.key,
                    kind,
                });
            }
            return;
        }
        let settled = ExecTotals {
            owner: rec.field(rawrec::EXEC_OWNER, 8).unwrap_or(0),
            gen: rec.field(rawrec::EXEC_GEN, 8).unwrap_or(0),
            us: rec.field(rawrec::EXEC_US, 8).unwrap_or(0),
            count: rec.field(rawrec::EXEC_COUNT, 8).unwrap_or(0),
        };
        if settled.owner != 0 {
            match self.keys.get_mut(&settled.owner) {
                Some(k) if k.gen == settled.gen => k.report(&settled, rec.ts_ns(), out),
                _ => {
                    let n = &mut self.unknown[slot::STATS_LATENCY as usize];
                    *n = n.saturating_add(settled.count);
                }
            }
        }
        let Some(ev) = decode(rec, layout) else {
            return;
        };
        if ptr != 0 {
            if ev.kind == EventKind::Closed {
                self.keys.remove(&ptr);
            } else {
                self.keys.insert(
                    ptr,
                    Known {
                        key: ev.xprt,
                        gen: rec.ts_ns(),
                        us: 0,
                        count: 0,
                    },
                );
            }
        }
        out.push(ev);
    }

    /// Report what grew of every known transport's folded totals;
    /// `read` gives an entry of the kernel's `EXEC_TOTALS` (None while it
    /// changes hands). An entry that another claim holds, or whose claim's
    /// full record has not been decoded yet, waits for a later sweep or
    /// for the record that settles it.
    pub fn sweep(
        &mut self,
        read: impl Fn(u32) -> Option<ExecTotals>,
        now_ns: u64,
        out: &mut Vec<Event>,
    ) {
        for (&ptr, k) in &mut self.keys {
            if let Some(t) = read(xprt_table::slot(ptr)) {
                if t.owner == ptr && t.gen == k.gen {
                    k.report(&t, now_ns, out);
                }
            }
        }
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
