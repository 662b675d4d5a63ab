//! The link between a view and its producer. A local source runs the
//! pipeline on its own thread; the view only ever sees snapshots arriving
//! on a channel and sends `Control` messages back, so a slow producer can
//! never block drawing.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use nfsdtop::state::RemoteStatus;
use nfsdtop_agent::aggregate::{Aggregator, Limits};
use nfsdtop_agent::classify::ClassMap;
use nfsdtop_agent::model::{Snapshot, SourceKind};
use nfsdtop_agent::pipeline::{Control, Flow, Pace, Pipeline};
use nfsdtop_agent::redact::Redactor;
use nfsdtop_agent::source::live::{BenchStage, LiveError, LiveOptions, Tracepoints};
use nfsdtop_agent::source::{Source, SourceSpec};

use crate::cli::{BenchStageArg, SourceArgs};

/// What the producer says to the view.
pub enum Update {
    Snapshot(Box<Snapshot>),
    /// The producer stopped (end of a replay, or an error it cannot
    /// recover from); the view keeps what it has and says why.
    Ended(Result<(), String>),
    /// How the link to a remote agent is doing (remote sources only).
    Status(RemoteStatus),
}

pub struct Connection {
    pub updates: Receiver<Update>,
    pub control: Sender<Control>,
    /// A note for the header, e.g. why the demo is shown.
    pub notice: Option<String>,
    thread: Option<JoinHandle<()>>,
}

