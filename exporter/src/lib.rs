//! nfsdtopd: nfsdtop's pipeline run headless, served over HTTP.
//!
//! - [`config`] (its `[http]` table in `config::http`): flags over a TOML
//!   file, errors with
//!   file:line:column;
//! - [`metrics`]: snapshots → Prometheus metrics with bounded cardinality;
//! - [`fold`]: which K peers and classes get a series (victims first), the
//!   rest folded into "other";
//! - [`unfair`]: /api/v1/unfair, every entity below its fair share;
//! - [`server`]: the axum routes (/metrics, /api/v1/snapshot,
//!   /api/v1/stream, /healthz); [`json_error`]: every error's body;
//!   [`landing`]: the page at
//!   `/` and the list of paths;
//! - [`body_budget`]: the memory all snapshot JSON may hold at once;
//! - [`auth`], [`auth_limit`], [`tls`]: basic auth (bcrypt or sha256)
//!   with failure budgets, and rustls;
//! - [`web_config`]: `--web.config.file`, exporter-toolkit's YAML (TLS,
//!   mutual TLS, users, headers), re-read when it changes;
//! - [`listener`], [`conn_io`], [`ratelog`]: accepting and serving
//!   connections under timeouts and a connection cap;
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
pub mod auth_limit;
pub mod body_budget;
pub mod config;
pub mod conn_io;
pub mod daemon;
pub mod fold;
pub mod json_error;
pub mod landing;
pub mod listener;
pub mod log;
pub mod manual;
pub mod metrics;
pub mod privileges;
pub mod ratelog;
pub mod server;
pub mod snapshot;
pub mod stream;
pub mod tls;
pub mod unfair;
pub mod web_config;
