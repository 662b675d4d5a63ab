//! The link between a view and its producer. A local source runs the
//! pipeline on its own thread; the view only ever sees snapshots arriving
//! on a channel and sends `Control` messages back, so a slow producer can
//! never block drawing.

use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context as _;
use nfsdtop_agent::aggregate::{Aggregator, Limits};
use nfsdtop_agent::classify::ClassMap;
use nfsdtop_agent::model::Snapshot;
use nfsdtop_agent::pipeline::{Control, Flow, Pace, Pipeline};
use nfsdtop_agent::source::SourceSpec;

use crate::cli::SourceArgs;

/// What the producer says to the view.
pub enum Update {
    Snapshot(Box<Snapshot>),
    /// The producer stopped (end of a replay, or an error it cannot
    /// recover from); the view keeps what it has and says why.
    Ended(Result<(), String>),
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
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub fn spec_of(args: &SourceArgs) -> SourceSpec {
    match &args.demo {
        Some(s) => SourceSpec::Demo {
            scenario: s.clone(),
            policy: args.policy,
        },
        None => SourceSpec::Live(Default::default()),
    }
}

/// Open the source the arguments name; with no source flag and no nfsd on
/// this host, fall back to the built-in demo (and say so).
pub fn open_local(args: &SourceArgs) -> anyhow::Result<(SourceSpec, Option<String>)> {
    if args.replay.is_some() {
        anyhow::bail!("--replay is not available in this build yet");
    }
    if args.connect.is_some() {
        anyhow::bail!("--connect is not available in this build yet");
    }
    let spec = spec_of(args);
    if matches!(spec, SourceSpec::Live(_)) {
        if let Err(e) = spec.open() {
            return Ok((
                SourceSpec::Demo {
                    scenario: "movers".into(),
                    policy: None,
                },
                Some(format!("no live nfsd ({e:#}): showing the built-in demo")),
            ));
        }
    }
    Ok((spec, None))
}

pub fn class_map(args: &SourceArgs, spec: &SourceSpec) -> anyhow::Result<ClassMap> {
    match &args.class_map {
        Some(path) => ClassMap::load(path),
        None => Ok(spec.builtin_classmap()?.unwrap_or_default()),
    }
}

/// Start the pipeline on its own thread.
pub fn connect(args: &SourceArgs, interval: Duration) -> anyhow::Result<Connection> {
    let (spec, notice) = open_local(args)?;
    let classmap = class_map(args, &spec)?;
    // Open here, so a bad scenario or file fails before any UI starts.
    let source = spec.open().context("cannot open the event source")?;
    let pace = if args.speed == 0.0 {
        Pace::AsFastAsPossible
    } else {
        Pace::Realtime { speed: args.speed }
    };
    let (utx, urx) = mpsc::channel();
    let (ctx, crx) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("nfsdtop-pipeline".into())
        .spawn(move || {
            let pipeline = Pipeline {
                pace,
                ..Pipeline::new(
                    source,
                    Aggregator::new(classmap, Limits::default()),
                    interval,
                )
            };
            let tx = utx.clone();
            let res = pipeline.run(Some(crx), move |s| {
                if tx.send(Update::Snapshot(Box::new(s))).is_err() {
                    Flow::Stop
                } else {
                    Flow::Continue
                }
            });
            let _ = utx.send(Update::Ended(res.map(|_| ()).map_err(|e| format!("{e:#}"))));
        })?;
    Ok(Connection {
        updates: urx,
        control: ctx,
        notice,
        thread: Some(thread),
    })
}
