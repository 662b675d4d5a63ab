//! One session of the pipeline as `nfsdtop` and `nfsdtopd` run it: open the
//! source a [`SessionConfig`] names (with the interactive UI's fallback to
//! the demo where there is no nfsd), load its class map, pace it, and run
//! the pipeline into a sink, on the caller's thread or one of its own.
//! What each front end does with the snapshots (draw, print, serve) and
//! how it reports errors stays with it.
//!
//! - [`config`]: the settings, their defaults and checks;
//! - [`args`] (feature `cli`): the source flags both binaries share.

#[cfg(feature = "cli")]
pub mod args;
pub mod config;

use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;

use anyhow::Context as _;

use crate::enrich::classify::ClassMap;
use crate::enrich::redact::Redactor;
use crate::model::Snapshot;
use crate::pipeline::playback::Handle;
use crate::pipeline::{Control, Flow, Pace, Pipeline, Restart};
use crate::source::live::LiveError;
use crate::source::{Source, SourceSpec};

#[cfg(feature = "cli")]
pub use args::{PolicyParser, SourceArgs, LOCAL_SOURCE};
pub use config::{SessionConfig, SourceChoice, DEFAULT_SCENARIO, FIRST_SCENARIO};

/// What to do when the live source finds no nfsd on this host (and no
/// `--wait` was asked for).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoNfsd {
    /// Show the built-in demo under a notice that says so. Only the
    /// interactive UI may: batch output, recordings and the daemon must
    /// never carry made-up numbers.
    ShowDemo,
    /// Fail with this first line instead of "cannot watch this host's nfsd".
    FailSaying(&'static str),
    /// Fail like any other error of the live source.
    Fail,
}

/// An opened source, ready to run.
pub struct Session {
    cfg: SessionConfig,
    spec: SourceSpec,
    source: Box<dyn Source>,
    notice: Option<String>,
    classmap: Option<ClassMap>,
    redactor: Option<Redactor>,
    playback: Option<Handle>,
    lookup: Option<crate::enrich::resolve::LookupFn>,
}

