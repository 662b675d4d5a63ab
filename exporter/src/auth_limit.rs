//! How many password checks the daemon does for whom: each source address
//! and all of them together have a budget of checks per minute (a token
//! bucket: the budget at once, then refilled evenly over the minute). A
//! check that succeeds gives its token back, so only failures use the
//! budget; when a budget is spent the request gets 429 without a hash.
//!
//! Sources are IPv4 addresses and IPv6 /64 networks (one host usually has
//! a whole /64). The table of sources is bounded: when full, sources whose
//! budget has refilled are forgotten, and if none has, new sources share
//! one overflow budget.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Sources remembered at most.
pub const MAX_SOURCES: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FailureLimits {
    /// Failed checks per minute from one source.
    pub per_source: u32,
    /// Failed checks per minute from all sources together.
    pub total: u32,
}

pub const DEFAULT_FAILURE_LIMITS: FailureLimits = FailureLimits {
    per_source: 10,
    total: 60,
};

impl Default for FailureLimits {
    fn default() -> FailureLimits {
        DEFAULT_FAILURE_LIMITS
    }
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(per_minute: u32, now: Instant) -> Bucket {
        Bucket {
            tokens: per_minute as f64,
            at: now,
        }
    }

    fn refill(&mut self, per_minute: u32, now: Instant) {
        let rate = per_minute as f64 / 60.0;
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + dt * rate).min(per_minute as f64);
        self.at = now;
    }

    /// How long until a token is there (zero: now).
    fn wait(&self, per_minute: u32) -> Duration {
        if self.tokens >= 1.0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64((1.0 - self.tokens) * 60.0 / per_minute.max(1) as f64)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Source {
    Ip(IpAddr),
    Overflow,
}

fn source_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

#[derive(Debug)]
pub struct FailureLimiter {
    limits: FailureLimits,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    total: Bucket,
    sources: HashMap<Source, Bucket>,
}

/// A check allowed by the limiter; [`FailureLimiter::succeeded`] gives
/// its tokens back.
#[derive(Debug)]
pub struct Permit(Source);

impl FailureLimiter {
    pub fn new(limits: FailureLimits) -> FailureLimiter {
        FailureLimiter {
            limits,
            state: Mutex::new(State {
                total: Bucket::full(limits.total, Instant::now()),
                sources: HashMap::new(),
            }),
        }
    }

    /// Take a token for a check from `ip`, or say how long to wait.
    pub fn try_check(&self, ip: IpAddr, now: Instant) -> Result<Permit, Duration> {
        let l = self.limits;
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut key = Source::Ip(source_of(ip));
        if !st.sources.contains_key(&key) && st.sources.len() >= MAX_SOURCES {
            st.sources.retain(|_, b| {
                b.refill(l.per_source, now);
                b.tokens < l.per_source as f64
            });
            if st.sources.len() >= MAX_SOURCES {
                key = Source::Overflow;
            }
        }
        st.total.refill(l.total, now);
        let total_wait = st.total.wait(l.total);
        let src = st
            .sources
            .entry(key)
            .or_insert_with(|| Bucket::full(l.per_source, now));
        src.refill(l.per_source, now);
        let wait = src.wait(l.per_source).max(total_wait);
        if wait > Duration::ZERO {
            return Err(wait);
        }
        src.tokens -= 1.0;
        st.total.tokens -= 1.0;
        Ok(Permit(key))
    }

    /// The check passed: it does not count against the budgets.
    pub fn succeeded(&self, permit: Permit) {
        let l = self.limits;
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.total.tokens = (st.total.tokens + 1.0).min(l.total as f64);
        if let Some(b) = st.sources.get_mut(&permit.0) {
            b.tokens = (b.tokens + 1.0).min(l.per_source as f64);
        }
    }

    #[cfg(test)]
    fn sources(&self) -> usize {
        self.state.lock().unwrap().sources.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_source_gets_its_budget_then_waits_and_successes_are_free() {
        let l = FailureLimiter::new(FailureLimits {
            per_source: 3,
            total: 100,
        });
        let t = Instant::now();
        for _ in 0..3 {
            l.try_check(ip("10.0.0.1"), t).unwrap();
        }
        let wait = l.try_check(ip("10.0.0.1"), t).unwrap_err();
        assert!(wait > Duration::from_secs(19) && wait <= Duration::from_secs(20));
        // Another source is not affected; 20 s later one more try is due.
        l.try_check(ip("10.0.0.2"), t).unwrap();
        l.try_check(ip("10.0.0.1"), t + Duration::from_secs(20))
            .unwrap();
        // Successes give their token back.
        for _ in 0..10 {
            let p = l.try_check(ip("10.0.0.3"), t).unwrap();
            l.succeeded(p);
        }
    }

    #[test]
    fn the_total_budget_binds_all_sources_and_ipv6_counts_per_64() {
        let l = FailureLimiter::new(FailureLimits {
            per_source: 2,
            total: 4,
        });
        let t = Instant::now();
        l.try_check(ip("2001:db8::1"), t).unwrap();
        l.try_check(ip("2001:db8::2"), t).unwrap();
        assert!(l.try_check(ip("2001:db8::3"), t).is_err(), "same /64");
        l.try_check(ip("10.0.0.1"), t).unwrap();
        l.try_check(ip("::ffff:10.0.0.1"), t).unwrap();
        assert!(l.try_check(ip("10.0.0.9"), t).is_err(), "total spent");
    }

    #[test]
    fn the_source_table_stays_bounded() {
        let l = FailureLimiter::new(FailureLimits {
            per_source: 1,
            total: 1_000_000,
        });
        let t = Instant::now();
        for i in 0..(MAX_SOURCES as u32 + 100) {
            let a = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            let _ = l.try_check(a, t);
        }
        assert!(l.sources() <= MAX_SOURCES + 1, "{}", l.sources());
        // The overflow budget is shared: after one failure it is spent.
        assert!(l.try_check(ip("192.168.0.1"), t).is_err());
        // A minute later every budget has refilled and old sources go.
        l.try_check(ip("192.168.0.2"), t + Duration::from_secs(61))
            .unwrap();
        assert!(l.sources() < 10, "{}", l.sources());
    }
}
