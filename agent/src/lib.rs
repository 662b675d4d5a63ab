//! nfsdtop's pipeline. Every module, in the order data flows through it
//! (ARCHITECTURE.md at the top of the repository draws the same path):
//!
//! - [`source`]: where events come from — the live kernel (BPF on the
//!   sunrpc tracepoints), the built-in demo simulator, or a recording;
//! - [`record`]: recordings, events to a checked file and back;
//! - [`input`]: the small files a user hands over (class maps, scenarios,
//!   configs, certificates), read with a size limit;
//! - [`text`]: text from outside (kernel files, recordings, DNS, remote
//!   agents) made safe to show;
//! - [`enrich`]: what a peer is besides its address: its class
//!   (`classify`: class map file or the kernel's class), its NFSv4
//!   clients' own names (`clients`: nfsd's client list), its host name
//!   only when asked (`resolve`), and pseudonyms where the list is
//!   sensitive (`redact`);
//! - [`aggregate`]: events → shares, fair shares, waits, execution time
//!   (nfsd's, and each other RPC service's apart in `aggregate::services`);
//! - [`server`]: the server's threads and how busy the interval kept them;
//! - [`model`]: the event and snapshot types every stage agrees on;
//! - [`pipeline`]: drives a source into the aggregator and hands snapshots
//!   to a view (TUI, batch output, HTTP API, exporter), with its
//!   `playback` (pause, step, seek, speed) for a virtual source;
//! - [`session`]: the source, class map and pacing a front end asks for,
//!   opened and run (with the shared source flags under feature `cli`);
//! - [`present`]: the per-entity field table, one formatter per unit and
//!   the fairness vocabulary, which the TUI, the batch output (its
//!   `output`) and the manual show from;
//! - [`whatif`]: a recording → a fitted model → the simulator under
//!   another dispatch policy (`nfsdtop whatif`);
//! - [`keyhash`]: the seeded hash of maps keyed by what clients choose;
//! - [`testing`]: how tests that need BPF, tracefs or root say "skipped";
//!   `fuzzing`: the entry points of the fuzz targets (hidden).

pub mod aggregate;
pub mod enrich;
#[doc(hidden)]
pub mod fuzzing;
pub mod input;
pub mod keyhash;
pub mod model;
pub mod pipeline;
pub mod present;
pub mod record;
pub mod server;
pub mod session;
pub mod source;
pub mod testing;
pub mod text;
pub mod whatif;
