//! The link between a view and its producer. A local source runs the
//! agent's session (`nfsdtop_agent::session`) on its own thread; the view
//! only ever sees snapshots arriving on a channel and sends `Control`
//! messages back, so a slow producer can never block drawing. A remote
//! agent (`--connect`) is followed by [`remote`] behind the same
//! `Connection`.

use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use nfsdtop::state::RemoteStatus;
use nfsdtop_agent::enrich::redact::Redactor;
use nfsdtop_agent::model::Snapshot;
use nfsdtop_agent::pipeline::playback::Handle;
use nfsdtop_agent::pipeline::{Control, Flow};
use nfsdtop_agent::session::{NoNfsd, Session, SessionConfig};

use crate::cli::SourceArgs;
use crate::out;

mod remote;

/// What the producer says to the view.
pub enum Update {
    Snapshot(Box<Snapshot>),
    /// The producer stopped (end of a replay, or an error it cannot
    /// recover from); the view keeps what it has and says why.
    Ended(Result<(), String>),
    /// How the link to a remote nfsdtopd is doing (remote sources only).
    Status(RemoteStatus),
}

pub struct Connection {
    pub updates: Receiver<Update>,
    pub control: Sender<Control>,
    /// A note for the header, e.g. why the demo is shown.
    pub notice: Option<String>,
    /// The remote nfsdtopd's URL as it may be shown (no credentials).
    pub remote: Option<String>,
    /// Pause, step, seek and speed of a demo or replay paced in real time.
    pub playback: Option<Handle>,
    pub(crate) thread: Option<JoinHandle<()>>,
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

/// May a host without nfsd be shown the built-in demo instead? Only in the
/// interactive UI, where its banner says so: batch output, recordings and
/// scripts must never carry made-up numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DemoFallback {
    Allowed,
    Refused,
}

/// Open the local source the arguments name (see [`Session::open`]).
pub fn open_local(
    args: &SourceArgs,
    interval: Duration,
    fallback: DemoFallback,
) -> anyhow::Result<Session> {
    if args.connect.is_some() {
        anyhow::bail!(
            "--connect watches a remote nfsdtopd's snapshots: it has no local events to open"
        );
    }
    let cfg = SessionConfig {
        interval,
        ..args.local.config()?
    };
    // (--wait is a live source's option only.)
    match cfg.live.wait_for_nfsd {
        Some(Duration::MAX) => out::warn("waiting for nfsd (its sunrpc tracepoints) to appear..."),
        Some(w) => out::warn(format_args!(
            "waiting up to {w:.0?} for nfsd (its sunrpc tracepoints) to appear..."
        )),
        None => {}
    }
    let no_nfsd = match fallback {
        DemoFallback::Allowed => NoNfsd::ShowDemo,
        DemoFallback::Refused => NoNfsd::FailSaying(
            "cannot watch this host's nfsd, and batch output never shows the demo \
             instead: run it on the NFS server, wait for nfsd with --wait, or ask for \
             the simulator with --demo",
        ),
    };
    Session::open(&cfg, no_nfsd)
}

/// Who watches the snapshots, which decides what the source may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Viewer {
    /// The interactive UI: may show the demo where there is no nfsd, and
    /// steers a replay or the demo (pause, step, seek, speed); at the end
    /// of a recording it waits for a seek back.
    Interactive,
    /// Batch output: never the demo instead of nfsd, and nobody to steer,
    /// so a replay ends the run when the recording ends, at any speed.
    Batch,
}

/// Snapshots a local pipeline may have waiting for its view.
const SNAPSHOTS_QUEUED: usize = 16;

/// Start the pipeline on its own thread (or follow a remote nfsdtopd).
pub fn connect(
    args: &SourceArgs,
    interval: Duration,
    viewer: Viewer,
) -> anyhow::Result<Connection> {
    if let Some(url) = &args.connect {
        let opts = remote::Options {
            ca_cert: args.ca_cert.as_deref(),
            client_cert: args.client_cert.as_deref().zip(args.client_key.as_deref()),
            netrc: args.netrc_file.as_deref(),
            auth_env: std::env::var(remote::url::AUTH_ENV).ok(),
            redact: args.redact,
        };
        return remote::connect(url, &opts);
    }
    // Open here, so a bad scenario or file fails before any UI starts.
    let fallback = match viewer {
        Viewer::Interactive => DemoFallback::Allowed,
        Viewer::Batch => DemoFallback::Refused,
    };
    let mut session = open_local(args, interval, fallback)?;
    session.load_class_map()?;
    let notice = session.notice().map(str::to_string);
    let mut session = session.with_redactor(args.redact.then(Redactor::random));
    // A virtual source in real time can be paused, stepped, sought
    // through and sped up; seeking back opens it again from the start.
    // Only for a view that can send those: under playback control the
    // pipeline outlives the recording's end (one more place to seek back
    // from), which batch output would wait on for ever.
    let playback = match viewer {
        Viewer::Interactive => session.playback(),
        Viewer::Batch => None,
    };
    // Bounded: a view that falls behind (stdout piped into a slow reader)
    // holds the pipeline back instead of letting snapshots pile up.
    let (utx, urx) = mpsc::sync_channel(SNAPSHOTS_QUEUED);
    let (ctx, crx) = mpsc::channel();
    let tx = utx.clone();
    let thread = session.spawn(
        "nfsdtop-pipeline",
        crx,
        move |s| {
            if tx.send(Update::Snapshot(Box::new(s))).is_err() {
                Flow::Stop
            } else {
                Flow::Continue
            }
        },
        move |res| {
            let _ = utx.send(Update::Ended(res));
        },
    )?;
    Ok(Connection {
        updates: urx,
        control: ctx,
        notice,
        remote: None,
        playback,
        thread: Some(thread),
    })
}
