//! Demo scenarios: the built-in ones reproduce the seeds' experiments;
//! others load from TOML.
//!
//! ```toml
//! name = "mine"
//! threads = 16          # nfsd threads
//! service_ms = 10.0     # per-request service time
//! jitter = 0.5          # ± fraction of service_ms, uniform
//! policy = "flat"       # flat | rr-peer | rr-class | sparse-flow
//! rtt_us = 100.0        # reply → next request
//!
//! [[client]]
//! address = "10.0.0.2"  # IPv4 or IPv6
//! count = 1             # this many clients at consecutive addresses
//! connections = 2       # transports (nconnect)
//! inflight = 32         # requests kept in flight (backlogged client)
//! # burst = 32          # or: bursts of N requests ...
//! # think_ms = 100.0    # ... separated by this much idle time
//! # nfs_name = "Linux NFSv4.2 mover"  # an NFSv4 client: the name the
//! #                     # server shows (with count > 1: "-1", "-2", ...
//! #                     # appended); its requests are COMPOUNDs, and their
//! #                     # NFSv4 operations (SEQUENCE, PUTFH, READ...) shown
//! request_bytes = 200   # each request received, RPC header included
//! reply_bytes = 4296    # each reply sent (default: 4 KiB reads)
//!
//! [[class]]
//! prefix = "10.1.0.0/24"
//! name = "movers"
//! per_peer = false
//! ```
//!
//! A file is read and refused (FILE:LINE: reason) past its bounds in
//! bounds.rs:
//! 4096 threads, 1024 connections a client, a million transports and a
//! million requests in flight in all, a million dispatches a second
//! (threads / service_ms), an hour for any time, 64 MiB a message.

use std::fmt;
use std::net::IpAddr;
use std::path::Path;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::enrich::classify::{ClassMap, ClassRule};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Today's kernel: one FIFO of ready transports.
    #[default]
    Flat,
    /// Round-robin across peers (the series' v1).
    RrPeer,
    /// Round-robin across classes from the class map (the series' v2).
    RrClass,
    /// The sparse-flow RFC: a transport enqueued with nothing in flight
    /// goes on a priority queue drained ahead of the flat one, for up to
    /// [`SPARSE_FLOW_CREDIT`] dispatches (re-armed at its next enqueue
    /// with nothing in flight).
    SparseFlow,
}

/// The sparse-flow RFC's burst budget: high-priority dispatches granted a
/// transport enqueued with nothing in flight.
pub const SPARSE_FLOW_CREDIT: u32 = 64;

impl FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "flat" => Ok(Policy::Flat),
            "rr-peer" => Ok(Policy::RrPeer),
            "rr-class" => Ok(Policy::RrClass),
            "sparse-flow" => Ok(Policy::SparseFlow),
            other => Err(format!(
                "unknown policy {other:?}: expected flat, rr-peer, rr-class or sparse-flow"
            )),
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Policy::Flat => "flat",
            Policy::RrPeer => "rr-peer",
            Policy::RrClass => "rr-class",
            Policy::SparseFlow => "sparse-flow",
        })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSpec {
    pub address: IpAddr,
    #[serde(default = "one")]
    pub count: u32,
    pub connections: u32,
    #[serde(default)]
    pub inflight: Option<u32>,
    #[serde(default)]
    pub burst: Option<u32>,
    #[serde(default)]
    pub think_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nfs_name: Option<String>,
    /// Bytes on the wire of each request and each reply (the demo's
    /// `bytes_in` / `bytes_out`): fixed per client, so a test can work
    /// them out as requests × size. Defaults: a read of 4 KiB.
    #[serde(default = "default_request_bytes")]
    pub request_bytes: u64,
    #[serde(default = "default_reply_bytes")]
    pub reply_bytes: u64,
}

/// A READ call: RPC and NFS headers, a file handle, offset and count.
pub const DEFAULT_REQUEST_BYTES: u64 = 200;
/// Its reply: 4 KiB of data behind the headers and attributes.
pub const DEFAULT_REPLY_BYTES: u64 = 4096 + 200;

fn default_request_bytes() -> u64 {
    DEFAULT_REQUEST_BYTES
}
fn default_reply_bytes() -> u64 {
    DEFAULT_REPLY_BYTES
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassSpec {
    pub prefix: String,
    pub name: String,
    #[serde(default)]
    pub per_peer: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "sixteen")]
    pub threads: u32,
    #[serde(default = "ten")]
    pub service_ms: f64,
    #[serde(default)]
    pub jitter: f64,
    #[serde(default)]
    pub policy: Policy,
    #[serde(default = "hundred")]
    pub rtt_us: f64,
    #[serde(default = "one_u64")]
    pub seed: u64,
    #[serde(rename = "client")]
    pub clients: Vec<ClientSpec>,
    #[serde(default, rename = "class")]
    pub classes: Vec<ClassSpec>,
}

