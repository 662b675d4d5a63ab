//! nfsdtopd: nfsdtop's pipeline run headless, served over HTTP.
//!
//! - [`config`]: flags over a TOML file, errors with file:line:column;
//! - [`metrics`]: snapshots → Prometheus metrics with bounded cardinality
//!   (top K peers and classes, the rest folded into "other");
//! - [`server`]: the axum routes (/metrics, /api/v1/snapshot,
//!   /api/v1/stream, /healthz) and JSON errors;
//! - [`auth`], [`tls`]: basic auth (bcrypt or sha256) and rustls;
//! - [`privileges`]: capabilities dropped once the live source is attached;
//! - [`daemon`]: wires a source, the pipeline thread, SIGHUP and the server;
//! - [`snapshot`]: published snapshots, their shared JSON encodings and
//!   /api/v1/snapshot; [`stream`]: /api/v1/stream, capped, slow readers
//!   dropped;
//! - [`log`]: log lines that cannot fail.

// `eprintln!` panics when stderr is closed: log lines go through
// `log::log`, which cannot.
#![deny(clippy::print_stderr, clippy::print_stdout)]

pub mod auth;
pub mod config;
pub mod daemon;
pub mod log;
pub mod metrics;
pub mod privileges;
pub mod server;
pub mod snapshot;
pub mod stream;
pub mod tls;
