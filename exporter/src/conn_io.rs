//! One served connection's byte stream, as the listener sees it: whether a
//! response is in flight (an idle connection may be closed to make room,
//! a busy one is not), since when its writes have been stuck (a client
//! that stopped reading), and the JSON bodies of hyper's own errors.
//!
//! hyper answers requests it cannot parse (400), over-long URIs (414) and
//! over-large heads (431) itself, with an empty body and no hook to change
//! it. Such a reply is recognisable: no request of ours is in flight, it is
//! a 4xx with `content-length: 0`, `connection: close` and no content type
//! (every response of the router has one and a JSON body). [`Tracked`]
//! writes `{"error": ...}` in its place.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes, HttpBody};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// hyper's read buffer bound: a request head up to this size (and URIs up
/// to hyper's 65534 bytes) is read, a larger one gets 431.
pub const MAX_HEAD: usize = 80 * 1024;

/// The 431's message (hyper's and the router's: [`crate::server`]).
pub fn head_too_large() -> String {
    format!(
        "request head too large: at most 100 headers and {} KiB",
        MAX_HEAD / 1024
    )
}

/// What the listener and the connection's task share about it.
#[derive(Debug)]
pub struct ConnShared {
    /// Accept order: the lowest idle one is closed first.
    pub id: u64,
    base: Instant,
    busy: AtomicUsize,
    /// Milliseconds since `base` + 1 when a write last found the socket
    /// full and nothing has been written since; 0 when writes flow.
    stalled_since: AtomicU64,
    killed: AtomicBool,
    kill: Notify,
}

impl ConnShared {
    pub fn new(id: u64, base: Instant) -> ConnShared {
        ConnShared {
            id,
            base,
            busy: AtomicUsize::new(0),
            stalled_since: AtomicU64::new(0),
            killed: AtomicBool::new(false),
            kill: Notify::new(),
        }
    }

    pub fn is_busy(&self) -> bool {
        self.busy.load(Ordering::SeqCst) > 0
    }

    /// How long writes have been stuck, if they are.
    pub fn stalled_for(&self, now: Instant) -> Option<Duration> {
        match self.stalled_since.load(Ordering::SeqCst) {
            0 => None,
            t => Some(now.saturating_duration_since(self.base + Duration::from_millis(t - 1))),
        }
    }

    /// Close the connection (its task drops it). Returns false if it was
    /// already told to.
    pub fn kill(&self) -> bool {
        if self.killed.swap(true, Ordering::SeqCst) {
            return false;
        }
        self.kill.notify_one();
        true
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    pub async fn killed(&self) {
        self.kill.notified().await
    }

    /// Marks a response in flight until dropped (with its body).
    pub fn begin(self: &std::sync::Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::SeqCst);
        Busy(self.clone())
    }

    fn note_write(&self, stuck: bool) {
        if stuck {
            let now = self.base.elapsed().as_millis() as u64 + 1;
            let _ = self
                .stalled_since
                .compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst);
        } else {
            self.stalled_since.store(0, Ordering::SeqCst);
        }
    }
}

