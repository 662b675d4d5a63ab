//! Ring-buffer records → [`Event`]s. Pure functions, so raw records can be
//! tested without a kernel.

use nfsdtop_common::{rflag, slot, Record, ADDR_MAX};

use super::layout::Layout;
use crate::model::{Endpoint, Event, EventKind, XprtKey};

const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

/// A kernel `struct sockaddr` of `len` bytes (only the first
/// `min(len, ADDR_MAX)` of `raw` are valid). Length 0, an unknown family
/// or a short address is [`Endpoint::None`].
pub fn sockaddr(raw: &[u8; ADDR_MAX], len: u8) -> Endpoint {
    let len = (len as usize).min(ADDR_MAX);
    if len < 2 {
        return Endpoint::None;
    }
    let family = u16::from_ne_bytes([raw[0], raw[1]]);
    let port = u16::from_be_bytes([raw[2], raw[3]]);
    match family {
        AF_INET if len >= 8 => Endpoint::V4 {
            ip: [raw[4], raw[5], raw[6], raw[7]],
            port,
        },
        AF_INET6 if len >= 24 => {
            let mut ip = [0u8; 16];
            ip.copy_from_slice(&raw[8..24]);
            Endpoint::V6 { ip, port }
        }
        _ => Endpoint::None,
    }
}

/// Decode one record. `None` for records that are not events: an enqueue
/// attempt that found the transport BUSY (the BPF program drops these
/// already; this is the same rule, for safety) or an unknown slot.
pub fn decode(rec: &Record, layout: &Layout) -> Option<Event> {
    let cfg = layout.slots.get(rec.slot as usize)?;
    let has_value = rec.rflags & rflag::HAS_VALUE != 0;
    let kind = match rec.slot {
        slot::ENQUEUE => {
            let f = rec.flags as u64;
            if f & cfg.drop_mask != 0 || (cfg.need_mask != 0 && f & cfg.need_mask == 0) {
                return None;
            }
            EventKind::Enqueue
        }
        slot::DEQUEUE => EventKind::Dequeue {
            qtime_ns: (layout.qtime && has_value).then(|| rec.value.saturating_mul(1000)),
            class: (layout.kernel_class && rec.rflags & rflag::HAS_CLASS != 0).then_some(rec.class),
        },
        slot::STATS_LATENCY => EventKind::Executed {
            exec_ns: if has_value {
                rec.value.saturating_mul(1000)
            } else {
                0
            },
        },
        slot::ACCEPT => EventKind::Accepted,
        slot::CLOSE => EventKind::Closed,
        _ => return None,
    };
    Some(Event {
        ts_ns: rec.ts_ns,
        xprt: XprtKey {
            netns: rec.netns,
            server: sockaddr(&rec.server, rec.server_len),
            client: sockaddr(&rec.client, rec.client_len),
        },
        kind,
    })
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