fn one() -> u32 {
    1
}
fn one_u64() -> u64 {
    1
}
fn sixteen() -> u32 {
    16
}
fn ten() -> f64 {
    10.0
}
fn hundred() -> f64 {
    100.0
}

pub const BUILTIN: &[&str] = &[
    "seed-k4", "seed-k8", "seed-k16", "seed-k32", "movers", "burst",
];

fn backlogged(addr: &str, connections: u32) -> ClientSpec {
    ClientSpec {
        address: addr.parse().expect("built-in address"),
        count: 1,
        connections,
        // 16 requests per connection keeps every transport backlogged
        // against 16 threads whatever the policy.
        inflight: Some(16 * connections),
        burst: None,
        think_ms: 0.0,
        nfs_name: None,
        request_bytes: DEFAULT_REQUEST_BYTES,
        reply_bytes: DEFAULT_REPLY_BYTES,
    }
}

impl Scenario {
    fn base(name: &str, description: &str) -> Scenario {
        Scenario {
            name: name.to_string(),
            description: description.to_string(),
            threads: 16,
            service_ms: 10.0,
            jitter: 0.0,
            policy: Policy::Flat,
            rtt_us: 100.0,
            seed: 1,
            clients: Vec::new(),
            classes: Vec::new(),
        }
    }

    /// A built-in scenario by name.
    pub fn builtin(name: &str) -> Option<Scenario> {
        if let Some(k) = name.strip_prefix("seed-k") {
            let k: u32 = k.parse().ok().filter(|k| [4, 8, 16, 32].contains(k))?;
            let mut s = Scenario::base(
                name,
                &format!("one client with 2 connections against one with {k}, both backlogged"),
            );
            s.clients = vec![backlogged("10.0.0.2", 2), backlogged("10.0.0.3", k)];
            return Some(s);
        }
        match name {
            "movers" => {
                let mut s = Scenario::base(
                    "movers",
                    "six data movers with 4 connections each against four backlogged customers with 4 each",
                );
                let mut movers = backlogged("10.1.0.1", 4);
                movers.count = 6;
                let mut customers = backlogged("10.2.0.1", 4);
                customers.count = 4;
                s.clients = vec![movers, customers];
                s.classes = vec![
                    ClassSpec {
                        prefix: "10.1.0.0/24".into(),
                        name: "movers".into(),
                        per_peer: false,
                    },
                    ClassSpec {
                        prefix: "0.0.0.0/0".into(),
                        name: "customers".into(),
                        per_peer: true,
                    },
                    ClassSpec {
                        prefix: "::/0".into(),
                        name: "customers".into(),
                        per_peer: true,
                    },
                ];
                Some(s)
            }
            "burst" => {
                let mut s = Scenario::base(
                    "burst",
                    "an interactive NFSv4.2 client's bursts of 32 against a busy host with 16 connections",
                );
                s.clients = vec![
                    ClientSpec {
                        address: "fd00::9".parse().expect("literal"),
                        count: 1,
                        connections: 1,
                        inflight: None,
                        burst: Some(32),
                        think_ms: 200.0,
                        // An NFSv4.2 client: the demo shows its name and
                        // its NFSv4 operations.
                        nfs_name: Some("Linux NFSv4.2 laptop".into()),
                        request_bytes: DEFAULT_REQUEST_BYTES,
                        reply_bytes: DEFAULT_REPLY_BYTES,
                    },
                    backlogged("10.0.0.3", 16),
                ];
                Some(s)
            }
            _ => None,
        }
    }

    /// A built-in name or a path to a TOML file.
    pub fn resolve(name_or_path: &str) -> anyhow::Result<Scenario> {
        if let Some(s) = Scenario::builtin(name_or_path) {
            return Ok(s);
        }
        let path = Path::new(name_or_path);
        if name_or_path.ends_with(".toml") || path.exists() {
            return Scenario::load(path);
        }
        anyhow::bail!(
            "unknown demo scenario {name_or_path:?}: use one of {} or a path to a .toml scenario file",
            BUILTIN.join(", ")
        )
    }

