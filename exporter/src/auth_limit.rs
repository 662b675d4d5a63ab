//! How many password checks the daemon does for whom: each source address
//! and all of them together have a budget of failed checks per minute (a
//! token bucket: the budget at once, then refilled evenly over the
//! minute). A check that succeeds gives its token back, so only failures
//! use the budgets; when one is spent the request gets 429 without a hash.
//!
//! The budget of all sources together bounds guessing spread over many
//! addresses (and the hashing they queue). It binds only the sources that
//! have failed lately: one whose own budget is whole (it has not failed
//! for a minute, or never) always gets its check, so other addresses'
//! failures cannot lock out correct credentials. While that budget is
//! spent, such a source's check is its last for a while if it fails: it
//! loses its whole budget, and from then on waits for the common one. So
//! an attacker gets one guess a minute from each address it has, and then
//! shares the common budget with the others that failed.
//!
//! Sources are IPv4 addresses and IPv6 /64 networks (one host usually has
//! a whole /64). The table of sources is bounded: when full, sources whose
//! budget has refilled are forgotten. If none has (more than
//! [`MAX_SOURCES`] addresses failed within a minute), a new source cannot
//! be told from one forgotten to make room, so it is checked only out of
//! the common budget (then the one nearest to a whole budget is
//! forgotten): rotating addresses buys no more checks than that budget.
//! Only then can a source that has not failed be refused, and only for a
//! first login: credentials already seen to be good from it still pass.

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

/// A check refused: which budget is spent, and how long until a try.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limited {
    pub wait: Duration,
    pub by: Spent,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spent {
    /// This source's own failures (`auth_failures_per_source` a minute).
    Source(u32),
    /// All sources' failures together (`auth_failures_total` a minute),
    /// this one having failed lately too.
    Total(u32),
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

    fn is_full(&self, per_minute: u32) -> bool {
        self.tokens >= per_minute as f64
    }

    /// How long until a token is there (zero: now).
    fn wait(&self, per_minute: u32) -> Duration {
        if self.tokens >= 1.0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64((1.0 - self.tokens) * 60.0 / per_minute.max(1) as f64)
    }
}

/// The source an address counts as: itself, or its IPv6 /64.
pub fn source_of(ip: IpAddr) -> IpAddr {
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
    sources: HashMap<IpAddr, Bucket>,
}

/// A check allowed by the limiter; [`FailureLimiter::succeeded`] gives
/// back what it took.
#[derive(Debug)]
pub struct Permit {
    source: IpAddr,
    /// Tokens taken from the source's budget.
    taken: f64,
    /// Whether a token was taken from the common budget.
    total: bool,
}

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

    /// Take what a check from `ip` costs, or say which budget is spent.
    pub fn try_check(&self, ip: IpAddr, now: Instant) -> Result<Permit, Limited> {
        let l = self.limits;
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let key = source_of(ip);
        if !st.sources.contains_key(&key) && st.sources.len() >= MAX_SOURCES {
            forget_refilled(&mut st.sources, l.per_source, now);
            if st.sources.len() >= MAX_SOURCES {
                // Every source remembered failed lately. A new one cannot
                // be told from one forgotten to make room (with a whole
                // budget again): it waits with them for the common budget,
                // so that rotating addresses buys no checks.
                st.total.refill(l.total, now);
                let wait = st.total.wait(l.total);
                if wait > Duration::ZERO {
                    return Err(Limited {
                        wait,
                        by: Spent::Total(l.total),
                    });
                }
                forget_nearest(&mut st.sources);
            }
        }
        let State { total, sources } = &mut *st;
        let src = sources
            .entry(key)
            .or_insert_with(|| Bucket::full(l.per_source, now));
        match decide(l, total, src, now) {
            Err(limited) => Err(limited),
            Ok(Cost::OneOfEach) => {
                src.tokens -= 1.0;
                total.tokens -= 1.0;
                Ok(Permit {
                    source: key,
                    taken: 1.0,
                    total: true,
                })
            }
            // In good standing while the common budget is spent: its
            // check, at the price of its whole budget should it fail.
            Ok(Cost::WholeSourceBudget) => {
                let taken = src.tokens;
                src.tokens = 0.0;
                Ok(Permit {
                    source: key,
                    taken,
                    total: false,
                })
            }
        }
    }

    /// The check passed: it does not count against the budgets.
    pub fn succeeded(&self, permit: Permit) {
        let l = self.limits;
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if permit.total {
            st.total.tokens = (st.total.tokens + 1.0).min(l.total as f64);
        }
        if let Some(b) = st.sources.get_mut(&permit.source) {
            b.tokens = (b.tokens + permit.taken).min(l.per_source as f64);
        }
    }

    #[cfg(test)]
    fn sources(&self) -> usize {
        self.state.lock().unwrap().sources.len()
    }
}

/// What a check costs a source in the standing `src` has, with the common
/// budget `total` (both refilled to `now`).
enum Cost {
    /// A token of each budget.
    OneOfEach,
    /// The source's whole budget, the common one being spent.
    WholeSourceBudget,
}

