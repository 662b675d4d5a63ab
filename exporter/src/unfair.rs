//! `/api/v1/unfair`: every peer and class below its fair share, worst
//! first, whatever the top-K bound of /metrics folds. The on-call view
//! behind `nfsdtop_unfair_entities`: the gauge counts, this lists.
//!
//! `GET /api/v1/unfair[?group=peer|class][&below=R]`; R defaults to the
//! daemon's `--unfair-ratio`. The ratio is the smoothed one the labels are
//! chosen by ([`crate::fold::Smooth`]), not one interval's.

use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use nfsdtop_agent::model::{EntityKind, Schema, Snapshot};
use serde::Serialize;

use crate::fold::SMOOTH_SECONDS;
use crate::metrics::MetricsState;
use crate::server::{json_error, AppState};

/// What the handler reads: the metrics state the pipeline updates.
#[derive(Clone, Debug)]
pub struct UnfairSource(pub Arc<Mutex<MetricsState>>);

/// One entity below the threshold.
#[derive(Serialize, Debug, PartialEq)]
pub struct Row {
    pub name: String,
    pub class: String,
    pub netns: u32,
    /// Smoothed dispatches / entitled (1 = its fair share).
    pub ratio: f64,
    /// Smoothed dispatches per second.
    pub dispatch_rate: f64,
    /// Smoothed entitled (fair-share) dispatches per second.
    pub entitled_rate: f64,
    /// Cumulative, as in the snapshot.
    pub dispatches: u64,
    pub entitled: f64,
    pub connections: u64,
    pub backlogged: bool,
    /// Its label in /metrics (`peer=` or `class=`), or null when folded
    /// into "other".
    pub series: Option<String>,
}

#[derive(Serialize, Debug)]
pub struct Counts {
    pub peers: usize,
    pub classes: usize,
}

#[derive(Serialize, Debug)]
pub struct Unfair {
    /// The JSON's schema (docs/json.md).
    pub schema: Schema,
    /// The snapshot's Unix time.
    pub time: f64,
    pub below: f64,
    pub window_seconds: f64,
    pub counts: Counts,
    pub peers: Vec<Row>,
    pub classes: Vec<Row>,
}

/// The query: `group` and `below`.
fn parse(
    params: &[(String, String)],
    default_below: f64,
) -> Result<(Option<EntityKind>, f64), String> {
    let (mut group, mut below) = (None, None);
    for (k, v) in params {
        match k.as_str() {
            "group" if group.is_none() => {
                group = Some(match v.as_str() {
                    "peer" => EntityKind::Peer,
                    "class" => EntityKind::Class,
                    o => return Err(format!("invalid group {o:?}: expected peer or class")),
                })
            }
            "below" if below.is_none() => {
                let r: f64 = v
                    .parse()
                    .map_err(|_| format!("invalid below {v:?}: expected a ratio such as 0.5"))?;
                if !(r.is_finite() && r > 0.0 && r <= 100.0) {
                    return Err(format!(
                        "invalid below {v:?}: expected a ratio above 0, at most 100"
                    ));
                }
                below = Some(r);
            }
            "group" | "below" => return Err(format!("{k} given more than once")),
            o => {
                return Err(format!(
                    "unknown query parameter {o:?}: expected group=peer|class and/or below=RATIO"
                ))
            }
        }
    }
    Ok((group, below.unwrap_or(default_below)))
}

/// The rows of one grouping, worst ratio first.
pub fn rows(m: &MetricsState, s: &Snapshot, kind: EntityKind, below: f64) -> Vec<Row> {
    let mut out: Vec<Row> = s
        .entities(kind)
        .iter()
        .filter_map(|e| {
            let (sm, label) = m.smoothed(kind, e)?;
            let ratio = sm.below(below)?;
            Some(Row {
                name: e.name.clone(),
                class: e.class.clone(),
                netns: e.netns,
                ratio,
                dispatch_rate: sm.dispatch_rate,
                entitled_rate: sm.entitled_rate,
                dispatches: e.dispatches,
                entitled: e.entitled,
                connections: e.connections,
                backlogged: e.backlogged,
                series: label.map(str::to_owned),
            })
        })
        .collect();
    out.sort_by(|a, b| a.ratio.total_cmp(&b.ratio).then(a.name.cmp(&b.name)));
    out
}

type Params = Result<Query<Vec<(String, String)>>, axum::extract::rejection::QueryRejection>;

pub async fn handler(
    State(st): State<AppState>,
    src: Option<Extension<UnfairSource>>,
    q: Params,
) -> Response {
    let Some(Extension(src)) = src else {
        return json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "this server keeps no fairness state",
        );
    };
    let params = match q {
        Ok(Query(p)) => p,
        Err(e) => {
            return json_error(
                StatusCode::BAD_REQUEST,
                format!("bad query string: {}", e.body_text()),
            )
        }
    };
    let default_below = src
        .0
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .unfair_below();
    let (group, below) = match parse(&params, default_below) {
        Ok(v) => v,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, e),
    };
    let Some(p) = st.latest.borrow().clone() else {
        return json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "no snapshot yet: the pipeline has not produced one",
        );
    };
    let body = tokio::task::spawn_blocking(move || {
        let m = src.0.lock().unwrap_or_else(|p| p.into_inner());
        let s = &p.snapshot;
        let want = |k: EntityKind| group.is_none_or(|g| g == k);
        let pick = |k: EntityKind| {
            if want(k) {
                rows(&m, s, k, below)
            } else {
                Vec::new()
            }
        };
        let (peers, classes) = (pick(EntityKind::Peer), pick(EntityKind::Class));
        let u = Unfair {
            schema: Schema::default(),
            time: s.time,
            below,
            window_seconds: SMOOTH_SECONDS,
            counts: Counts {
                peers: peers.len(),
                classes: classes.len(),
            },
            peers,
            classes,
        };
        serde_json::to_string(&u).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    })
    .await;
    match body {
        Ok(b) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            b,
        )
            .into_response(),
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(q: &[(&str, &str)]) -> Vec<(String, String)> {
        q.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_query_is_checked() {
        assert_eq!(parse(&p(&[]), 0.5), Ok((None, 0.5)));
        assert_eq!(
            parse(&p(&[("group", "class"), ("below", "0.9")]), 0.5),
            Ok((Some(EntityKind::Class), 0.9))
        );
        for bad in [
            vec![("below", "x")],
            vec![("below", "0")],
            vec![("below", "NaN")],
            vec![("group", "node")],
            vec![("group", "peer"), ("group", "peer")],
            vec![("top", "3")],
        ] {
            assert!(parse(&p(&bad), 0.5).is_err(), "{bad:?}");
        }
    }
}
