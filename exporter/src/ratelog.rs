//! Log lines that a client can trigger at will (failed TLS handshakes, the
//! connection cap) go through a [`RateLog`]: at most one line per period,
//! the next one saying how many were left out, so a flood of bad clients
//! cannot flood the journal.

use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct RateLog {
    period: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    last: Option<Instant>,
    suppressed: u64,
}

impl RateLog {
    pub const fn new(period: Duration) -> RateLog {
        RateLog {
            period,
            state: Mutex::new(State {
                last: None,
                suppressed: 0,
            }),
        }
    }

    /// The line to print now (with the count of lines left out since the
    /// last one), or None when one was printed less than a period ago.
    /// `line` is only called when a line is due.
    pub fn line(&self, now: Instant, line: impl FnOnce() -> String) -> Option<String> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.last.is_some_and(|t| now.duration_since(t) < self.period) {
            st.suppressed += 1;
            return None;
        }
        st.last = Some(now);
        let more = std::mem::take(&mut st.suppressed);
        let mut s = line();
        if more > 0 {
            s.push_str(&format!(
                " ({more} more like this in the last {} s not logged)",
                self.period.as_secs()
            ));
        }
        Some(s)
    }

    /// Print `line()` on stderr, prefixed with "nfsdtopd: ", if one is due.
    pub fn log(&self, line: impl FnOnce() -> String) {
        if let Some(l) = self.line(Instant::now(), line) {
            crate::log::log(l);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_period_and_the_count_of_the_rest() {
        let r = RateLog::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(r.line(t0, || "a".into()).as_deref(), Some("a"));
        for i in 1..=5 {
            assert_eq!(r.line(t0 + Duration::from_secs(i), || "b".into()), None);
        }
        let l = r.line(t0 + Duration::from_secs(10), || "c".into()).unwrap();
        assert!(l.starts_with("c (5 more"), "{l}");
        assert_eq!(
            r.line(t0 + Duration::from_secs(21), || "d".into())
                .as_deref(),
            Some("d")
        );
    }
}
