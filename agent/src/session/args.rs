//! The source flags `nfsdtop` and `nfsdtopd` share (`#[command(flatten)]`
//! in both): their names, help, value checks and how they land on a
//! [`SessionConfig`]. This is their one definition: each long flag is also
//! a key of nfsdtopd's config file (`--ring-size` is `ring_size`, read
//! through this very parser by the exporter's `config::keys`), and the
//! group [`LOCAL_SOURCE`] names them all for the TUI's `--connect`, which
//! excludes every one. Everything here is optional, so that flags can be
//! laid over the file.

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::config::{check_speed, check_wait, SessionConfig, SourceChoice};
use crate::source::demo::Policy;
use crate::source::live::{BenchStage, Tracepoints};

/// `C::parse()` for both binaries, except that a help or version text
/// that cannot be written (`--help > /dev/full`) ends with status 1, `warn`
/// told why: clap's own exit drops the write error and says 0. A closed
/// pipe (`--help | head`) still ends quietly.
pub fn parse_command_line<C: clap::Parser>(warn: impl FnOnce(&std::io::Error)) -> C {
    C::try_parse().unwrap_or_else(|e| {
        let printed = e.print();
        let code = e.exit_code();
        match printed {
            Err(io) if code == 0 && io.kind() != std::io::ErrorKind::BrokenPipe => {
                warn(&io);
                std::process::exit(1)
            }
            _ => std::process::exit(code),
        }
    })
}

/// The clap group of every [`SourceArgs`] flag: what a remote source
/// (the TUI's `--connect`) conflicts with, so a flag added here is refused
/// there without being listed again.
pub const LOCAL_SOURCE: &str = "local_source";

