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
//! [http]                      # see http_config.rs
//! max_connections = 512
//! ```
//!
//! Every error names the file, line and column of the offending value.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail};
use clap::Parser;
use nfsdtop_agent::source::demo::Policy;
use nfsdtop_agent::source::live::Tracepoints;
use serde::Deserialize;
use toml::Spanned;

use crate::auth::PasswordHash;
use crate::http_config::{FileHttp, HttpSettings};

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
    about = "nfsdtop's agent daemon: serves /metrics (Prometheus), /api/v1/snapshot, /api/v1/stream and /healthz",
    long_about = "nfsdtopd runs nfsdtop's pipeline (source → classifier → aggregator) headless and \
serves its snapshots over HTTP: /metrics (OpenMetrics or Prometheus text), /api/v1/snapshot \
(JSON), /api/v1/stream (server-sent events for remote TUIs) and /healthz.\n\n\
Without a source flag it watches this host's nfsd and fails when there is none: it never \
silently serves the demo. SIGHUP reloads the class map without losing counts."
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
    /// Live source: wait up to SECS for nfsd's tracepoints to appear (nfsd started later).
    #[arg(long, value_name = "SECS")]
    pub wait: Option<f64>,
    /// Live source: tracefs mount point [default: /sys/kernel/tracing].
    #[arg(long, value_name = "DIR")]
    pub tracefs: Option<PathBuf>,
    /// Live source: have the kernel time nfsdtop's BPF programs (kernel.bpf_stats_enabled while running) and export their run time; costs two clock reads per tracepoint hit.
    #[arg(long)]
    pub bpf_stats: bool,
    /// Live source: size of the BPF ring buffer, e.g. 64M (a power of two from 4096 bytes to 1G) [default: 16M]. Enlarge it when events are lost (nfsdtop_events_lost_total grows).
    #[arg(long, value_name = "BYTES", value_parser = parse_ring_size)]
    pub ring_size: Option<u32>,
    /// Live source: raw tracepoints where the kernel's BTF allows (the default; kept for scripts that pass it).
    #[arg(long, hide = true, conflicts_with = "classic_tracepoints")]
    pub raw_tracepoints: bool,
    /// Live source: watch every event through its classic tracepoint instead of the default raw tracepoints (which read nfsd's fields at offsets from the kernel's BTF and send a transport's addresses once).
    #[arg(long)]
    pub classic_tracepoints: bool,
    /// Address to serve on [default: 127.0.0.1:9847].
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<String>,
    /// Allow a non-loopback --listen address (serve other hosts).
    #[arg(long)]
    pub expose: bool,
    /// Serve the built-in simulated server (seed-k4|seed-k8|seed-k16|seed-k32|movers|burst, or a scenario .toml).
    #[arg(long, value_name = "SCENARIO", num_args = 0..=1, default_missing_value = "movers", conflicts_with = "replay")]
    pub demo: Option<String>,
    /// Dispatch policy of the demo server: flat|rr-peer|rr-class.
    #[arg(long, value_name = "P", value_parser = parse_policy)]
    pub policy: Option<Policy>,
    /// Replay a recording made by `nfsdtop record`.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
    /// Class map file: lines of "PREFIX CLASS [per-peer]" (reloaded on SIGHUP).
    #[arg(long, value_name = "FILE")]
    pub class_map: Option<PathBuf>,
    /// Peers with their own series in /metrics; the rest are summed into peer="other" [default: 50].
    #[arg(long, value_name = "K")]
    pub top_k: Option<usize>,
    /// Classes with their own series in /metrics; the rest are summed into class="other" [default: 200].
    #[arg(long, value_name = "K")]
    pub top_k_classes: Option<usize>,
    /// Count a peer or class in nfsdtop_unfair_entities (and list it on /api/v1/unfair) when it gets less than RATIO of its fair share while backlogged [default: 0.5, as the NfsdtopUnfairShare alert].
    #[arg(long, value_name = "RATIO")]
    pub unfair_ratio: Option<f64>,
    /// Clients of /api/v1/stream served at once; one more gets a 503 [default: 64].
    #[arg(long, value_name = "N")]
    pub max_streams: Option<usize>,
    /// Seconds between snapshots [default: 1].
    #[arg(long, value_name = "SECS")]
    pub interval: Option<f64>,
    /// Run a demo or replay this many times faster than real time (0 = as fast as possible) [default: 1].
    #[arg(long, value_name = "X")]
    pub speed: Option<f64>,
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