    pub fn class_map(&self) -> Result<ClassMap, String> {
        let text: String = self
            .classes
            .iter()
            .map(|c| {
                format!(
                    "{} {}{}\n",
                    c.prefix,
                    c.name,
                    if c.per_peer { " per-peer" } else { "" }
                )
            })
            .collect();
        let m = ClassMap::parse(&text, "[[class]]").map_err(|e| e.to_string())?;
        let rules: Vec<ClassRule> = m.rules().to_vec();
        Ok(ClassMap::from_rules(rules))
    }

    /// The NFSv4 client names the scenario gives its clients.
    pub fn client_names(&self) -> crate::enrich::clients::ClientMap {
        let mut map = crate::enrich::clients::ClientMap::new(None);
        for c in &self.clients {
            let Some(name) = &c.nfs_name else {
                continue;
            };
            for i in 0..c.count {
                let name = if c.count > 1 {
                    format!("{name}-{}", i + 1)
                } else {
                    name.clone()
                };
                map.insert(
                    nth_address(c.address, i),
                    crate::enrich::clients::ClientName {
                        name: crate::text::printable(&name),
                        minor_version: Some(2),
                        implementation: Some("nfsdtop demo".into()),
                    },
                );
            }
        }
        map
    }

    /// The clients with `count` expanded to consecutive addresses.
    pub fn expanded_clients(&self) -> Vec<(IpAddr, &ClientSpec)> {
        let mut out = Vec::new();
        for c in &self.clients {
            for i in 0..c.count {
                out.push((nth_address(c.address, i), c));
            }
        }
        out
    }
}

