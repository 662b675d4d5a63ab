//! The command-line contract (the man pages, and the book's
//! docs/book/src/reference/cli.md, generated from its --help). Scripts and
//! tests rely on it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use nfsdtop_agent::model::EntityKind;
use nfsdtop_agent::present::output::Format;
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
Exit status: 0 on success, also when the reader of stdout goes away (| head; not for record, whose file it cuts short); 1 on an error, \
said in one line on stderr (with --connect in batch mode: credentials refused, certificate \
not trusted, no link or no snapshot for --give-up-after seconds); 2 for a bad command line; 3 from \
doctor when the live source cannot start here; 129 when the UI's terminal hangs up.",
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
    ///
    /// Exit status: 0 when the live source can start here; 3 when it cannot
    /// (each problem is listed with what to do); 1 when the report cannot be
    /// made or written; 2 for a bad command line.
    Doctor(DoctorArgs),
    /// Predict each client's share and waits under another dispatch policy, from a recording.
    Whatif(WhatifArgs),
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

/// Where the snapshots come from: a local source (the flags the agent
/// shares with nfsdtopd) or a remote nfsdtopd.
#[derive(Args, Debug, Clone)]
#[group(skip)]
#[command(mut_arg("policy", |a| a.requires("demo")))]
// The UI's `--demo` alone opens the scenario whose first screen tells the
// story (nfsdtopd keeps its own default).
#[command(mut_arg("demo", |a| a
    .default_missing_value(nfsdtop_agent::session::FIRST_SCENARIO)
    .help("Watch the built-in simulated server: seed-k4|seed-k8|seed-k16|seed-k32|movers|burst, or a scenario .toml file; alone, seed-k16 (2 connections against 16 under the flat queue)")))]
pub struct SourceArgs {
    #[command(flatten)]
    pub local: nfsdtop_agent::session::SourceArgs,
    /// Connect to a remote nfsdtopd, e.g. http://server:9847 or https://server:9847. Basic-auth credentials come from the URL (https://user:password@server:9847), else $NFSDTOP_AUTH (user:password), else a netrc file; they are never shown.
    // Every local source flag (the agent's group), none listed here: the
    // remote nfsdtopd has its own, and one given here would be ignored.
    #[arg(long, value_name = "URL", conflicts_with = nfsdtop_agent::session::LOCAL_SOURCE)]
    pub connect: Option<String>,
    /// With --connect https://...: trust the certificates in this PEM file instead of the system's roots: CAs for the certificates they signed, and each certificate itself when the agent presents exactly it (a self-signed one, as `openssl req -x509` makes).
    #[arg(long, value_name = "FILE", requires = "connect")]
    pub ca_cert: Option<PathBuf>,
    /// With --connect https://...: present this client certificate (PEM, with its chain) to an agent that asks for one (mutual TLS); needs --client-key.
    #[arg(long, value_name = "FILE", requires_all = ["connect", "client_key"])]
    pub client_cert: Option<PathBuf>,
    /// With --connect https://...: the private key (PEM) of --client-cert.
    #[arg(long, value_name = "FILE", requires_all = ["connect", "client_cert"])]
    pub client_key: Option<PathBuf>,
    /// With --connect: the netrc file holding the agent's user and password ("machine HOST login USER password PASS"; default: $NETRC, else ~/.netrc).
    #[arg(long, value_name = "FILE", requires = "connect")]
    pub netrc_file: Option<PathBuf>,
    /// Hash client addresses in every output (for sensitive client lists).
    #[arg(long)]
    pub redact: bool,
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
    /// Seconds between snapshots [default: 1, or the interactive UI's remembered one].
    #[arg(short = 'd', long, value_name = "SECS", value_parser = parse_delay)]
    pub delay: Option<f64>,
    /// Batch output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text, requires = "batch")]
    pub format: OutputFormat,
    /// Show peers or classes [default: peer, or the interactive UI's remembered grouping].
    #[arg(long, value_enum)]
    pub group: Option<Group>,
    /// Show at most N entities.
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// Batch mode with --connect: give up (exit status 1) when no link to the agent has held for SECS seconds, or a link has carried no snapshot for SECS seconds or three of the agent's intervals, whichever is longer (the interactive UI keeps retrying, or shows the agent as stale).
    #[arg(long, value_name = "SECS", default_value_t = 30.0, value_parser = parse_delay, requires = "connect")]
    pub give_up_after: f64,
    /// Replay only: add columns predicting each entity's share, ratio and wait p99 under this policy (see `nfsdtop whatif`).
    #[arg(long, value_name = "POLICY", value_parser = PolicyParser, requires = "replay", conflicts_with_all = ["batch", "demo", "connect"])]
    pub whatif: Option<Policy>,
}

