//! Tests of `crate::enrich::resolve`: the cache's TTLs (on a clock the test
//! moves) and bound, the queue that drops rather than waits, a lookup that
//! never returns, and one real lookup through the system resolver.

use std::net::IpAddr;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::*;

const DEADLINE: Duration = Duration::from_secs(20);

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn answers_expire_after_their_ttl_names_later_than_failures() {
    let t0 = Instant::now();
    let mut c = Cache::new(10, Duration::from_secs(600), Duration::from_secs(60));
    assert_eq!(c.get(ip("10.0.0.2"), t0), Cached::Miss);
    c.insert(ip("10.0.0.2"), Some("two.example".into()), t0);
    c.insert(ip("10.0.0.3"), None, t0);
    let at = |s| t0 + Duration::from_secs(s);
    assert_eq!(
        c.get(ip("10.0.0.2"), at(59)),
        Cached::Fresh(Some("two.example"))
    );
    assert_eq!(c.get(ip("10.0.0.3"), at(59)), Cached::Fresh(None));
    assert_eq!(c.get(ip("10.0.0.3"), at(60)), Cached::Stale(None));
    assert_eq!(
        c.get(ip("10.0.0.2"), at(599)),
        Cached::Fresh(Some("two.example"))
    );
    assert_eq!(
        c.get(ip("10.0.0.2"), at(600)),
        Cached::Stale(Some("two.example"))
    );
    // A fresh answer holds again for its own TTL.
    c.insert(ip("10.0.0.3"), Some("three.example".into()), at(60));
    assert_eq!(
        c.get(ip("10.0.0.3"), at(659)),
        Cached::Fresh(Some("three.example"))
    );
    // IPv4-mapped IPv6 is the same address.
    assert_eq!(
        c.get(ip("::ffff:10.0.0.2"), at(1)),
        Cached::Fresh(Some("two.example"))
    );
}

#[test]
fn the_cache_is_bounded_and_evicts_the_oldest() {
    let t0 = Instant::now();
    let mut c = Cache::new(3, Duration::from_secs(600), Duration::from_secs(60));
    for i in 1..=3 {
        c.insert(ip(&format!("10.0.0.{i}")), Some(format!("h{i}")), t0);
    }
    // Refreshing .1 makes it the newest: .2 is the oldest now.
    c.insert(ip("10.0.0.1"), Some("h1".into()), t0);
    c.insert(ip("10.0.0.4"), Some("h4".into()), t0);
    assert_eq!(c.len(), 3);
    assert_eq!(c.get(ip("10.0.0.2"), t0), Cached::Miss);
    assert_eq!(c.get(ip("10.0.0.1"), t0), Cached::Fresh(Some("h1")));
    assert_eq!(c.get(ip("10.0.0.3"), t0), Cached::Fresh(Some("h3")));
    assert_eq!(c.evicted, 1);
    for i in 0..10_000u32 {
        c.insert(IpAddr::from(i.to_be_bytes()), None, t0);
        // Refreshed over and over: the order stays bounded too.
        c.insert(ip("10.0.0.4"), Some("h4".into()), t0);
    }
    assert_eq!(c.len(), 3);
    assert!(c.order.len() <= 2 * 3 + 64 + 1, "{}", c.order.len());
    assert_eq!(c.get(ip("10.0.0.4"), t0), Cached::Fresh(Some("h4")));
}

/// A lookup that waits for the test: it says which address it started
/// on, then blocks until `release` sends (or is dropped), then answers
/// `name-of-ADDR`.
fn gated() -> (LookupFn, Receiver<IpAddr>, Sender<()>) {
    let (started_tx, started) = std::sync::mpsc::channel();
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let started_tx = Mutex::new(started_tx);
    let gate = Mutex::new(gate);
    let f: LookupFn = Arc::new(move |ip: IpAddr| {
        let _ = started_tx.lock().unwrap().send(ip);
        let _ = gate.lock().unwrap().recv();
        Some(format!("name-of-{ip}"))
    });
    (f, started, release)
}

fn opts(workers: usize, queue: usize) -> Options {
    Options {
        workers,
        queue,
        ..Options::default()
    }
}

