//! nfsdtopd's configuration: command-line flags over a TOML file.
//!
//! ```toml
//! listen = "127.0.0.1:9847"   # ADDR:PORT; non-loopback needs expose = true
//! expose = false
//! class_map = "classes.txt"   # relative to this file; reloaded on SIGHUP
//! top_k = 50                  # peers with their own series (rest: peer="other")
//! top_k_classes = 200         # classes with their own series
//! interval = 1.0              # seconds between snapshots
//! speed = 1.0                 # demo/replay clock speed (0 = as fast as possible)
//! wait = 300                  # live: wait this long for nfsd's tracepoints
//! ring_size = "16M"           # live: BPF ring buffer (power of two, 4096..1G)
//! unfair_ratio = 0.5          # nfsdtop_unfair_entities counts entities below this
//! max_streams = 64            # /api/v1/stream clients served at once
//!
//! [source]
//! kind = "demo"               # live | demo | replay
//! scenario = "seed-k16"       # demo: built-in name or scenario .toml
//! policy = "flat"             # demo: flat | rr-peer | rr-class
//! # path = "trace.nfsdrec"    # replay
//!
//! redact = false               # hash client addresses in every output
//! # redact_key = "..."        # >= 16 chars: pseudonyms stable across restarts
//!
//! [tls_server_config]         # as Prometheus exporter-toolkit's web config
//! cert_file = "server.crt"
//! key_file = "server.key"
//!
//! [basic_auth_users]          # bcrypt ($2y$..., cost <= 14) or "sha256:<hex>"
//! prometheus = "$2y$10$..."
//!
//! [http]                      # see config/http.rs
//! max_connections = 512
//! ```
//!
//! Every error names the file, line and column of the offending value.
//!
//! Each long flag is also a key (`--ring-size` is `ring_size`, the
//! `--listen` alias `listen`), read through the same clap definition
//! (`keys`): a setting is declared once, as a flag, here or in the agent's
//! `SourceArgs`. Only what no flag says is the file's own (`file`): the
//! tables and `redact_key`.
//!
//! Here: the flags (the source flags are nfsdtop's, from the agent) with
//! the checks of the daemon's own values as their value parsers, and the
//! resolved [`Config`]. The pipeline's settings (source, class map, speed,
//! interval) are the agent's `SessionConfig`, with its defaults and checks.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail};
use clap::Parser;
use nfsdtop_agent::session::config::check_interval;
use nfsdtop_agent::session::{SessionConfig, SourceArgs};

use crate::auth::PasswordHash;
use http::HttpSettings;

mod file;
pub mod http;
mod keys;
mod origin;

pub(crate) use origin::Origin;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:9847";
pub const DEFAULT_TOP_K: usize = 50;
pub const DEFAULT_TOP_K_CLASSES: usize = 200;
pub const MAX_TOP_K: usize = 10_000;
/// Checking a bcrypt password costs 2^cost rounds (cost 14: about a
/// second); at cost 31 start-up, and every login, would take days.
pub const MAX_BCRYPT_COST: u32 = 14;

