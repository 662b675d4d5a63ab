//! The data model shared by every stage: events in, snapshots out.

mod event;
mod snapshot;

pub use event::{Bytes, Endpoint, Event, EventKind, PeerKey, PerTracepoint, Tracepoint, XprtKey};
pub use snapshot::{
    BpfProgramStats, ClientName, EntityKind, EntityStats, PoolView, ServerView, Snapshot,
    SourceInfo, SourceKind, Totals, TransportStats, WaitSource,
};