#[test]
fn a_full_queue_drops_and_counts_and_never_blocks() {
    let (lookup, started, release) = gated();
    let mut r = Resolver::start(lookup, opts(1, 2));
    assert_eq!(r.hostname(ip("10.0.0.1")), None);
    // The one thread is in the lookup of .1 (and stays there) ...
    assert_eq!(started.recv_timeout(DEADLINE).unwrap(), ip("10.0.0.1"));
    // ... the queue takes two more, the rest are dropped, not waited on.
    let t = Instant::now();
    for i in 2..=6 {
        assert_eq!(r.hostname(ip(&format!("10.0.0.{i}"))), None);
    }
    assert_eq!(r.dropped(), 3);
    // Asked already: not asked again (not dropped again either).
    assert_eq!(r.hostname(ip("10.0.0.1")), None);
    assert_eq!(r.hostname(ip("10.0.0.2")), None);
    assert_eq!(r.dropped(), 3);
    assert!(t.elapsed() < Duration::from_secs(5), "asking never waits");
    // Let the lookups finish: .1, .2, .3 get their names.
    for _ in 0..3 {
        release.send(()).unwrap();
    }
    let mut got = 0;
    while got < 3 {
        assert!(
            r.collect_waiting(DEADLINE) > 0,
            "no answer within {DEADLINE:?}"
        );
        got = (1..=3)
            .filter(|i| {
                matches!(
                    r.cache().get(ip(&format!("10.0.0.{i}")), Instant::now()),
                    Cached::Fresh(Some(_))
                )
            })
            .count();
    }
    assert_eq!(
        r.hostname(ip("10.0.0.2")).as_deref(),
        Some("name-of-10.0.0.2")
    );
    // Dropped ones are asked for again later, when there is room.
    assert_eq!(r.hostname(ip("10.0.0.4")), None);
    for i in 2..=4 {
        let want = ip(&format!("10.0.0.{i}"));
        assert_eq!(started.recv_timeout(DEADLINE).unwrap(), want);
    }
    drop(release);
}

#[test]
fn a_lookup_that_hangs_holds_up_nothing() {
    let (lookup, started, release) = gated();
    let mut r = Resolver::start(lookup, opts(2, 4));
    // Both threads in a lookup that never ends ...
    let _ = r.hostname(ip("10.9.0.1"));
    let _ = r.hostname(ip("10.9.0.2"));
    for _ in 0..2 {
        started.recv_timeout(DEADLINE).unwrap();
    }
    // ... and asking goes on at full speed.
    let t = Instant::now();
    for round in 0..1000u32 {
        r.collect();
        for i in 0..50u32 {
            let _ = r.hostname(IpAddr::from((round * 50 + i).to_be_bytes()));
        }
    }
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    // Four wait in the queue, the rest are dropped.
    assert_eq!(r.dropped(), 50_000 - 4);
    assert_eq!(r.cache().len(), 0);
    drop(release);
}

#[test]
fn names_are_made_printable() {
    let f: LookupFn = Arc::new(|_| Some("evil\x1b[2J.example\n".into()));
    let mut r = Resolver::start(f, opts(1, 4));
    assert_eq!(r.hostname(ip("10.0.0.9")), None);
    assert_eq!(r.collect_waiting(DEADLINE), 1);
    assert_eq!(
        r.hostname(ip("10.0.0.9")).as_deref(),
        Some("evil?[2J.example?")
    );
}

#[test]
fn no_name_is_cached_as_none() {
    let f: LookupFn = Arc::new(|_| None);
    let mut r = Resolver::start(f, opts(1, 4));
    assert_eq!(r.hostname(ip("10.0.0.9")), None);
    assert_eq!(r.collect_waiting(DEADLINE), 1);
    assert_eq!(
        r.cache().get(ip("10.0.0.9"), Instant::now()),
        Cached::Fresh(None)
    );
}

#[test]
fn the_system_resolver_names_127_0_0_1() {
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    let name = system_lookup(ip("127.0.0.1")).unwrap_or_else(|| {
        panic!(
            "the system resolver has no name for 127.0.0.1: /etc/hosts needs a line \
             such as \"127.0.0.1 localhost\" (it reads:\n{hosts})"
        )
    });
    assert!(
        !name.is_empty() && name.parse::<IpAddr>().is_err(),
        "{name:?}"
    );
    // Through the pool too.
    let mut r = Resolver::system();
    assert_eq!(r.hostname(ip("127.0.0.1")), None);
    assert_eq!(r.collect_waiting(DEADLINE), 1);
    assert_eq!(r.hostname(ip("127.0.0.1")), Some(name));
}