/// The `i`-th of consecutive addresses from `base`.
fn nth_address(base: IpAddr, i: u32) -> IpAddr {
    match base {
        IpAddr::V4(a) => IpAddr::V4((u32::from(a).wrapping_add(i)).into()),
        IpAddr::V6(a) => IpAddr::V6((u128::from(a).wrapping_add(i as u128)).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_resolve_and_validate() {
        for name in BUILTIN {
            let s = Scenario::builtin(name).unwrap();
            s.validate().unwrap();
        }
        assert!(Scenario::builtin("seed-k5").is_none());
    }

    #[test]
    fn unknown_scenario_names_the_choices() {
        let e = Scenario::resolve("nope").unwrap_err().to_string();
        assert!(e.contains("unknown demo scenario \"nope\""), "{e}");
        assert!(e.contains("seed-k16"), "{e}");
    }

    #[test]
    fn toml_round_trip_and_errors_with_line() {
        let text = "name = \"t\"\npolicy = \"rr-peer\"\n[[client]]\naddress = \"10.0.0.2\"\nconnections = 2\ninflight = 8\n";
        let s = Scenario::parse(text, "t.toml").unwrap();
        assert_eq!(s.policy, Policy::RrPeer);
        assert_eq!(s.threads, 16);

        let bad = "name = \"t\"\n[[client]]\naddress = \"10.0.0.2\"\nconnections = 2\ninflight = 8\ncolour = 1\n";
        let e = Scenario::parse(bad, "t.toml").unwrap_err().to_string();
        assert!(e.starts_with("t.toml:6"), "{e}");
        assert!(e.contains("colour"), "{e}");

        let bad = "name = \"t\"\n[[client]]\naddress = \"10.0.0.2\"\nconnections = 2\n";
        let e = Scenario::parse(bad, "t.toml").unwrap_err().to_string();
        assert!(e.contains("give inflight"), "{e}");

        let bad = "name = \"t\"\npolicy = \"fifo\"\n[[client]]\naddress = \"10.0.0.2\"\nconnections = 2\ninflight=1\n";
        let e = Scenario::parse(bad, "t.toml").unwrap_err().to_string();
        assert!(e.contains("t.toml:2"), "{e}");

        let bad = "name = \"t\"\n[[client]]\naddress = \"10.0.0.2\"\nconnections = 2\ninflight=1\n[[class]]\nprefix=\"10.0.0.0/99\"\nname=\"x\"\n";
        let e = Scenario::parse(bad, "t.toml").unwrap_err().to_string();
        assert!(e.contains("prefix length"), "{e}");
    }

    /// Sizes default to a 4 KiB read; a file may set its own per client;
    /// every executed request carries its client's sizes.
    #[test]
    fn request_and_reply_sizes_default_and_per_client() {
        let text =
            "name = \"t\"\n[[client]]\naddress = \"10.0.0.2\"\nconnections = 1\ninflight = 1\n\
                    [[client]]\naddress = \"10.0.0.3\"\nconnections = 1\ninflight = 1\n\
                    request_bytes = 65636\nreply_bytes = 100\n";
        let s = Scenario::parse(text, "t.toml").unwrap();
        let sizes: Vec<(u64, u64)> = s
            .clients
            .iter()
            .map(|c| (c.request_bytes, c.reply_bytes))
            .collect();
        assert_eq!(
            sizes,
            [(DEFAULT_REQUEST_BYTES, DEFAULT_REPLY_BYTES), (65_636, 100)]
        );
        let mut sim = super::super::Simulator::new(s);
        let mut events = Vec::new();
        sim.run_until(1_000_000_000, &mut events);
        let mut seen = std::collections::HashMap::new();
        for e in &events {
            if let crate::model::EventKind::Executed { bytes, .. } = e.kind {
                seen.insert(e.xprt.peer().to_string(), bytes);
            }
        }
        let b = |r, s| {
            Some(crate::model::Bytes {
                received: r,
                sent: s,
            })
        };
        assert_eq!(seen["10.0.0.2"], b(200, 4296));
        assert_eq!(seen["10.0.0.3"], b(65_636, 100));
    }

    #[test]
    fn count_expands_to_consecutive_addresses() {
        let s = Scenario::builtin("movers").unwrap();
        let c = s.expanded_clients();
        assert_eq!(c.len(), 10);
        assert_eq!(c[5].0.to_string(), "10.1.0.6");
        assert_eq!(c[6].0.to_string(), "10.2.0.1");
    }

    fn refusal(text: &str) -> String {
        Scenario::parse(text, "big.toml").unwrap_err().to_string()
    }

    #[test]
    fn bounds_keep_memory_and_event_rate_finite() {
        let client = |extra: &str| {
            format!(
                "name = \"t\"\n\n[[client]]\naddress = \"10.0.0.2\"\nconnections = 2\n{extra}\n"
            )
        };
        let e = refusal(&client("inflight = 4000000000"));
        assert!(
            e.starts_with("big.toml:6: client 1 (10.0.0.2): inflight"),
            "{e}"
        );
        assert!(e.contains("at most 1000000"), "{e}");
        let e = refusal(&client("burst = 4000000000"));
        assert!(
            e.starts_with("big.toml:6: client 1 (10.0.0.2): burst"),
            "{e}"
        );
        let e = refusal(&client("inflight = 2000\ncount = 1000"));
        assert!(e.contains("requests in flight to 2000000"), "{e}");
        let e = refusal(&format!(
            "threads = 4096\nservice_ms = 0.000001\nrtt_us = 0.0\n{}",
            client("inflight = 8")
        ));
        assert!(
            e.starts_with("big.toml:2: threads = 4096 at service_ms"),
            "{e}"
        );
        assert!(e.contains("dispatches per second"), "{e}");
        let e = refusal(&format!("service_ms = 1e300\n{}", client("inflight = 8")));
        assert!(e.starts_with("big.toml:1: service_ms"), "{e}");
        let e = refusal(&client("inflight = 8\nthink_ms = 1e300"));
        assert!(e.starts_with("big.toml:7:"), "{e}");
        let e = refusal(&client("inflight = 8\nreply_bytes = 1000000000"));
        assert!(
            e.starts_with("big.toml:7: client 1 (10.0.0.2): reply_bytes"),
            "{e}"
        );
        let e = refusal(
            &client("inflight = 8\ncount = 100000\nconnections = 1000")
                .replace("connections = 2\n", ""),
        );
        assert!(e.contains("transports"), "{e}");
        // The bounds leave room for the largest sensible demo.
        let ok = format!(
            "threads = 4096\nservice_ms = 10\n{}",
            client("inflight = 16384").replace("connections = 2", "connections = 1024")
        );
        Scenario::parse(&ok, "ok.toml").unwrap();
    }

    #[test]
    fn every_connection_of_a_client_is_its_own_transport() {
        use super::super::bounds::MAX_CONNECTIONS;
        let text = format!(
            "name = \"t\"\n[[client]]\naddress = \"10.0.0.2\"\nconnections = {MAX_CONNECTIONS}\ninflight = {MAX_CONNECTIONS}\n"
        );
        let s = Scenario::parse(&text, "t.toml").unwrap();
        let mut sim = super::super::Simulator::new(s);
        let mut events = Vec::new();
        sim.run_until(0, &mut events);
        let keys: std::collections::HashSet<_> = events.iter().map(|e| e.xprt).collect();
        assert_eq!(keys.len(), MAX_CONNECTIONS as usize);
    }
}
