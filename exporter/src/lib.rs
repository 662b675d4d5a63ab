//! nfsdtopd: nfsdtop's pipeline run headless, served over HTTP.
//!
//! - [`config`], [`http_config`]: flags over a TOML file, errors with
//!   file:line:column;
//! - [`metrics`]: snapshots → Prometheus metrics with bounded cardinality
//!   (top K peers and classes, the rest folded into "other");
//! - [`server`]: the axum routes (/metrics, /api/v1/snapshot,
//!   /api/v1/stream, /healthz) and JSON errors;
//! - [`auth`], [`auth_limit`], [`tls`]: basic auth (bcrypt or sha256)
//!   with failure budgets, and rustls;
//! - [`listener`], [`conn_io`], [`ratelog`]: accepting and serving
//!   connections under timeouts and a connection cap;
//! - [`privileges`]: capabilities dropped once the live source is attached;
//! - [`daemon`]: wires a source, the pipeline thread, SIGHUP and the server.

pub mod auth;
pub mod auth_limit;
pub mod config;
pub mod conn_io;
pub mod daemon;
pub mod http_config;
pub mod listener;
pub mod metrics;
pub mod privileges;
pub mod ratelog;
pub mod server;
pub mod tls;