fn parse_policy(s: &str) -> Result<Policy, String> {
    s.parse()
}

fn parse_ring_size(s: &str) -> Result<u32, String> {
    nfsdtop_agent::source::live::bpf::parse_ring_size(s)
}

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
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub listen: SocketAddr,
    pub expose: bool,
    pub class_map: Option<PathBuf>,
    pub top_k: usize,
    pub top_k_classes: usize,
    pub max_streams: usize,
    pub interval: Duration,
    pub speed: f64,
    /// Live source: how long to wait for nfsd's tracepoints.
    pub wait: Option<Duration>,
    pub tracefs: Option<PathBuf>,
    /// Live source: kernel BPF run-time statistics on while attached.
    pub bpf_stats: bool,
    /// Live source: which events go on raw tracepoints.
    pub tracepoints: Tracepoints,
    /// Live source: the BPF ring buffer's size in bytes.
    pub ring_bytes: u32,
    /// The fairness ratio under which an entity counts as unfairly served.
    pub unfair_ratio: f64,
    pub source: SourceChoice,
    pub tls: Option<TlsFiles>,
    pub users: BTreeMap<String, PasswordHash>,
    /// Redact client addresses: None = no; Some(None) = random key;
    /// Some(Some(key)) = pseudonyms stable across restarts.
    pub redact: Option<Option<String>>,
    /// The `[http]` table.
    pub http: HttpSettings,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<Spanned<String>>,
    expose: Option<bool>,
    class_map: Option<Spanned<PathBuf>>,
    top_k: Option<Spanned<i64>>,
    top_k_classes: Option<Spanned<i64>>,
    max_streams: Option<Spanned<i64>>,
    interval: Option<Spanned<f64>>,
    speed: Option<Spanned<f64>>,
    wait: Option<Spanned<f64>>,
    ring_size: Option<Spanned<RingSize>>,
    unfair_ratio: Option<Spanned<f64>>,
    source: Option<Spanned<FileSource>>,
    tls_server_config: Option<Spanned<FileTls>>,
    basic_auth_users: Option<BTreeMap<String, Spanned<String>>>,
    redact: Option<bool>,
    redact_key: Option<Spanned<String>>,
    bpf_stats: Option<bool>,
    raw_tracepoints: Option<bool>,
    http: Option<FileHttp>,
}

/// `ring_size = 16777216` or `ring_size = "16M"`.
#[derive(Deserialize, Debug)]
#[serde(untagged)]
enum RingSize {
    Bytes(i64),
    Text(String),
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct FileSource {
    kind: Spanned<String>,
    scenario: Option<Spanned<String>>,
    policy: Option<Spanned<String>>,
    path: Option<Spanned<PathBuf>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct FileTls {
    cert_file: Spanned<PathBuf>,
    key_file: Spanned<PathBuf>,
}

/// Where in the config file a value was (for error messages).
pub(crate) struct Origin<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Origin<'_> {
    fn at(&self, offset: usize) -> String {
        let offset = offset.min(self.text.len());
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let col = before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
        format!("{}:{line}:{col}", self.path.display())
    }

    pub(crate) fn err<T>(
        &self,
        span: std::ops::Range<usize>,
        reason: impl std::fmt::Display,
    ) -> anyhow::Result<T> {
        Err(anyhow!("{}: {reason}", self.at(span.start)))
    }

    /// Paths in the file are relative to the file's directory.
    fn path(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.path.parent().unwrap_or(Path::new(".")).join(p)
        }
    }
}

pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Some(port) = s.strip_prefix("localhost:") {
        if let Ok(p) = port.parse::<u16>() {
            return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), p));
        }
    }
    Err(format!(
        "invalid listen address {s:?}: expected ADDR:PORT such as 127.0.0.1:9847 or [::1]:9847"
    ))
}

fn check_top_k(k: i64, what: &str) -> Result<usize, String> {
    if k < 1 || k as u64 > MAX_TOP_K as u64 {
        return Err(format!("{what} must be between 1 and {MAX_TOP_K}, not {k}"));
    }
    Ok(k as usize)
}

fn check_max_streams(n: i64, what: &str) -> Result<usize, String> {
    let max = crate::stream::MAX_MAX_STREAMS;
    if n < 1 || n as u64 > max as u64 {
        return Err(format!("{what} must be between 1 and {max}, not {n}"));
    }
    Ok(n as usize)
}

/// Refuse a bcrypt hash too costly to check (a malformed one is left to
/// [`PasswordHash::parse`] to explain).
fn check_bcrypt_cost(hash: &str, user: &str) -> Result<(), String> {
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

fn check_interval(s: f64) -> Result<Duration, String> {
    if !(0.05..=3600.0).contains(&s) || !s.is_finite() {
        return Err(format!(
            "interval must be between 0.05 and 3600 seconds, not {s}"
        ));
    }
    Ok(Duration::from_secs_f64(s))
}

fn check_speed(s: f64) -> Result<f64, String> {
    if !s.is_finite() || !(0.0..=1_000_000.0).contains(&s) {
        return Err(format!(
            "speed must be between 0 (as fast as possible) and 1000000, not {s}"
        ));
    }
    Ok(s)
}

fn check_unfair_ratio(r: f64) -> Result<f64, String> {
    if !(r.is_finite() && r > 0.0 && r <= 1.0) {
        return Err(format!(
            "unfair_ratio must be above 0 and at most 1 (a fraction of the fair share), not {r}"
        ));
    }
    Ok(r)
}

fn check_wait(s: f64) -> Result<Duration, String> {
    if !s.is_finite() || !(0.0..=31_536_000.0).contains(&s) {
        return Err(format!(
            "wait must be between 0 and 31536000 seconds, not {s}"
        ));
    }
    Ok(Duration::from_secs_f64(s))
}

impl Config {
    /// The flags, over the config file when one is given.
    pub fn resolve(cli: &Cli) -> anyhow::Result<Config> {
        let mut cfg = Config {
            listen: parse_listen(DEFAULT_LISTEN).map_err(|e| anyhow!(e))?,
            expose: false,
            class_map: None,
            top_k: DEFAULT_TOP_K,
            top_k_classes: DEFAULT_TOP_K_CLASSES,
            max_streams: crate::stream::DEFAULT_MAX_STREAMS,
            interval: Duration::from_secs(1),
            speed: 1.0,
            wait: None,
            tracefs: None,
            bpf_stats: false,
            tracepoints: Tracepoints::Raw,
            ring_bytes: nfsdtop_agent::source::live::bpf::DEFAULT_RING_BYTES,
            unfair_ratio: crate::metrics::DEFAULT_UNFAIR_BELOW,
            source: SourceChoice::Live,
            tls: None,
            users: BTreeMap::new(),
            redact: None,
            http: HttpSettings::default(),
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

    fn apply_file(&mut self, path: &Path, text: &str) -> anyhow::Result<()> {
        let o = Origin { path, text };
        let f: FileConfig = match toml::from_str(text) {
            Ok(f) => f,
            Err(e) => {
                let at = match e.span() {
                    Some(span) => o.at(span.start),
                    None => path.display().to_string(),
                };
                bail!("{at}: {}", e.message().trim_end());
            }
        };
        if let Some(l) = &f.listen {
            match parse_listen(l.get_ref()) {
                Ok(a) => self.listen = a,
                Err(e) => return o.err(l.span(), e),
            }
        }
        if let Some(x) = f.bpf_stats {
            self.bpf_stats = x;
        }
        if let Some(x) = f.raw_tracepoints {
            self.tracepoints = if x {
                Tracepoints::Raw
            } else {
                Tracepoints::Classic
            };
        }
        if let Some(x) = f.expose {
            self.expose = x;
        }
        if let Some(c) = &f.class_map {
            self.class_map = Some(o.path(c.get_ref()));
        }
        if let Some(k) = &f.top_k {
            self.top_k = check_top_k(*k.get_ref(), "top_k").or_else(|e| o.err(k.span(), e))?;
        }
        if let Some(k) = &f.top_k_classes {
            self.top_k_classes =
                check_top_k(*k.get_ref(), "top_k_classes").or_else(|e| o.err(k.span(), e))?;
        }
        if let Some(n) = &f.max_streams {
            self.max_streams =
                check_max_streams(*n.get_ref(), "max_streams").or_else(|e| o.err(n.span(), e))?;
        }
        if let Some(i) = &f.interval {
            self.interval = check_interval(*i.get_ref()).or_else(|e| o.err(i.span(), e))?;
        }
        if let Some(s) = &f.speed {
            self.speed = check_speed(*s.get_ref()).or_else(|e| o.err(s.span(), e))?;
        }
        if let Some(w) = &f.wait {
            self.wait = Some(check_wait(*w.get_ref()).or_else(|e| o.err(w.span(), e))?);
        }
        if let Some(r) = &f.ring_size {
            let parsed = match r.get_ref() {
                RingSize::Bytes(n) => parse_ring_size(&n.to_string()),
                RingSize::Text(t) => parse_ring_size(t),
            };
            self.ring_bytes = parsed.or_else(|e| o.err(r.span(), format!("ring_size: {e}")))?;
        }
        if let Some(r) = &f.unfair_ratio {
            self.unfair_ratio = check_unfair_ratio(*r.get_ref()).or_else(|e| o.err(r.span(), e))?;
        }
        if let Some(src) = &f.source {
            let s = src.get_ref();
            let policy = match &s.policy {
                Some(p) => Some(
                    p.get_ref()
                        .parse::<Policy>()
                        .or_else(|e| o.err(p.span(), e))?,
                ),
                None => None,
            };
            self.source = match s.kind.get_ref().as_str() {
                "live" => SourceChoice::Live,
                "demo" => SourceChoice::Demo {
                    scenario: match &s.scenario {
                        Some(sc) => {
                            let v = sc.get_ref();
                            if v.ends_with(".toml") {
                                o.path(Path::new(v)).display().to_string()
                            } else {
                                v.clone()
                            }
                        }
                        None => "movers".into(),
                    },
                    policy,
                },
                "replay" => match &s.path {
                    Some(p) => SourceChoice::Replay(o.path(p.get_ref())),
                    None => {
                        return o.err(src.span(), "source kind \"replay\" needs path = \"FILE\"")
                    }
                },
                other => {
                    return o.err(
                        s.kind.span(),
                        format!("unknown source kind {other:?}: expected live, demo or replay"),
                    )
                }
            };
            if policy.is_some() && !matches!(self.source, SourceChoice::Demo { .. }) {
                return o.err(
                    s.policy.as_ref().map(|p| p.span()).unwrap_or(src.span()),
                    "policy applies to kind = \"demo\" only",
                );
            }
        }
        if let Some(t) = &f.tls_server_config {
            let t = t.get_ref();
            self.tls = Some(TlsFiles {
                cert: o.path(t.cert_file.get_ref()),
                key: o.path(t.key_file.get_ref()),
            });
        }
        if let Some(k) = &f.redact_key {
            if k.get_ref().len() < 16 {
                return o.err(k.span(), "redact_key must be at least 16 characters");
            }
        }
        match (f.redact, &f.redact_key) {
            (Some(false), _) => self.redact = None,
            (_, Some(k)) => self.redact = Some(Some(k.get_ref().clone())),
            (Some(true), None) => self.redact = Some(None),
            (None, None) => {}
        }
        if let Some(h) = &f.http {
            crate::http_config::apply(&o, h, &mut self.http)?;
        }
        if let Some(users) = &f.basic_auth_users {
            for (user, hash) in users {
                if user.is_empty() || user.contains(':') {
                    return o.err(
                        hash.span(),
                        format!("invalid user name {user:?} (empty or contains ':')"),
                    );
                }
                check_bcrypt_cost(hash.get_ref(), user).or_else(|e| o.err(hash.span(), e))?;
                let h = PasswordHash::parse(hash.get_ref())
                    .or_else(|e| o.err(hash.span(), format!("user {user:?}: {e}")))?;
                self.users.insert(user.clone(), h);
            }
        }
        Ok(())
    }

    fn apply_cli(&mut self, cli: &Cli) -> anyhow::Result<()> {
        if let Some(l) = &cli.listen {
            self.listen = parse_listen(l).map_err(|e| anyhow!("--listen: {e}"))?;
        }
        if cli.expose {
            self.expose = true;
        }
        if cli.redact && self.redact.is_none() {
            self.redact = Some(None);
        }
        if let Some(c) = &cli.class_map {
            self.class_map = Some(c.clone());
        }
        if let Some(k) = cli.top_k {
            self.top_k =
                check_top_k(k.min(i64::MAX as usize) as i64, "--top-k").map_err(|e| anyhow!(e))?;
        }
        if let Some(k) = cli.top_k_classes {
            self.top_k_classes = check_top_k(k.min(i64::MAX as usize) as i64, "--top-k-classes")
                .map_err(|e| anyhow!(e))?;
        }
        if let Some(n) = cli.max_streams {
            self.max_streams = check_max_streams(n.min(i64::MAX as usize) as i64, "--max-streams")
                .map_err(|e| anyhow!(e))?;
        }
        if let Some(i) = cli.interval {
            self.interval = check_interval(i).map_err(|e| anyhow!("--interval: {e}"))?;
        }
        if let Some(s) = cli.speed {
            self.speed = check_speed(s).map_err(|e| anyhow!("--speed: {e}"))?;
        }
        if let Some(w) = cli.wait {
            self.wait = Some(check_wait(w).map_err(|e| anyhow!("--wait: {e}"))?);
        }
        if let Some(r) = cli.ring_size {
            self.ring_bytes = r;
        }
        if let Some(r) = cli.unfair_ratio {
            self.unfair_ratio =
                check_unfair_ratio(r).map_err(|e| anyhow!("--unfair-ratio: {e}"))?;
        }
        if let Some(t) = &cli.tracefs {
            self.tracefs = Some(t.clone());
        }
        if cli.bpf_stats {
            self.bpf_stats = true;
        }
        if cli.raw_tracepoints {
            self.tracepoints = Tracepoints::Raw;
        }
        if cli.classic_tracepoints {
            self.tracepoints = Tracepoints::Classic;
        }
        if let Some(d) = &cli.demo {
            self.source = SourceChoice::Demo {
                scenario: d.clone(),
                policy: cli.policy,
            };
        } else if let Some(r) = &cli.replay {
            self.source = SourceChoice::Replay(r.clone());
        } else if let Some(p) = cli.policy {
            match &mut self.source {
                SourceChoice::Demo { policy, .. } => *policy = Some(p),
                _ => bail!("--policy applies to the demo server only: add --demo [SCENARIO]"),
            }
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
