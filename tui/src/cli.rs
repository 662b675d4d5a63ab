//! The command-line contract (README.md, the man pages). Scripts and tests rely on it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use nfsdtop_agent::model::EntityKind;
use nfsdtop_agent::output::Format;
use nfsdtop_agent::source::demo::Policy;

#[derive(Parser, Debug)]
#[command(
    name = "nfsdtop",
    version,
    about = "Who gets a Linux NFS server's threads, who waits, and whether that is fair",
    long_about = "nfsdtop shows, live, how a Linux NFS server's RPC dispatch is shared among \
its clients: each peer's (or class's) share of dispatches, its fair share while backlogged, \
the ratio of the two, its queue waits and its thread time.\n\n\
Without a source flag it watches this host's nfsd; where there is none the interactive UI \
shows the built-in demo server under a DEMO DATA banner, while batch output (-b, --format) \
and record fail.\n\n\
Exit status: 0 on success, also when the reader of stdout goes away (| head); 1 on an error, \
said in one line on stderr (with --connect in batch mode: credentials refused, certificate \
not trusted, no link for --give-up-after seconds); 2 for a bad command line; 129 when the \
UI's terminal hangs up.",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub view: ViewArgs,
}

// Parsed once per run: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Record events (live or demo) to a file for later --replay.
    Record(RecordArgs),
    /// Report what this host supports: tracefs, sunrpc, tracepoints, BPF.
    Doctor(DoctorArgs),
    /// Predict each client's share and waits under another dispatch policy, from a recording.
    Whatif(crate::whatif::WhatifArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the man pages (nfsdtop.1 and one per subcommand) into DIR,
    /// or print nfsdtop(1) when no DIR is given.
    #[command(hide = true)]
    Manpage { dir: Option<std::path::PathBuf> },
}

#[derive(Args, Debug, Clone)]
pub struct SourceArgs {
    /// Watch the built-in simulated server (seed-k4|seed-k8|seed-k16|seed-k32|movers|burst, or a scenario .toml file).
    #[arg(long, value_name = "SCENARIO", num_args = 0..=1, default_missing_value = "movers")]
    pub demo: Option<String>,
    /// Dispatch policy of the demo server.
    #[arg(long, value_parser = PolicyParser, requires = "demo")]
    pub policy: Option<Policy>,
    /// Replay a recording made by `nfsdtop record`.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["demo", "connect"])]
    pub replay: Option<PathBuf>,
    /// Connect to a remote agent (nfsdtopd), e.g. http://server:9847 or https://server:9847. Basic-auth credentials come from the URL (https://user:password@server:9847), else $NFSDTOP_AUTH (user:password), else a netrc file; they are never shown.
    #[arg(long, value_name = "URL", conflicts_with_all = ["demo", "replay"])]
    pub connect: Option<String>,
    /// With --connect https://...: trust the CA certificates in this PEM file instead of the system's.
    #[arg(long, value_name = "FILE", requires = "connect")]
    pub ca_cert: Option<PathBuf>,
    /// With --connect: the netrc file holding the agent's user and password ("machine HOST login USER password PASS"; default: $NETRC, else ~/.netrc).
    #[arg(long, value_name = "FILE", requires = "connect")]
    pub netrc_file: Option<PathBuf>,
    /// Run a demo or replay this many times faster than real time (0 = as fast as possible).
    #[arg(long, default_value_t = 1.0, value_parser = parse_speed)]
    pub speed: f64,
    /// Class map file: lines of "PREFIX CLASS [per-peer]".
    #[arg(long, value_name = "FILE")]
    pub class_map: Option<PathBuf>,
    /// Hash client addresses in every output (for sensitive client lists).
    #[arg(long)]
    pub redact: bool,
    /// Wait for this host's nfsd (its sunrpc tracepoints) to appear, up to SECS seconds (no value: as long as it takes), instead of showing the demo.
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "forever", value_parser = parse_wait, conflicts_with_all = ["demo", "replay", "connect"])]
    pub wait: Option<f64>,
    /// tracefs mount point (default: /sys/kernel/tracing).
    #[arg(long, value_name = "DIR", hide = true)]
    pub tracefs: Option<PathBuf>,
    /// Size of the live source's BPF ring buffer, e.g. 16M (a power of two, at least 4096 bytes; too small loses events, which are counted and shown).
    #[arg(long, value_name = "BYTES", value_parser = parse_ring_size, conflicts_with_all = ["demo", "replay", "connect"])]
    pub ring_size: Option<u32>,
    /// Raw tracepoints where the kernel's BTF allows: the default (kept for scripts that pass it).
    #[arg(long, hide = true, conflicts_with_all = ["demo", "replay", "connect", "classic_tracepoints"])]
    pub raw_tracepoints: bool,
    /// Watch every event through its classic tracepoint (the kernel builds each hit's record, the program copies it) instead of the default raw tracepoints, which read nfsd's fields at offsets from the kernel's BTF and send a transport's addresses once.
    #[arg(long, conflicts_with_all = ["demo", "replay", "connect"])]
    pub classic_tracepoints: bool,
    /// Benchmarks only (`cargo xtask bench`): run part of the live pipeline, to split its cost: `hooked` = programs attached but idle, `discard` = records drained and thrown away undecoded.
    #[arg(long, hide = true, value_name = "STAGE", value_enum, conflicts_with_all = ["demo", "replay", "connect"])]
    pub bench_stage: Option<BenchStageArg>,
    /// Have the kernel time nfsdtop's BPF programs while attached (kernel.bpf_stats_enabled), to show their run time per event; costs two clock reads per tracepoint hit.
    #[arg(long, conflicts_with_all = ["demo", "replay", "connect"])]
    pub bpf_stats: bool,
    /// Most peers the aggregator keeps before it evicts idle ones (tests; default 65536).
    #[arg(long, value_name = "N", hide = true, value_parser = parse_limit)]
    pub max_peers: Option<std::num::NonZeroU32>,
    /// Most transports the aggregator keeps before it evicts idle ones (tests; default 262144).
    #[arg(long, value_name = "N", hide = true, value_parser = parse_limit)]
    pub max_transports: Option<std::num::NonZeroU32>,
}

