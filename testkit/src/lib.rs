//! What the integration tests of several crates share (a dev-dependency
//! of each, never built into a binary): stand-ins for the host's files
//! (nfsd's client list), the command that runs a binary unprivileged, and
//! the golden scenario every golden file is made from.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nfsdtop_agent::aggregate::Aggregator;
use nfsdtop_agent::pipeline::{Pace, Pipeline};
use nfsdtop_agent::source::demo::{DemoSource, Scenario};

/// The fixed demo scenario of the golden files (tui/tests/golden.rs,
/// exporter/tests/golden.rs).
pub const GOLDEN_SCENARIO: &str = include_str!("../../tui/tests/golden/scenario.toml");

/// The golden scenario's pipeline: one-second snapshots, as fast as it
/// runs, with the scenario's own class map.
pub fn golden_pipeline() -> Pipeline<'static> {
    let scenario = Scenario::parse(GOLDEN_SCENARIO, "golden").expect("the golden scenario");
    let classes = scenario.class_map().expect("its class map");
    Pipeline {
        pace: Pace::AsFastAsPossible,
        ..Pipeline::new(
            Box::new(DemoSource::new(scenario)),
            Aggregator::new(classes, Default::default()),
            Duration::from_secs(1),
        )
    }
}

/// One NFSv4 client as nfsd lists it (`/proc/fs/nfsd/clients/ID/info`).
pub struct NfsdClient<'a> {
    pub id: u32,
    /// `ADDR:PORT`.
    pub address: &'a str,
    /// The client's own name (`name:`).
    pub name: &'a str,
    /// The client's kernel (`Implementation name:`).
    pub implementation: &'a str,
}

/// A fresh stand-in for nfsd's clients directory under the temporary
/// directory (`tag` and this process tell it apart), holding `clients`;
/// the caller removes it.
pub fn nfsd_clients_dir(tag: &str, clients: &[NfsdClient]) -> PathBuf {
    let root = std::env::temp_dir().join(format!("nfsdtop-clients-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for c in clients {
        let dir = root.join(c.id.to_string());
        std::fs::create_dir_all(&dir).expect("a client's directory");
        std::fs::write(
            dir.join("info"),
            format!(
                "clientid: {:#x}\naddress: \"{}\"\nstatus: confirmed\nname: \"{}\"\n\
                 minor version: 2\nImplementation domain: \"kernel.org\"\n\
                 Implementation name: \"{}\"\n",
                c.id, c.address, c.name, c.implementation
            ),
        )
        .expect("a client's info");
    }
    root
}

/// Where setpriv is, for [`as_nobody`]; a test that needs it checks it is
/// there (and that it runs as root) first.
pub const SETPRIV: &str = "/usr/bin/setpriv";

/// `bin` run as nobody (uid and gid 65534, no groups, no inheritable
/// capabilities): what an unprivileged user sees. The caller adds the
/// arguments.
pub fn as_nobody(bin: &Path) -> Command {
    let mut c = Command::new(SETPRIV);
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
    ])
    .arg(bin);
    c
}
