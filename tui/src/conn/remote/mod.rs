//! `--connect URL`: follow a remote nfsdtopd's (nfsdtopd's) snapshot stream
//! on a thread of its own, with a single-threaded tokio runtime: GET
//! /api/v1/stream ([`http`]), read its server-sent events ([`sse`]),
//! forward each snapshot (redacted with `--redact`, [`redact`]), and
//! reconnect with backoff when the link fails or the stream ends. A
//! failure retrying cannot mend (credentials refused, certificate not
//! trusted) ends the source with its reason. The view only ever sees
//! `Update`s, so a dead agent can never block it.

pub mod http;
pub mod redact;
pub mod sanitize;
pub mod sse;
pub mod tls;
pub mod url;

use std::path::Path;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Duration;

use http_body_util::BodyExt as _;
use nfsdtop::state::RemoteStatus;
use nfsdtop_agent::enrich::redact::Redactor;
use nfsdtop_agent::model::{bounds, Snapshot, SourceKind};
use nfsdtop_agent::pipeline::Control;

use crate::conn::{Connection, Update};
use http::Client;

/// Why a request did not give a stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Failure {
    /// Worth another try later (the agent down, restarting, overloaded).
    Retry(String),
    /// Retrying cannot help; the user must change something.
    Fatal(String),
}

/// A stream silent this long is dead (the agent sends a snapshot every
/// interval and a comment after 15 s of silence): drop it and reconnect.
/// Comments alone keep the link: an agent with nothing new (a finished
/// replay, a stalled source) would send its last snapshot again on every
/// reconnect. Whether the snapshots have stopped for too long is the
/// view's call (batch mode gives up, the UI says "stale").
const READ_TIMEOUT: Duration = Duration::from_secs(30);
pub const BACKOFF_MIN: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(10);

/// What `--connect` needs besides the URL.
#[derive(Clone, Debug, Default)]
pub struct Options<'a> {
    pub ca_cert: Option<&'a Path>,
    /// `--client-cert` and `--client-key`, for an agent that wants one.
    pub client_cert: Option<(&'a Path, &'a Path)>,
    pub netrc: Option<&'a Path>,
    /// `$NFSDTOP_AUTH`.
    pub auth_env: Option<String>,
    pub redact: bool,
}

/// Follow `url`'s snapshot stream. Bad URLs, credentials or CA files fail
/// here, before any UI starts.
pub fn connect(raw_url: &str, opts: &Options) -> anyhow::Result<Connection> {
    let (url, userinfo) = url::parse_url(raw_url)?;
    let creds = url::credentials(&url, userinfo, opts.auth_env.clone(), opts.netrc)?;
    let display = url.to_string();
    let identity = opts
        .client_cert
        .map(|(cert, key)| tls::Identity { cert, key });
    let client = Client::new(url, creds.as_ref(), opts.ca_cert, identity.as_ref())?;
    let redactor = opts.redact.then(Redactor::random);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (utx, urx) = mpsc::channel();
    let (ctx, crx) = mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    // Turns the view's Stop (or its going away) into a wake-up for the
    // runtime, which then drops whatever it was waiting on.
    std::thread::Builder::new()
        .name("nfsdtop-remote-ctl".into())
        .spawn(move || wait_for_stop(&crx, stop_tx))?;
    let shown = display.clone();
    // Detached: quitting never waits for a connect or a read.
    std::thread::Builder::new()
        .name("nfsdtop-remote".into())
        .spawn(move || {
            rt.block_on(async move {
                tokio::select! {
                    _ = follow(&client, &shown, redactor.as_ref(), &utx) => {}
                    _ = stop_rx => {}
                }
            })
        })?;
    Ok(Connection {
        updates: urx,
        control: ctx,
        notice: None,
        remote: Some(display),
        playback: None,
        thread: None,
    })
}

fn wait_for_stop(crx: &Receiver<Control>, stop: tokio::sync::oneshot::Sender<()>) {
    loop {
        match crx.recv() {
            // The agent keeps its own pace and class map.
            Ok(Control::Stop) | Err(_) => {
                let _ = stop.send(());
                return;
            }
            Ok(_) => {}
        }
    }
}

enum StreamEnd {
    /// The view has gone: stop for good.
    Stop,
    /// The agent closed the stream after this many snapshots.
    Closed(u64),
}

