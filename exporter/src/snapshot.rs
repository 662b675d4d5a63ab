//! Published snapshots and their JSON, and /api/v1/snapshot.
//!
//! Each view of a snapshot (`group`, `top`) is encoded at most once per
//! interval, on first demand, and every snapshot response and stream client
//! of that interval shares the bytes: eight clients asking for the same
//! 100,000 peers cost one encoding, not eight. Views are normalised first
//! (every `top` at or above the entity count is one view), and at most
//! [`MAX_SHARED_VIEWS`] distinct views are encoded per interval: a client
//! cycling through `top=1..N` gets a 503 saying nfsdtopd is overloaded
//! rather than an encoding each. Large encodings run one at a
//! time on a blocking thread, so however many clients ask, they take at
//! most one core from the pipeline (whose snapshots /healthz watches) and
//! never block the async workers that answer /metrics; small views (a
//! class table, a top 10) have a one-at-a-time lane of their own, so they
//! never wait behind a large one, and so has the full view (what
//! `nfsdtop --connect` reads), so that clients asking for many other
//! views cannot starve it; the lane of the other large views rests after
//! each encoding twice as long as it took (a third of a core at most). A client waiting for its
//! turn holds no snapshot: when the turn comes it gets the encoding made
//! meanwhile, or the latest snapshot's.
//!
//! All the encodings together, shared or not, cached or held by responses
//! not yet written, stay within one [`BodyBudget`]: past it a request gets
//! a 503 (and a stream skips the snapshot) rather than the daemon growing
//! by an encoding per waiting client.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use nfsdtop_agent::model::{
    EntityKind, EntityStats, Schema, ServerView, Snapshot, SourceInfo, Totals,
};
use serde::Serialize;
use tokio::sync::Semaphore;

use crate::body_budget::{BodyBudget, Budgeted, OverBudget, DEFAULT_BUDGET_MIB, MIB};
use crate::json_error::json_error;

/// Distinct views of one snapshot that are encoded (and shared); a client
/// asking for yet another in the same interval gets a 503 (`top` takes
/// many values: without a bound a client cycling through them would keep
/// the encoder busy for ever).
pub const MAX_SHARED_VIEWS: usize = 16;

/// Of those, views of more than [`SMALL_VIEW`] entities besides the full
/// one: each costs about as much as the full view (0.2 s for 20,000
/// peers), so sixteen a second would keep the large lane busy for ever.
pub const MAX_LARGE_VIEWS: usize = 4;

type Cell = Arc<OnceLock<Bytes>>;

/// The latest snapshot published, as every view and handler watches it.
pub type Latest = tokio::sync::watch::Receiver<Option<Arc<Published>>>;

static NEXT_SEQ: AtomicU64 = AtomicU64::new(0);

/// One snapshot as published to every view, with its encodings.
#[derive(Debug)]
pub struct Published {
    pub snapshot: Snapshot,
    pub at: Instant,
    /// Tells snapshots apart (a stream sends each one once).
    pub seq: u64,
    encodings: Mutex<Encodings>,
}

/// The encodings of one snapshot's views, and which views were admitted
/// (kept when the encodings are let go for the budget, so that letting
/// them go does not admit more views).
#[derive(Debug, Default)]
struct Encodings {
    cells: Vec<(View, Cell)>,
    /// Each view admitted, and whether it is a large one.
    admitted: Vec<(View, bool)>,
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
            encodings: Mutex::new(Encodings::default()),
        }
    }

    /// The encoding of `view`, if it has been made.
    fn made(&self, view: View) -> Option<Bytes> {
        let enc = self.encodings.lock().unwrap_or_else(|p| p.into_inner());
        enc.cells
            .iter()
            .find(|(v, _)| *v == view)
            .and_then(|(_, c)| c.get().cloned())
    }

    /// The cell of `view`, or None when [`MAX_SHARED_VIEWS`] others (or
    /// [`MAX_LARGE_VIEWS`] other large ones) have been admitted already.
    fn cell(&self, view: View) -> Option<Cell> {
        let mut enc = self.encodings.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, c)) = enc.cells.iter().find(|(v, _)| *v == view) {
            return Some(c.clone());
        }
        if !enc.admitted.iter().any(|(v, _)| *v == view) {
            let large = !view.is_full() && view.entities(&self.snapshot) > SMALL_VIEW;
            let larges = enc.admitted.iter().filter(|(_, l)| *l).count();
            // The full view (what nfsdtop --connect reads) always has a
            // place: clients asking for other views cannot take it.
            let full = view.is_full();
            if !full
                && (enc.admitted.len() >= MAX_SHARED_VIEWS || (large && larges >= MAX_LARGE_VIEWS))
            {
                return None;
            }
            enc.admitted.push((view, large));
        }
        let c = Cell::default();
        enc.cells.push((view, c.clone()));
        Some(c)
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
    /// The full view in a lane of its own: many other large views asked
    /// for at once must not make it wait behind each of them.
    full_permits: Arc<Semaphore>,
    /// The views waiting for the large lane, and how many requests each.
    large_waiting: Arc<Mutex<Vec<(View, usize)>>>,
    newest: Mutex<Vec<(View, Encoded)>>,
    /// What all the encodings may hold at once.
    budget: Arc<BodyBudget>,
}