#[derive(Args, Debug, Clone, Default)]
#[group(id = "local_source", multiple = true)]
pub struct SourceArgs {
    /// Watch the built-in simulated server (seed-k4|seed-k8|seed-k16|seed-k32|movers|burst, or a scenario .toml file).
    #[arg(long, value_name = "SCENARIO", num_args = 0..=1, default_missing_value = super::DEFAULT_SCENARIO, conflicts_with = "replay")]
    pub demo: Option<String>,
    /// Dispatch policy of the demo server.
    #[arg(long, value_parser = PolicyParser)]
    pub policy: Option<Policy>,
    /// Replay a recording made by `nfsdtop record`.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
    /// Run a demo or replay this many times faster than real time (0 = as fast as possible) [default: 1].
    #[arg(long, value_name = "X", value_parser = parse_speed)]
    pub speed: Option<f64>,
    /// Class map file: lines of "PREFIX CLASS [per-peer]".
    #[arg(long, value_name = "FILE")]
    pub class_map: Option<PathBuf>,
    /// Live source: wait for this host's nfsd (its sunrpc tracepoints) to appear, up to SECS seconds (no value: as long as it takes).
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "forever", value_parser = parse_wait, conflicts_with_all = ["demo", "replay"])]
    pub wait: Option<Duration>,
    /// Live source: tracefs mount point [default: /sys/kernel/tracing].
    #[arg(long, value_name = "DIR")]
    pub tracefs: Option<PathBuf>,
    /// Live source: size of the BPF ring buffer, e.g. 64M (a power of two from 4096 bytes to 1G) [default: 16M]. Too small loses events, which are counted and shown.
    #[arg(long, value_name = "BYTES", value_parser = parse_ring_size, conflicts_with_all = ["demo", "replay"])]
    pub ring_size: Option<u32>,
    /// Live source: raw tracepoints where the kernel's BTF allows (the default; kept for scripts that pass it).
    #[arg(long, hide = true, conflicts_with_all = ["demo", "replay", "classic_tracepoints"])]
    pub raw_tracepoints: bool,
    /// Live source: watch every event through its classic tracepoint (the kernel builds each hit's record, the program copies it) instead of the default raw tracepoints, which read nfsd's fields at offsets from the kernel's BTF and send a transport's addresses once.
    #[arg(long, conflicts_with_all = ["demo", "replay"])]
    pub classic_tracepoints: bool,
    /// Live source, kernels that can preempt raw tracepoint programs (7.x with preemption full, lazy or rt), where nfsdtop gives svc_xprt_dequeue and svc_stats_latency a second program that does the hits the kernel skips for the first: keep the raw tracepoints without it. A little cheaper (see BENCHMARKS.md), but the hits the kernel skips while one of nfsdtop's programs is preempted are lost, counted in events_lost.
    #[arg(long, conflicts_with_all = ["demo", "replay", "classic_tracepoints"])]
    pub keep_raw_tracepoints: bool,
    /// Live source, kernels whose dequeues carry qtime (6.16+): hook svc_xprt_enqueue too, instead of rebuilding the ready queue from the dequeues alone (the default there: four tracepoint hits fewer per dispatch, events held 1 s to put them in order); this is what measures the depth in flight at enqueue there (hence its alias), and costs some 0.4 points of IOPS (BENCHMARKS.md).
    #[arg(long, visible_alias = "inflight", conflicts_with_all = ["demo", "replay"])]
    pub enqueue_hooks: bool,
    /// Live source: read svc_xprt_enqueue's transports and svc_xprt_dequeue's and svc_stats_latency's requests with the raw programs (a kernel helper call per field) instead of the typed ones (plain loads the verifier checks against the kernel's BTF; the default where the kernel allows): for comparing the two, or for a kernel that rejects the typed ones.
    #[arg(long, conflicts_with_all = ["demo", "replay"])]
    pub no_typed_program: bool,
    /// Live source: count each client's NFSv4 operations (READ, WRITE, SEQUENCE, GETATTR...) on nfsd's compound tracepoints: one more record per COMPOUND (see BENCHMARKS.md for the cost), off by default. Needs nfsd loaded and its BTF (/sys/kernel/btf/nfsd).
    #[arg(long, conflicts_with_all = ["demo", "replay"])]
    pub nfs4_ops: bool,
    /// Live source: have the kernel time nfsdtop's BPF programs while attached (kernel.bpf_stats_enabled), to show their run time per event; costs two clock reads per tracepoint hit.
    #[arg(long, conflicts_with_all = ["demo", "replay"])]
    pub bpf_stats: bool,
    /// Benchmarks only (`cargo xtask bench`): run part of the live pipeline, to split its cost: `hooked` = programs attached but idle, `discard` = records drained and thrown away undecoded, `no-workload` = everything but procedures and bytes.
    #[arg(long, hide = true, value_name = "STAGE", value_enum, conflicts_with_all = ["demo", "replay"])]
    pub bench_stage: Option<BenchStageArg>,
    /// Most peers the aggregator keeps before it evicts idle ones (tests; default 65536).
    #[arg(long, value_name = "N", hide = true, value_parser = parse_limit)]
    pub max_peers: Option<NonZeroU32>,
    /// Most transports the aggregator keeps before it evicts idle ones (tests; default 262144).
    #[arg(long, value_name = "N", hide = true, value_parser = parse_limit)]
    pub max_transports: Option<NonZeroU32>,
    /// Show the peers' host names: reverse DNS through the system resolver (/etc/hosts, DNS), looked up in the background and cached (10 min; 1 min for no name); off by default. Pseudonyms under --redact.
    #[arg(long)]
    pub resolve: bool,
    /// Read the NFSv4 clients' names from DIR (laid out as /proc/fs/nfsd/clients) instead (tests; any source).
    #[arg(long, value_name = "DIR", hide = true)]
    pub nfsd_clients: Option<PathBuf>,
}

