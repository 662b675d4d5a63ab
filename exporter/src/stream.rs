//! /api/v1/stream: server-sent events, `event: snapshot\ndata: <Snapshot
//! JSON>\n\n`, the latest snapshot at once, then each new one.
//!
//! What a stream client can cost is bounded, however slowly it reads:
//! - at most `max_streams` are served at once; one more gets a 503;
//! - all clients of an interval send the one shared encoding of their view
//!   ([`Encoder::encoded`]), handed to the connection in small copied
//!   pieces, so what a client holds of its own is a few of those in the
//!   connection's write buffer;
//! - a client that finishes a snapshot goes on with the latest one (it
//!   skips those it was too slow for). Slow clients may between them still
//!   be reading [`MAX_STALE`] snapshots older than the latest two; past
//!   that, those on the oldest, the slowest, are dropped with a log line:
//!   they let go of it and their connections are closed at once, even if
//!   their writes are stuck. A lone slow reader (a remote TUI on a thin
//!   link) still gets every snapshot it can;
//! - a snapshot whose encoding does not fit in the response budget (see
//!   [`crate::body_budget`]) is skipped, the client told why (`event:
//!   skipped`), and the stream waits for the next.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::connect_info::ConnectInfo;
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use futures_util::stream;
use tokio::sync::watch;

use crate::body_budget::MIB;
use crate::conn_io::ConnCloser;
use crate::json_error::json_error;
use crate::log::log;
use crate::ratelog::RateLog;
use crate::snapshot::{
    too_many_views_message, view_of, views_bound, EncodeError, Encoder, Latest, Params, View,
};

pub const DEFAULT_MAX_STREAMS: usize = 64;
pub const MAX_MAX_STREAMS: usize = 100_000;

/// The size of the pieces a snapshot is sent in: a connection's write
/// buffer holds at most 16 of them.
const PIECE: usize = 16 * 1024;
const PREFIX: &[u8] = b"event: snapshot\ndata: ";
const SUFFIX: &[u8] = b"\n\n";
/// A comment line when no snapshot came for this long: a client can tell
/// a quiet stream (long --interval, a finished replay) from a dead link.
const KEEPALIVE: Duration = Duration::from_secs(15);
/// Snapshots older than the latest two that slow clients may be reading;
/// each is up to a whole encoding (29 MB for 20,000 peers).
pub const MAX_STALE: usize = 2;

/// Snapshots skipped for the response budget: every stream client could
/// hit it every interval.
static BUSY_LOG: RateLog = RateLog::new(Duration::from_secs(60));

/// Every open stream.
#[derive(Debug)]
pub struct Streams {
    max: usize,
    /// Client addresses stay out of the log under --redact.
    redact: bool,
    next_id: AtomicU64,
    clients: Mutex<BTreeMap<u64, Arc<Client>>>,
}

#[derive(Debug)]
struct Client {
    peer: Option<SocketAddr>,
    /// Its connection, when served by [`crate::listener`].
    conn: Option<ConnCloser>,
    sending: Mutex<Sending>,
}

