//! The data model shared by every stage: events in, snapshots out.

mod batch;
pub mod bounds;
mod depth;
mod event;
pub mod histogram;
mod operations;
mod procedures;
mod schema;
mod snapshot;

pub use batch::BatchEntity;
pub use depth::{DepthHistogram, DepthTally, DEPTH_BUCKETS, DEPTH_LOWER};
pub use event::{
    Bytes, Endpoint, Event, EventKind, PeerKey, PerTracepoint, ProcName, Tracepoint, XprtKey,
};
pub use operations::{OperationStats, Operations};
pub use procedures::Procedures;
pub use schema::{Schema, SCHEMA};
pub use snapshot::{
    BpfProgramStats, ClientName, EntityKind, EntityStats, OperationTotals, PoolView,
    ProcedureStats, ServerView, ServicePeer, ServiceView, Snapshot, SourceInfo, SourceKind,
    ThreadsRunning, Totals, TransportStats, WaitSource,
};