impl Connection {
    pub fn join(mut self) {
        drop(self.control);
        // A pipeline blocked on a full channel sees the view gone.
        drop(self.updates);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub fn spec_of(args: &SourceArgs) -> SourceSpec {
    if let Some(path) = &args.replay {
        return SourceSpec::Replay { path: path.clone() };
    }
    match &args.demo {
        Some(s) => SourceSpec::Demo {
            scenario: s.clone(),
            policy: args.policy,
        },
        None => SourceSpec::Live(live_options(args)),
    }
}

/// The live source's options from the command line.
pub fn live_options(args: &SourceArgs) -> LiveOptions {
    LiveOptions {
        tracefs: args.tracefs.clone(),
        wait_for_nfsd: args.wait.map(|s| {
            if s.is_finite() {
                Duration::from_secs_f64(s)
            } else {
                Duration::MAX
            }
        }),
        ring_bytes: args.ring_size.unwrap_or(LiveOptions::default().ring_bytes),
        kernel_stats: args.bpf_stats,
        tracepoints: if args.classic_tracepoints {
            Tracepoints::Classic
        } else {
            Tracepoints::Raw
        },
        stage: match args.bench_stage {
            Some(BenchStageArg::Hooked) => BenchStage::Hooked,
            Some(BenchStageArg::Discard) => BenchStage::Discard,
            None => BenchStage::Full,
        },
        ..LiveOptions::default()
    }
}

/// Open the source the arguments name. With no source flag and no nfsd on
/// this host (and no --wait), fall back to the built-in demo and say so;
/// any other failure of the live source (privileges, tracefs, a format this
/// version cannot use) is an error the user must see.
pub fn open_local(
    args: &SourceArgs,
) -> anyhow::Result<(SourceSpec, Box<dyn Source>, Option<String>)> {
    if args.connect.is_some() {
        anyhow::bail!(
            "--connect watches a remote agent's snapshots: it has no local events to open"
        );
    }
    let spec = spec_of(args);
    if let SourceSpec::Live(opts) = &spec {
        if let Some(w) = opts.wait_for_nfsd {
            if w == Duration::MAX {
                eprintln!("nfsdtop: waiting for nfsd (its sunrpc tracepoints) to appear...");
            } else {
                eprintln!(
                    "nfsdtop: waiting up to {w:.0?} for nfsd (its sunrpc tracepoints) to appear..."
                );
            }
        }
        return match spec.open() {
            Ok(source) => Ok((spec, source, None)),
            Err(e) if args.wait.is_none() && LiveError::chain_is_no_nfsd(&e) => {
                let demo = SourceSpec::Demo {
                    scenario: "movers".into(),
                    policy: None,
                };
                let source = demo.open().context("cannot open the built-in demo")?;
                let notice = format!("no live nfsd ({e:#}): showing the built-in demo");
                Ok((demo, source, Some(notice)))
            }
            Err(e) => Err(e.context("cannot watch this host's nfsd")),
        };
    }
    let source = spec.open().context("cannot open the event source")?;
    Ok((spec, source, None))
}

pub fn class_map(args: &SourceArgs, spec: &SourceSpec) -> anyhow::Result<ClassMap> {
    match &args.class_map {
        Some(path) => ClassMap::load(path),
        None => Ok(spec.builtin_classmap()?.unwrap_or_default()),
    }
}

/// Snapshots a local pipeline may have waiting for its view.
const SNAPSHOTS_QUEUED: usize = 16;

/// Start the pipeline on its own thread.
pub fn connect(args: &SourceArgs, interval: Duration) -> anyhow::Result<Connection> {
    if let Some(url) = &args.connect {
        return connect_remote(url);
    }
    // Open here, so a bad scenario or file fails before any UI starts.
    let (spec, source, notice) = open_local(args)?;
    let classmap = class_map(args, &spec)?;
    // E.g. a damaged recording: say what is replayed and where it stops.
    let notice = match (notice, source.notice()) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    };
    let pace = if args.speed == 0.0 {
        Pace::AsFastAsPossible
    } else {
        Pace::Realtime { speed: args.speed }
    };
    let defaults = Limits::default();
    let limits = Limits {
        max_peers: args
            .max_peers
            .map_or(defaults.max_peers, |n| n.get() as usize),
        max_transports: args
            .max_transports
            .map_or(defaults.max_transports, |n| n.get() as usize),
        ..defaults
    };
    let mut aggregator = Aggregator::new(classmap, limits);
    if args.redact {
        aggregator = aggregator.with_redactor(Redactor::random());
    }
    // Bounded: a view that falls behind (stdout piped into a slow reader)
    // holds the pipeline back instead of letting snapshots pile up.
    let (utx, urx) = mpsc::sync_channel(SNAPSHOTS_QUEUED);
    let (ctx, crx) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("nfsdtop-pipeline".into())
        .spawn(move || {
            let pipeline = Pipeline {
                pace,
                ..Pipeline::new(source, aggregator, interval)
            };
            let tx = utx.clone();
            // A panic (a bug) must end the view with an error, not look
            // like the normal end of a replay.
            let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                pipeline.run(Some(crx), move |s| {
                    if tx.send(Update::Snapshot(Box::new(s))).is_err() {
                        Flow::Stop
                    } else {
                        Flow::Continue
                    }
                })
            }));
            let res = match res {
                Ok(r) => r.map(|_| ()).map_err(|e| format!("{e:#}")),
                Err(_) => Err("the pipeline failed (see the panic message above)".into()),
            };
            let _ = utx.send(Update::Ended(res));
        })?;
    Ok(Connection {
        updates: urx,
        control: ctx,
        notice,
        thread: Some(thread),
    })
}

// ---- remote agents (`--connect URL`) ----------------------------------
//
// A minimal HTTP/1.1 client over std's TcpStream on its own thread: GET
// /api/v1/stream, read server-sent events (`event: snapshot` / `data:
// <Snapshot JSON>`), forward each snapshot, and reconnect with backoff
// when the link fails or the stream ends. The view only ever sees
// `Update`s, so a dead agent can never block it.

pub const DEFAULT_PORT: u16 = 9847;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// A stream silent this long is dead (the agent sends a snapshot every
/// interval): drop it and reconnect.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
const BACKOFF_MIN: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// Longest header or event line accepted (a snapshot of many peers is
/// one line of JSON).
const MAX_LINE: usize = 256 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteUrl {
    pub host: String,
    pub port: u16,
    /// Path prefix before `/api/v1/...`, without a trailing slash.
    pub base: String,
}

impl std::fmt::Display for RemoteUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "http://[{}]:{}{}", self.host, self.port, self.base)
        } else {
            write!(f, "http://{}:{}{}", self.host, self.port, self.base)
        }
    }
}

