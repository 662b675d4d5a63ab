//! Published snapshots and their JSON, and /api/v1/snapshot.
//!
//! Each view of a snapshot (`group`, `top`) is encoded at most once per
//! interval, on first demand, and every snapshot response and stream client
//! of that interval shares the bytes: eight clients asking for the same
//! 100,000 peers cost one encoding, not eight. Large encodings run one at a
//! time on a blocking thread, so however many clients ask, they take at
//! most one core from the pipeline (whose snapshots /healthz watches) and
//! never block the async workers that answer /metrics; small views (a
//! class table, a top 10) have a one-at-a-time lane of their own, so they
//! never wait behind a large one. A client waiting for its
//! turn holds no snapshot: when the turn comes it gets the encoding made
//! meanwhile, or the latest snapshot's.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use nfsdtop_agent::model::{EntityKind, EntityStats, ServerView, Snapshot, SourceInfo, Totals};
use serde::Serialize;
use tokio::sync::Semaphore;

use crate::server::{json_error, AppState, Latest};

/// Views of one snapshot that get a shared encoding; a client asking for
/// yet another (`top` takes many values) gets one made for it alone, so a
/// client cycling through `top=1..N` cannot pile encodings up.
pub const MAX_SHARED_VIEWS: usize = 16;

type Cell = Arc<OnceLock<Bytes>>;

static NEXT_SEQ: AtomicU64 = AtomicU64::new(0);

/// One snapshot as published to every view, with its encodings.
#[derive(Debug)]
pub struct Published {
    pub snapshot: Snapshot,
    pub at: Instant,
    /// Tells snapshots apart (a stream sends each one once).
    pub seq: u64,
    encodings: Mutex<Vec<(View, Cell)>>,
}

/// A view of one snapshot, as JSON.
#[derive(Clone, Debug)]
pub struct Encoded {
    pub json: Bytes,
    /// [`Published::seq`] of the snapshot.
    pub seq: u64,
}

impl Published {
    pub fn new(snapshot: Snapshot) -> Published {
        Published {
            snapshot,
            at: Instant::now(),
            seq: NEXT_SEQ.fetch_add(1, Ordering::Relaxed),
            encodings: Mutex::new(Vec::new()),
        }
    }

    fn cell(&self, view: View) -> Cell {
        let mut enc = self.encodings.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, c)) = enc.iter().find(|(v, _)| *v == view) {
            return c.clone();
        }
        let c = Cell::default();
        if enc.len() < MAX_SHARED_VIEWS {
            enc.push((view, c.clone()));
        }
        c
    }
}

/// Makes the encodings: one at a time, and remembers the newest of each
/// view, so that a client that waited for its turn takes what was made
/// meanwhile. When encoding takes longer than an interval, the snapshot a
/// client arrived at is never encoded (a newer one is); without this every
/// waiting client would encode a snapshot of its own, one after another.
#[derive(Debug)]
pub struct Encoder {
    /// One encoding of a large view at a time: the pipeline keeps a core.
    permits: Arc<Semaphore>,
    /// Small views ([`SMALL_VIEW`] entities or fewer) one at a time in a
    /// lane of their own: a class table or a top 10 takes milliseconds and
    /// must not wait behind full encodings of 20,000 peers (seconds each
    /// in a debug build, so behind them it would wait for ever).
    small_permits: Arc<Semaphore>,
    newest: Mutex<Vec<(View, Encoded)>>,
}

impl Default for Encoder {
    fn default() -> Encoder {
        Encoder {
            permits: Arc::new(Semaphore::new(1)),
            small_permits: Arc::new(Semaphore::new(1)),
            newest: Mutex::new(Vec::new()),
        }
    }
}

impl Encoder {
    /// The newest encoding of `view`, if it is of snapshot `seq` or later.
    fn newest(&self, view: View, seq: u64) -> Option<Encoded> {
        let newest = self.newest.lock().unwrap_or_else(|p| p.into_inner());
        newest
            .iter()
            .find(|(v, e)| *v == view && e.seq >= seq)
            .map(|(_, e)| e.clone())
    }

    /// Remember `e` as the newest of `view`; the views not encoded for the
    /// longest go first past [`MAX_SHARED_VIEWS`].
    fn made(&self, view: View, e: &Encoded) {
        let mut newest = self.newest.lock().unwrap_or_else(|p| p.into_inner());
        newest.retain(|(v, _)| *v != view);
        newest.push((view, e.clone()));
        if newest.len() > MAX_SHARED_VIEWS {
            newest.remove(0);
        }
    }