async fn follow(client: &Client, display: &str, redactor: Option<&Redactor>, utx: &Sender<Update>) {
    let mut attempt: u32 = 0;
    loop {
        let status = RemoteStatus::Connecting {
            url: display.to_string(),
        };
        if utx.send(Update::Status(status)).is_err() {
            return;
        }
        let error = match stream_once(client, display, redactor, utx).await {
            Ok(StreamEnd::Stop) => return,
            Ok(StreamEnd::Closed(n)) => {
                if n > 0 {
                    attempt = 0;
                }
                "nfsdtopd closed the stream".to_string()
            }
            Err(Failure::Retry(e)) => e,
            Err(Failure::Fatal(e)) => {
                let _ = utx.send(Update::Ended(Err(e)));
                return;
            }
        };
        attempt = attempt.saturating_add(1);
        let retry_in = BACKOFF_MIN
            .saturating_mul(1u32 << (attempt - 1).min(5))
            .min(BACKOFF_MAX);
        let status = RemoteStatus::Reconnecting {
            url: display.to_string(),
            attempt,
            retry_in,
            error,
        };
        if utx.send(Update::Status(status)).is_err() {
            return;
        }
        // The view going away cancels this sleep (see `connect`).
        tokio::time::sleep(retry_in).await;
    }
}

async fn stream_once(
    client: &Client,
    display: &str,
    redactor: Option<&Redactor>,
    utx: &Sender<Update>,
) -> Result<StreamEnd, Failure> {
    let mut body = client.get("/api/v1/stream").await?.into_body();
    let status = RemoteStatus::Connected {
        url: display.to_string(),
    };
    if utx.send(Update::Status(status)).is_err() {
        return Ok(StreamEnd::Stop);
    }
    let mut parser = sse::Parser::default();
    let mut received = 0u64;
    loop {
        let frame = match tokio::time::timeout(READ_TIMEOUT, body.frame()).await {
            Err(_) => {
                return Err(Failure::Retry(format!(
                    "nothing from nfsdtopd for {}s",
                    READ_TIMEOUT.as_secs()
                )))
            }
            Ok(None) => return Ok(StreamEnd::Closed(received)),
            Ok(Some(Err(e))) => return Err(Failure::Retry(format!("the stream broke: {e}"))),
            Ok(Some(Ok(f))) => f,
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        let mut events = Vec::new();
        parser
            .feed(&data, &mut |e| events.push(e))
            .map_err(Failure::Retry)?;
        for e in events {
            if e.name == "skipped" {
                let status = RemoteStatus::Skipping {
                    url: display.to_string(),
                    reason: sanitize::displayable(&e.data),
                };
                if utx.send(Update::Status(status)).is_err() {
                    return Ok(StreamEnd::Stop);
                }
                continue;
            }
            if !(e.name.is_empty() || e.name == "snapshot") {
                continue;
            }
            let parsed =
                bounds::read_bounded(bounds::REMOTE, || serde_json::from_str::<Snapshot>(&e.data));
            let mut snap: Snapshot = parsed.map_err(|err| match bounds::past() {
                Some(what) => Failure::Retry(past_bounds(what)),
                None => {
                    // serde quotes what it could not take, escapes and all.
                    let err = sanitize::displayable(&err.to_string());
                    Failure::Retry(format!("a snapshot from nfsdtopd does not parse: {err}"))
                }
            })?;
            // Fields are only ever added within a schema: an older one reads
            // fine, a newer one may mean something this build misreads.
            if !snap.schema.understood() {
                return Err(Failure::Fatal(format!(
                    "nfsdtopd sends JSON schema {}, newer than this nfsdtop's {}: \
                     use an nfsdtop as new as nfsdtopd",
                    snap.schema.0,
                    nfsdtop_agent::model::SCHEMA
                )));
            }
            sanitize::snapshot(&mut snap);
            remote_source(&mut snap, display);
            if let Some(r) = redactor {
                redact::snapshot(r, &mut snap);
            }
            received += 1;
            if utx.send(Update::Snapshot(Box::new(snap))).is_err() {
                return Ok(StreamEnd::Stop);
            }
        }
    }
}

/// Why a snapshot past [`bounds::REMOTE`] was refused, and what that
/// means.
fn past_bounds(what: &str) -> String {
    let b = bounds::REMOTE;
    format!(
        "a snapshot from nfsdtopd holds more {what} than nfsdtop --connect takes (at most \
{} peers and classes, {} transports, {} histograms of more than 8 buckets, {} MiB an \
event; docs/json.md); refused, as reading it could take gigabytes: is the agent nfsdtopd, \
and is it the one you meant?",
        b.entities,
        b.transports,
        b.dense_histograms,
        sse::MAX_EVENT >> 20
    )
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

#[cfg(test)]
mod tests;