/// `http://host[:port][/prefix]`, `host[:port]` or `[v6addr][:port]`.
pub fn parse_url(s: &str) -> anyhow::Result<RemoteUrl> {
    let s = s.trim();
    let rest = match s.split_once("://") {
        Some(("http", rest)) => rest,
        Some((scheme, _)) => anyhow::bail!(
            "{s:?}: {scheme}:// is not supported, only http:// (the agent serves plain HTTP; \
             tunnel it, e.g. ssh -L {DEFAULT_PORT}:127.0.0.1:{DEFAULT_PORT})"
        ),
        None => s,
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or_else(|| anyhow::anyhow!("{s:?}: unclosed [ in the address"))?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => anyhow::bail!("{s:?}: unexpected {after:?} after the address"),
        };
        (h.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    if host.is_empty() {
        anyhow::bail!("{s:?}: no host (try http://127.0.0.1:{DEFAULT_PORT})");
    }
    let port = match port {
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| anyhow::anyhow!("{s:?}: {p:?} is not a port number"))?,
        None => DEFAULT_PORT,
    };
    let base = path.trim_end_matches('/').to_string();
    Ok(RemoteUrl { host, port, base })
}

/// Follow a remote agent's snapshot stream on its own thread.
pub fn connect_remote(url: &str) -> anyhow::Result<Connection> {
    let url = parse_url(url)?;
    let (utx, urx) = mpsc::channel();
    let (ctx, crx) = mpsc::channel();
    // Detached: a read blocked on a silent agent must not hold up quitting.
    std::thread::Builder::new()
        .name("nfsdtop-remote".into())
        .spawn(move || remote_loop(&url, &utx, &crx))?;
    Ok(Connection {
        updates: urx,
        control: ctx,
        notice: None,
        thread: None,
    })
}

enum StreamEnd {
    /// The view has gone: stop for good.
    Stop,
    /// The agent closed the stream after this many snapshots.
    Closed(u64),
}

fn stop_requested(crx: &Receiver<Control>) -> bool {
    loop {
        match crx.try_recv() {
            Ok(Control::Stop) | Err(TryRecvError::Disconnected) => return true,
            // The agent keeps its own pace and class map.
            Ok(_) => continue,
            Err(TryRecvError::Empty) => return false,
        }
    }
}

fn remote_loop(url: &RemoteUrl, utx: &Sender<Update>, crx: &Receiver<Control>) {
    let display = url.to_string();
    let mut attempt: u32 = 0;
    loop {
        if stop_requested(crx) {
            return;
        }
        let status = RemoteStatus::Connecting {
            url: display.clone(),
        };
        if utx.send(Update::Status(status)).is_err() {
            return;
        }
        let error = match stream_once(url, &display, utx, crx) {
            Ok(StreamEnd::Stop) => return,
            Ok(StreamEnd::Closed(n)) => {
                if n > 0 {
                    attempt = 0;
                }
                "the agent closed the stream".to_string()
            }
            Err(e) => format!("{e:#}"),
        };
        attempt = attempt.saturating_add(1);
        let retry_in = BACKOFF_MIN
            .saturating_mul(1u32 << (attempt - 1).min(5))
            .min(BACKOFF_MAX);
        let status = RemoteStatus::Reconnecting {
            url: display.clone(),
            attempt,
            retry_in,
            error,
        };
        if utx.send(Update::Status(status)).is_err() {
            return;
        }
        // Wait out the backoff, listening for the view going away.
        let deadline = Instant::now() + retry_in;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match crx.recv_timeout(left) {
                Ok(Control::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => break,
            }
        }
    }
}