impl Session {
    /// Open the source `cfg` names. Errors: a live source's are under
    /// "cannot watch this host's nfsd", the others' under "cannot open the
    /// event source".
    pub fn open(cfg: &SessionConfig, no_nfsd: NoNfsd) -> anyhow::Result<Session> {
        let spec = cfg.spec();
        let (spec, source, fallback) = match &spec {
            SourceSpec::Live(opts) => match spec.open() {
                Ok(source) => (spec, source, None),
                Err(e) if opts.wait_for_nfsd.is_none() && LiveError::chain_is_no_nfsd(&e) => {
                    match no_nfsd {
                        NoNfsd::ShowDemo => {
                            let demo = SourceSpec::Demo {
                                scenario: FIRST_SCENARIO.into(),
                                policy: None,
                            };
                            let source = demo.open().context("cannot open the built-in demo")?;
                            // The first words of why (the whole of it, with
                            // what to do, is `nfsdtop doctor`'s): a banner
                            // that reads whole on an 80-column screen.
                            let top = e.to_string();
                            let why = top.split(": ").next().unwrap_or(&top);
                            let notice = format!(
                                "DEMO DATA, NOT THIS HOST: no live nfsd ({why}): showing the \
                                 built-in demo; `nfsdtop doctor` says what to do"
                            );
                            (demo, source, Some(notice))
                        }
                        NoNfsd::FailSaying(why) => return Err(e.context(why)),
                        NoNfsd::Fail => return Err(e.context("cannot watch this host's nfsd")),
                    }
                }
                Err(e) => return Err(e.context("cannot watch this host's nfsd")),
            },
            _ => {
                let source = spec.open().context("cannot open the event source")?;
                (spec, source, None)
            }
        };
        // E.g. a damaged recording: say what is replayed and where it stops.
        let notice = match (fallback, source.notice()) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        };
        Ok(Session {
            cfg: cfg.clone(),
            spec,
            source,
            notice,
            classmap: None,
            redactor: None,
            playback: None,
            lookup: None,
        })
    }

    /// What was opened (the demo, when it stands in for a missing nfsd).
    pub fn spec(&self) -> &SourceSpec {
        &self.spec
    }

    pub fn source(&self) -> &dyn Source {
        self.source.as_ref()
    }

    /// Something to tell the user once: the demo standing in, a damaged
    /// recording.
    pub fn notice(&self) -> Option<&str> {
        self.notice.as_deref()
    }

    /// Load the class map now (else it is loaded when the pipeline starts),
    /// e.g. after privileges are dropped, or to fail before anything else
    /// is set up.
    pub fn load_class_map(&mut self) -> anyhow::Result<&ClassMap> {
        let map = match self.classmap.take() {
            Some(m) => m,
            None => self.cfg.load_class_map(&self.spec)?,
        };
        Ok(self.classmap.insert(map))
    }

    /// Use this class map instead of loading the configured one.
    pub fn with_class_map(mut self, map: ClassMap) -> Self {
        self.classmap = Some(map);
        self
    }

    /// Hash client addresses in the snapshots.
    pub fn with_redactor(mut self, redactor: Option<Redactor>) -> Self {
        self.redactor = redactor;
        self
    }

    /// Look host names up with `lookup` instead of the system resolver,
    /// when `--resolve` asks for them (tests).
    pub fn with_lookup(mut self, lookup: crate::enrich::resolve::LookupFn) -> Self {
        self.lookup = Some(lookup);
        self
    }

    /// Playback controls (pause, step, seek, speed) for a view, where the
    /// source is virtual (demo, replay) and paced in real time; `None`
    /// elsewhere. Seeking back opens the source again from the start with
    /// a fresh aggregator (same class map, same pseudonym key).
    pub fn playback(&mut self) -> Option<Handle> {
        let pace = self.cfg.pace(self.source.is_virtual());
        if !self.source.is_virtual() || !matches!(pace, Pace::Realtime { .. }) {
            return None;
        }
        Some(
            self.playback
                .get_or_insert_with(|| Handle::new(self.cfg.speed))
                .clone(),
        )
    }

    /// The pipeline, paced and configured, for the caller to run (and
    /// to add a tap or a source-time limit to).
    pub fn pipeline<'a>(mut self) -> anyhow::Result<Pipeline<'a>> {
        self.load_class_map()?;
        let classmap = self.classmap.take().unwrap_or_default();
        let redactor = self.redactor.take();
        let aggregator = self.cfg.aggregator(classmap.clone(), redactor.clone());
        let restart: Option<Restart<'a>> = self.playback.is_some().then(|| {
            let (spec, cfg) = (self.spec.clone(), self.cfg.clone());
            let restart: Restart<'a> = Box::new(move || {
                let source = spec.open().context("cannot open the event source again")?;
                Ok((source, cfg.aggregator(classmap.clone(), redactor.clone())))
            });
            restart
        });
        let clients = self.cfg.client_names(&self.spec, self.source.as_ref());
        let resolver = self.cfg.resolve.then(|| match self.lookup.take() {
            Some(f) => crate::enrich::resolve::Resolver::start(f, Default::default()),
            None => crate::enrich::resolve::Resolver::system(),
        });
        Ok(Pipeline {
            pace: self.cfg.pace(self.source.is_virtual()),
            clients,
            resolver,
            playback: self.playback,
            restart,
            ..Pipeline::new(self.source, aggregator, self.cfg.interval)
        })
    }

    /// Run the pipeline on a thread named `name` until the sink or a
    /// `Control::Stop` ends it, or the source does; then `done` hears how
    /// it ended. A panic (a bug) ends it with an error, never looking like
    /// the normal end of a replay.
    pub fn spawn(
        self,
        name: &str,
        control: Receiver<Control>,
        sink: impl FnMut(Snapshot) -> Flow + Send + 'static,
        done: impl FnOnce(Result<(), String>) + Send + 'static,
    ) -> anyhow::Result<JoinHandle<()>> {
        let pipeline = self.pipeline()?;
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    pipeline.run(Some(control), sink)
                }));
                done(match res {
                    Ok(r) => r.map(|_| ()).map_err(|e| format!("{e:#}")),
                    Err(_) => Err("the pipeline failed (see the panic message above)".into()),
                });
            })
            .context("cannot start the pipeline thread")?;
        Ok(thread)
    }
}