impl SourceArgs {
    /// Lay the flags given over `cfg` (the defaults, or a config file).
    pub fn apply(&self, cfg: &mut SessionConfig) -> anyhow::Result<()> {
        if let Some(c) = &self.class_map {
            cfg.class_map = Some(c.clone());
        }
        if let Some(s) = self.speed {
            cfg.speed = s;
        }
        let live = &mut cfg.live;
        if let Some(w) = self.wait {
            live.wait_for_nfsd = Some(w);
        }
        if let Some(t) = &self.tracefs {
            live.tracefs = Some(t.clone());
        }
        if let Some(r) = self.ring_size {
            live.ring_bytes = r;
        }
        if self.bpf_stats {
            live.kernel_stats = true;
        }
        if self.raw_tracepoints {
            live.tracepoints = Tracepoints::Raw;
        }
        if self.classic_tracepoints {
            live.tracepoints = Tracepoints::Classic;
        }
        if self.keep_raw_tracepoints {
            live.keep_raw = true;
        }
        if self.enqueue_hooks {
            live.enqueue_hooks = true;
        }
        if self.nfs4_ops {
            live.nfs4_ops = true;
        }
        if self.no_typed_program {
            live.typed_program = false;
        }
        if let Some(s) = self.bench_stage {
            live.stage = match s {
                BenchStageArg::Hooked => BenchStage::Hooked,
                BenchStageArg::Discard => BenchStage::Discard,
                BenchStageArg::NoWorkload => BenchStage::NoWorkload,
            };
        }
        if let Some(n) = self.max_peers {
            cfg.limits.max_peers = n.get() as usize;
        }
        if let Some(n) = self.max_transports {
            cfg.limits.max_transports = n.get() as usize;
        }
        if self.resolve {
            cfg.resolve = true;
        }
        if let Some(d) = &self.nfsd_clients {
            cfg.nfsd_clients = Some(d.clone());
        }
        if let Some(d) = &self.demo {
            cfg.source = SourceChoice::Demo {
                scenario: d.clone(),
                policy: self.policy,
            };
        } else if let Some(r) = &self.replay {
            cfg.source = SourceChoice::Replay(r.clone());
        } else if let Some(p) = self.policy {
            cfg.set_policy(p).map_err(anyhow::Error::msg)?;
        }
        // A config file can ask for both; the flags cannot (clap).
        if cfg.live.keep_raw && cfg.live.tracepoints == Tracepoints::Classic {
            anyhow::bail!(
                "keeping raw tracepoints (--keep-raw-tracepoints, keep_raw_tracepoints = true) \
                 and every event on its classic tracepoint (--classic-tracepoints, \
                 classic_tracepoints = true) were both asked for: drop one of the two"
            );
        }
        Ok(())
    }

    /// The session these flags ask for, over the defaults.
    pub fn config(&self) -> anyhow::Result<SessionConfig> {
        let mut cfg = SessionConfig::default();
        self.apply(&mut cfg)?;
        Ok(cfg)
    }
}

/// `--policy` (and the TUI's `--whatif`): parsed by the agent's own
/// `Policy` (its message on a bad value), and listing the values for the
/// completion scripts and `--help`.
#[derive(Clone, Copy)]
pub struct PolicyParser;

impl clap::builder::TypedValueParser for PolicyParser {
    type Value = Policy;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Policy, clap::Error> {
        let text = value.to_string_lossy();
        text.parse().map_err(|e: String| {
            clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{e}\n"))
                .with_cmd(cmd)
        })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        let all = [
            (
                Policy::Flat,
                "one FIFO of ready transports (today's kernel)",
            ),
            (Policy::RrPeer, "round-robin across peers"),
            (
                Policy::RrClass,
                "round-robin across classes of the class map",
            ),
            (
                Policy::SparseFlow,
                "transports enqueued with nothing in flight first, for 64 dispatches (the sparse-flow RFC)",
            ),
        ];
        Some(Box::new(all.into_iter().map(|(p, help)| {
            clap::builder::PossibleValue::new(p.to_string()).help(help)
        })))
    }
}

