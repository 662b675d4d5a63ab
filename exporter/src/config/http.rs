//! The `[http]` table of nfsdtopd's config file: what clients may hold
//! (timeouts, the connection cap, the memory of responses) and the login
//! failure budgets.
//!
//! ```toml
//! [http]
//! header_timeout = 10            # seconds for a TLS handshake, for a request head
//! write_timeout = 30             # seconds a response may make no progress
//! shutdown_timeout = 3           # seconds open requests get on SIGTERM
//! max_connections = 512          # then the oldest idle one is closed
//! auth_failures_per_source = 10  # failed logins per minute, per address
//! auth_failures_total = 60       # failed logins per minute, all addresses
//! response_memory_mib = 1024     # snapshot JSON held at once, all responses
//! ```

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::Origin;
use crate::auth_limit::FailureLimits;
use crate::body_budget::{DEFAULT_BUDGET_MIB, MIB};

/// What the listener lets each connection hold, and how many.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    pub header_timeout: Duration,
    pub write_timeout: Duration,
    pub shutdown_timeout: Duration,
    pub max_connections: usize,
}

pub const DEFAULT_LIMITS: Limits = Limits {
    header_timeout: Duration::from_secs(10),
    write_timeout: Duration::from_secs(30),
    shutdown_timeout: Duration::from_secs(3),
    max_connections: 512,
};

impl Default for Limits {
    fn default() -> Limits {
        DEFAULT_LIMITS
    }
}

/// What clients may hold: connection limits and login failure budgets.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpSettings {
    pub limits: Limits,
    pub failures: FailureLimits,
    /// max_connections was given (a warning if the fd limit lowers it).
    pub max_connections_set: bool,
    /// Bytes of snapshot JSON all responses and streams hold at once
    /// ([`crate::body_budget`]).
    pub response_memory: usize,
}

impl Default for HttpSettings {
    fn default() -> HttpSettings {
        HttpSettings {
            limits: Limits::default(),
            failures: FailureLimits::default(),
            max_connections_set: false,
            response_memory: DEFAULT_BUDGET_MIB * MIB,
        }
    }
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileHttp {
    header_timeout: Option<Spanned<f64>>,
    write_timeout: Option<Spanned<f64>>,
    shutdown_timeout: Option<Spanned<f64>>,
    max_connections: Option<Spanned<i64>>,
    auth_failures_per_source: Option<Spanned<i64>>,
    auth_failures_total: Option<Spanned<i64>>,
    response_memory_mib: Option<Spanned<i64>>,
}

pub(crate) fn apply(o: &Origin<'_>, h: &FileHttp, into: &mut HttpSettings) -> anyhow::Result<()> {
    let secs = |v: &Spanned<f64>, what: &str| -> anyhow::Result<Duration> {
        let s = *v.get_ref();
        if !s.is_finite() || !(0.1..=3600.0).contains(&s) {
            return o.err(
                v.span(),
                format!("{what} must be between 0.1 and 3600 seconds, not {s}"),
            );
        }
        Ok(Duration::from_secs_f64(s))
    };
    let count = |v: &Spanned<i64>, what: &str| -> anyhow::Result<u32> {
        let n = *v.get_ref();
        if !(1..=1_000_000).contains(&n) {
            return o.err(
                v.span(),
                format!("{what} must be between 1 and 1000000, not {n}"),
            );
        }
        Ok(n as u32)
    };
    let l = &mut into.limits;
    if let Some(v) = &h.header_timeout {
        l.header_timeout = secs(v, "header_timeout")?;
    }
    if let Some(v) = &h.write_timeout {
        l.write_timeout = secs(v, "write_timeout")?;
    }
    if let Some(v) = &h.shutdown_timeout {
        l.shutdown_timeout = secs(v, "shutdown_timeout")?;
    }
    if let Some(v) = &h.max_connections {
        l.max_connections = count(v, "max_connections")? as usize;
        into.max_connections_set = true;
    }
    if let Some(v) = &h.auth_failures_per_source {
        into.failures.per_source = count(v, "auth_failures_per_source")?;
    }
    if let Some(v) = &h.auth_failures_total {
        into.failures.total = count(v, "auth_failures_total")?;
    }
    if let Some(v) = &h.response_memory_mib {
        let n = *v.get_ref();
        // Below 16 MiB a full snapshot of a few thousand peers would not fit.
        if !(16..=1 << 20).contains(&n) {
            return o.err(
                v.span(),
                format!("response_memory_mib must be between 16 and 1048576, not {n}"),
            );
        }
        into.response_memory = n as usize * MIB;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::Config;

    #[test]
    fn the_http_table_sets_limits_and_bad_values_name_their_line() {
        let path = Path::new("/etc/nfsdtopd.toml");
        let cfg = Config::from_file_text(
            path,
            "[http]\nheader_timeout = 2.5\nwrite_timeout = 5\nshutdown_timeout = 1\n\
    max_connections = 100\nauth_failures_per_source = 3\nauth_failures_total = 30\n\
    response_memory_mib = 64\n",
        )
        .unwrap();
        let h = &cfg.http;
        assert_eq!(h.limits.header_timeout, Duration::from_millis(2500));
        assert_eq!(h.limits.write_timeout, Duration::from_secs(5));
        assert_eq!(h.limits.shutdown_timeout, Duration::from_secs(1));
        assert_eq!(
            (h.limits.max_connections, h.max_connections_set),
            (100, true)
        );
        assert_eq!((h.failures.per_source, h.failures.total), (3, 30));
        assert_eq!(h.response_memory, 64 << 20);
        let d = Config::from_file_text(path, "").unwrap().http;
        assert_eq!(d, HttpSettings::default());
        for (text, at, needle) in [
            ("[http]\nheader_timeout = 0\n", ":2:", "header_timeout"),
            ("[http]\n\nmax_connections = 0\n", ":3:", "max_connections"),
            (
                "[http]\nauth_failures_total = -1\n",
                ":2:",
                "auth_failures_total",
            ),
            ("[http]\nidle = 3\n", ":2:", "idle"),
            (
                "[http]\nresponse_memory_mib = 8\n",
                ":2:",
                "response_memory_mib",
            ),
        ] {
            let e = format!("{:#}", Config::from_file_text(path, text).unwrap_err());
            assert!(e.contains(at) && e.contains(needle), "{text:?}: {e}");
        }
    }
}