#[derive(Parser, Debug, Default)]
#[command(
    name = "nfsdtopd",
    version,
    about = "nfsdtop's daemon: serves /metrics (Prometheus), /api/v1/snapshot, /api/v1/stream and /healthz",
    long_about = "nfsdtopd runs nfsdtop's pipeline (source → classifier → aggregator) headless and \
serves its snapshots over HTTP: /metrics (OpenMetrics or Prometheus text), /api/v1/snapshot \
(JSON), /api/v1/stream (server-sent events for remote TUIs) and /healthz.\n\n\
Without a source flag it watches this host's nfsd and fails when there is none: it never \
silently serves the demo. SIGHUP reloads the class map without losing counts.",
    mut_arg("class_map", |a| a.help("Class map file: lines of \"PREFIX CLASS [per-peer]\" (reloaded on SIGHUP)."))
)]
pub struct Cli {
    /// Print a shell completion script for SHELL and exit.
    #[arg(long, value_name = "SHELL", hide = true)]
    pub completions: Option<clap_complete::Shell>,
    /// Write the nfsdtopd(8) man page into DIR and exit.
    #[arg(long, value_name = "DIR", hide = true)]
    pub manpage: Option<PathBuf>,
    /// TOML configuration file (flags override it).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub source: SourceArgs,
    /// Address to serve on, as Prometheus exporters take it (:PORT is every IPv4 interface) [default: 127.0.0.1:9847].
    #[arg(
        long = "web.listen-address",
        visible_alias = "listen",
        value_name = "ADDR:PORT",
        value_parser = parse_listen
    )]
    pub listen: Option<SocketAddr>,
    /// Prometheus exporter-toolkit's web configuration file (YAML): TLS, mutual TLS, basic_auth_users, response headers. Read again when it changes; a bad change is logged and the last good one kept. Not with TLS or users in --config, nor --tls-cert.
    #[arg(long = "web.config.file", value_name = "FILE", conflicts_with_all = ["tls_cert", "tls_key"])]
    pub web_config_file: Option<PathBuf>,
    /// Allow a non-loopback --web.listen-address (serve other hosts).
    #[arg(long)]
    pub expose: bool,
    /// Peers with their own series in /metrics; the rest are summed into peer="other" [default: 50].
    #[arg(long, value_name = "K", value_parser = parse_top_k)]
    pub top_k: Option<usize>,
    /// Classes with their own series in /metrics; the rest are summed into class="other" [default: 200].
    #[arg(long, value_name = "K", value_parser = parse_top_k)]
    pub top_k_classes: Option<usize>,
    /// Count a peer or class in nfsdtop_unfair_entities (and list it on /api/v1/unfair) when it gets less than RATIO of its fair share while backlogged [default: 0.5, as the NfsdtopUnfairShare alert].
    #[arg(long, value_name = "RATIO", value_parser = parse_unfair_ratio)]
    pub unfair_ratio: Option<f64>,
    /// Clients of /api/v1/stream served at once; one more gets a 503 [default: 64].
    #[arg(long, value_name = "N", value_parser = parse_max_streams)]
    pub max_streams: Option<usize>,
    /// Seconds between snapshots [default: 1].
    #[arg(long, value_name = "SECS", value_parser = parse_interval)]
    pub interval: Option<Duration>,
    /// Hash client addresses in every output (pseudonyms change per run
    /// unless redact_key is set in the config file).
    #[arg(long)]
    pub redact: bool,
    /// TLS certificate chain (PEM); needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM); needs --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub listen: SocketAddr,
    pub expose: bool,
    pub top_k: usize,
    pub top_k_classes: usize,
    pub max_streams: usize,
    /// The source, class map, speed and interval: the pipeline's settings,
    /// as nfsdtop's.
    pub session: SessionConfig,
    /// The fairness ratio under which an entity counts as unfairly served.
    pub unfair_ratio: f64,
    pub tls: Option<TlsFiles>,
    pub users: BTreeMap<String, PasswordHash>,
    /// `--web.config.file`: TLS, users and headers from there instead.
    pub web_config: Option<PathBuf>,
    /// Redact client addresses: None = no; Some(None) = random key;
    /// Some(Some(key)) = pseudonyms stable across restarts.
    pub redact: Option<Option<String>>,
    /// The `[http]` table.
    pub http: HttpSettings,
    /// What the config file should say otherwise (an old key's name), for
    /// the log at start.
    pub warnings: Vec<String>,
}

pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Some(Ok(p)) = s.strip_prefix(':').map(str::parse::<u16>) {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), p));
    }
    if let Some(port) = s.strip_prefix("localhost:") {
        if let Ok(p) = port.parse::<u16>() {
            return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), p));
        }
    }
    Err(format!(
        "invalid listen address {s:?}: expected ADDR:PORT such as 127.0.0.1:9847, [::1]:9847 or :9847"
    ))
}

/// A count from 1 to `max` (the flags' and the file's: one parser).
fn parse_count(s: &str, max: usize) -> Result<usize, String> {
    let n: i64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number"))?;
    if n < 1 || n as u64 > max as u64 {
        return Err(format!("must be between 1 and {max}, not {n}"));
    }
    Ok(n as usize)
}

fn parse_top_k(s: &str) -> Result<usize, String> {
    parse_count(s, MAX_TOP_K)
}

fn parse_max_streams(s: &str) -> Result<usize, String> {
    parse_count(s, crate::stream::MAX_MAX_STREAMS)
}

fn parse_number(s: &str) -> Result<f64, String> {
    s.parse().map_err(|_| format!("{s:?} is not a number"))
}

fn parse_interval(s: &str) -> Result<Duration, String> {
    check_interval(parse_number(s)?)
}

