//! Ring-buffer records → [`Event`]s: the pieces both kinds of record
//! share (addresses, what a slot's record means), the classic programs'
//! records ([`classic`]: a copy of the kernel's own record, read at the
//! format file's offsets) and the raw programs' ([`raw`]: full and short
//! records, and the execution totals folded in the kernel). Pure
//! functions and plain state, so records can be tested without a kernel;
//! the inverse, for tests and benchmarks, is behind the `testing` feature
//! ([`encode`]).

mod classic;
#[cfg(any(test, feature = "testing"))]
mod encode;
mod raw;

use nfsdtop_common::{RecordView, Slot, SlotConfig, ADDR_MAX, OFF_NONE};

use super::layout::Layout;
use crate::model::{Bytes, Endpoint, EventKind};

pub use classic::{decode, name_procedure};
#[cfg(any(test, feature = "testing"))]
pub use encode::{kernel_record, TraceFields};
pub use raw::KnownXprts;

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

/// The address a `__data_loc` word at `off` points at; `Endpoint::None`
/// for an absent field or a zero length (a listener or UDP transport),
/// `None` if the bytes lie beyond the copy.
#[inline(always)]
pub(super) fn endpoint_at(rec: &RecordView<'_>, off: u16) -> Option<Endpoint> {
    if off == OFF_NONE {
        return Some(Endpoint::None);
    }
    rec.data_loc(off).map(sockaddr)
}

/// What a record of slot `s` says happened; `None` for an enqueue attempt
/// that did not enqueue.
#[inline(always)]
fn kind(rec: &RecordView<'_>, s: Slot, cfg: &SlotConfig, layout: &Layout) -> Option<EventKind> {
    Some(match s {
        Slot::Enqueue => {
            if let Some(f) = rec.field(cfg.flags_off, cfg.flags_size) {
                if nfsdtop_common::not_enqueued(f, cfg.drop_mask, cfg.need_mask) {
                    return None;
                }
            }
            // Only a raw program's layout has this word (its
            // `rawrec::VALUE_INFLIGHT`); an `atomic_t` above i32::MAX is
            // a failed read (`rawrec::INFLIGHT_UNREAD`) or not a count.
            EventKind::Enqueue {
                inflight: rec
                    .field(cfg.value_off, cfg.value_size)
                    .filter(|&v| v <= i32::MAX as u64)
                    .map(|v| v as u32),
            }
        }
        Slot::Dequeue => EventKind::Dequeue {
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
        Slot::StatsLatency => EventKind::Executed {
            exec_ns: rec
                .field(cfg.value_off, cfg.value_size)
                .unwrap_or(0)
                .saturating_mul(1000),
            requests: 1,
            // Only a raw program's layout has this word (`rawrec::LENS`);
            // the classic record has no lengths.
            bytes: rec.field(cfg.flags_off, cfg.flags_size).map(|w| Bytes {
                received: w & 0xffff_ffff,
                sent: w >> 32,
            }),
            // Named by the caller, from the record's own field for it.
            procedure: None,
        },
        Slot::Accept => EventKind::Accepted,
        Slot::Close => EventKind::Closed,
    })
}