impl ViewArgs {
    /// `-d`, or its default.
    pub fn delay(&self) -> f64 {
        self.delay.unwrap_or(1.0)
    }

    /// `--group`, or its default.
    pub fn group(&self) -> Group {
        self.group.unwrap_or(Group::Peer)
    }
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
    #[arg(long, value_name = "FILE", hide = true, default_value = NFSDTOPD_CONFIG)]
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

pub use nfsdtop_agent::session::PolicyParser;

fn parse_delay(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(v.is_finite() && (0.05..=86_400.0).contains(&v)) {
        return Err(format!("{v} seconds is out of range: use 0.05 to 86400"));
    }
    Ok(v)
}

fn parse_iterations(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) | Err(_) => Err(format!("{s:?} is not a positive number of iterations")),
        Ok(n) => Ok(n),
    }
}

/// Where the shipped unit (dist/nfsdtopd.service) has nfsdtopd read its
/// configuration.
pub const NFSDTOPD_CONFIG: &str = "/etc/nfsdtop/nfsdtopd.toml";

/// `nfsdtop whatif FILE`'s arguments.
#[derive(Args, Debug, Clone)]
pub struct WhatifArgs {
    /// A recording made by `nfsdtop record`.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Policies to predict, comma-separated (flat, rr-peer, rr-class, sparse-flow).
    #[arg(long, value_delimiter = ',', value_parser = PolicyParser, default_value = "flat,rr-peer,rr-class")]
    pub policy: Vec<Policy>,
    /// Class map file for rr-class and the per-class rows (default: the one recorded).
    #[arg(long, value_name = "FILE")]
    pub class_map: Option<PathBuf>,
    /// nfsd threads of the modelled server (default: the recorded count).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub threads: Option<u32>,
    /// Seed of the simulation's random draws.
    #[arg(long, default_value_t = 1, hide = true)]
    pub seed: u64,
    /// Keep the model as fitted: do not calibrate its think times against
    /// the recording's shares (the fit column then shows the fit's own miss).
    #[arg(long)]
    pub no_calibrate: bool,
    /// Output: a table, or JSON for scripts.
    #[arg(long, value_enum, default_value_t = WhatifFormat::Text)]
    pub format: WhatifFormat,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhatifFormat {
    Text,
    Json,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// `--connect` refuses every local source flag, the agent's group
    /// expanded, so a new source flag needs no line here.
    #[test]
    fn connect_conflicts_with_every_local_source_flag() {
        let mut cmd = Cli::command();
        cmd.build();
        let connect = cmd
            .get_arguments()
            .find(|a| a.get_id() == "connect")
            .unwrap();
        let conflicts: Vec<_> = cmd
            .get_arg_conflicts_with(connect)
            .iter()
            .map(|a| a.get_id().to_string())
            .collect();
        let local = <nfsdtop_agent::session::SourceArgs as clap::Args>::augment_args(
            clap::Command::new("t"),
        );
        for a in local.get_arguments() {
            let id = a.get_id().to_string();
            assert!(conflicts.contains(&id), "--connect allows --{id}");
        }
        for args in [
            &["--ring-size", "64M"][..],
            &["--no-typed-program"],
            &["--class-map", "m"],
            &["--nfs4-ops"],
        ] {
            let line = ["nfsdtop", "--connect", "http://h:9847"].iter().chain(args);
            let e = Cli::try_parse_from(line).unwrap_err();
            assert_eq!(
                e.kind(),
                clap::error::ErrorKind::ArgumentConflict,
                "{args:?}"
            );
        }
    }
}