impl Default for Encoder {
    fn default() -> Encoder {
        Encoder::new(DEFAULT_BUDGET_MIB * MIB)
    }
}

/// Why a view could not be had.
#[derive(Debug)]
pub enum EncodeError {
    /// It would not fit in the budget beside the encodings held now.
    Busy(OverBudget),
    /// [`MAX_SHARED_VIEWS`] other views were encoded this interval.
    TooManyViews,
    Failed(String),
}

impl Encoder {
    /// An encoder whose encodings hold at most `budget` bytes at once.
    pub fn new(budget: usize) -> Encoder {
        Encoder {
            permits: Arc::new(Semaphore::new(1)),
            small_permits: Arc::new(Semaphore::new(1)),
            full_permits: Arc::new(Semaphore::new(1)),
            large_waiting: Arc::default(),
            newest: Mutex::new(Vec::new()),
            budget: BodyBudget::new(budget),
        }
    }

    pub fn budget(&self) -> &Arc<BodyBudget> {
        &self.budget
    }

    /// A buffer for `view` of `p` within the budget. When it does not fit,
    /// the encodings kept only for sharing (of views no one may ask for
    /// again) are let go first: what clients hold goes before what might
    /// spare a later encoding.
    fn buffer(&self, view: View, p: &Published) -> Result<Budgeted, OverBudget> {
        let guess = view.size_guess(&p.snapshot);
        Budgeted::with_capacity(&self.budget, guess).or_else(|_| {
            self.newest
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clear();
            p.encodings
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .cells
                .clear();
            Budgeted::with_capacity(&self.budget, guess)
        })
    }

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
    ) -> Option<Result<Encoded, EncodeError>> {
        let (first, first_seq, view, small, waiting) = {
            let p = latest.borrow().clone()?;
            let view = view.normalised(&p.snapshot);
            if let Some(b) = p.made(view) {
                return Some(Ok(Encoded {
                    json: b,
                    seq: p.seq,
                }));
            }
            let small = view.entities(&p.snapshot) <= SMALL_VIEW;
            // At most MAX_LARGE_VIEWS distinct views wait for the large
            // lane (see Waiting), checked before the view takes one of
            // the snapshot's places.
            let waiting = if !view.is_full() && !small {
                match Waiting::on(&self.large_waiting, view) {
                    Some(w) => Some(w),
                    None => return Some(Err(EncodeError::TooManyViews)),
                }
            } else {
                None
            };
            let Some(cell) = p.cell(view) else {
                return Some(Err(EncodeError::TooManyViews));
            };
            (cell, p.seq, view, small, waiting)
        };
        let lane = if view.is_full() {
            &self.full_permits
        } else if small {
            &self.small_permits
        } else {
            &self.permits
        };
        let acquired = lane.clone().acquire_owned().await;
        drop(waiting);
        let permit = match acquired {
            Ok(p) => p,
            Err(e) => {
                return Some(Err(EncodeError::Failed(format!(
                    "cannot encode the snapshot: {e}"
                ))))
            }
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
        // Normalised against the snapshot it will be made of.
        let view = view.normalised(&p.snapshot);
        let Some(cell) = p.cell(view) else {
            return Some(Err(EncodeError::TooManyViews));
        };
        if let Some(b) = cell.get() {
            return Some(Ok(Encoded {
                json: b.clone(),
                seq,
            }));
        }
        // Charged before a blocking thread is taken: a refusal costs none.
        let buf = match self.buffer(view, &p) {
            Ok(b) => b,
            Err(o) => return Some(Err(EncodeError::Busy(o))),
        };
        let me = self.clone();
        // The permit goes with the work: a client that hangs up meanwhile
        // does not let a second encoding start beside this one.
        let rests = !view.is_full() && !small;
        let made = tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let r = view.render_into(&p.snapshot, buf).map(|json| {
                // Set only here, under the lane's permit: unset before.
                let json = cell.get_or_init(|| json).clone();
                let e = Encoded { json, seq };
                me.made(view, &e);
                e
            });
            (r, permit, started.elapsed())
        })
        .await;
        Some(match made {
            Ok((r, permit, took)) => {
                if rests {
                    // The large lane rests twice as long as it worked:
                    // clients asking for many distinct large views take a
                    // third of a core at most, and the full view and the
                    // pipeline keep the rest.
                    tokio::spawn(async move {
                        tokio::time::sleep((took * 2).min(MAX_REST)).await;
                        drop(permit);
                    });
                }
                r.map_err(EncodeError::Busy)
            }
            Err(e) => Err(EncodeError::Failed(format!(
                "encoding the snapshot failed: {e}"
            ))),
        })
    }
}

/// `group` and `top` of the snapshot and stream endpoints.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct View {
    pub group: Option<EntityKind>,
    pub top: Option<usize>,
}

