//! Records the classic tracepoint programs copied from the kernel's own
//! tracepoint record: every field at the offset the running kernel's
//! format file gives (the raw programs' full records are read the same
//! way, with the `rawrec` offsets).

use nfsdtop_common::RecordView;

use super::{endpoint_at, kind};
use crate::model::{Event, EventKind, ProcName, XprtKey};
use crate::source::live::layout::Layout;

/// Decode one ring record: its fields are where the slot's format put
/// them. `None` for records that are not events: an enqueue attempt that
/// found the transport BUSY or not ready (the BPF program drops these
/// already; this is the same rule, for safety), an unknown slot, or an
/// address whose bytes lie beyond the copy (never, for the formats
/// [`Layout`] accepts).
pub fn decode(rec: &RecordView<'_>, layout: &Layout) -> Option<Event> {
    let s = rec.slot()?;
    let cfg = &layout.slots[s as usize];
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

/// Names, in `ev` (a classic svc_stats_latency record decoded), the
/// procedure of its request from the record's `procedure` string; left
/// unnamed where the format has none or the string lies beyond the copy.
pub fn name_procedure(rec: &RecordView<'_>, layout: &Layout, ev: &mut Event) {
    if let EventKind::Executed { procedure, .. } = &mut ev.kind {
        *procedure = rec
            .data_loc(layout.procedure_loc)
            .map(|bytes| ProcName::from_bytes(bytes.split(|&b| b == 0).next().unwrap_or_default()));
    }
}
