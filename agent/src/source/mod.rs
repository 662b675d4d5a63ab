//! Event sources. Each turns its own input into [`Event`]s on its own
//! monotonic clock; the pipeline decides how fast that clock runs.

pub mod demo;
pub mod live;
pub mod replay;

use crate::model::{Event, SourceInfo};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    /// More may come later.
    Pending,
    /// The source has nothing more to give (end of a recording).
    Finished,
}

pub trait Source: Send {
    fn info(&self) -> SourceInfo;

    /// Append the events with timestamps up to `until_ns` (source clock) to
    /// `out`. Live sources return what has arrived, up to `until_ns` only
    /// where they [release in order](Source::releases_in_order).
    fn poll(&mut self, until_ns: u64, out: &mut Vec<Event>) -> anyhow::Result<Poll>;

    /// The source clock now. Simulated and recorded sources start at their
    /// first timestamp; live sources read the kernel's monotonic clock.
    fn now_ns(&self) -> u64;

    /// Block until the source may have events, at most `timeout`. The
    /// default sleeps: simulated and recorded sources make events from
    /// the clock. Live sources return as soon as records arrive.
    fn wait(&mut self, timeout: std::time::Duration) {
        std::thread::sleep(timeout);
    }

    /// True when the source's clock is driven by the pipeline (demo and
    /// replay can run faster than real time); false for live and remote.
    fn is_virtual(&self) -> bool {
        true
    }

    /// Something the user should be told once, e.g. that a recording is
    /// damaged and only its intact part is replayed.
    fn notice(&self) -> Option<String> {
        None
    }

    /// The Unix time (seconds) at which the source clock read `now_ns`,
    /// where that is not simply now: snapshots of a replay carry the
    /// recorded time, not the time of the replay, and a live snapshot cut
    /// in the past (see [`Source::releases_in_order`]) the time it covers.
    fn recorded_wall_clock(&self, _now_ns: u64) -> Option<f64> {
        None
    }

    /// True for a live source that holds events to put them in time order
    /// and releases them up to `poll`'s `until_ns`: the pipeline then cuts
    /// its snapshots on the source's clock ([`Source::now_ns`], how far
    /// its events are complete), not the agent's, so an agent that falls
    /// behind catches up snapshot by snapshot, each covering what it
    /// would have covered on time.
    fn releases_in_order(&self) -> bool {
        false
    }

    /// How far the snapshot at `at_ns` (source clock) is behind the
    /// kernel, beyond what the source holds by design (live only): the
    /// agent reading its records late, or a snapshot cut late.
    fn lag_ns(&self, _at_ns: u64) -> Option<u64> {
        None
    }

    /// Per-program statistics of the kernel side (live source only):
    /// hits, records, losses, BUSY drops and, where the kernel keeps them
    /// (`kernel.bpf_stats_enabled`), run time and run count.
    fn bpf_stats(&self) -> Vec<BpfProgramStats> {
        Vec::new()
    }

    /// How much source time the source spans from its start, where it
    /// ends (a recording).
    fn length_ns(&self) -> Option<u64> {
        None
    }

    /// NFSv4 client names the source makes up itself (the demo's); a
    /// live host's come from its nfsd's client list (`crate::enrich::clients`).
    fn client_names(&self) -> Option<crate::enrich::clients::ClientMap> {
        None
    }

    /// nfsd's threads as far as the source knows (unknown by default).
    fn nfsd_threads(&self) -> crate::server::NfsdThreads {
        Default::default()
    }

    /// The ports nfsd listens on, where the source knows them: what
    /// [`Source::nfsd_threads`] says, for a source whose reading of its
    /// threads has no side effect. A source whose reading starts the
    /// next interval (the live one: the fewest and most threads that
    /// ran) says it without that reading.
    fn nfsd_ports(&self) -> Option<crate::aggregate::services::NfsdPorts> {
        self.nfsd_threads().ports
    }
}

pub use crate::model::BpfProgramStats;

/// What the user asked to watch, before it is opened.
#[derive(Clone, Debug, PartialEq)]
pub enum SourceSpec {
    /// This host's nfsd through the BPF programs.
    Live(live::LiveOptions),
    /// The built-in simulator. `policy` overrides the scenario's own.
    Demo {
        scenario: String,
        policy: Option<demo::Policy>,
    },
    /// A recording made by `nfsdtop record`.
    Replay { path: std::path::PathBuf },
}

impl SourceSpec {
    pub fn open(&self) -> anyhow::Result<Box<dyn Source>> {
        match self {
            SourceSpec::Live(opts) => Ok(live::open(opts)?),
            SourceSpec::Demo { scenario, policy } => {
                let mut s = demo::Scenario::resolve(scenario)?;
                if let Some(p) = policy {
                    s.policy = *p;
                }
                Ok(Box::new(demo::DemoSource::new(s)))
            }
            SourceSpec::Replay { path } => Ok(Box::new(replay::ReplaySource::open(path)?)),
        }
    }

    /// The class map a demo scenario brings with it, if any.
    pub fn builtin_classmap(&self) -> anyhow::Result<Option<crate::enrich::classify::ClassMap>> {
        match self {
            SourceSpec::Demo { scenario, .. } => {
                let s = demo::Scenario::resolve(scenario)?;
                let m = s.class_map().map_err(|e| anyhow::anyhow!(e))?;
                Ok((!m.is_empty()).then_some(m))
            }
            SourceSpec::Replay { path } => {
                let m = replay::recorded_class_map(path)?;
                Ok((!m.is_empty()).then_some(m))
            }
            _ => Ok(None),
        }
    }
}

/// Now, in seconds since the Unix epoch (0 before it).
pub(crate) fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
