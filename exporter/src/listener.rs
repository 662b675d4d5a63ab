//! Accepting and serving connections (plain or TLS) under limits no client
//! can get around:
//!
//! - a connection must finish its TLS handshake, and then each request
//!   head, within `header_timeout` (hyper's header read timeout runs from
//!   the moment a connection is ready for a request: it covers silent
//!   sockets, half-sent heads and idle keep-alive connections alike);
//! - a response whose writes make no progress for `write_timeout` (a
//!   client that stopped reading) is dropped;
//! - at most `max_connections` are open, kept below the open-files limit
//!   with room to spare. When a new one comes at the cap, the oldest
//!   connection with no response in flight is closed for it (silent and
//!   half-sent ones are all such), so a scrape still gets through a flood;
//!   only when every connection is busy is the new one refused;
//! - on shutdown, connections with no response in flight (idle, silent,
//!   half-sent) close at once and the rest get `shutdown_timeout` to
//!   finish before they are dropped;
//! - the lines a client can provoke (failed handshakes, the cap) are
//!   rate-limited and name the client by pseudonym under --redact.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use nfsdtop_agent::enrich::redact::Redactor;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;

use crate::config::http::{HttpSettings, Limits};
use crate::conn_io::{BusyBody, ConnCloser, ConnShared, Tracked, MAX_HEAD};
use crate::ratelog::RateLog;
use crate::web_config::watch::WebSource;
use crate::web_config::WebConfig;

/// Descriptors kept free beside the connections: the listener, the
/// runtime's, files opened while serving and the connections being closed.
const FD_RESERVE: u64 = 64;

static CAP_LOG: RateLog = RateLog::new(Duration::from_secs(60));
static TLS_LOG: RateLog = RateLog::new(Duration::from_secs(60));
static ACCEPT_LOG: RateLog = RateLog::new(Duration::from_secs(60));

/// Connections the kernel completes before nfsdtopd accepts them; std's
/// (and so tokio's) 128 is soon full under a flood, and the next clients'
/// SYNs are dropped for a second.
const BACKLOG: u32 = 1024;

/// Listen on `addr` with room for a burst of connections.
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let sock = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    sock.set_reuseaddr(true)?;
    sock.bind(addr)?;
    sock.listen(BACKLOG)
}

/// `max_connections` as far as the open-files limit allows, and a warning
/// when that lowered a configured value.
pub fn connection_cap(wanted: usize, configured: bool) -> (usize, Option<String>) {
    let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    let open = std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count() as u64)
        .unwrap_or(32);
    let room = soft.saturating_sub(open + FD_RESERVE).max(1);
    if (wanted as u64) <= room {
        return (wanted, None);
    }
    let cap = room as usize;
    let warn = configured.then(|| {
        format!(
            "warning: max_connections {wanted} lowered to {cap}: the open-files limit is {soft} \
(raise LimitNOFILE in the unit, or ulimit -n)"
        )
    });
    (cap, warn)
}

struct Registry {
    base: Instant,
    next_id: AtomicU64,
    conns: Mutex<BTreeMap<u64, Arc<ConnShared>>>,
    ended: Notify,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<ConnShared>>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn len(&self) -> usize {
        self.lock().len()
    }

    fn add(self: &Arc<Self>) -> Entry {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let shared = Arc::new(ConnShared::new(id, self.base));
        self.lock().insert(id, shared.clone());
        Entry {
            reg: self.clone(),
            shared,
        }
    }

    /// Close the oldest connection with no response in flight.
    fn evict_oldest_idle(&self) -> bool {
        let victim = self
            .lock()
            .values()
            .find(|c| !c.is_busy() && !c.is_killed())
            .cloned();
        victim.is_some_and(|c| c.kill())
    }

    /// Connections told to close whose tasks have not dropped them yet.
    fn closing(&self) -> usize {
        self.lock().values().filter(|c| c.is_killed()).count()
    }

    fn kill_stalled(&self, limit: Duration) -> usize {
        let now = Instant::now();
        self.lock()
            .values()
            .filter(|c| c.stalled_for(now).is_some_and(|d| d >= limit))
            .filter(|c| c.kill())
            .count()
    }

