//! `--web.config.file`: the web configuration file of Prometheus'
//! exporter-toolkit (YAML), so the file an operator keeps for every other
//! exporter serves nfsdtopd too. Here: the file's schema, where each value
//! stood (FILE:LINE:COL in every error), and what it resolves to, a
//! [`WebConfig`]; the TLS side is built in [`tls`], the re-reading on new
//! connections in [`watch`].
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt          # or cert: inline PEM; relative to this file
//!   key_file: server.key           # or key: inline PEM
//!   client_auth_type: RequireAndVerifyClientCert
//!   client_ca_file: clients-ca.crt # or client_ca: inline PEM
//!   min_version: TLS12             # TLS12 | TLS13
//!   max_version: TLS13
//!   cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]   # TLS 1.2's
//!   prefer_server_cipher_suites: true
//!   curve_preferences: [X25519, CurveP256]
//! http_server_config:
//!   http2: false
//!   headers: {X-Frame-Options: deny}
//! basic_auth_users:
//!   prometheus: $2y$10$...
//! ```
//!
//! Every key of upstream's documentation is known; one nfsdtopd cannot
//! honour (HTTP/2, `client_allowed_sans`, `rate_limit`, TLS 1.0/1.1, the
//! ciphers and curves rustls lacks) is refused with its place and why,
//! never ignored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::anyhow;
use axum::http::{HeaderName, HeaderValue};
use serde::Deserialize;
use serde_saphyr::Spanned;
use tokio_rustls::rustls::ServerConfig;

use crate::auth::PasswordHash;

pub mod tls;
pub mod watch;

/// The most a web config file may hold (upstream's are a few lines).
pub const MAX_WEB_CONFIG: u64 = 1 << 20;

/// What a web config file says, checked and ready to serve with.
#[derive(Debug)]
pub struct WebConfig {
    /// None: plain HTTP.
    pub tls: Option<Arc<ServerConfig>>,
    pub users: BTreeMap<String, PasswordHash>,
    /// `http_server_config.headers`, added to every response.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// The files it names (re-read when they change, as the file itself).
    pub files: Vec<PathBuf>,
}

impl WebConfig {
    /// Plain HTTP, nobody to log in, no headers.
    pub fn plain() -> WebConfig {
        WebConfig {
            tls: None,
            users: BTreeMap::new(),
            headers: Vec::new(),
            files: Vec::new(),
        }
    }
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct FileWeb {
    tls_server_config: Option<Spanned<FileTls>>,
    http_server_config: Option<FileHttp>,
    basic_auth_users: Option<BTreeMap<String, Spanned<String>>>,
    rate_limit: Option<Spanned<serde::de::IgnoredAny>>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileTls {
    pub cert: Option<Spanned<String>>,
    pub key: Option<Spanned<String>>,
    pub client_ca: Option<Spanned<String>>,
    pub cert_file: Option<Spanned<PathBuf>>,
    pub key_file: Option<Spanned<PathBuf>>,
    pub client_auth_type: Option<Spanned<String>>,
    pub client_ca_file: Option<Spanned<PathBuf>>,
    pub client_allowed_sans: Option<Spanned<serde::de::IgnoredAny>>,
    pub min_version: Option<Spanned<String>>,
    pub max_version: Option<Spanned<String>>,
    pub cipher_suites: Option<Vec<Spanned<String>>>,
    pub prefer_server_cipher_suites: Option<Spanned<bool>>,
    pub curve_preferences: Option<Vec<Spanned<String>>>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct FileHttp {
    http2: Option<Spanned<bool>>,
    headers: Option<BTreeMap<String, Spanned<String>>>,
}

/// The headers `http_server_config.headers` may set, and the values each
/// accepts (none listed: any), as exporter-toolkit has them.
const HEADERS: [(&str, &[&str]); 5] = [
    ("Strict-Transport-Security", &[]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-XSS-Protection", &[]),
    ("Content-Security-Policy", &[]),
];

/// Where in the file a value stood: errors start with FILE:LINE:COL.
pub(crate) struct Place<'a> {
    pub path: &'a Path,
}

impl Place<'_> {
    pub fn at(&self, loc: serde_saphyr::Location) -> String {
        if loc.line() == 0 {
            return self.path.display().to_string();
        }
        format!("{}:{}:{}", self.path.display(), loc.line(), loc.column())
    }

    pub fn err<T>(
        &self,
        loc: serde_saphyr::Location,
        why: impl std::fmt::Display,
    ) -> anyhow::Result<T> {
        Err(anyhow!("{}: {why}", self.at(loc)))
    }

    /// Paths in the file are relative to its directory (as upstream's).
    pub fn file(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.path.parent().unwrap_or(Path::new(".")).join(p)
        }
    }
}

/// Where connections get TLS and users from: `--web.config.file`, else
/// the TOML config and flags (whose users `auth` already has).
pub fn source(
    cfg: &crate::config::Config,
    auth: Arc<crate::auth::Auth>,
) -> anyhow::Result<watch::WebSource> {
    if let Some(path) = &cfg.web_config {
        return watch::WebSource::watch(path.clone(), auth);
    }
    let mut web = WebConfig::plain();
    if let Some(t) = &cfg.tls {
        web.tls = Some(crate::tls::server_config(&t.cert, &t.key)?);
    }
    web.users = cfg.users.clone();
    Ok(watch::WebSource::fixed(web, auth))
}

/// What is worth a warning at start-up: the config file's (an old key),
/// serving other hosts without users, or with users over plain HTTP
/// (base64 is no protection).
pub fn start_warnings(cfg: &crate::config::Config, web: &WebConfig) -> Vec<String> {
    let mut out = cfg.warnings.clone();
    if cfg.expose && web.users.is_empty() {
        out.push(format!(
            "warning: serving {} to other hosts without basic_auth_users",
            cfg.listen
        ));
    }
    if !cfg.listen.ip().is_loopback() && !web.users.is_empty() && web.tls.is_none() {
        out.push(format!(
            "warning: basic_auth_users without TLS on {}: passwords cross the network in clear; \
add tls_server_config (or --tls-cert and --tls-key)",
            cfg.listen
        ));
    }
    out
}

/// Read and check the web config file at `path`.
pub fn load(path: &Path) -> anyhow::Result<WebConfig> {
    let text = nfsdtop_agent::input::read_text(
        path,
        "web config file",
        "--web.config.file",
        MAX_WEB_CONFIG,
    )?;
    parse(path, &text)
}

/// Check a web config file's text (`path` for messages and relative files).
pub fn parse(path: &Path, text: &str) -> anyhow::Result<WebConfig> {
    let place = Place { path };
    let f: FileWeb = if text.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#') || l == "---"
    }) {
        FileWeb::default()
    } else {
        serde_saphyr::from_str(text).map_err(|e| {
            let at = e.location().map_or(path.display().to_string(), |l| place.at(l));
            let msg = e.without_snippet().to_string();
            let first = msg.lines().next().unwrap_or("not valid YAML");
            // The place is said first, once.
            let first = first.rfind(" at line ").map_or(first, |i| &first[..i]);
            anyhow!(
                "{at}: {first}; the file is exporter-toolkit's web configuration \
                 (https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md)"
            )
        })?
    };
    if let Some(r) = &f.rate_limit {
        return place.err(
            r.referenced,
            "rate_limit is not supported by nfsdtopd: remove it (nfsdtopd caps connections and \
             failed logins itself, in the [http] table of --config)",
        );
    }
    let mut web = WebConfig::plain();
    if let Some(h) = &f.http_server_config {
        if let Some(v) = &h.http2 {
            if v.value {
                return place.err(
                    v.referenced,
                    "http2: true cannot be honoured: nfsdtopd serves HTTP/1.1 only; remove the \
                     key or set it to false",
                );
            }
        }
        for (name, value) in h.headers.iter().flatten() {
            web.headers.extend(header(&place, name, value)?);
        }
    }
    for (user, hash) in f.basic_auth_users.iter().flatten() {
        web.users
            .insert(user.clone(), password(&place, user, hash)?);
    }
    if let Some(t) = &f.tls_server_config {
        let (cfg, files) = tls::server_config(&place, &t.value, t.referenced)?;
        web.tls = cfg;
        web.files = files;
    }
    Ok(web)
}

