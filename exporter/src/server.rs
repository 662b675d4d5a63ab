//! The HTTP surface: /metrics, /api/v1/snapshot, /api/v1/stream, /healthz
//! (and /api/v1/unfair, in `unfair`).
//! Every error is JSON `{"error": "..."}` with a 4xx/5xx status; nothing a
//! client sends can panic the daemon.

use std::convert::Infallible;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::stream::{self, Stream};
use nfsdtop_agent::model::{EntityKind, EntityStats, Snapshot};
use tokio::sync::watch;

use crate::auth::{Auth, AuthError};
use crate::metrics;

/// One snapshot as published to every view; the JSON is made once, on
/// first demand, and shared.
#[derive(Debug)]
pub struct Published {
    pub snapshot: Snapshot,
    pub at: Instant,
    json: OnceLock<Arc<str>>,
}

impl Published {
    pub fn new(snapshot: Snapshot) -> Published {
        Published {
            snapshot,
            at: Instant::now(),
            json: OnceLock::new(),
        }
    }

    pub fn json(&self) -> Arc<str> {
        self.json
            .get_or_init(|| {
                serde_json::to_string(&self.snapshot)
                    .unwrap_or_else(|e| format!("{{\"error\":\"cannot serialise snapshot: {e}\"}}"))
                    .into()
            })
            .clone()
    }
}

pub type Latest = watch::Receiver<Option<Arc<Published>>>;

#[derive(Clone)]
pub struct AppState {
    pub latest: Latest,
    /// /metrics in OpenMetrics text, encoded by the pipeline thread right
    /// after each snapshot (so a scrape never waits for an update).
    pub metrics: watch::Receiver<Arc<str>>,
    pub auth: Arc<Auth>,
    pub interval: Duration,
    /// Becomes true when the daemon stops: open streams end, so a graceful
    /// shutdown does not wait for clients that never hang up.
    pub shutdown: watch::Receiver<bool>,
}

pub fn json_error(status: StatusCode, msg: impl Into<String>) -> Response {
    let body = serde_json::json!({ "error": msg.into() }).to_string();
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/api/v1/snapshot", get(snapshot_handler))
        .route("/api/v1/stream", get(stream_handler))
        .route("/api/v1/unfair", get(crate::unfair::handler))
        .route("/healthz", get(healthz_handler))
        .fallback(|req: Request| async move {
            json_error(
                StatusCode::NOT_FOUND,
                format!(
                    "no such path {:?}: try /metrics, /api/v1/snapshot, /api/v1/stream, /api/v1/unfair or /healthz",
                    req.uri().path()
                ),
            )
        })
        .method_not_allowed_fallback(|req: Request| async move {
            json_error(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("method {} not allowed: use GET", req.method()),
            )
        })
        .layer(middleware::from_fn_with_state(state.clone(), auth_layer))
        .with_state(state)
}

async fn auth_layer(State(st): State<AppState>, req: Request, next: Next) -> Response {
    if !st.auth.enabled() {
        return next.run(req).await;
    }
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let auth = st.auth.clone();
    let res = tokio::task::spawn_blocking(move || auth.check(header.as_deref()))
        .await
        .unwrap_or(Err(AuthError::Denied));
    match res {
        Ok(()) => next.run(req).await,
        Err(e) => {
            let msg = match e {
                AuthError::Missing => "authentication required",
                AuthError::Malformed => {
                    "malformed Authorization header: expected Basic credentials"
                }
                AuthError::Denied => "invalid user name or password",
            };
            let mut r = json_error(StatusCode::UNAUTHORIZED, msg);
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"nfsdtopd\""),
            );
            r
        }
    }
}

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const PROM_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// OpenMetrics when the client asks for it (Prometheus does), else the
/// Prometheus text format 0.0.4 (promtool, curl, older scrapers).
fn wants_openmetrics(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"))
}