    /// Close the connections with no response in flight.
    fn kill_idle(&self) -> usize {
        self.lock()
            .values()
            .filter(|c| !c.is_busy())
            .filter(|c| c.kill())
            .count()
    }

    fn kill_all(&self) -> usize {
        self.lock().values().filter(|c| c.kill()).count()
    }

    /// Wait until no connection is left or `until`; true if none is left.
    async fn drained(&self, until: tokio::time::Instant) -> bool {
        loop {
            let ended = self.ended.notified();
            if self.len() == 0 {
                return true;
            }
            if tokio::time::timeout_at(until, ended).await.is_err() {
                return self.len() == 0;
            }
        }
    }
}

/// A connection's place in the registry, given up when its task ends.
struct Entry {
    reg: Arc<Registry>,
    shared: Arc<ConnShared>,
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.reg.lock().remove(&self.shared.id);
        self.reg.ended.notify_waiters();
    }
}

struct Ctx {
    router: Router,
    /// TLS, users and headers, as of each new connection.
    web: Arc<WebSource>,
    http: hyper::server::conn::http1::Builder,
    limits: Limits,
    redactor: Option<Redactor>,
}

impl Ctx {
    /// How a client is named in log lines.
    fn name(&self, peer: SocketAddr) -> String {
        match &self.redactor {
            Some(r) => r.pseudonym(peer.ip()),
            None => peer.to_string(),
        }
    }
}