fn header(
    place: &Place,
    name: &str,
    value: &Spanned<String>,
) -> anyhow::Result<Option<(HeaderName, HeaderValue)>> {
    let Some((_, allowed)) = HEADERS.iter().find(|(n, _)| *n == name) else {
        let names: Vec<&str> = HEADERS.iter().map(|(n, _)| *n).collect();
        return place.err(
            value.referenced,
            format!(
                "HTTP header {name:?} can not be configured: only {}",
                names.join(", ")
            ),
        );
    };
    let v = value.value.as_str();
    if v.is_empty() {
        // Upstream: "Unset if blank".
        return Ok(None);
    }
    if !allowed.is_empty() && !allowed.contains(&v) {
        return place.err(
            value.referenced,
            format!("invalid value {v:?} for {name}: expected one of {allowed:?}"),
        );
    }
    let value = HeaderValue::from_str(v).or_else(|e| {
        place.err(
            value.referenced,
            format!("{name}: not a valid header value: {e}"),
        )
    })?;
    Ok(Some((HeaderName::from_static(static_name(name)), value)))
}

/// The lower-case name axum wants, for one of [`HEADERS`].
fn static_name(name: &str) -> &'static str {
    match name {
        "Strict-Transport-Security" => "strict-transport-security",
        "X-Content-Type-Options" => "x-content-type-options",
        "X-Frame-Options" => "x-frame-options",
        "X-XSS-Protection" => "x-xss-protection",
        _ => "content-security-policy",
    }
}

/// A user's bcrypt hash, as upstream takes them (nothing else).
fn password(place: &Place, user: &str, hash: &Spanned<String>) -> anyhow::Result<PasswordHash> {
    if user.is_empty() || user.contains(':') {
        return place.err(
            hash.referenced,
            format!("invalid user name {user:?} (empty or contains ':')"),
        );
    }
    crate::config::check_bcrypt_cost(&hash.value, user)
        .or_else(|e| place.err(hash.referenced, e))?;
    match PasswordHash::parse(&hash.value) {
        Ok(h @ PasswordHash::Bcrypt(_)) => Ok(h),
        Ok(_) => place.err(
            hash.referenced,
            format!(
                "user {user:?}: basic_auth_users takes bcrypt hashes only (as exporter-toolkit), \
                 e.g. from `htpasswd -nBC 10 {user}`"
            ),
        ),
        Err(e) => place.err(
            hash.referenced,
            format!("user {user:?}: {e}; make one with `htpasswd -nBC 10 {user}`"),
        ),
    }
}

#[cfg(test)]
mod tests;
