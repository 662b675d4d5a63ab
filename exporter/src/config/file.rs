//! nfsdtopd's TOML config file: its schema, where each value stood (for
//! FILE:LINE:COL errors), and how its values land on [`Config`]; the
//! pipeline's settings through the agent's checks
//! (`nfsdtop_agent::session::config`), the same as the flags'.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail};
use nfsdtop_agent::session::config::{check_interval, check_speed, check_wait};
use nfsdtop_agent::session::{SourceChoice, DEFAULT_SCENARIO};
use nfsdtop_agent::source::demo::Policy;
use nfsdtop_agent::source::live::bpf::parse_ring_size;
use nfsdtop_agent::source::live::Tracepoints;
use serde::Deserialize;
use toml::Spanned;

use super::http::FileHttp;
use super::{
    check_bcrypt_cost, check_max_streams, check_top_k, check_unfair_ratio, parse_listen, Config,
    TlsFiles,
};
use crate::auth::PasswordHash;

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
    resolve: Option<bool>,
    raw_tracepoints: Option<bool>,
    keep_raw_tracepoints: Option<bool>,
    enqueue_hooks: Option<bool>,
    typed_program: Option<bool>,
    nfs4_ops: Option<bool>,
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

impl Config {
    pub(super) fn apply_file(&mut self, path: &Path, text: &str) -> anyhow::Result<()> {
        let o = Origin { path, text };
        let f: FileConfig = match toml::from_str(text) {
            Ok(f) => f,
            Err(e) => {
                let at = match e.span() {
                    Some(span) => o.at(span.start),
                    None => path.display().to_string(),
                };
                bail!("{at}: {}", nfsdtop_agent::text::one_line(e.message()));
            }
        };
        if let Some(l) = &f.listen {
            match parse_listen(l.get_ref()) {
                Ok(a) => self.listen = a,
                Err(e) => return o.err(l.span(), e),
            }
        }
        let session = &mut self.session;
        if let Some(x) = f.bpf_stats {
            session.live.kernel_stats = x;
        }
        if let Some(x) = f.resolve {
            session.resolve = x;
        }
        if let Some(x) = f.raw_tracepoints {
            session.live.tracepoints = if x {
                Tracepoints::Raw
            } else {
                Tracepoints::Classic
            };
        }
        if let Some(x) = f.keep_raw_tracepoints {
            session.live.keep_raw = x;
        }
        if let Some(x) = f.enqueue_hooks {
            session.live.enqueue_hooks = x;
        }
        if let Some(x) = f.typed_program {
            session.live.typed_program = x;
        }
        if let Some(x) = f.nfs4_ops {
            session.live.nfs4_ops = x;
        }
        if let Some(x) = f.expose {
            self.expose = x;
        }
        if let Some(c) = &f.class_map {
            session.class_map = Some(o.path(c.get_ref()));
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
            session.interval = check_interval(*i.get_ref()).or_else(|e| o.err(i.span(), e))?;
        }
        if let Some(s) = &f.speed {
            session.speed = check_speed(*s.get_ref()).or_else(|e| o.err(s.span(), e))?;
        }
        if let Some(w) = &f.wait {
            session.live.wait_for_nfsd =
                Some(check_wait(*w.get_ref()).or_else(|e| o.err(w.span(), e))?);
        }
        if let Some(r) = &f.ring_size {
            let parsed = match r.get_ref() {
                RingSize::Bytes(n) => parse_ring_size(&n.to_string()),
                RingSize::Text(t) => parse_ring_size(t),
            };
            session.live.ring_bytes =
                parsed.or_else(|e| o.err(r.span(), format!("ring_size: {e}")))?;
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
            session.source = match s.kind.get_ref().as_str() {
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
                        None => DEFAULT_SCENARIO.into(),
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
            if policy.is_some() && !matches!(session.source, SourceChoice::Demo { .. }) {
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
            super::http::apply(&o, h, &mut self.http)?;
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
}