#[derive(Debug, Default)]
enum Sending {
    /// Between snapshots.
    #[default]
    Idle,
    /// `json` (shared), of snapshot `seq`, framed as an event, sent up to
    /// `pos`.
    Frame { json: Bytes, seq: u64, pos: usize },
    /// Too slow: the connection is ended at the next chance.
    Dropped,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Streams {
    pub fn new(max: usize, redact: bool) -> Streams {
        Streams {
            max,
            redact,
            next_id: AtomicU64::new(0),
            clients: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn len(&self) -> usize {
        lock(&self.clients).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A place for one more client, or None at the cap.
    fn join(
        self: &Arc<Self>,
        peer: Option<SocketAddr>,
        conn: Option<ConnCloser>,
    ) -> Option<Member> {
        let mut clients = lock(&self.clients);
        if clients.len() >= self.max {
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let client = Arc::new(Client {
            peer,
            conn,
            sending: Mutex::new(Sending::Idle),
        });
        clients.insert(id, client.clone());
        Some(Member {
            streams: self.clone(),
            id,
            client,
        })
    }

    /// Call after snapshot `latest` is published: when slow clients are
    /// reading more than [`MAX_STALE`] older snapshots (older than the
    /// latest two), those on the oldest are dropped.
    pub fn published(&self, latest: u64) {
        let mut clients = lock(&self.clients);
        // A snapshot being read, told apart by number and view (encoding).
        let reading = |s: &Sending| match s {
            Sending::Frame { json, seq, .. } if seq + 1 < latest => {
                Some((*seq, json.as_ptr() as usize))
            }
            _ => None,
        };
        let mut stale: Vec<(u64, usize)> = clients
            .values()
            .filter_map(|c| reading(&lock(&c.sending)))
            .collect();
        stale.sort_unstable();
        stale.dedup();
        if stale.len() <= MAX_STALE {
            return;
        }
        let oldest = &stale[..stale.len() - MAX_STALE];
        let mut dropped = Vec::new();
        clients.retain(|_, c| {
            let mut s = lock(&c.sending);
            if reading(&s).is_some_and(|r| oldest.contains(&r)) {
                *s = Sending::Dropped;
                // hyper polls the body only once the client has read what
                // is buffered: a stuck one would otherwise stay till the
                // write timeout.
                if let Some(conn) = &c.conn {
                    conn.close();
                }
                dropped.push(c.peer);
                return false;
            }
            true
        });
        drop(clients);
        if dropped.is_empty() {
            return;
        }
        let mut who = String::new();
        if !self.redact {
            let known: Vec<String> = dropped.iter().flatten().map(|a| a.to_string()).collect();
            if !known.is_empty() {
                let shown = known.len().min(8);
                who = format!(": {}", known[..shown].join(", "));
                if known.len() > shown {
                    who.push_str(&format!(" and {} more", known.len() - shown));
                }
            }
        }
        log(format_args!(
            "dropped {} /api/v1/stream client(s) reading too slowly (still on the oldest of \
the past snapshots slow clients were reading; at most {MAX_STALE} are kept){who}",
            dropped.len()
        ));
    }
}

/// A client's place; given back when its stream ends.
struct Member {
    streams: Arc<Streams>,
    id: u64,
    client: Arc<Client>,
}

impl Drop for Member {
    fn drop(&mut self) {
        lock(&self.streams.clients).remove(&self.id);
    }
}

/// The next piece of `json` framed as an event, from `pos` on.
fn next_piece(json: &[u8], pos: &mut usize) -> Bytes {
    let total = PREFIX.len() + json.len() + SUFFIX.len();
    let end = (*pos + PIECE).min(total);
    let mut out = Vec::with_capacity(end - *pos);
    let mut start = 0;
    for part in [PREFIX, json, SUFFIX] {
        let (a, b) = ((*pos).max(start), end.min(start + part.len()));
        if a < b {
            out.extend_from_slice(&part[a - start..b - start]);
        }
        start += part.len();
    }
    *pos = end;
    Bytes::from(out)
}

fn framed_len(json: &[u8]) -> usize {
    PREFIX.len() + json.len() + SUFFIX.len()
}

struct Feed {
    latest: Latest,
    encoder: Arc<Encoder>,
    shutdown: watch::Receiver<bool>,
    view: View,
    member: Member,
    /// The snapshot last sent, by [`crate::snapshot::Published::seq`].
    sent: Option<u64>,
}

fn ended(why: &str) -> std::io::Error {
    std::io::Error::other(why.to_string())
}

impl Feed {
    /// The next piece of the body; an error ends the connection at once
    /// (the client is in the middle of an event), None ends it cleanly.
    async fn next(&mut self) -> Option<Result<Bytes, std::io::Error>> {
        loop {
            {
                let mut s = lock(&self.member.client.sending);
                match &mut *s {
                    Sending::Dropped => return Some(Err(ended("read too slowly"))),
                    Sending::Frame { .. } if *self.shutdown.borrow() => {
                        // Do not make shutdown wait for a slow reader to
                        // finish a large snapshot.
                        return Some(Err(ended("shutting down")));
                    }
                    Sending::Frame { json, pos, .. } => {
                        let piece = next_piece(json, pos);
                        if *pos >= framed_len(json) {
                            *s = Sending::Idle;
                        }
                        return Some(Ok(piece));
                    }
                    Sending::Idle => {}
                }
            }
            if *self.shutdown.borrow() {
                return None;
            }
            tokio::select! {
                changed = self.latest.changed() => {
                    if changed.is_err() {
                        // The pipeline is gone for good: end the stream.
                        return None;
                    }
                }
                r = self.shutdown.changed() => {
                    if r.is_err() {
                        return None;
                    }
                    continue;
                }
                _ = tokio::time::sleep(KEEPALIVE) => return Some(Ok(Bytes::from_static(b":\n\n"))),
            }
            self.latest.borrow_and_update();
            let e = match self.encoder.encoded(&self.latest, self.view).await {
                None => continue,
                Some(Ok(e)) => e,
                // Memory held by other responses comes back as their
                // clients read: this client waits for the next snapshot.
                Some(Err(EncodeError::Busy(o))) => {
                    let why = format!(
                        "its JSON (about {} MiB) does not fit in the response budget ({} of {} \
MiB held; [http] response_memory_mib)",
                        o.needed.div_ceil(MIB),
                        o.used.div_ceil(MIB),
                        o.limit.div_ceil(MIB)
                    );
                    BUSY_LOG.log(|| format!("/api/v1/stream: a snapshot skipped: {why}"));
                    // The client is told too, so that it can say why no
                    // snapshot comes (the link itself is fine).
                    return Some(Ok(Bytes::from(format!(
                        "event: skipped\ndata: nfsdtopd skipped a snapshot: {why}\n\n"
                    ))));
                }
                Some(Err(EncodeError::TooManyViews)) => {
                    let why = too_many_views_message(&views_bound());
                    BUSY_LOG.log(|| format!("/api/v1/stream: a snapshot skipped: {why}"));
                    return Some(Ok(Bytes::from(format!(
                        "event: skipped\ndata: nfsdtopd skipped a snapshot: {why}\n\n"
                    ))));
                }
                Some(Err(EncodeError::Failed(e))) => {
                    log(format_args!("/api/v1/stream: {e}"));
                    return Some(Err(ended("cannot encode")));
                }
            };
            // Waiting for the encoder may have brought a newer snapshot
            // than the one that woke us; its own wake-up then finds it sent.
            if self.sent.is_some_and(|s| s >= e.seq) {
                continue;
            }
            self.sent = Some(e.seq);
            *lock(&self.member.client.sending) = Sending::Frame {
                json: e.json,
                seq: e.seq,
                pos: 0,
            };
        }
    }
}

pub async fn stream_handler(
    State(latest): State<Latest>,
    State(encoder): State<Arc<Encoder>>,
    State(streams): State<Arc<Streams>>,
    State(shutdown): State<watch::Receiver<bool>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    conn: Option<Extension<ConnCloser>>,
    q: Params,
) -> Response {
    let view = match view_of(q) {
        Ok(v) => v,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, e),
    };
    let peer = peer.map(|Extension(ConnectInfo(a))| a);
    let Some(member) = streams.join(peer, conn.map(|Extension(c)| c)) else {
        let mut r = json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "too many stream clients: {} are connected, the most max_streams \
(--max-streams) allows; try again later",
                streams.max
            ),
        );
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("10"));
        return r;
    };
    let mut latest = latest;
    // Whatever is there now counts as unseen: send it immediately.
    latest.mark_changed();
    let feed = Feed {
        latest,
        encoder,
        shutdown,
        view,
        member,
        sent: None,
    };
    let body = stream::unfold(feed, |mut f| async move {
        let item = f.next().await?;
        Some((item, f))
    });
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        Body::from_stream(body),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn_io::ConnShared;

    #[test]
    fn pieces_make_up_one_event() {
        let json = vec![b'x'; PIECE * 2 + 5];
        let mut pos = 0;
        let mut all = Vec::new();
        let mut n = 0;
        while pos < framed_len(&json) {
            let p = next_piece(&json, &mut pos);
            assert!(p.len() <= PIECE);
            all.extend_from_slice(&p);
            n += 1;
        }
        assert_eq!(n, 3);
        let want = [PREFIX, &json[..], SUFFIX].concat();
        assert_eq!(all, want);
    }

    #[test]
    fn past_max_stale_the_clients_on_the_oldest_are_dropped_and_let_go() {
        let s = Arc::new(Streams::new(4, true));
        let conn = |id| Arc::new(ConnShared::new(id, std::time::Instant::now()));
        let conns: Vec<_> = (0..3).map(conn).collect();
        let on = |seq: u64| {
            let closer = ConnCloser::new(conns[seq as usize - 1].clone());
            let m = s.join(None, Some(closer)).unwrap();
            let json = Bytes::from(vec![b'{'; 1 << 20]);
            *lock(&m.client.sending) = Sending::Frame {
                json: json.clone(),
                seq,
                pos: 0,
            };
            (m, json)
        };
        let (a, a_json) = on(1);
        let (_b, _) = on(2);
        let (_c, _) = on(3);
        let idle = s.join(None, None).unwrap();
        assert!(s.join(None, None).is_none(), "capped at 4");
        // Only 1 is older than the latest two: kept.
        s.published(3);
        assert_eq!(s.len(), 4);
        // 1, 2 and 3 are: the readers of 1, the slowest, go.
        s.published(5);
        assert_eq!(s.len(), 3);
        assert!(matches!(*lock(&a.client.sending), Sending::Dropped));
        assert!(
            a_json.is_unique(),
            "the dropped client let go of the snapshot"
        );
        assert!(conns[0].is_killed(), "and its connection is closed");
        assert!(!conns[1].is_killed() && !conns[2].is_killed());
        assert!(matches!(*lock(&idle.client.sending), Sending::Idle));
        s.published(9);
        assert_eq!(s.len(), 3, "two stale snapshots are allowed");
        drop(a);
        assert!(s.join(None, None).is_some(), "a place is free");
    }
}