fn parse_unfair_ratio(s: &str) -> Result<f64, String> {
    check_unfair_ratio(parse_number(s)?)
}

/// Refuse a bcrypt hash too costly to check (a malformed one is left to
/// [`PasswordHash::parse`] to explain).
pub(crate) fn check_bcrypt_cost(hash: &str, user: &str) -> Result<(), String> {
    let Some(rest) = ["$2a$", "$2b$", "$2x$", "$2y$"]
        .iter()
        .find_map(|p| hash.strip_prefix(p))
    else {
        return Ok(());
    };
    match rest.get(..2).and_then(|c| c.parse::<u32>().ok()) {
        Some(cost) if cost > MAX_BCRYPT_COST => Err(format!(
            "user {user:?}: bcrypt cost {cost} is above the maximum, {MAX_BCRYPT_COST} (checking a \
password takes 2^cost rounds: start-up and every login would hang); make a new hash with a \
lower cost, e.g. `htpasswd -nBC 12 {user}`"
        )),
        _ => Ok(()),
    }
}

fn check_unfair_ratio(r: f64) -> Result<f64, String> {
    if !(r.is_finite() && r > 0.0 && r <= 1.0) {
        return Err(format!(
            "unfair_ratio must be above 0 and at most 1 (a fraction of the fair share), not {r}"
        ));
    }
    Ok(r)
}

impl Config {
    /// The flags, over the config file when one is given.
    pub fn resolve(cli: &Cli) -> anyhow::Result<Config> {
        let mut cfg = Config {
            listen: parse_listen(DEFAULT_LISTEN).map_err(|e| anyhow!(e))?,
            expose: false,
            top_k: DEFAULT_TOP_K,
            top_k_classes: DEFAULT_TOP_K_CLASSES,
            max_streams: crate::stream::DEFAULT_MAX_STREAMS,
            session: SessionConfig::default(),
            unfair_ratio: crate::metrics::DEFAULT_UNFAIR_BELOW,
            tls: None,
            users: BTreeMap::new(),
            web_config: None,
            redact: None,
            http: HttpSettings::default(),
            warnings: Vec::new(),
        };
        if let Some(path) = &cli.config {
            let text = nfsdtop_agent::input::read_text(
                path,
                "config file",
                "--config",
                nfsdtop_agent::input::MAX_TEXT_FILE,
            )?;
            cfg.apply_file(path, &text)?;
        }
        cfg.apply_cli(cli)?;
        cfg.check_listen()?;
        Ok(cfg)
    }

    /// Parse a config file's text (exposed for tests).
    pub fn from_file_text(path: &Path, text: &str) -> anyhow::Result<Config> {
        let mut cfg = Config::resolve(&Cli::default())?;
        cfg.apply_file(path, text)?;
        cfg.check_listen()?;
        Ok(cfg)
    }

    fn apply_cli(&mut self, cli: &Cli) -> anyhow::Result<()> {
        if let Some(l) = cli.listen {
            self.listen = l;
        }
        if cli.expose {
            self.expose = true;
        }
        if cli.redact && self.redact.is_none() {
            self.redact = Some(None);
        }
        if let Some(k) = cli.top_k {
            self.top_k = k;
        }
        if let Some(k) = cli.top_k_classes {
            self.top_k_classes = k;
        }
        if let Some(n) = cli.max_streams {
            self.max_streams = n;
        }
        if let Some(i) = cli.interval {
            self.session.interval = i;
        }
        if let Some(r) = cli.unfair_ratio {
            self.unfair_ratio = r;
        }
        cli.source.apply(&mut self.session)?;
        if let Some(web) = &cli.web_config_file {
            if self.tls.is_some() || !self.users.is_empty() {
                bail!(
                    "--web.config.file {} and [tls_server_config] or [basic_auth_users] in --config: \
TLS and users are set in one place; move them into the web config file (or drop --web.config.file)",
                    web.display()
                );
            }
            self.web_config = Some(web.clone());
        }
        if let (Some(cert), Some(key)) = (&cli.tls_cert, &cli.tls_key) {
            self.tls = Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            });
        }
        Ok(())
    }

    fn check_listen(&self) -> anyhow::Result<()> {
        if !self.listen.ip().is_loopback() && !self.expose {
            bail!(
                "refusing to listen on {}: it is not a loopback address and would serve other hosts; \
pass --expose (or expose = true in the config file) to allow it",
                self.listen
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