#[derive(Debug)]
pub struct Busy(std::sync::Arc<ConnShared>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Lets a handler end its connection at once (a request extension): a
/// stream client dropped as too slow is closed then, not when its stuck
/// writes time out, and gives back its buffers and its descriptor.
#[derive(Clone, Debug)]
pub struct ConnCloser(std::sync::Arc<ConnShared>);

impl ConnCloser {
    pub fn new(shared: std::sync::Arc<ConnShared>) -> ConnCloser {
        ConnCloser(shared)
    }

    pub fn close(&self) {
        self.0.kill();
    }
}

/// A response body that keeps its connection marked busy until it is
/// sent (or dropped): a stream is busy for as long as it runs.
pub struct BusyBody {
    inner: Body,
    _busy: Busy,
}

impl BusyBody {
    pub fn wrap(inner: Body, busy: Busy) -> Body {
        Body::new(BusyBody { inner, _busy: busy })
    }
}

impl HttpBody for BusyBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The connection's stream with its bookkeeping.
pub struct Tracked<S> {
    inner: S,
    shared: std::sync::Arc<ConnShared>,
    /// A JSON error reply being written in place of hyper's, and how much
    /// of it is out.
    replacing: Option<(Vec<u8>, usize)>,
}

impl<S> Tracked<S> {
    pub fn new(inner: S, shared: std::sync::Arc<ConnShared>) -> Tracked<S> {
        Tracked {
            inner,
            shared,
            replacing: None,
        }
    }
}

impl<S: AsyncWrite + Unpin> Tracked<S> {
    /// Write out the rest of a replacement reply.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, done)) = &mut self.replacing {
            if *done == bytes.len() {
                self.replacing = None;
                break;
            }
            match Pin::new(&mut self.inner).poll_write(cx, &bytes[*done..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    *done += n;
                    self.shared.note_write(false);
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    self.shared.note_write(true);
                    return Poll::Pending;
                }
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Takes `buf` if it is (the rest of) one of hyper's own error replies,
    /// which goes out as JSON instead.
    fn take_error_reply(
        &mut self,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Option<Poll<io::Result<usize>>> {
        if self.replacing.is_some() {
            // hyper's reply ends the connection: nothing follows it.
            return Some(match self.drain(cx) {
                Poll::Ready(Ok(())) => Poll::Ready(Ok(buf.len())),
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            });
        }
        if self.shared.is_busy() {
            return None;
        }
        let reply = json_for_hyper_error(buf)?;
        self.replacing = Some((reply, 0));
        Some(match self.drain(cx) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            // Taken: the rest goes out on flush or shutdown.
            _ => Poll::Ready(Ok(buf.len())),
        })
    }

    fn note(&self, r: &Poll<io::Result<usize>>) {
        match r {
            Poll::Ready(Ok(n)) if *n > 0 => self.shared.note_write(false),
            Poll::Pending => self.shared.note_write(true),
            _ => {}
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

/// Vectored writes are passed on as such: hyper asks `is_write_vectored`
/// and, when told no, copies every body chunk into a buffer of the
/// connection's own (each snapshot response a private copy of the shared
/// encoding, 29 MB for 20,000 peers) instead of queueing the shared bytes.
impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if let Some(r) = this.take_error_reply(cx, buf) {
            return r;
        }
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.note(&r);
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        // hyper's own replies are a head alone, in the first slice.
        let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| b);
        if let Some(r) = this.take_error_reply(cx, first) {
            return r;
        }
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.note(&r);
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut self.inner).poll_flush(cx),
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut self.inner).poll_shutdown(cx),
            other => other,
        }
    }
}

/// If `buf` starts with one of hyper's own error replies (see the module
/// comment), the same status with a JSON body.
pub fn json_for_hyper_error(buf: &[u8]) -> Option<Vec<u8>> {
    if !(buf.starts_with(b"HTTP/1.1 4") || buf.starts_with(b"HTTP/1.0 4")) {
        return None;
    }
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let headers: Vec<&str> = lines.collect();
    let has = |h: &str| headers.iter().any(|l| l.replace(' ', "") == h);
    if !has("content-length:0")
        || !has("connection:close")
        || headers.iter().any(|l| l.starts_with("content-type:"))
    {
        return None;
    }
    let code = status_line.get(9..12)?;
    let (reason, msg): (&str, String) = match code {
        "400" => (
            "Bad Request",
            "bad request: the request line or a header could not be parsed as HTTP/1.1".into(),
        ),
        "414" => ("URI Too Long", "URI too long: at most 65534 bytes".into()),
        "431" => ("Request Header Fields Too Large", head_too_large()),
        _ => ("Client Error", "the request could not be handled".into()),
    };
    let body = serde_json::json!({ "error": msg }).to_string();
    Some(
        format!(
            "{} {code} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
connection: close\r\n\r\n{body}",
            &status_line[..8].to_ascii_uppercase(),
            body.len()
        )
        .into_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_own_empty_4xx_replies_are_replaced() {
        let hyper = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\n\
content-length: 0\r\ndate: Wed, 02 Dec 2026 00:42:01 GMT\r\n\r\n";
        let r = String::from_utf8(json_for_hyper_error(hyper).unwrap()).unwrap();
        assert!(r.starts_with("HTTP/1.1 431 "), "{r}");
        assert!(r.contains("content-type: application/json"), "{r}");
        let body: serde_json::Value =
            serde_json::from_str(r.split("\r\n\r\n").nth(1).unwrap()).expect("a JSON body");
        assert!(body["error"].as_str().unwrap().contains("too large"));
        // The router's own errors carry a content type and a body.
        let ours = b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\n\
content-length: 12\r\n\r\n{\"error\":1}";
        assert_eq!(json_for_hyper_error(ours), None);
        assert_eq!(json_for_hyper_error(b"HTTP/1.1 200 OK\r\n\r\n"), None);
        assert_eq!(json_for_hyper_error(b"{\"peers\":[]}"), None);
    }
}