    /// `view` of the latest snapshot as JSON (None before the first one):
    /// the shared encoding when there is one, else made now, off the async
    /// workers.
    pub async fn encoded(
        self: &Arc<Self>,
        latest: &Latest,
        view: View,
    ) -> Option<Result<Encoded, String>> {
        let (first, first_seq, small) = {
            let p = latest.borrow().clone()?;
            let cell = p.cell(view);
            if let Some(b) = cell.get() {
                return Some(Ok(Encoded {
                    json: b.clone(),
                    seq: p.seq,
                }));
            }
            (cell, p.seq, view.entities(&p.snapshot) <= SMALL_VIEW)
        };
        let lane = if small {
            &self.small_permits
        } else {
            &self.permits
        };
        let permit = match lane.clone().acquire_owned().await {
            Ok(p) => p,
            Err(e) => return Some(Err(format!("cannot encode the snapshot: {e}"))),
        };
        // Made by the encoder before us, while we waited.
        if let Some(b) = first.get() {
            return Some(Ok(Encoded {
                json: b.clone(),
                seq: first_seq,
            }));
        }
        if let Some(e) = self.newest(view, first_seq) {
            return Some(Ok(e));
        }
        let p = latest.borrow().clone()?;
        let seq = p.seq;
        let cell = p.cell(view);
        let me = self.clone();
        // The permit goes with the work: a client that hangs up meanwhile
        // does not let a second encoding start beside this one.
        let made = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let e = Encoded {
                json: cell.get_or_init(|| view.render(&p.snapshot)).clone(),
                seq,
            };
            me.made(view, &e);
            e
        })
        .await;
        Some(made.map_err(|e| format!("encoding the snapshot failed: {e}")))
    }
}

/// `group` and `top` of the snapshot and stream endpoints.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct View {
    pub group: Option<EntityKind>,
    pub top: Option<usize>,
}

pub const MAX_TOP: usize = 1_000_000;

/// Views of at most this many entities are encoded in the small lane.
pub const SMALL_VIEW: usize = 1_000;

/// A [`Snapshot`] by reference, serialised exactly as the snapshot would
/// be (a test holds them equal): views are encoded without copying the
/// entities they show.
#[derive(Serialize)]
struct ViewOf<'a> {
    time: f64,
    interval_s: f64,
    source: &'a SourceInfo,
    totals: &'a Totals,
    peers: Vec<&'a EntityStats>,
    classes: Vec<&'a EntityStats>,
    server: &'a ServerView,
}

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

    /// Whether this view lists entities of `kind` at all.
    fn shows(&self, kind: EntityKind) -> bool {
        self.group.is_none_or(|g| g == kind)
    }

    /// How many entities this view of `s` shows.
    fn entities(&self, s: &Snapshot) -> usize {
        let shown = |kind: EntityKind, n: usize| {
            if self.shows(kind) {
                self.top.map_or(n, |t| t.min(n))
            } else {
                0
            }
        };
        shown(EntityKind::Peer, s.peers.len()) + shown(EntityKind::Class, s.classes.len())
    }

    pub fn is_full(&self) -> bool {
        *self == View::default()
    }

    fn pick<'a>(&self, kind: EntityKind, list: &'a [EntityStats]) -> Vec<&'a EntityStats> {
        if !self.shows(kind) {
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
        refs
    }

    /// The snapshot as this view shows it, as JSON: only the requested
    /// grouping (the other list empty), the top N entities by dispatch
    /// rate. CPU-bound: call it off the async workers.
    pub fn render(&self, s: &Snapshot) -> Bytes {
        let view = ViewOf {
            time: s.time,
            interval_s: s.interval_s,
            source: &s.source,
            totals: &s.totals,
            peers: self.pick(EntityKind::Peer, &s.peers),
            classes: self.pick(EntityKind::Class, &s.classes),
            server: &s.server,
        };
        // One allocation of about the final size instead of a dozen
        // doublings (each a copy of everything so far, and a last one that
        // holds twice the encoding at once): the size per entity is
        // measured on a few of them, as it grows with the entity's
        // transports, names and histogram.
        let mut out =
            Vec::with_capacity(size_guess(&view.peers) + size_guess(&view.classes) + 4096);
        match serde_json::to_writer(&mut out, &view) {
            Ok(()) => {
                out.shrink_to_fit();
                Bytes::from(out)
            }
            Err(e) => Bytes::from(
                serde_json::json!({ "error": format!("cannot serialise snapshot: {e}") })
                    .to_string(),
            ),
        }
    }
}

/// The JSON size of `list`, estimated from up to 16 of its entities spread
/// over it, with an eighth to spare.
fn size_guess(list: &[&EntityStats]) -> usize {
    if list.is_empty() {
        return 0;
    }
    let step = list.len().div_ceil(16);
    let sample: Vec<&EntityStats> = list.iter().step_by(step).copied().collect();
    let bytes = serde_json::to_vec(&sample).map_or(1024 * sample.len(), |v| v.len());
    let per = bytes / sample.len() + 1;
    per.saturating_mul(list.len()).saturating_mul(9) / 8
}

pub type Params = Result<Query<Vec<(String, String)>>, axum::extract::rejection::QueryRejection>;

/// The view a query string asks for, or the 400 message.
pub fn view_of(q: Params) -> Result<View, String> {
    let Query(params) = q.map_err(|e| format!("bad query string: {}", e.body_text()))?;
    View::parse(&params)
}

