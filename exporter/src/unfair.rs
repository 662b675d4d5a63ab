//! `/api/v1/unfair`: every peer and class below its fair share, worst
//! first, whatever the top-K bound of /metrics folds. The on-call view
//! behind `nfsdtop_unfair_entities`: the gauge counts, this lists.
//!
//! `GET /api/v1/unfair[?group=peer|class][&below=R]`; R defaults to the
//! daemon's `--unfair-ratio`. The ratio is the smoothed one the labels are
//! chosen by ([`crate::fold::Smooth`]), not one interval's.
//!
//! Served like the snapshot views ([`crate::snapshot`]): each query is
//! encoded at most once per snapshot and every response of that interval
//! shares the bytes, charged to the same response budget (past it, a 503);
//! at most [`MAX_UNFAIR_VIEWS`] distinct queries are encoded per interval
//! (then a 503 saying nfsdtopd is overloaded). Encodings run one at a
//! time on a blocking thread: the metrics state the pipeline updates is
//! locked only there, only while the rows are picked (not while they are
//! written out), so neither the pipeline nor an async worker waits on a
//! client's JSON.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use nfsdtop_agent::model::{EntityKind, Schema, Snapshot};
use serde::Serialize;
use tokio::sync::Semaphore;

use crate::body_budget::{Budgeted, OverBudget};
use crate::fold::SMOOTH_SECONDS;
use crate::json_error::json_error;
use crate::metrics::MetricsState;
use crate::snapshot::{busy, no_snapshot, too_many_views, Encoder, Latest};

/// Distinct queries (`group`, `below`) encoded per snapshot; more in one
/// interval get a 503 instead of an encoding each.
pub const MAX_UNFAIR_VIEWS: usize = 8;

/// What the handler reads: the metrics state the pipeline updates, and the
/// encodings of the latest snapshot's queries.
#[derive(Clone, Debug)]
pub struct UnfairSource {
    state: Arc<Mutex<MetricsState>>,
    /// The daemon's `--unfair-ratio` (fixed for its life): read without
    /// the lock.
    default_below: f64,
    made: Arc<Made>,
}

/// A query, as a key: its group and its threshold's bits.
type Key = (Option<EntityKind>, u64);

/// The encodings made, all of one snapshot, and the one-at-a-time lane.
#[derive(Debug)]
struct Made {
    lane: Arc<Semaphore>,
    /// (snapshot seq, query, JSON): only the newest snapshot's are kept.
    views: Mutex<Vec<(u64, Key, Bytes)>>,
}

impl Made {
    fn find(&self, key: Key, seq: u64) -> Option<Bytes> {
        let views = self.views.lock().unwrap_or_else(|p| p.into_inner());
        views
            .iter()
            .find(|(s, k, _)| *k == key && *s >= seq)
            .map(|(_, _, b)| b.clone())
    }

    /// Distinct queries encoded for snapshot `seq`.
    fn count(&self, seq: u64) -> usize {
        let views = self.views.lock().unwrap_or_else(|p| p.into_inner());
        views.iter().filter(|(s, _, _)| *s == seq).count()
    }

    /// Keep `json` as `key`'s of `seq`; older snapshots' go (their bytes
    /// are charged to the budget and no one will ask for them again).
    fn keep(&self, seq: u64, key: Key, json: Bytes) {
        let mut views = self.views.lock().unwrap_or_else(|p| p.into_inner());
        views.retain(|(s, k, _)| *s >= seq && *k != key);
        views.push((seq, key, json));
    }

    fn clear(&self) {
        self.views.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

impl UnfairSource {
    pub fn new(state: Arc<Mutex<MetricsState>>, default_below: f64) -> UnfairSource {
        UnfairSource {
            state,
            default_below,
            made: Arc::new(Made {
                lane: Arc::new(Semaphore::new(1)),
                views: Mutex::new(Vec::new()),
            }),
        }
    }
}

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

/// The unfair list of snapshot `s` as JSON, within the budget: the rows
/// are picked under the metrics lock, which is let go before they are
/// written out. Blocking: call it off the async workers.
fn encode(
    src: &UnfairSource,
    s: &Snapshot,
    group: Option<EntityKind>,
    below: f64,
    buffer: impl Fn(usize) -> Result<Budgeted, OverBudget>,
) -> Result<Bytes, OverBudget> {
    let want = |k: EntityKind| group.is_none_or(|g| g == k);
    let (peers, classes) = {
        let m = src.state.lock().unwrap_or_else(|p| p.into_inner());
        let pick = |k: EntityKind| {
            if want(k) {
                rows(&m, s, k, below)
            } else {
                Vec::new()
            }
        };
        (pick(EntityKind::Peer), pick(EntityKind::Class))
    };
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
    // About the JSON of a row with a short name, and then some.
    let guess = (u.peers.len() + u.classes.len()) * 320 + 1024;
    let mut out = buffer(guess)?;
    match serde_json::to_writer(&mut out, &u) {
        Ok(()) => Ok(out.finish()),
        Err(e) => match out.over {
            Some(o) => Err(o),
            None => Ok(Bytes::from(
                serde_json::json!({ "error": format!("cannot serialise the list: {e}") })
                    .to_string(),
            )),
        },
    }
}

fn json(body: Bytes) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

pub async fn handler(
    State(latest): State<Latest>,
    State(encoder): State<Arc<Encoder>>,
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
    let (group, below) = match parse(&params, src.default_below) {
        Ok(v) => v,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, e),
    };
    let key = (group, below.to_bits());
    let Some(first) = latest.borrow().as_ref().map(|p| p.seq) else {
        return no_snapshot();
    };
    if let Some(b) = src.made.find(key, first) {
        return json(b);
    }
    let permit = match src.made.lane.clone().acquire_owned().await {
        Ok(p) => p,
        Err(e) => return json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    // Made by the request before us, while we waited.
    if let Some(b) = src.made.find(key, first) {
        return json(b);
    }
    let Some(p) = latest.borrow().clone() else {
        return no_snapshot();
    };
    if src.made.count(p.seq) >= MAX_UNFAIR_VIEWS {
        return too_many_views(&format!(
            "{MAX_UNFAIR_VIEWS} distinct /api/v1/unfair queries (group, below)"
        ));
    }
    let budget = encoder.budget().clone();
    let made = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let buffer = |guess: usize| {
            Budgeted::with_capacity(&budget, guess).or_else(|_| {
                // What clients hold goes before what might spare a later
                // encoding.
                src.made.clear();
                Budgeted::with_capacity(&budget, guess)
            })
        };
        let json = encode(&src, &p.snapshot, group, below, buffer)?;
        src.made.keep(p.seq, key, json.clone());
        Ok(json)
    })
    .await;
    match made {
        Ok(Ok(b)) => json(b),
        Ok(Err(o)) => busy(o),
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