fn decide(
    l: FailureLimits,
    total: &mut Bucket,
    src: &mut Bucket,
    now: Instant,
) -> Result<Cost, Limited> {
    total.refill(l.total, now);
    let total_wait = total.wait(l.total);
    src.refill(l.per_source, now);
    let wait = src.wait(l.per_source);
    if total_wait > Duration::ZERO && !src.is_full(l.per_source) {
        return Err(Limited {
            wait: wait.max(total_wait),
            by: Spent::Total(l.total),
        });
    }
    if wait > Duration::ZERO {
        return Err(Limited {
            wait,
            by: Spent::Source(l.per_source),
        });
    }
    Ok(if total_wait == Duration::ZERO {
        Cost::OneOfEach
    } else {
        Cost::WholeSourceBudget
    })
}

/// Forget the sources whose budget has refilled: they are in good
/// standing, as sources never seen are.
fn forget_refilled(sources: &mut HashMap<IpAddr, Bucket>, per_source: u32, now: Instant) {
    sources.retain(|_, b| {
        b.refill(per_source, now);
        !b.is_full(per_source)
    });
}

/// Forget the source nearest to a whole budget: room for one more.
fn forget_nearest(sources: &mut HashMap<IpAddr, Bucket>) {
    let nearest = sources
        .iter()
        .max_by(|a, b| a.1.tokens.total_cmp(&b.1.tokens))
        .map(|(k, _)| *k);
    if let Some(k) = nearest {
        sources.remove(&k);
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
        let e = l.try_check(ip("10.0.0.1"), t).unwrap_err();
        assert_eq!(e.by, Spent::Source(3));
        assert!(e.wait > Duration::from_secs(19) && e.wait <= Duration::from_secs(20));
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
    fn the_total_budget_binds_the_sources_that_failed_and_ipv6_counts_per_64() {
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
        // Total spent: 10.0.0.1 has failed, it waits for the total.
        let e = l.try_check(ip("10.0.0.1"), t).unwrap_err();
        assert_eq!(e.by, Spent::Total(4));
        assert!(e.wait > Duration::from_secs(14), "{e:?}");
        // A source that never failed still gets its check, and a failed
        // one costs it its whole budget: then it waits with the others.
        l.try_check(ip("10.0.0.9"), t).unwrap();
        assert_eq!(
            l.try_check(ip("10.0.0.9"), t).unwrap_err().by,
            Spent::Total(4)
        );
        // One that passes keeps its budget.
        let p = l.try_check(ip("10.0.0.8"), t).unwrap();
        l.succeeded(p);
        let p = l.try_check(ip("10.0.0.8"), t).unwrap();
        l.succeeded(p);
    }

    #[test]
    fn others_failures_never_refuse_a_source_that_has_not_failed() {
        let l = FailureLimiter::new(DEFAULT_FAILURE_LIMITS);
        let mut t = Instant::now();
        // 12 bad logins from each of 8 addresses, then one from each
        // every second for ten minutes: together they can fail more than
        // the total allows (80 a minute), so it is spent all along.
        let attack = |t| {
            for a in 2..=9 {
                let _ = l.try_check(ip(&format!("127.0.0.{a}")), t);
            }
        };
        for _ in 0..12 {
            attack(t);
        }
        for i in 0..600 {
            t += Duration::from_secs(1);
            attack(t);
            if i % 15 == 0 {
                // A scraper whose credentials are good (checked each time,
                // as after a restart).
                let p = l.try_check(ip("127.0.0.1"), t).expect("good standing");
                l.succeeded(p);
            }
        }
    }

    /// More addresses failing within a minute than the table holds: once
    /// it is full of them, a new address is checked only out of the common
    /// budget, so rotating through addresses buys no more checks.
    #[test]
    fn rotating_addresses_past_the_table_buys_no_checks() {
        let l = FailureLimiter::new(FailureLimits {
            per_source: 1,
            total: 10,
        });
        let t = Instant::now();
        let addr = |i: u32| IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i));
        let mut checked = 0;
        for round in 0..3u32 {
            for i in 0..(MAX_SOURCES as u32 + 500) {
                let at = t + Duration::from_millis(u64::from(round));
                checked += usize::from(l.try_check(addr(i), at).is_ok());
            }
        }
        // Each of the first MAX_SOURCES addresses got its one check (its
        // whole budget), and nothing more in the same instant.
        assert_eq!(checked, MAX_SOURCES);
        let e = l.try_check(ip("192.168.7.7"), t).unwrap_err();
        assert_eq!(e.by, Spent::Total(10));
        // As the common budget refills (one check every 6 s), one more.
        let later = t + Duration::from_secs(6);
        l.try_check(addr(MAX_SOURCES as u32 + 1), later).unwrap();
        assert!(l.try_check(addr(MAX_SOURCES as u32 + 2), later).is_err());
        assert!(l.sources() <= MAX_SOURCES, "{}", l.sources());
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
        assert!(l.sources() <= MAX_SOURCES, "{}", l.sources());
        // A new source still gets its check, and its own budget.
        l.try_check(ip("192.168.0.1"), t).unwrap();
        assert!(l.try_check(ip("192.168.0.1"), t).is_err());
        // A minute later every budget has refilled and old sources go.
        l.try_check(ip("192.168.0.2"), t + Duration::from_secs(61))
            .unwrap();
        assert!(l.sources() < 10, "{}", l.sources());
    }
}
