//! A demo scenario read from its file within the bounds it must keep, so
//! that a file that passes can never make the simulator exhaust memory
//! (transports, requests in flight) or hang on an endless event rate, and
//! where in the file a refused value is written (FILE:LINE).

use std::path::Path;

use super::scenario::Scenario;

/// Bounds of a scenario (see `Scenario::check`).
const MAX_THREADS: u32 = 4096;
/// One port per connection, from 665 up: all distinct.
pub const MAX_CONNECTIONS: u32 = 1024;
const MAX_TRANSPORTS: u64 = 1_000_000;
/// Requests in flight (inflight or burst, over every client): each is an
/// entry in the simulator's event queue.
const MAX_REQUESTS: u64 = 1_000_000;
const MAX_DISPATCH_RATE: f64 = 1e6;
/// Service, think and round-trip times: at most an hour.
const MAX_MS: f64 = 3_600_000.0;
/// A request or reply: nfsd's largest payload is 1 MiB; 64 MiB leaves
/// room for any wire format without letting a cumulative count race to
/// its (saturating) end.
const MAX_MESSAGE_BYTES: u64 = 64 << 20;

/// What a scenario is refused for, and the key (of the top level, or of
/// the `client`-th `[[client]]` table) the reason is about.
struct Invalid {
    pub client: Option<usize>,
    pub key: &'static str,
    pub reason: String,
}

/// The line of `key = ...` in a scenario's text: at the top level, or in
/// its `client`-th `[[client]]` table (that table's header line when the
/// key is not written there). None when it cannot be found.
fn line_of(text: &str, client: Option<usize>, key: &str) -> Option<usize> {
    // None = top level; Some(Some(i)) = the i-th client; Some(None) = other tables.
    let mut table: Option<Option<usize>> = None;
    let mut clients = 0;
    let mut header = None;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.starts_with('[') {
            table = Some(if line.starts_with("[[client]]") {
                clients += 1;
                Some(clients - 1)
            } else {
                None
            });
            if key == "client" && client.is_none() && table == Some(Some(0)) {
                return Some(n + 1);
            }
            if client.is_some() && table == Some(client) {
                header = Some(n + 1);
            }
            continue;
        }
        let here = match client {
            None => table.is_none(),
            Some(_) => table == Some(client),
        };
        let names_key = line
            .strip_prefix(key)
            .is_some_and(|rest| rest.trim_start().starts_with('='));
        if here && names_key {
            return Some(n + 1);
        }
    }
    header
}

impl Scenario {
    /// The scenario in the file at `path`, checked.
    pub fn load(path: &Path) -> anyhow::Result<Scenario> {
        let text =
            crate::input::read_text(path, "scenario file", "--demo", crate::input::MAX_TEXT_FILE)?;
        Scenario::parse(&text, &path.display().to_string())
    }

    /// The scenario `text` says, checked; errors name `origin` and the
    /// line (FILE:LINE).
    pub fn parse(text: &str, origin: &str) -> anyhow::Result<Scenario> {
        let s: Scenario = toml::from_str(text).map_err(|e| {
            let pos = e
                .span()
                .map(|sp| {
                    let line = text[..sp.start.min(text.len())].matches('\n').count() + 1;
                    format!(":{line}")
                })
                .unwrap_or_default();
            anyhow::anyhow!("{origin}{pos}: {}", crate::text::one_line(e.message()))
        })?;
        if let Err(e) = s.check() {
            let at = line_of(text, e.client, e.key)
                .map(|l| format!(":{l}"))
                .unwrap_or_default();
            anyhow::bail!("{origin}{at}: {}", e.reason);
        }
        Ok(s)
    }

    /// Whether the scenario keeps the bounds (the built-ins are checked
    /// in tests).
    pub fn validate(&self) -> Result<(), String> {
        self.check().map_err(|e| e.reason)
    }

