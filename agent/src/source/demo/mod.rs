//! The built-in simulated NFS server: nfsdtop is useful on any machine,
//! and the simulator's own counts are an independent truth for tests.

mod bounds;
pub mod scenario;
pub mod sim;

pub use scenario::{Policy, Scenario, BUILTIN};
pub use sim::Simulator;

use super::{Poll, Source};
use crate::model::{Event, SourceInfo, SourceKind, WaitSource};

pub struct DemoSource {
    sim: Simulator,
}

impl DemoSource {
    pub fn new(scenario: Scenario) -> Self {
        DemoSource {
            sim: Simulator::new(scenario),
        }
    }

    pub fn simulator(&self) -> &Simulator {
        &self.sim
    }
}

impl Source for DemoSource {
    /// The simulated server: one pool of the scenario's threads.
    fn nfsd_threads(&self) -> crate::server::NfsdThreads {
        let n = self.sim.scenario().threads;
        crate::server::NfsdThreads {
            threads: Some(n),
            pools: Some(1),
            pool_threads: Some(vec![n]),
            ..Default::default()
        }
    }

    /// The scenario's `nfs_name`s, where it gives any.
    fn client_names(&self) -> Option<crate::enrich::clients::ClientMap> {
        let m = self.sim.scenario().client_names();
        (!m.is_empty()).then_some(m)
    }

    fn info(&self) -> SourceInfo {
        let s = self.sim.scenario();
        SourceInfo {
            kind: SourceKind::Demo,
            kernel: "simulated".into(),
            generation: "demo".into(),
            wait_source: WaitSource::EnqueueDequeue,
            detail: format!(
                "{} policy={} threads={} service={}ms",
                s.name, s.policy, s.threads, s.service_ms
            ),
            host: String::new(),
        }
    }

    fn poll(&mut self, until_ns: u64, out: &mut Vec<Event>) -> anyhow::Result<Poll> {
        self.sim.run_until(until_ns, out);
        Ok(Poll::Pending)
    }

    fn now_ns(&self) -> u64 {
        self.sim.now_ns()
    }
}