/// Serve `router` on `listener` until `shutdown` completes, then close
/// every connection within `limits.shutdown_timeout`.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    web: Arc<WebSource>,
    settings: HttpSettings,
    redactor: Option<Redactor>,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let mut limits = settings.limits;
    let (cap, warning) = connection_cap(limits.max_connections, settings.max_connections_set);
    if let Some(w) = warning {
        crate::log::log(w);
    }
    limits.max_connections = cap;
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_HEAD);
    let ctx = Arc::new(Ctx {
        router,
        web,
        http,
        limits,
        redactor,
    });
    let reg = Arc::new(Registry {
        base: Instant::now(),
        next_id: AtomicU64::new(0),
        conns: Mutex::new(BTreeMap::new()),
        ended: Notify::new(),
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let sweeper = tokio::spawn(sweep(reg.clone(), ctx.limits.write_timeout));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok((tcp, peer)) => admit(&ctx, &reg, &stop_rx, tcp, peer).await,
                Err(e) => {
                    let out_of_fds = matches!(e.raw_os_error(), Some(23 | 24));
                    ACCEPT_LOG.log(|| format!("accept: {e}"));
                    if out_of_fds && reg.evict_oldest_idle() {
                        tokio::task::yield_now().await;
                    } else {
                        // Do not spin on an error that persists.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            },
        }
    }
    drop(listener);
    sweeper.abort();
    stop_tx.send_replace(true);
    // Nothing to finish on a connection between requests or in the middle
    // of a head: it goes now, the rest get shutdown_timeout.
    reg.kill_idle();
    let until = tokio::time::Instant::now() + ctx.limits.shutdown_timeout;
    if !reg.drained(until).await {
        let n = reg.kill_all();
        crate::log::log(format_args!(
            "closing {n} connection(s) that did not finish within {:.1} s",
            ctx.limits.shutdown_timeout.as_secs_f64()
        ));
        // Killed connections end at their next poll.
        reg.drained(tokio::time::Instant::now() + Duration::from_secs(1))
            .await;
    }
    Ok(())
}

/// Take a new connection in, making room at the cap if it can.
async fn admit(
    ctx: &Arc<Ctx>,
    reg: &Arc<Registry>,
    stop: &watch::Receiver<bool>,
    tcp: TcpStream,
    peer: SocketAddr,
) {
    let cap = ctx.limits.max_connections;
    if reg.len() - reg.closing().min(reg.len()) >= cap {
        if reg.evict_oldest_idle() {
            CAP_LOG.log(|| {
                format!(
                    "{cap} connections open (max_connections): closing the oldest idle ones \
to let new ones in"
                )
            });
        } else {
            CAP_LOG.log(|| {
                format!("{cap} connections open (max_connections), all busy: refusing new ones")
            });
            return;
        }
    }
    // Let closed connections give back their descriptors before taking
    // more: the spare ones are few.
    for _ in 0..64 {
        if reg.len() < cap + (FD_RESERVE as usize) / 2 {
            break;
        }
        tokio::task::yield_now().await;
    }
    let entry = reg.add();
    tokio::spawn(connection(ctx.clone(), entry, stop.clone(), tcp, peer));
}

/// Close connections whose writes have been stuck too long.
async fn sweep(reg: Arc<Registry>, limit: Duration) {
    let every = (limit / 4).clamp(Duration::from_millis(100), Duration::from_secs(1));
    loop {
        tokio::time::sleep(every).await;
        reg.kill_stalled(limit);
    }
}

async fn connection(
    ctx: Arc<Ctx>,
    entry: Entry,
    mut stop: watch::Receiver<bool>,
    tcp: TcpStream,
    peer: SocketAddr,
) {
    let shared = entry.shared.clone();
    let web = ctx.web.current().await;
    let Some(tls) = web.tls.clone() else {
        return http(&ctx, web, Tracked::new(tcp, shared), peer, &entry, stop).await;
    };
    let acceptor = TlsAcceptor::from(tls);
    let deadline = tokio::time::Instant::now() + ctx.limits.header_timeout;
    let mut first = [0u8; 1];
    let peeked = tokio::select! {
        r = tokio::time::timeout_at(deadline, tcp.peek(&mut first)) => r,
        _ = shared.killed() => return,
        _ = stop.wait_for(|s| *s) => return,
    };
    // A TLS handshake starts with byte 0x16; a plain HTTP request with its
    // method's capitals. Answered with a TLS alert, curl says "HTTP/0.9"
    // and a browser nothing useful: say in plain HTTP what to do instead.
    if matches!(peeked, Ok(Ok(1))) && first[0].is_ascii_uppercase() {
        TLS_LOG.log(|| {
            format!(
                "plain HTTP from {} on the TLS port: answered 400, use https://",
                ctx.name(peer)
            )
        });
        return crate::tls::answer_plain_http(tcp).await;
    }
    let handshake = tokio::time::timeout_at(deadline, acceptor.accept(tcp));
    let tls = tokio::select! {
        r = handshake => match r {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                TLS_LOG.log(|| format!("TLS handshake with {} failed: {e}", ctx.name(peer)));
                return;
            }
            Err(_) => {
                TLS_LOG.log(|| format!("TLS handshake with {} timed out", ctx.name(peer)));
                return;
            }
        },
        _ = shared.killed() => return,
        _ = stop.wait_for(|s| *s) => return,
    };
    http(&ctx, web, Tracked::new(tls, shared), peer, &entry, stop).await
}

