//! `nfsdtop -b`: snapshots printed like `top -b`, as text, JSON lines or CSV,
//! until the source ends, -n is reached, or a remote nfsdtopd is given up on
//! ([`Patience`]).

use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use nfsdtop_agent::model::EntityKind;
use nfsdtop_agent::present::output::{self, Format};

use nfsdtop::state::RemoteStatus;

use crate::cli::ViewArgs;
use crate::conn::{self, Update, Viewer};
use crate::out;

pub fn run(args: &ViewArgs) -> anyhow::Result<()> {
    let conn = conn::connect(
        &args.source,
        Duration::from_secs_f64(args.delay()),
        Viewer::Batch,
    )?;
    if let Some(n) = &conn.notice {
        out::warn(n);
    }
    let group: EntityKind = args.group().into();
    let format: Format = args.format.into();
    let write = |text: &str| -> anyhow::Result<()> {
        out::stdout(text.as_bytes())
            .map_err(|e| anyhow::Error::from(e).context("cannot write the output"))
    };
    if format == Format::Csv {
        write(&format!("{}\n", output::csv_header()))?;
    }
    let mut patience = conn
        .remote
        .as_deref()
        .map(|url| Patience::new(url, Duration::from_secs_f64(args.give_up_after)));
    let mut printed = 0u64;
    let mut result = Ok(());
    loop {
        let update = match &patience {
            Some(p) => match conn
                .updates
                .recv_timeout(p.deadline().saturating_duration_since(Instant::now()))
            {
                Ok(u) => u,
                Err(RecvTimeoutError::Timeout) => {
                    result = Err(p.giving_up());
                    break;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            },
            None => match conn.updates.recv() {
                Ok(u) => u,
                Err(_) => break,
            },
        };
        match update {
            Update::Snapshot(s) => {
                if let Some(p) = patience.as_mut() {
                    p.snapshot(s.interval_s);
                }
                let text = match format {
                    Format::Json => output::json_line(&s, group, args.top) + "\n",
                    Format::Text => output::text_block(&s, group, args.top) + "\n",
                    Format::Csv => output::csv_rows(&s, group, args.top),
                };
                if let Err(e) = write(&text) {
                    // stdout closed (e.g. piped into head) ends the run
                    // quietly, in `main`.
                    result = Err(e);
                    break;
                }
                printed += 1;
                if args.iterations.is_some_and(|n| printed >= n) {
                    break;
                }
            }
            Update::Ended(r) => {
                result = r.map_err(|e| anyhow::anyhow!(e));
                break;
            }
            Update::Status(s) => {
                // A skipping agent says so each snapshot: once is enough
                // until a snapshot comes again.
                let repeat = patience.as_ref().is_some_and(|p| p.skip.is_some())
                    && matches!(s, RemoteStatus::Skipping { .. });
                if let Some(p) = patience.as_mut() {
                    p.status(&s);
                }
                if !repeat {
                    out::warn(s);
                }
            }
        }
    }
    conn.join();
    result
}

/// How long batch mode waits on a remote nfsdtopd (`--connect`), given
/// `--give-up-after SECS`:
/// - without a link, SECS from when it went (or from the start);
/// - over a link, SECS or three of the agent's snapshot intervals,
///   whichever is longer, from the last snapshot (or the start). The agent
///   keeps a quiet stream open with comments, so a replay that has ended
///   or a source that has stalled leaves a healthy link carrying nothing;
///   three intervals is also when the agent's /healthz calls it stale.
struct Patience {
    url: String,
    give_up: Duration,
    /// Since when no link has held (None while connected).
    down_since: Option<Instant>,
    last_error: String,
    last_snapshot: Instant,
    /// The agent's snapshot interval, as its last snapshot says.
    agent_interval: Duration,
    /// Why the agent skipped its last snapshot, if it did since the last
    /// one came.
    skip: Option<String>,
}

impl Patience {
    fn new(url: &str, give_up: Duration) -> Patience {
        let now = Instant::now();
        Patience {
            url: url.to_string(),
            give_up,
            down_since: Some(now),
            last_error: String::new(),
            last_snapshot: now,
            agent_interval: Duration::ZERO,
            skip: None,
        }
    }

    fn status(&mut self, s: &RemoteStatus) {
        match s {
            RemoteStatus::Connected { .. } => self.down_since = None,
            RemoteStatus::Reconnecting { error, .. } => {
                self.last_error = error.clone();
                self.down_since.get_or_insert_with(Instant::now);
            }
            RemoteStatus::Connecting { .. } => {}
            RemoteStatus::Skipping { reason, .. } => self.skip = Some(reason.clone()),
        }
    }

    fn snapshot(&mut self, interval_s: f64) {
        self.last_snapshot = Instant::now();
        self.skip = None;
        // A day at most: an agent's nonsense cannot make it wait for ever.
        if interval_s.is_finite() && interval_s > 0.0 {
            self.agent_interval = Duration::from_secs_f64(interval_s.min(86_400.0));
        }
    }

    fn quiet_limit(&self) -> Duration {
        self.give_up.max(self.agent_interval * 3)
    }

    fn deadline(&self) -> Instant {
        match self.down_since {
            Some(t) => t + self.give_up,
            None => self.last_snapshot + self.quiet_limit(),
        }
    }

    fn giving_up(&self) -> anyhow::Error {
        let url = &self.url;
        if self.down_since.is_some() {
            let why = if self.last_error.is_empty() {
                String::new()
            } else {
                format!(" (last error: {})", self.last_error)
            };
            return anyhow::anyhow!(
                "giving up on {url}: no link for {}s{why}; --give-up-after SECS waits longer",
                secs(self.give_up)
            );
        }
        if let Some(why) = &self.skip {
            return anyhow::anyhow!(
                "giving up on {url}: connected, but no snapshot for {}s ({why}); \
                 --give-up-after SECS waits longer",
                secs(self.quiet_limit())
            );
        }
        anyhow::anyhow!(
            "giving up on {url}: connected, but no snapshot for {}s (its source has ended or \
             stalled, or nfsdtopd is overloaded: see nfsdtopd's /healthz and log); \
             --give-up-after SECS waits longer",
            secs(self.quiet_limit())
        )
    }
}

/// Seconds to a tenth, without trailing zeros ("5", "0.5").
fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_without_snapshots_waits_give_up_after_or_three_agent_intervals() {
        let give_up = Duration::from_secs(5);
        let mut p = Patience::new("http://agent:9847", give_up);
        let start = p.deadline() - give_up;
        p.status(&RemoteStatus::Connected { url: p.url.clone() });
        // Connected, nothing yet: counted from the start.
        assert_eq!(p.deadline(), start + give_up);
        p.snapshot(1.0);
        assert_eq!(p.deadline(), p.last_snapshot + give_up);
        // A slow agent's three intervals are longer than --give-up-after.
        p.snapshot(4.0);
        assert_eq!(p.deadline(), p.last_snapshot + Duration::from_secs(12));
        let e = p.giving_up().to_string();
        assert!(
            e.contains("http://agent:9847: connected, but no snapshot for 12s"),
            "{e}"
        );
        assert!(e.contains("--give-up-after"), "{e}");
        // Nonsense keeps the last sensible interval; a day bounds it.
        p.snapshot(f64::NAN);
        assert_eq!(p.quiet_limit(), Duration::from_secs(12));
        p.snapshot(1e12);
        assert_eq!(p.quiet_limit(), Duration::from_secs(3 * 86_400));
    }

    /// An agent that says it skipped its snapshots (its response memory
    /// held by others): giving up says why, until a snapshot comes again.
    #[test]
    fn giving_up_on_a_skipping_agent_says_why() {
        let mut p = Patience::new("http://agent:9847", Duration::from_secs(5));
        p.status(&RemoteStatus::Connected { url: p.url.clone() });
        p.status(&RemoteStatus::Skipping {
            url: p.url.clone(),
            reason: "nfsdtopd skipped a snapshot: its JSON does not fit".into(),
        });
        let e = p.giving_up().to_string();
        assert!(
            e.contains("connected, but no snapshot for 5s (nfsdtopd skipped a snapshot: its JSON"),
            "{e}"
        );
        p.snapshot(1.0);
        let e = p.giving_up().to_string();
        assert!(
            e.contains("ended or stalled, or nfsdtopd is overloaded"),
            "{e}"
        );
    }

    #[test]
    fn without_a_link_it_waits_give_up_after_from_when_the_link_went() {
        let give_up = Duration::from_secs(5);
        let mut p = Patience::new("http://agent:9847", give_up);
        p.status(&RemoteStatus::Connected { url: p.url.clone() });
        p.snapshot(60.0);
        p.status(&RemoteStatus::Reconnecting {
            url: p.url.clone(),
            attempt: 1,
            retry_in: Duration::from_secs(1),
            error: "connection refused".into(),
        });
        let went = p.down_since.unwrap();
        assert_eq!(p.deadline(), went + give_up, "not the agent's 3 minutes");
        let e = p.giving_up().to_string();
        assert!(
            e.contains("no link for 5s (last error: connection refused)"),
            "{e}"
        );
    }
}