#[derive(Args, Debug, Clone)]
pub struct ViewArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Batch mode like `top -b`: print snapshots instead of the interactive UI.
    #[arg(short = 'b', long)]
    pub batch: bool,
    /// Number of snapshots to print in batch mode (default: until interrupted).
    #[arg(short = 'n', long, value_name = "N", value_parser = parse_iterations, requires = "batch")]
    pub iterations: Option<u64>,
    /// Seconds between snapshots.
    #[arg(short = 'd', long, value_name = "SECS", default_value_t = 1.0, value_parser = parse_delay)]
    pub delay: f64,
    /// Batch output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text, requires = "batch")]
    pub format: OutputFormat,
    /// Show peers or classes.
    #[arg(long, value_enum, default_value_t = Group::Peer)]
    pub group: Group,
    /// Show at most N entities.
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// Batch mode with --connect: give up (exit status 1) when no link to the agent has held for SECS seconds (the interactive UI keeps retrying).
    #[arg(long, value_name = "SECS", default_value_t = 30.0, value_parser = parse_delay, requires = "connect")]
    pub give_up_after: f64,
    /// Replay only: add columns predicting each entity's share, ratio and wait p99 under this policy (see `nfsdtop whatif`).
    #[arg(long, value_name = "POLICY", value_parser = PolicyParser, requires = "replay", conflicts_with_all = ["batch", "demo", "connect"])]
    pub whatif: Option<Policy>,
}

#[derive(Args, Debug, Clone)]
pub struct RecordArgs {
    /// Output file.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: PathBuf,
    /// Stop after this many seconds (source time).
    #[arg(long, value_name = "SECS", value_parser = parse_delay)]
    pub duration: Option<f64>,
    /// Stop after this many events.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// Overwrite the output file if it exists.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub source: SourceArgs,
}

#[derive(Args, Debug, Clone)]
pub struct DoctorArgs {
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
    /// tracefs mount point (default: /sys/kernel/tracing).
    #[arg(long, value_name = "DIR", hide = true)]
    pub tracefs: Option<PathBuf>,
    /// nfsdtopd's config file to check, if it exists.
    #[arg(long, value_name = "FILE", hide = true, default_value = crate::doctor::NFSDTOPD_CONFIG)]
    pub nfsdtopd_config: PathBuf,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Text,
    Json,
    Csv,
}

impl From<OutputFormat> for Format {
    fn from(f: OutputFormat) -> Format {
        match f {
            OutputFormat::Text => Format::Text,
            OutputFormat::Json => Format::Json,
            OutputFormat::Csv => Format::Csv,
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    Peer,
    Class,
}

impl From<Group> for EntityKind {
    fn from(g: Group) -> EntityKind {
        match g {
            Group::Peer => EntityKind::Peer,
            Group::Class => EntityKind::Class,
        }
    }
}

/// `--policy` and `--whatif`: parsed by the agent's own `Policy` (its
/// message on a bad value), and listing the values for the completion
/// scripts and `--help`.
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
        ];
        Some(Box::new(all.into_iter().map(|(p, help)| {
            clap::builder::PossibleValue::new(p.to_string()).help(help)
        })))
    }
}

fn parse_delay(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(v.is_finite() && (0.05..=86_400.0).contains(&v)) {
        return Err(format!("{v} seconds is out of range: use 0.05 to 86400"));
    }
    Ok(v)
}

fn parse_speed(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| {
        format!("{s:?} is not a speed factor (e.g. 1, 10, 0.5; 0 = as fast as possible)")
    })?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("speed {v} must be 0 or positive"));
    }
    Ok(v)
}

/// `--ring-size`: bytes, or with a K/M/G suffix (KiB, MiB, GiB).
fn parse_ring_size(s: &str) -> Result<u32, String> {
    nfsdtop_agent::source::live::bpf::parse_ring_size(s)
}

/// `--wait` seconds; "forever" (the flag without a value) is infinite.
fn parse_wait(s: &str) -> Result<f64, String> {
    if s == "forever" {
        return Ok(f64::INFINITY);
    }
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds to wait for nfsd")),
    }
}

/// A limit of the aggregator's tables (> 0; 4-byte option, so the
/// arguments stay small).
fn parse_limit(s: &str) -> Result<std::num::NonZeroU32, String> {
    s.parse()
        .map_err(|_| format!("{s:?} is not a positive number"))
}

fn parse_iterations(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) | Err(_) => Err(format!("{s:?} is not a positive number of iterations")),
        Ok(n) => Ok(n),
    }
}

/// `--bench-stage` (see `nfsdtop_agent::source::live::BenchStage`).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchStageArg {
    Hooked,
    Discard,
}