fn open_stream(url: &RemoteUrl, path: &str) -> anyhow::Result<Box<dyn BufRead + Send>> {
    let addrs: Vec<_> = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {}", url.host))?
        .collect();
    let mut last_err = None;
    let mut stream = None;
    for a in &addrs {
        match TcpStream::connect_timeout(a, CONNECT_TIMEOUT) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last_err = Some(anyhow::anyhow!("{a}: {e}")),
        }
    }
    let mut stream = match stream {
        Some(s) => s,
        None => {
            return Err(last_err.unwrap_or_else(|| anyhow::anyhow!("{} has no address", url.host)))
        }
    };
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    stream.set_nodelay(true)?;
    let host = if url.host.contains(':') {
        format!("[{}]:{}", url.host, url.port)
    } else {
        format!("{}:{}", url.host, url.port)
    };
    write!(
        stream,
        "GET {}{path} HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream, application/json\r\n\
         User-Agent: nfsdtop/{}\r\nConnection: close\r\n\r\n",
        url.base,
        env!("CARGO_PKG_VERSION")
    )?;
    stream.flush()?;
    let mut r = BufReader::with_capacity(64 << 10, stream);
    let status = read_line(&mut r)?.ok_or_else(|| anyhow::anyhow!("no HTTP response"))?;
    let mut parts = status.splitn(3, ' ');
    let (proto, code, reason) = (parts.next(), parts.next(), parts.next().unwrap_or(""));
    if !proto.is_some_and(|p| p.starts_with("HTTP/1.")) {
        anyhow::bail!("not an HTTP/1 response: {:?}", truncate(&status, 60));
    }
    let code: u16 = code
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("bad status line {:?}", truncate(&status, 60)))?;
    let mut chunked = false;
    let mut length: Option<u64> = None;
    loop {
        let line = read_line(&mut r)?.ok_or_else(|| anyhow::anyhow!("headers cut short"))?;
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            let (k, v) = (k.trim(), v.trim());
            if k.eq_ignore_ascii_case("transfer-encoding")
                && v.to_ascii_lowercase().contains("chunked")
            {
                chunked = true;
            } else if k.eq_ignore_ascii_case("content-length") {
                length = v.parse().ok();
            }
        }
    }
    let body: Box<dyn BufRead + Send> = if chunked {
        Box::new(BufReader::new(Chunked {
            inner: r,
            left: 0,
            done: false,
        }))
    } else if let Some(n) = length {
        Box::new(BufReader::new(r.take(n)))
    } else {
        Box::new(r)
    };
    if code != 200 {
        let mut text = String::new();
        let _ = body.take(200).read_to_string(&mut text);
        anyhow::bail!(
            "HTTP {code} {reason} from {path}: {}",
            truncate(text.trim(), 120)
        );
    }
    Ok(body)
}

fn stream_once(
    url: &RemoteUrl,
    display: &str,
    utx: &Sender<Update>,
    crx: &Receiver<Control>,
) -> anyhow::Result<StreamEnd> {
    let mut body = open_stream(url, "/api/v1/stream")?;
    let status = RemoteStatus::Connected {
        url: display.to_string(),
    };
    if utx.send(Update::Status(status)).is_err() {
        return Ok(StreamEnd::Stop);
    }
    let mut event = String::new();
    let mut data = String::new();
    let mut received = 0u64;
    loop {
        let Some(line) = read_line(&mut body)? else {
            return Ok(StreamEnd::Closed(received));
        };
        if !line.is_empty() {
            // field: value (one optional space after the colon).
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (line.as_str(), ""),
            };
            match field {
                "" => {} // a comment / keep-alive
                "event" => event = value.to_string(),
                "data" => {
                    if !data.is_empty() {
                        data.push('\n');
                    }
                    data.push_str(value);
                }
                _ => {} // id, retry
            }
            continue;
        }
        // A blank line ends an event.
        if (event.is_empty() || event == "snapshot") && !data.is_empty() {
            let mut snap: Snapshot = serde_json::from_str(&data)
                .map_err(|e| anyhow::anyhow!("a snapshot from the agent does not parse: {e}"))?;
            remote_source(&mut snap, display);
            received += 1;
            if utx.send(Update::Snapshot(Box::new(snap))).is_err() {
                return Ok(StreamEnd::Stop);
            }
            if stop_requested(crx) {
                return Ok(StreamEnd::Stop);
            }
        }
        event.clear();
        data.clear();
    }
}

/// Say where a remote snapshot came from, keeping what the agent said.
fn remote_source(s: &mut Snapshot, display: &str) {
    let src = &mut s.source;
    if src.kind != SourceKind::Remote {
        let inner = if src.detail.is_empty() {
            src.kind.as_str().to_string()
        } else {
            format!("{} {}", src.kind.as_str(), src.detail)
        };
        src.detail = format!("{display} ({inner})");
        src.kind = SourceKind::Remote;
    }
}