async fn metrics_handler(State(st): State<AppState>, headers: HeaderMap) -> Response {
    let om = wants_openmetrics(&headers);
    let text = st.metrics.borrow().clone();
    let body = if om {
        Ok(text.to_string())
    } else {
        tokio::task::spawn_blocking(move || metrics::openmetrics_to_text(&text)).await
    };
    match body {
        Ok(b) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(if om { OPENMETRICS } else { PROM_TEXT }),
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

/// `group` and `top` of the snapshot and stream endpoints.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct View {
    pub group: Option<EntityKind>,
    pub top: Option<usize>,
}

pub const MAX_TOP: usize = 1_000_000;

impl View {
    pub fn parse(params: &[(String, String)]) -> Result<View, String> {
        let mut v = View::default();
        let mut seen_group = false;
        let mut seen_top = false;
        for (k, val) in params {
            match k.as_str() {
                "group" => {
                    if seen_group {
                        return Err("group given more than once".into());
                    }
                    seen_group = true;
                    v.group = Some(match val.as_str() {
                        "peer" => EntityKind::Peer,
                        "class" => EntityKind::Class,
                        other => {
                            return Err(format!("invalid group {other:?}: expected peer or class"))
                        }
                    });
                }
                "top" => {
                    if seen_top {
                        return Err("top given more than once".into());
                    }
                    seen_top = true;
                    let n: usize = val.parse().map_err(|_| {
                        format!("invalid top {val:?}: expected a whole number from 1 to {MAX_TOP}")
                    })?;
                    if n == 0 || n > MAX_TOP {
                        return Err(format!(
                            "invalid top {n}: expected a whole number from 1 to {MAX_TOP}"
                        ));
                    }
                    v.top = Some(n);
                }
                other => {
                    return Err(format!(
                        "unknown query parameter {other:?}: expected group=peer|class and/or top=N"
                    ))
                }
            }
        }
        Ok(v)
    }

    pub fn is_full(&self) -> bool {
        *self == View::default()
    }

    /// The snapshot as this view shows it: only the requested grouping
    /// (the other list empty), the top N entities by dispatch rate.
    pub fn render(&self, p: &Published) -> Arc<str> {
        if self.is_full() {
            return p.json();
        }
        let s = &p.snapshot;
        let pick = |kind: EntityKind, list: &[EntityStats]| -> Vec<EntityStats> {
            if self.group.is_some_and(|g| g != kind) {
                return Vec::new();
            }
            let mut refs: Vec<&EntityStats> = list.iter().collect();
            if let Some(n) = self.top {
                refs.sort_by(|a, b| {
                    b.dispatch_rate
                        .total_cmp(&a.dispatch_rate)
                        .then(b.dispatches.cmp(&a.dispatches))
                        .then(a.name.cmp(&b.name))
                });
                refs.truncate(n);
            }
            refs.into_iter().cloned().collect()
        };
        let view = Snapshot {
            time: s.time,
            interval_s: s.interval_s,
            source: s.source.clone(),
            totals: s.totals.clone(),
            peers: pick(EntityKind::Peer, &s.peers),
            classes: pick(EntityKind::Class, &s.classes),
        };
        serde_json::to_string(&view)
            .unwrap_or_else(|e| format!("{{\"error\":\"cannot serialise snapshot: {e}\"}}"))
            .into()
    }
}

type Params = Result<Query<Vec<(String, String)>>, axum::extract::rejection::QueryRejection>;

/// The view a query string asks for, or the 400 message.
fn view_of(q: Params) -> Result<View, String> {
    let Query(params) = q.map_err(|e| format!("bad query string: {}", e.body_text()))?;
    View::parse(&params)
}

fn no_snapshot() -> Response {
    json_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "no snapshot yet: the pipeline has not produced one",
    )
}

async fn snapshot_handler(State(st): State<AppState>, q: Params) -> Response {
    let view = match view_of(q) {
        Ok(v) => v,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, e),
    };
    let Some(p) = st.latest.borrow().clone() else {
        return no_snapshot();
    };
    let body = match tokio::task::spawn_blocking(move || view.render(&p)).await {
        Ok(b) => b,
        Err(e) => return json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.to_string(),
    )
        .into_response()
}

/// Server-sent events: `event: snapshot\ndata: <Snapshot JSON>\n\n`, the
/// latest snapshot at once, then each new one. A slow client skips
/// snapshots (it always gets the newest), it never makes the daemon buffer.
async fn stream_handler(State(st): State<AppState>, q: Params) -> Response {
    let view = match view_of(q) {
        Ok(v) => v,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, e),
    };
    // A comment line (":") every 15 s when no snapshot came: a client can
    // tell a quiet stream (long --interval, a finished replay) from a dead
    // link. SSE clients ignore comments.
    Sse::new(snapshot_events(
        st.latest.clone(),
        st.shutdown.clone(),
        view,
    ))
    .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
    .into_response()
}

pub fn snapshot_events(
    mut rx: Latest,
    shutdown: watch::Receiver<bool>,
    view: View,
) -> impl Stream<Item = Result<Event, Infallible>> + Send {
    // Whatever is there now counts as unseen: send it immediately.
    rx.mark_changed();
    stream::unfold((rx, shutdown), move |(mut rx, mut shutdown)| async move {
        loop {
            if *shutdown.borrow() {
                return None;
            }
            tokio::select! {
                changed = rx.changed() => {
                    if changed.is_err() {
                        // The pipeline is gone for good: end the stream.
                        return None;
                    }
                }
                _ = shutdown.changed() => continue,
            }
            let cur = rx.borrow_and_update().clone();
            if let Some(p) = cur {
                let data = tokio::task::spawn_blocking(move || view.render(&p))
                    .await
                    .ok()?;
                let ev = Event::default().event("snapshot").data(&*data);
                return Some((Ok(ev), (rx, shutdown)));
            }
        }
    })
}

async fn healthz_handler(State(st): State<AppState>) -> Response {
    let limit = st.interval * 3;
    let at = st.latest.borrow().as_ref().map(|p| p.at);
    match at {
        Some(at) if at.elapsed() <= limit => (StatusCode::OK, "ok\n").into_response(),
        Some(at) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "stale: last snapshot {:.1}s ago (limit {:.1}s)\n",
                at.elapsed().as_secs_f64(),
                limit.as_secs_f64()
            ),
        )
            .into_response(),
        None => (StatusCode::SERVICE_UNAVAILABLE, "no snapshot yet\n").into_response(),
    }
}