pub const MAX_TOP: usize = 1_000_000;

/// The longest the large lane rests after an encoding (see
/// [`Encoder::encoded`]).
const MAX_REST: Duration = Duration::from_secs(2);

/// Views of at most this many entities are encoded in the small lane.
pub const SMALL_VIEW: usize = 1_000;

/// A [`Snapshot`] by reference, serialised exactly as the snapshot would
/// be (a test holds them equal): views are encoded without copying the
/// entities they show.
#[derive(Serialize)]
struct ViewOf<'a> {
    schema: Schema,
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

    /// How many of `n` entities of `kind` this view shows.
    fn shown(&self, kind: EntityKind, n: usize) -> usize {
        if self.shows(kind) {
            self.top.map_or(n, |t| t.min(n))
        } else {
            0
        }
    }

    /// How many entities this view of `s` shows.
    fn entities(&self, s: &Snapshot) -> usize {
        self.shown(EntityKind::Peer, s.peers.len()) + self.shown(EntityKind::Class, s.classes.len())
    }

    pub fn is_full(&self) -> bool {
        *self == View::default()
    }

    /// The one view that stands for all that show the same: every `top` at
    /// or above the number of entities shown is `top=MAX_TOP` (all of
    /// them, sorted as a top is), so `top=20001`, `top=20002`... of 20,000
    /// peers share one encoding.
    pub fn normalised(self, s: &Snapshot) -> View {
        let most = |kind: EntityKind, n: usize| if self.shows(kind) { n } else { 0 };
        let n = most(EntityKind::Peer, s.peers.len()).max(most(EntityKind::Class, s.classes.len()));
        match self.top {
            Some(t) if t >= n => View {
                top: Some(MAX_TOP),
                ..self
            },
            _ => self,
        }
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

    /// About the size of this view's JSON, from the size of a few of each
    /// list's entities (it grows with their transports, names and
    /// histogram), with an eighth to spare.
    fn size_guess(&self, s: &Snapshot) -> usize {
        let list = |kind: EntityKind, list: &[EntityStats]| {
            per_entity(list).saturating_mul(self.shown(kind, list.len()))
        };
        let entities =
            list(EntityKind::Peer, &s.peers).saturating_add(list(EntityKind::Class, &s.classes));
        entities.saturating_mul(9) / 8 + 4096
    }

    /// [`View::render_into`] outside any budget, for the tests.
    #[cfg(test)]
    pub fn render(&self, s: &Snapshot) -> Bytes {
        let unbounded = BodyBudget::new(usize::MAX);
        let out = Budgeted::with_capacity(&unbounded, self.size_guess(s)).unwrap();
        self.render_into(s, out).unwrap()
    }

    /// The snapshot as this view shows it, as JSON: only the requested
    /// grouping (the other list empty), the top N entities by dispatch
    /// rate, written into `out`, which holds the encoding's charge.
    /// CPU-bound: call it off the async workers.
    fn render_into(&self, s: &Snapshot, mut out: Budgeted) -> Result<Bytes, OverBudget> {
        let view = ViewOf {
            schema: s.schema,
            time: s.time,
            interval_s: s.interval_s,
            source: &s.source,
            totals: &s.totals,
            peers: self.pick(EntityKind::Peer, &s.peers),
            classes: self.pick(EntityKind::Class, &s.classes),
            server: &s.server,
        };
        // `out` is one allocation of about the final size (see
        // [`View::size_guess`]) instead of a dozen doublings (each a copy
        // of everything so far, and a last one that holds twice the
        // encoding at once).
        match serde_json::to_writer(&mut out, &view) {
            Ok(()) => Ok(out.finish()),
            Err(e) => match out.over {
                Some(o) => Err(o),
                None => Ok(Bytes::from(
                    serde_json::json!({ "error": format!("cannot serialise snapshot: {e}") })
                        .to_string(),
                )),
            },
        }
    }
}

/// The JSON size of one of `list`'s entities, measured on up to 16 of them
/// spread over it.
fn per_entity(list: &[EntityStats]) -> usize {
    if list.is_empty() {
        return 0;
    }
    let step = list.len().div_ceil(16);
    let sample: Vec<&EntityStats> = list.iter().step_by(step).collect();
    let bytes = serde_json::to_vec(&sample).map_or(1024 * sample.len(), |v| v.len());
    bytes / sample.len() + 1
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

pub async fn snapshot_handler(
    State(latest): State<Latest>,
    State(encoder): State<Arc<Encoder>>,
    q: Params,
) -> Response {
    let view = match view_of(q) {
        Ok(v) => v,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, e),
    };
    match encoder.encoded(&latest, view).await {
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
        Some(Err(EncodeError::Busy(o))) => busy(o),
        Some(Err(EncodeError::TooManyViews)) => too_many_views(&views_bound()),
        Some(Err(EncodeError::Failed(e))) => json_error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

mod overload;
use overload::Waiting;
pub use overload::{busy, too_many_views, too_many_views_message, views_bound};

#[cfg(test)]
mod tests;