/// A line without its CR LF; None at end of stream.
fn read_line(r: &mut dyn BufRead) -> anyhow::Result<Option<String>> {
    let mut buf = Vec::new();
    let n = r.take(MAX_LINE as u64).read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() != Some(&b'\n') && n >= MAX_LINE {
        anyhow::bail!("a line longer than {} MiB", MAX_LINE >> 20);
    }
    while matches!(buf.last(), Some(b'\n' | b'\r')) {
        buf.pop();
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| anyhow::anyhow!("the agent sent bytes that are not UTF-8"))
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// The body of a `Transfer-Encoding: chunked` response.
struct Chunked<R: BufRead> {
    inner: R,
    left: u64,
    done: bool,
}

impl<R: BufRead> Read for Chunked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
            let line = read_line(&mut self.inner)
                .map_err(|e| bad(&format!("{e:#}")))?
                .ok_or_else(|| bad("the stream ended inside a chunk header"))?;
            let size = line.split(';').next().unwrap_or("").trim();
            self.left = u64::from_str_radix(size, 16)
                .map_err(|_| bad(&format!("bad chunk size {:?}", truncate(size, 20))))?;
            if self.left == 0 {
                self.done = true;
                return Ok(0);
            }
        }
        let want = buf.len().min(self.left.min(usize::MAX as u64) as usize);
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the stream ended inside a chunk",
            ));
        }
        self.left -= n as u64;
        if self.left == 0 {
            // The CR LF after the chunk's data.
            let mut crlf = Vec::new();
            self.inner.read_until(b'\n', &mut crlf)?;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod remote_tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;

    use nfsdtop_agent::model::EntityStats;

    use super::*;

    fn snapshot(n: u64) -> Snapshot {
        Snapshot {
            time: n as f64,
            interval_s: 1.0,
            source: nfsdtop_agent::model::SourceInfo {
                kind: SourceKind::Demo,
                detail: "seed-k16 policy=flat".into(),
                ..Default::default()
            },
            peers: vec![EntityStats {
                name: "10.0.0.2".into(),
                dispatches: n,
                share: 2.0 / 18.0,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn read_request(s: &mut TcpStream) -> String {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut req = Vec::new();
        let mut b = [0u8; 1];
        while !req.ends_with(b"\r\n\r\n") {
            if s.read(&mut b).unwrap() == 0 {
                break;
            }
            req.push(b[0]);
        }
        String::from_utf8(req).unwrap()
    }

    /// Server-sent events, chunked in awkward 7-byte pieces so chunk
    /// boundaries fall inside lines and inside the JSON.
    fn write_chunked_events(s: &mut TcpStream, snaps: &[Snapshot]) {
        s.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
        )
        .unwrap();
        let mut body = String::from(": keep-alive comment\n\n");
        for snap in snaps {
            body.push_str("event: snapshot\ndata: ");
            body.push_str(&serde_json::to_string(snap).unwrap());
            body.push_str("\n\n");
        }
        for piece in body.as_bytes().chunks(7) {
            write!(s, "{:x}\r\n", piece.len()).unwrap();
            s.write_all(piece).unwrap();
            s.write_all(b"\r\n").unwrap();
        }
        s.write_all(b"0\r\n\r\n").unwrap();
    }

    fn next(rx: &Receiver<Update>) -> Update {
        rx.recv_timeout(Duration::from_secs(20))
            .expect("an update within 20 s")
    }

    #[test]
    fn streams_snapshots_then_reconnects_when_the_agent_closes() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let mut requests = Vec::new();
            // First connection: two snapshots, chunked, then close.
            let (mut s, _) = listener.accept().unwrap();
            requests.push(read_request(&mut s));
            write_chunked_events(&mut s, &[snapshot(1), snapshot(2)]);
            drop(s);
            // Second: the reconnect; one snapshot, close-delimited (no
            // chunking, as an HTTP/1.0-style server would send it).
            let (mut s, _) = listener.accept().unwrap();
            requests.push(read_request(&mut s));
            let body = format!(
                "event: snapshot\r\ndata: {}\r\n\r\n",
                serde_json::to_string(&snapshot(3)).unwrap()
            );
            s.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
                .unwrap();
            s.write_all(body.as_bytes()).unwrap();
            drop(s);
            requests
        });

        let conn = connect_remote(&format!("http://127.0.0.1:{port}")).unwrap();
        let mut seen = Vec::new();
        let mut snapshots = Vec::new();
        // Connecting, Connected, 2 snapshots, Reconnecting, Connecting,
        // Connected, 1 snapshot.
        while snapshots.len() < 3 {
            match next(&conn.updates) {
                Update::Snapshot(s) => {
                    seen.push("snapshot".to_string());
                    snapshots.push(s);
                }
                Update::Status(st) => seen.push(match st {
                    RemoteStatus::Connecting { .. } => "connecting".into(),
                    RemoteStatus::Connected { .. } => "connected".into(),
                    RemoteStatus::Reconnecting { attempt, error, .. } => {
                        assert_eq!(error, "the agent closed the stream");
                        format!("reconnecting {attempt}")
                    }
                }),
                Update::Ended(r) => panic!("a remote source never ends: {r:?}"),
            }
        }
        assert_eq!(
            seen,
            [
                "connecting",
                "connected",
                "snapshot",
                "snapshot",
                "reconnecting 1",
                "connecting",
                "connected",
                "snapshot"
            ]
        );
        let dispatches: Vec<u64> = snapshots.iter().map(|s| s.peers[0].dispatches).collect();
        assert_eq!(dispatches, [1, 2, 3]);
        let src = &snapshots[0].source;
        assert_eq!(src.kind, SourceKind::Remote);
        assert_eq!(
            src.detail,
            format!("http://127.0.0.1:{port} (demo seed-k16 policy=flat)")
        );
        let requests = server.join().unwrap();
        for r in &requests {
            assert!(r.starts_with("GET /api/v1/stream HTTP/1.1\r\n"), "{r}");
            assert!(r.contains(&format!("Host: 127.0.0.1:{port}")), "{r}");
        }
        // The listener is gone: the next attempt fails and says why.
        match next(&conn.updates) {
            Update::Status(RemoteStatus::Reconnecting { .. }) => {}
            Update::Status(RemoteStatus::Connecting { .. }) => match next(&conn.updates) {
                Update::Status(RemoteStatus::Reconnecting { error, .. }) => {
                    assert!(!error.is_empty())
                }
                _ => panic!("expected reconnecting"),
            },
            _ => panic!("expected a status"),
        }
    }

    #[test]
    fn http_errors_and_refused_connections_become_reconnecting() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            read_request(&mut s);
            s.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 9\r\n\r\nno stream")
                .unwrap();
        });
        let conn = connect_remote(&format!("127.0.0.1:{port}")).unwrap();
        let error = loop {
            if let Update::Status(RemoteStatus::Reconnecting { error, .. }) = next(&conn.updates) {
                break error;
            }
        };
        assert_eq!(error, "HTTP 404 Not Found from /api/v1/stream: no stream");
        server.join().unwrap();

        // Nothing listening at all.
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let conn = connect_remote(&format!("http://127.0.0.1:{port}/")).unwrap();
        let (attempt, retry_in) = loop {
            if let Update::Status(RemoteStatus::Reconnecting {
                attempt, retry_in, ..
            }) = next(&conn.updates)
            {
                break (attempt, retry_in);
            }
        };
        assert_eq!((attempt, retry_in), (1, BACKOFF_MIN));
        // Dropping the connection stops the thread (its sends fail).
        drop(conn);
    }

    #[test]
    fn urls() {
        let u = parse_url("http://example.org").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.base.as_str()),
            ("example.org", 9847, "")
        );
        let u = parse_url("10.0.0.1:1234/nfsdtop/").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.base.as_str()),
            ("10.0.0.1", 1234, "/nfsdtop")
        );
        let u = parse_url("http://[::1]:9000").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 9000));
        assert_eq!(u.to_string(), "http://[::1]:9000");
        assert_eq!(parse_url("[fe80::1]").unwrap().port, DEFAULT_PORT);
        for bad in [
            "https://x",
            "http://",
            "x:0",
            "x:99999",
            "[::1",
            "http://h:port",
        ] {
            assert!(parse_url(bad).is_err(), "{bad} accepted");
        }
    }
}
