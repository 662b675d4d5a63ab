//! The state of the link to the source, as the header shows it: a remote
//! agent's connection status, and whether data is late (stale) or the
//! source has ended.

use std::time::Duration;

use nfsdtop_agent::model::{SourceInfo, SourceKind};

use super::State;

/// What the agent behind a remote source serves ("demo", "replay" or
/// "live"), from the detail `nfsdtop --connect` gives its snapshots: "URL
/// (KIND DETAIL)" (a URL as shown has no spaces). None for a local source
/// or an agent that does not say.
pub fn served_kind(src: &SourceInfo) -> Option<&str> {
    if src.kind != SourceKind::Remote {
        return None;
    }
    let (_, inner) = src.detail.split_once(" (")?;
    let word = inner.split([' ', ')']).next()?;
    ["demo", "replay", "live"].into_iter().find(|k| *k == word)
}

/// How a remote source's link is doing (local sources have none).
#[derive(Clone, Debug, PartialEq)]
pub enum RemoteStatus {
    Connecting {
        url: String,
    },
    Connected {
        url: String,
    },
    /// Connected, but nfsdtopd skipped a snapshot, saying why (its
    /// response memory held by others).
    Skipping {
        url: String,
        reason: String,
    },
    /// The last attempt failed or the stream ended; the next attempt is
    /// `retry_in` away.
    Reconnecting {
        url: String,
        attempt: u32,
        retry_in: Duration,
        error: String,
    },
}

impl std::fmt::Display for RemoteStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoteStatus::Connecting { url } => write!(f, "connecting to {url}"),
            RemoteStatus::Connected { url } => write!(f, "connected to {url}"),
            RemoteStatus::Skipping { url, reason } => write!(f, "{url}: {reason}"),
            RemoteStatus::Reconnecting {
                url,
                attempt,
                retry_in,
                error,
            } => write!(
                f,
                "reconnecting to {url} in {:.1}s (attempt {attempt}): {error}",
                retry_in.as_secs_f64()
            ),
        }
    }
}

/// What the header says about the link, worst last.
#[derive(Clone, Debug, PartialEq)]
pub enum LinkLabel {
    /// A local source delivering on time: nothing to say.
    Ok,
    Connecting,
    Connected,
    /// No snapshot for this long (more than three intervals).
    Stale(Duration),
    Reconnecting {
        attempt: u32,
        error: String,
    },
    /// The source stopped: end of a replay, or an error.
    Ended(Result<(), String>),
}

impl State {
    pub fn link(&self) -> LinkLabel {
        if let Some(r) = &self.ended {
            return LinkLabel::Ended(r.clone());
        }
        if let Some(RemoteStatus::Reconnecting { attempt, error, .. }) = &self.remote {
            return LinkLabel::Reconnecting {
                attempt: *attempt,
                error: error.clone(),
            };
        }
        let since = self
            .now
            .saturating_duration_since(self.last_snapshot_at.unwrap_or(self.started));
        // The source's own interval may differ from ours (a remote nfsdtopd).
        let interval = self
            .shown
            .as_deref()
            .map(|s| s.interval_s)
            .filter(|i| i.is_finite() && *i > 0.0)
            .map(|i| Duration::from_secs_f64(i.min(86_400.0)).max(self.interval))
            .unwrap_or(self.interval);
        if since > interval * 3 {
            return LinkLabel::Stale(since);
        }
        match &self.remote {
            Some(RemoteStatus::Connecting { .. }) => LinkLabel::Connecting,
            Some(RemoteStatus::Connected { .. } | RemoteStatus::Skipping { .. }) => {
                LinkLabel::Connected
            }
            _ => LinkLabel::Ok,
        }
    }
}
