//! nfsdtopd: nfsdtop's pipeline run headless, served over HTTP.
//!
//! - [`config`]: flags over a TOML file, errors with file:line:column;
//! - [`metrics`]: snapshots → Prometheus metrics with bounded cardinality;
//! - [`fold`]: which K peers and classes get a series (victims first), the
//!   rest folded into "other";
//! - [`unfair`]: /api/v1/unfair, every entity below its fair share;
//! - [`server`]: the axum routes (/metrics, /api/v1/snapshot,
//!   /api/v1/stream, /healthz) and JSON errors;
//! - [`auth`], [`tls`]: basic auth (bcrypt or sha256) and rustls;
//! - [`privileges`]: capabilities dropped once the live source is attached;
//! - [`daemon`]: wires a source, the pipeline thread, SIGHUP and the server.

pub mod auth;
pub mod config;
pub mod daemon;
pub mod fold;
pub mod manual;
pub mod metrics;
pub mod privileges;
pub mod server;
pub mod tls;
pub mod unfair;
