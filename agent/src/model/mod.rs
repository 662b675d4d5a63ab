//! The data model shared by every stage: events in, snapshots out.

mod event;
mod procedures;
mod snapshot;

pub use event::{
    Bytes, Endpoint, Event, EventKind, PeerKey, PerTracepoint, ProcName, Tracepoint, XprtKey,
};
pub use procedures::Procedures;
pub use snapshot::{
    BpfProgramStats, ClientName, EntityKind, EntityStats, PoolView, ProcedureStats, ServerView,
    ServiceView, Snapshot, SourceInfo, SourceKind, Totals, TransportStats, WaitSource,
};