pub fn no_snapshot() -> Response {
    json_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "no snapshot yet: the pipeline has not produced one",
    )
}

pub async fn snapshot_handler(State(st): State<AppState>, q: Params) -> Response {
    let view = match view_of(q) {
        Ok(v) => v,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, e),
    };
    match st.encoder.encoded(&st.latest, view).await {
        None => no_snapshot(),
        // The shared bytes themselves: no copy per response.
        Some(Ok(Encoded { json: body, .. })) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response(),
        Some(Err(e)) => json_error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap() -> Snapshot {
        let e = |name: &str, kind, rate| EntityStats {
            name: name.into(),
            kind,
            class: name.into(),
            dispatch_rate: rate,
            dispatches: 7,
            ..EntityStats::default()
        };
        Snapshot {
            time: 12.5,
            interval_s: 1.0,
            peers: vec![
                e("10.0.0.1", EntityKind::Peer, 1.0),
                e("10.0.0.2", EntityKind::Peer, 3.0),
            ],
            classes: vec![e("lab", EntityKind::Class, 4.0)],
            ..Snapshot::default()
        }
    }

    #[test]
    fn the_full_view_is_the_snapshot_json() {
        let s = snap();
        let got = View::default().render(&s);
        assert_eq!(&got[..], serde_json::to_string(&s).unwrap().as_bytes());
    }

    #[test]
    fn views_pick_a_group_and_the_top_n() {
        let s = snap();
        let v = View {
            group: Some(EntityKind::Peer),
            top: Some(1),
        };
        let got: Snapshot = serde_json::from_slice(&v.render(&s)).unwrap();
        assert!(got.classes.is_empty());
        assert_eq!(got.peers.len(), 1);
        assert_eq!(got.peers[0].name, "10.0.0.2");
        assert_eq!(got.totals, s.totals);
    }

    #[tokio::test]
    async fn a_small_view_does_not_wait_behind_a_large_encoding() {
        let mut big = snap();
        let peer = big.peers[0].clone();
        big.peers = vec![peer; SMALL_VIEW + 1];
        let (_tx, rx) = tokio::sync::watch::channel(Some(Arc::new(Published::new(big))));
        let enc = Arc::new(Encoder::default());
        // A large encoding holds its lane for as long as this test runs.
        let _busy = enc.permits.clone().try_acquire_owned().unwrap();
        let classes = View {
            group: Some(EntityKind::Class),
            top: None,
        };
        // A bound on a test that would otherwise hang, not a pacing.
        let got = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            enc.encoded(&rx, classes),
        )
        .await
        .expect("the class view waited behind the large encoding")
        .unwrap()
        .unwrap();
        let got: Snapshot = serde_json::from_slice(&got.json).unwrap();
        assert_eq!(got.classes.len(), 1);
        // The full view is large: it waits for the held lane.
        let waiting = enc.encoded(&rx, View::default());
        assert!(futures_util::FutureExt::now_or_never(waiting).is_none());
    }

    #[tokio::test]
    async fn one_encoding_per_view_is_shared() {
        let (tx, rx) = tokio::sync::watch::channel(None);
        let enc = Arc::new(Encoder::default());
        assert!(enc.encoded(&rx, View::default()).await.is_none());
        tx.send_replace(Some(Arc::new(Published::new(snap()))));
        let get = |v: View| {
            let (rx, enc) = (rx.clone(), enc.clone());
            async move { enc.encoded(&rx, v).await.unwrap().unwrap().json }
        };
        let full = View::default();
        let (a, b) = (get(full).await, get(full).await);
        // The same allocation, not an equal copy.
        assert_eq!(a.as_ptr(), b.as_ptr());
        let top1 = View {
            top: Some(1),
            ..View::default()
        };
        assert_ne!(a.as_ptr(), get(top1).await.as_ptr());
        // Past the shared views, a snapshot keeps no more cells.
        for n in 2..=(MAX_SHARED_VIEWS + 1) {
            get(View {
                top: Some(n),
                ..View::default()
            })
            .await;
        }
        let last = View {
            top: Some(1000),
            ..View::default()
        };
        assert_eq!(get(last).await, get(last).await);
        let p = rx.borrow().clone().unwrap();
        assert_eq!(p.encodings.lock().unwrap().len(), MAX_SHARED_VIEWS);
        // The encoder remembers the newest of each view, as many views.
        assert!(enc.newest(last, p.seq).is_some());
        assert!(
            enc.newest(last, p.seq + 1).is_none(),
            "not older than asked"
        );
        assert_eq!(enc.newest.lock().unwrap().len(), MAX_SHARED_VIEWS);
        // A new snapshot: a new encoding, told apart by its seq.
        let first = enc.encoded(&rx, full).await.unwrap().unwrap();
        tx.send_replace(Some(Arc::new(Published::new(snap()))));
        let second = enc.encoded(&rx, full).await.unwrap().unwrap();
        assert!(second.seq > first.seq);
        assert_ne!(first.json.as_ptr(), second.json.as_ptr());
    }
}
