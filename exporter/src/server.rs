//! The HTTP surface: the routes, /metrics and /healthz (`/`, the landing
//! page, is in [`crate::landing`], /api/v1/snapshot
//! is in [`crate::snapshot`], /api/v1/stream in [`crate::stream`],
//! /api/v1/unfair in [`crate::unfair`]).
//! Every error is JSON `{"error": "..."}` with a 4xx/5xx status; nothing a
//! client sends can panic the daemon.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRef, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::sync::watch;

use crate::auth::Auth;
use crate::conn_io::MAX_HEAD;
use crate::json_error::json_error;
use crate::metrics;
use crate::snapshot::{snapshot_handler, Encoder, Latest};
use crate::stream::{stream_handler, Streams};

#[derive(Clone)]
pub struct AppState {
    pub latest: Latest,
    /// /metrics, encoded by the pipeline thread right after each snapshot
    /// (so a scrape never waits for an update).
    pub metrics: watch::Receiver<Arc<metrics::Exposition>>,
    pub auth: Arc<Auth>,
    pub interval: Duration,
    /// Becomes true when the daemon stops: open streams end, so a graceful
    /// shutdown does not wait for clients that never hang up.
    pub shutdown: watch::Receiver<bool>,
    /// The open /api/v1/stream clients, capped.
    pub streams: Arc<Streams>,
    /// Makes the snapshots' JSON, shared by the snapshot and stream views.
    pub encoder: Arc<Encoder>,
}

// The parts of the state each handler takes (`State<Latest>`, …), so that
// the handlers' modules need not know AppState.
impl FromRef<AppState> for Latest {
    fn from_ref(st: &AppState) -> Latest {
        st.latest.clone()
    }
}

impl FromRef<AppState> for Arc<Encoder> {
    fn from_ref(st: &AppState) -> Arc<Encoder> {
        st.encoder.clone()
    }
}

impl FromRef<AppState> for Arc<Streams> {
    fn from_ref(st: &AppState) -> Arc<Streams> {
        st.streams.clone()
    }
}

/// The daemon's stop (see [`AppState::shutdown`]).
impl FromRef<AppState> for watch::Receiver<bool> {
    fn from_ref(st: &AppState) -> watch::Receiver<bool> {
        st.shutdown.clone()
    }
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(crate::landing::handler))
        .route("/metrics", get(metrics_handler))
        .route("/api/v1/snapshot", get(snapshot_handler))
        .route("/api/v1/stream", get(stream_handler))
        .route("/api/v1/unfair", get(crate::unfair::handler))
        .route("/healthz", get(healthz_handler))
        .fallback(|req: Request| async move {
            json_error(
                StatusCode::NOT_FOUND,
                format!(
                    "no such path {:?}: try {}",
                    req.uri().path(),
                    crate::landing::path_list()
                ),
            )
        })
        .method_not_allowed_fallback(|req: Request| async move {
            json_error(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("method {} not allowed: use GET", req.method()),
            )
        })
        .layer(middleware::from_fn_with_state(
            state.auth.clone(),
            crate::auth::layer,
        ))
        .layer(middleware::from_fn(head_bound))
        .with_state(state)
}

/// The bytes of a request's head, as sent: request line, headers, blank
/// line.
fn head_size(req: &Request) -> usize {
    let target = req.uri().path_and_query().map_or(1, |p| p.as_str().len());
    let headers: usize = req
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum();
    req.method().as_str().len() + 1 + target + 11 + headers + 2
}

/// Heads over [`MAX_HEAD`] get the 431 hyper gives past
/// its read buffer. hyper checks its buffer only after each read, so a head
/// up to a read's worth larger reaches the router; it is refused here, so
/// that the bound the 431 states holds whatever the reads.
async fn head_bound(req: Request, next: middleware::Next) -> Response {
    if head_size(&req) > MAX_HEAD {
        let mut r = json_error(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            crate::conn_io::head_too_large(),
        );
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return r;
    }
    next.run(req).await
}

/// The format the `Accept` header asks for ([`metrics::Format::negotiate`]):
/// OpenMetrics for Prometheus, protobuf for Prometheus with native
/// histograms on, the text format 0.0.4 for promtool, curl and the rest.
async fn metrics_handler(State(st): State<AppState>, headers: HeaderMap) -> Response {
    let format = metrics::Format::negotiate(
        headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok()),
    );
    let exposition = st.metrics.borrow().clone();
    // Off the async threads: a first text or protobuf scrape of a
    // snapshot encodes, and every scrape reads /proc for process_*.
    let body = tokio::task::spawn_blocking(move || exposition.body(format)).await;
    match body {
        Ok((format, b)) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(format.content_type()),
            )],
            b,
        )
            .into_response(),
        Err(e) => json_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding metrics failed: {e}"),
        ),
    }
}

async fn healthz_handler(State(st): State<AppState>) -> Response {
    let limit = st.interval * 3;
    let (at, behind) = match st.latest.borrow().as_ref() {
        Some(p) => (Some(p.at), p.snapshot.behind_s()),
        None => (None, None),
    };
    match at {
        // Behind is still serving: the numbers are right, only late.
        Some(at) if at.elapsed() <= limit => match behind {
            Some(lag) => (
                StatusCode::OK,
                format!(
                    "ok, but behind: {lag:.1}s behind the kernel (nfsdtopd gets too little CPU to keep up; its numbers stay right and catch up in order)\n"
                ),
            )
                .into_response(),
            None => (StatusCode::OK, "ok\n").into_response(),
        },
        Some(at) => json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "stale: last snapshot {:.1}s ago (limit {:.1}s)",
                at.elapsed().as_secs_f64(),
                limit.as_secs_f64()
            ),
        ),
        None => json_error(StatusCode::SERVICE_UNAVAILABLE, "no snapshot yet"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{Encoder, Published};
    use nfsdtop_agent::model::Snapshot;
    use tower::ServiceExt as _;

    /// /healthz of a daemon whose latest snapshot has `lag_s`.
    async fn healthz(lag_s: Option<f64>) -> (StatusCode, String) {
        let mut s = Snapshot {
            interval_s: 1.0,
            ..Snapshot::default()
        };
        s.totals.lag_s = lag_s;
        let (_tx, latest) = tokio::sync::watch::channel(Some(Arc::new(Published::new(s))));
        let (_mtx, metrics) =
            tokio::sync::watch::channel(Arc::new(crate::metrics::Exposition::new(String::new())));
        let (_stx, shutdown) = tokio::sync::watch::channel(false);
        let app = router(AppState {
            latest,
            metrics,
            auth: Arc::new(crate::auth::Auth::new(Default::default())),
            interval: std::time::Duration::from_secs(1),
            shutdown,
            streams: Arc::new(crate::stream::Streams::new(4, false)),
            encoder: Arc::new(Encoder::new(1 << 20)),
        });
        let req = axum::http::Request::get("/healthz")
            .body(axum::body::Body::empty())
            .unwrap();
        let r = app.oneshot(req).await.unwrap();
        let status = r.status();
        let body = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn healthz_says_when_the_agent_is_behind_the_kernel() {
        assert_eq!(healthz(None).await, (StatusCode::OK, "ok\n".into()));
        assert_eq!(healthz(Some(0.05)).await, (StatusCode::OK, "ok\n".into()));
        let (status, text) = healthz(Some(8.25)).await;
        assert_eq!(status, StatusCode::OK, "behind is still serving");
        assert!(
            text.starts_with("ok, but behind: 8.2s behind the kernel"),
            "{text}"
        );
    }
}
