//! The link between a view and its producer. A local source runs the
//! pipeline on its own thread; the view only ever sees snapshots arriving
//! on a channel and sends `Control` messages back, so a slow producer can
//! never block drawing. A remote agent (`--connect`) is followed by
//! `crate::remote` behind the same `Connection`.

use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context as _;
use nfsdtop::state::RemoteStatus;
use nfsdtop_agent::aggregate::{Aggregator, Limits};
use nfsdtop_agent::classify::ClassMap;
use nfsdtop_agent::model::Snapshot;
use nfsdtop_agent::pipeline::{Control, Flow, Pace, Pipeline, Restart};
use nfsdtop_agent::playback::Handle;
use nfsdtop_agent::redact::Redactor;
use nfsdtop_agent::source::live::{BenchStage, LiveError, LiveOptions, Tracepoints};
use nfsdtop_agent::source::{Source, SourceSpec};

use crate::cli::{BenchStageArg, SourceArgs};
use crate::{out, remote};

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
    /// The remote agent's URL as it may be shown (no credentials).
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

/// May a host without nfsd be shown the built-in demo instead? Only in the
/// interactive UI, where its banner says so: batch output, recordings and
/// scripts must never carry made-up numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DemoFallback {
    Allowed,
    Refused,
}

/// Open the source the arguments name. With no source flag and no nfsd on
/// this host (and no --wait), fall back to the built-in demo and say so
/// where `fallback` allows it; any other failure of the live source
/// (privileges, tracefs, a format this version cannot use) is an error the
/// user must see.
pub fn open_local(
    args: &SourceArgs,
    fallback: DemoFallback,
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
                out::warn("waiting for nfsd (its sunrpc tracepoints) to appear...");
            } else {
                out::warn(format_args!(
                    "waiting up to {w:.0?} for nfsd (its sunrpc tracepoints) to appear..."
                ));
            }
        }
        return match spec.open() {
            Ok(source) => Ok((spec, source, None)),
            Err(e)
                if args.wait.is_none()
                    && fallback == DemoFallback::Refused
                    && LiveError::chain_is_no_nfsd(&e) =>
            {
                Err(e.context(
                    "cannot watch this host's nfsd, and batch output never shows the demo \
                     instead: run it on the NFS server, wait for nfsd with --wait, or ask for \
                     the simulator with --demo",
                ))
            }
            Err(e) if args.wait.is_none() && LiveError::chain_is_no_nfsd(&e) => {
                let demo = SourceSpec::Demo {
                    scenario: "movers".into(),
                    policy: None,
                };
                let source = demo.open().context("cannot open the built-in demo")?;
                let notice = format!(
                    "DEMO DATA, NOT THIS HOST: no live nfsd ({e:#}): showing the built-in demo"
                );
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

/// Start the pipeline on its own thread (or follow a remote agent).
pub fn connect(
    args: &SourceArgs,
    interval: Duration,
    fallback: DemoFallback,
) -> anyhow::Result<Connection> {
    if let Some(url) = &args.connect {
        let opts = remote::Options {
            ca_cert: args.ca_cert.as_deref(),
            netrc: args.netrc_file.as_deref(),
            auth_env: std::env::var(remote::url::AUTH_ENV).ok(),
            redact: args.redact,
        };
        return remote::connect(url, &opts);
    }
    // Open here, so a bad scenario or file fails before any UI starts.
    let (spec, source, notice) = open_local(args, fallback)?;
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
    let redactor = args.redact.then(Redactor::random);
    let fresh_aggregator = move || {
        let a = Aggregator::new(classmap.clone(), limits);
        match &redactor {
            Some(r) => a.with_redactor(r.clone()),
            None => a,
        }
    };
    let aggregator = fresh_aggregator();
    // A virtual source in real time can be paused, stepped, sought
    // through and sped up; seeking back opens it again from the start.
    let playback = (source.is_virtual() && matches!(pace, Pace::Realtime { .. }))
        .then(|| Handle::new(args.speed));
    let restart: Restart<'static> = Box::new(move || {
        let source = spec.open().context("cannot open the event source again")?;
        Ok((source, fresh_aggregator()))
    });
    // Bounded: a view that falls behind (stdout piped into a slow reader)
    // holds the pipeline back instead of letting snapshots pile up.
    let (utx, urx) = mpsc::sync_channel(SNAPSHOTS_QUEUED);
    let (ctx, crx) = mpsc::channel();
    let handle = playback.clone();
    let thread = std::thread::Builder::new()
        .name("nfsdtop-pipeline".into())
        .spawn(move || {
            let pipeline = Pipeline {
                pace,
                playback: handle,
                restart: Some(restart),
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
        remote: None,
        playback,
        thread: Some(thread),
    })
}
