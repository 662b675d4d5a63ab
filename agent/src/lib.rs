//! nfsdtop's pipeline, in the order data flows through it:
//!
//! - [`source`]: where events come from — the live kernel (BPF on the
//!   sunrpc tracepoints), the built-in demo simulator, or a recording;
//! - [`classify`]: peers → classes (class map file or the kernel's class);
//! - [`clients`]: peers → the NFSv4 clients' own names (nfsd's client list);
//! - [`aggregate`]: events → shares, fair shares, waits, execution time
//!   (nfsd's, and each other RPC service's apart in `aggregate::services`);
//! - [`model`]: the event and snapshot types every stage agrees on;
//! - [`pipeline`]: drives a source into the aggregator and hands snapshots
//!   to a view (TUI, batch output, HTTP API, exporter);
//! - [`session`]: the source, class map and pacing a front end asks for,
//!   opened and run (with the shared source flags under feature `cli`);
//! - [`whatif`]: a recording → a fitted model → the simulator under
//!   another dispatch policy (`nfsdtop whatif`);
//! - [`present`]: the per-entity field table and one formatter per unit,
//!   which the TUI, the batch output ([`output`]) and the manual show from;
//! - [`keyhash`]: the seeded hash of maps keyed by what clients choose.

pub mod aggregate;
pub mod classify;
pub mod clients;
#[doc(hidden)]
pub mod fuzzing;
pub mod input;
pub mod keyhash;
pub mod model;
pub mod output;
pub mod pipeline;
pub mod playback;
pub mod present;
pub mod record;
pub mod redact;
pub mod resolve;
pub mod server;
pub mod session;
pub mod source;
pub mod testing;
pub mod text;
pub mod whatif;