async fn http<S>(
    ctx: &Ctx,
    web: Arc<WebConfig>,
    io: Tracked<S>,
    peer: SocketAddr,
    entry: &Entry,
    mut stop: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let shared = entry.shared.clone();
    let router = ctx.router.clone();
    let svc = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let busy = shared.begin();
        let mut req = req.map(Body::new);
        req.extensions_mut().insert(ConnectInfo(peer));
        req.extensions_mut().insert(ConnCloser::new(shared.clone()));
        let router = router.clone();
        let web = web.clone();
        async move {
            let mut resp = match router.oneshot(req).await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            for (name, value) in &web.headers {
                resp.headers_mut().insert(name.clone(), value.clone());
            }
            Ok::<_, Infallible>(resp.map(|b| BusyBody::wrap(b, busy)))
        }
    });
    let conn = ctx.http.serve_connection(TokioIo::new(io), svc);
    tokio::pin!(conn);
    let mut graceful = false;
    loop {
        tokio::select! {
            // Errors here are the client's (resets, timeouts, bad HTTP):
            // the connection just ends.
            _ = conn.as_mut() => return,
            _ = entry.shared.killed() => return,
            _ = stop.wait_for(|s| *s), if !graceful => {
                conn.as_mut().graceful_shutdown();
                graceful = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn plain() -> Arc<WebSource> {
        let auth = Arc::new(crate::auth::Auth::new(Default::default()));
        Arc::new(WebSource::fixed(WebConfig::plain(), auth))
    }

    #[tokio::test]
    async fn a_response_that_never_finishes_is_dropped_after_the_shutdown_timeout() {
        let started = Arc::new(Notify::new());
        let s = started.clone();
        let router = Router::new().route(
            "/hang",
            get(move || async move {
                s.notify_one();
                std::future::pending::<String>().await
            }),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let settings = HttpSettings {
            limits: Limits {
                shutdown_timeout: Duration::from_millis(300),
                ..crate::config::http::DEFAULT_LIMITS
            },
            ..HttpSettings::default()
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, router, plain(), settings, None, async {
            let _ = stopped.await;
        }));
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        started.notified().await;
        let t = Instant::now();
        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .expect("serve returns")
            .unwrap()
            .unwrap();
        let took = t.elapsed();
        assert!(took >= Duration::from_millis(300), "{took:?}: did not wait");
        assert!(took < Duration::from_secs(2), "{took:?}");
        let mut rest = Vec::new();
        let _ = c.read_to_end(&mut rest).await;
        assert!(rest.is_empty(), "no answer, the connection is closed");
    }

    #[tokio::test]
    async fn a_body_is_sent_from_the_shared_bytes_not_copied_per_connection() {
        // Far more than the socket buffers take while the client reads
        // nothing, so hyper holds the rest of the body meanwhile.
        let big = axum::body::Bytes::from(vec![b'x'; 16 << 20]);
        let once = Arc::new(Mutex::new(Some(big.clone())));
        let router = Router::new().route(
            "/big",
            get(move || async move { once.lock().unwrap().take().unwrap_or_default() }),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(
            listener,
            router,
            plain(),
            HttpSettings::default(),
            None,
            async {
                let _ = stopped.await;
            },
        ));
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.set_recv_buffer_size(64 * 1024).unwrap();
        let mut c = sock.connect(addr).await.unwrap();
        c.write_all(b"GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        // The head and the first of the body: hyper has the body by now.
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let body_at = loop {
            let n = c.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
            if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                if got.len() > i + 4 {
                    break i + 4;
                }
            }
        };
        assert!(got.starts_with(b"HTTP/1.1 200"), "{got:?}");
        assert!(
            !big.is_unique(),
            "hyper copied the body into a buffer of its own instead of sending the shared bytes"
        );
        c.read_to_end(&mut got).await.unwrap();
        assert_eq!(got.len() - body_at, big.len());
        assert!(big.is_unique(), "the body is let go once sent");
        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_write_that_cannot_progress_marks_the_connection_stalled() {
        let reg = Arc::new(Registry {
            base: Instant::now(),
            next_id: AtomicU64::new(0),
            conns: Mutex::new(BTreeMap::new()),
            ended: Notify::new(),
        });
        let entry = reg.add();
        let (near, mut far) = tokio::io::duplex(64);
        let mut io = Tracked::new(near, entry.shared.clone());
        let _busy = entry.shared.begin();
        io.write_all(&[b'x'; 64]).await.unwrap();
        assert_eq!(entry.shared.stalled_for(Instant::now()), None);
        // The peer reads nothing: the next write cannot go out.
        let blocked = tokio::time::timeout(Duration::from_millis(50), io.write_all(b"y")).await;
        assert!(blocked.is_err());
        assert!(entry.shared.stalled_for(Instant::now()).is_some());
        assert_eq!(reg.kill_stalled(Duration::from_secs(60)), 0, "not yet");
        let later = Instant::now() + Duration::from_millis(10);
        while Instant::now() < later {
            tokio::task::yield_now().await;
        }
        assert_eq!(reg.kill_stalled(Duration::from_millis(10)), 1);
        assert!(entry.shared.is_killed());
        // Once the peer reads, writes flow and the mark goes.
        let mut buf = [0u8; 64];
        far.read_exact(&mut buf).await.unwrap();
        io.write_all(b"z").await.unwrap();
        assert_eq!(entry.shared.stalled_for(Instant::now()), None);
        drop(entry);
        assert_eq!(reg.len(), 0, "an ended connection leaves the registry");
    }
}