    /// Bounds that keep the simulator's memory (transports, requests in
    /// flight) and event rate finite, whatever a file says.
    fn check(&self) -> Result<(), Invalid> {
        let top = |key: &'static str, reason: String| Invalid {
            client: None,
            key,
            reason,
        };
        if self.threads == 0 || self.threads > MAX_THREADS {
            return Err(top(
                "threads",
                format!("threads = {} must be 1..={MAX_THREADS}", self.threads),
            ));
        }
        if !(self.service_ms > 0.0 && self.service_ms <= MAX_MS) {
            return Err(top(
                "service_ms",
                format!(
                    "service_ms = {} must be > 0 and at most {MAX_MS}",
                    self.service_ms
                ),
            ));
        }
        let rate = f64::from(self.threads) * 1e3 / self.service_ms;
        if rate > MAX_DISPATCH_RATE {
            return Err(top(
                "service_ms",
                format!(
                    "threads = {} at service_ms = {} make {rate:.0} dispatches per second; the \
                     demo simulates at most {MAX_DISPATCH_RATE:.0} (raise service_ms or lower threads)",
                    self.threads, self.service_ms
                ),
            ));
        }
        if !(0.0..1.0).contains(&self.jitter) {
            return Err(top(
                "jitter",
                format!("jitter = {} must be in [0, 1)", self.jitter),
            ));
        }
        if !(self.rtt_us >= 0.0 && self.rtt_us <= MAX_MS * 1e3) {
            return Err(top(
                "rtt_us",
                format!(
                    "rtt_us = {} must be >= 0 and at most {}",
                    self.rtt_us,
                    MAX_MS * 1e3
                ),
            ));
        }
        if self.clients.is_empty() {
            return Err(top(
                "client",
                "no [[client]] entries: a scenario needs at least one client".into(),
            ));
        }
        let (mut transports, mut requests) = (0u64, 0u64);
        for (i, c) in self.clients.iter().enumerate() {
            let at = format!("client {} ({})", i + 1, c.address);
            let bad = |key: &'static str, reason: String| Invalid {
                client: Some(i),
                key,
                reason: format!("{at}: {reason}"),
            };
            if c.connections == 0 || c.connections > MAX_CONNECTIONS {
                return Err(bad(
                    "connections",
                    format!(
                        "connections = {} must be 1..={MAX_CONNECTIONS} (one port each)",
                        c.connections
                    ),
                ));
            }
            if c.count == 0 || c.count > 100_000 {
                return Err(bad(
                    "count",
                    format!("count = {} must be 1..=100000", c.count),
                ));
            }
            let (key, n) = match (c.inflight, c.burst) {
                (Some(0), _) => return Err(bad("inflight", "inflight must be > 0".into())),
                (_, Some(0)) => return Err(bad("burst", "burst must be > 0".into())),
                (Some(_), Some(_)) => {
                    return Err(bad(
                        "burst",
                        "give either inflight (backlogged) or burst (interactive), not both".into(),
                    ))
                }
                (None, None) => {
                    return Err(bad(
                        "address",
                        "give inflight (requests kept in flight) or burst (requests per burst)"
                            .into(),
                    ))
                }
                (Some(n), None) => ("inflight", n),
                (None, Some(n)) => ("burst", n),
            };
            transports += u64::from(c.count) * u64::from(c.connections);
            if transports > MAX_TRANSPORTS {
                return Err(bad(
                    "connections",
                    format!(
                        "count × connections brings the scenario to {transports} transports; \
                         the demo keeps at most {MAX_TRANSPORTS}"
                    ),
                ));
            }
            requests += u64::from(c.count) * u64::from(n);
            if requests > MAX_REQUESTS {
                return Err(bad(
                    key,
                    format!(
                        "{key} = {n} (× count {}) brings the requests in flight to {requests}; \
                         the demo keeps at most {MAX_REQUESTS}",
                        c.count
                    ),
                ));
            }
            for (key, n) in [
                ("request_bytes", c.request_bytes),
                ("reply_bytes", c.reply_bytes),
            ] {
                if n > MAX_MESSAGE_BYTES {
                    return Err(bad(
                        key,
                        format!("{key} = {n} must be at most {MAX_MESSAGE_BYTES} (64 MiB)"),
                    ));
                }
            }
            if !(c.think_ms >= 0.0 && c.think_ms <= MAX_MS) {
                return Err(bad(
                    "think_ms",
                    format!(
                        "think_ms = {} must be >= 0 and at most {MAX_MS}",
                        c.think_ms
                    ),
                ));
            }
        }
        self.class_map().map_err(|e| top("class", e))?;
        Ok(())
    }
}
