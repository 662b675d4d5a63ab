//! What one run of the pipeline is asked to do, whichever front end asks:
//! the source (live, demo or replay), the live source's options, the class
//! map, the clock speed, the snapshot interval and the aggregator's limits.
//! The defaults and the checks of each value live here once; `nfsdtop`'s
//! flags ([`super::SourceArgs`]) and `nfsdtopd`'s flags and TOML file all
//! land on [`SessionConfig`].

use std::path::PathBuf;
use std::time::Duration;

use crate::aggregate::{Aggregator, Limits};
use crate::enrich::classify::ClassMap;
use crate::enrich::redact::Redactor;
use crate::pipeline::Pace;
use crate::source::demo::Policy;
use crate::source::live::LiveOptions;
use crate::source::SourceSpec;

/// The demo scenario shown when none is named (`--demo` alone, nfsdtopd).
pub const DEFAULT_SCENARIO: &str = "movers";

/// The scenario nfsdtop's UI opens where there is no nfsd, and for
/// `nfsdtop --demo` alone: its first screen, grouped by peer as it opens,
/// shows the point of the tool without a key. One client with 2
/// connections against one with 16 gets about 0.22x its fair share under
/// the flat queue, far from any threshold, so the warning that names the
/// cause is there from the first refresh and stays.
pub const FIRST_SCENARIO: &str = "seed-k16";

/// Which source to open, before it is opened. The live source's options
/// are kept apart ([`SessionConfig::live`]), so that layered settings (a
/// file, then flags) may name them in any order.
#[derive(Clone, Debug, PartialEq)]
pub enum SourceChoice {
    Live,
    Demo {
        scenario: String,
        policy: Option<Policy>,
    },
    Replay(PathBuf),
}

#[derive(Clone, Debug)]
pub struct SessionConfig {
    pub source: SourceChoice,
    /// The live source's options (used when `source` is live).
    pub live: LiveOptions,
    /// The class map file; without one, the map a demo scenario or a
    /// recording brings with it.
    pub class_map: Option<PathBuf>,
    /// How many times faster than real time a demo or replay runs (0 = as
    /// fast as possible).
    pub speed: f64,
    /// Source time between snapshots.
    pub interval: Duration,
    pub limits: Limits,
    /// Where the NFSv4 clients' names are read from instead of the live
    /// host's `/proc/fs/nfsd/clients` (tests; any source).
    pub nfsd_clients: Option<PathBuf>,
    /// Look the peers' host names up (reverse DNS, `--resolve`).
    pub resolve: bool,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            source: SourceChoice::Live,
            live: LiveOptions::default(),
            class_map: None,
            speed: 1.0,
            interval: Duration::from_secs(1),
            limits: Limits::default(),
            nfsd_clients: None,
            resolve: false,
        }
    }
}

impl SessionConfig {
    /// The source to open.
    pub fn spec(&self) -> SourceSpec {
        match &self.source {
            SourceChoice::Live => SourceSpec::Live(self.live.clone()),
            SourceChoice::Demo { scenario, policy } => SourceSpec::Demo {
                scenario: scenario.clone(),
                policy: *policy,
            },
            SourceChoice::Replay(path) => SourceSpec::Replay { path: path.clone() },
        }
    }

    /// The class map file if one is set, else the one `spec` brings (a demo
    /// scenario's, a recording's), else none. Also what a reload reads.
    pub fn load_class_map(&self, spec: &SourceSpec) -> anyhow::Result<ClassMap> {
        match &self.class_map {
            Some(path) => ClassMap::load(path),
            None => Ok(spec.builtin_classmap()?.unwrap_or_default()),
        }
    }

    /// How fast the pipeline drives a source: a live source's clock is the
    /// kernel's, whatever `speed` says.
    pub fn pace(&self, source_is_virtual: bool) -> Pace {
        if !source_is_virtual {
            Pace::Realtime { speed: 1.0 }
        } else if self.speed == 0.0 {
            Pace::AsFastAsPossible
        } else {
            Pace::Realtime { speed: self.speed }
        }
    }