/// `--bench-stage` (see [`BenchStage`]).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchStageArg {
    Hooked,
    Discard,
    NoWorkload,
}

fn parse_speed(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| {
        format!("{s:?} is not a speed factor (e.g. 1, 10, 0.5; 0 = as fast as possible)")
    })?;
    check_speed(v)
}

/// `--wait` seconds; "forever" (the flag without a value) waits for ever.
fn parse_wait(s: &str) -> Result<Duration, String> {
    if s == "forever" {
        return Ok(Duration::MAX);
    }
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds to wait for nfsd"))?;
    check_wait(v)
}

/// `--ring-size`: bytes, or with a K/M/G suffix (KiB, MiB, GiB).
fn parse_ring_size(s: &str) -> Result<u32, String> {
    crate::source::live::bpf::parse_ring_size(s)
}

/// A limit of the aggregator's tables (> 0; 4-byte option, so the
/// arguments stay small).
fn parse_limit(s: &str) -> Result<NonZeroU32, String> {
    s.parse()
        .map_err(|_| format!("{s:?} is not a positive number"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        source: SourceArgs,
    }

    fn config(args: &[&str]) -> anyhow::Result<SessionConfig> {
        let cmd = Cmd::try_parse_from(std::iter::once("t").chain(args.iter().copied()))?;
        cmd.source.config()
    }

    #[test]
    fn the_flags_land_on_the_config() {
        let cfg = config(&["--ring-size", "64M", "--wait", "--classic-tracepoints"]).unwrap();
        assert_eq!(cfg.live.ring_bytes, 64 << 20);
        assert_eq!(cfg.live.wait_for_nfsd, Some(Duration::MAX));
        assert_eq!(cfg.live.tracepoints, Tracepoints::Classic);
        assert_eq!(cfg.source, SourceChoice::Live);
        let cfg = config(&["--demo", "--policy", "rr-peer", "--speed", "0"]).unwrap();
        assert_eq!(
            cfg.source,
            SourceChoice::Demo {
                scenario: "movers".into(),
                policy: Some(Policy::RrPeer)
            }
        );
        assert_eq!(cfg.speed, 0.0);
        let cfg = config(&["--max-peers", "3"]).unwrap();
        assert_eq!(cfg.limits.max_peers, 3);
        assert!(!cfg.resolve, "off by default");
        assert!(!cfg.live.keep_raw, "off by default");
        assert!(config(&["--keep-raw-tracepoints"]).unwrap().live.keep_raw);
        assert!(config(&["--demo", "--resolve"]).unwrap().resolve);
    }

    #[test]
    fn bad_values_and_combinations_are_refused() {
        for args in [
            &["--speed=-1"][..],
            &["--wait", "1e20"],
            &["--wait", "soon"],
            &["--ring-size", "3M"],
            &["--demo", "--replay", "x"],
            &["--demo", "--ring-size", "64M"],
            &["--classic-tracepoints", "--raw-tracepoints"],
            &["--classic-tracepoints", "--keep-raw-tracepoints"],
            &["--demo", "--keep-raw-tracepoints"],
        ] {
            assert!(config(args).is_err(), "{args:?}");
        }
        let e = config(&["--policy", "flat"]).unwrap_err().to_string();
        assert!(e.contains("--demo"), "{e}");
    }

    #[test]
    fn the_group_holds_every_flag() {
        let cmd = <Cmd as clap::CommandFactory>::command();
        let group = cmd
            .get_groups()
            .find(|g| g.get_id() == LOCAL_SOURCE)
            .expect("the local_source group");
        let members: Vec<_> = group.get_args().collect();
        for a in cmd.get_arguments().filter(|a| a.get_long().is_some()) {
            let id = a.get_id();
            if id != "help" {
                assert!(members.contains(&id), "--{} not in {LOCAL_SOURCE}", id);
            }
        }
    }
}