    /// Where the peers' NFSv4 client names come from: the directory
    /// given, else the live host's nfsd, else the names the source makes
    /// up (the demo's), else nowhere (a replay).
    pub fn client_names(
        &self,
        spec: &SourceSpec,
        source: &dyn crate::source::Source,
    ) -> Option<crate::enrich::clients::Refresher> {
        use crate::enrich::clients::{own_netns, Refresher, PROC_NFSD_CLIENTS, REFRESH};
        match (&self.nfsd_clients, spec) {
            // A directory of a test's: its names hold in any namespace.
            (Some(dir), _) => Some(Refresher::start(dir.clone(), None, REFRESH)),
            (None, SourceSpec::Live(_)) => Some(Refresher::start(
                PROC_NFSD_CLIENTS.into(),
                own_netns(),
                REFRESH,
            )),
            (None, _) => source.client_names().map(Refresher::fixed),
        }
    }

    /// A fresh aggregator under these limits.
    pub fn aggregator(&self, classmap: ClassMap, redactor: Option<Redactor>) -> Aggregator {
        let aggregator = Aggregator::new(classmap, self.limits);
        match redactor {
            Some(r) => aggregator.with_redactor(r),
            None => aggregator,
        }
    }

    /// `--policy` / `policy =` without naming a source: only a demo has
    /// a dispatch policy to change.
    pub fn set_policy(&mut self, p: Policy) -> Result<(), String> {
        match &mut self.source {
            SourceChoice::Demo { policy, .. } => {
                *policy = Some(p);
                Ok(())
            }
            _ => Err("--policy applies to the demo server only: add --demo [SCENARIO]".into()),
        }
    }
}

/// The demo or replay clock's speed factor.
pub fn check_speed(s: f64) -> Result<f64, String> {
    if !s.is_finite() || !(0.0..=1_000_000.0).contains(&s) {
        return Err(format!(
            "speed must be between 0 (as fast as possible) and 1000000, not {s}"
        ));
    }
    Ok(s)
}

/// Seconds between snapshots.
pub fn check_interval(s: f64) -> Result<Duration, String> {
    if !(0.05..=3600.0).contains(&s) || !s.is_finite() {
        return Err(format!(
            "interval must be between 0.05 and 3600 seconds, not {s}"
        ));
    }
    Ok(Duration::from_secs_f64(s))
}

/// How long the live source waits for nfsd's tracepoints to appear.
pub fn check_wait(s: f64) -> Result<Duration, String> {
    if !s.is_finite() || !(0.0..=31_536_000.0).contains(&s) {
        return Err(format!(
            "wait must be between 0 and 31536000 seconds, not {s}"
        ));
    }
    Ok(Duration::from_secs_f64(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_source_runs_in_real_time_whatever_the_speed() {
        let cfg = SessionConfig {
            speed: 0.0,
            ..SessionConfig::default()
        };
        assert_eq!(cfg.pace(false), Pace::Realtime { speed: 1.0 });
        assert_eq!(cfg.pace(true), Pace::AsFastAsPossible);
        let cfg = SessionConfig {
            speed: 4.0,
            ..SessionConfig::default()
        };
        assert_eq!(cfg.pace(true), Pace::Realtime { speed: 4.0 });
    }

    #[test]
    fn values_out_of_range_are_refused_with_the_range() {
        assert!(check_speed(-1.0).unwrap_err().contains("between 0"));
        assert!(check_speed(f64::NAN).is_err());
        assert_eq!(check_speed(0.0), Ok(0.0));
        assert!(check_interval(0.01).unwrap_err().contains("0.05 and 3600"));
        assert_eq!(check_interval(0.5), Ok(Duration::from_millis(500)));
        assert!(check_wait(1e20).unwrap_err().contains("31536000"));
        assert_eq!(check_wait(2.0), Ok(Duration::from_secs(2)));
    }

    #[test]
    fn policy_alone_needs_a_demo() {
        let mut cfg = SessionConfig::default();
        assert!(cfg
            .set_policy(Policy::RrPeer)
            .unwrap_err()
            .contains("--demo"));
        cfg.source = SourceChoice::Demo {
            scenario: DEFAULT_SCENARIO.into(),
            policy: None,
        };
        cfg.set_policy(Policy::RrPeer).unwrap();
        assert_eq!(
            cfg.spec(),
            SourceSpec::Demo {
                scenario: DEFAULT_SCENARIO.into(),
                policy: Some(Policy::RrPeer)
            }
        );
    }
}
