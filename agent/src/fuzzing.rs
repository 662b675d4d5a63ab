//! The properties the input fuzzers check, in one place for both: the
//! cargo-fuzz targets in fuzz/ (open-ended, nightly) and the deterministic
//! mutation tests `cargo test` runs (agent/tests/input_fuzz.rs). Each
//! panics when a property fails (a parser that panics fails them too)
//! and says whether the input was accepted.

use std::net::{IpAddr, SocketAddr};

use crate::enrich::classify::ClassMap;
use crate::model::{Endpoint, PeerKey};
use crate::source::demo::{Scenario, Simulator};

/// Simulated time a fuzzed scenario that parses is run for.
const SIM_NS: u64 = 1_000_000;
/// Scenarios with more transports are parsed and checked, not simulated
/// (building them is bounded, but slow for a fuzzer's time budget).
const SIM_MAX_TRANSPORTS: u64 = 10_000;

/// A class map's text: an error names the origin and a line of the
/// text; a map that parses prints as text that parses back to itself,
/// classifies every rule's own network by the longest prefix holding it,
/// and names no class like a peer or the exporter's folded series.
pub fn check_class_map(text: &str) -> bool {
    let m = match ClassMap::parse(text, "fuzz.map") {
        Ok(m) => m,
        Err(e) => {
            assert_eq!(e.origin, "fuzz.map");
            assert!(
                e.line >= 1 && e.line <= text.lines().count(),
                "line {} of {}",
                e.line,
                text.lines().count()
            );
            return false;
        }
    };
    let again = ClassMap::parse(&m.to_string(), "again").expect("a map's own text parses");
    assert_eq!(again, m, "printed and parsed back");
    for r in m.rules() {
        // A class never shares a name with a peer or the folded series.
        assert!(r.class.parse::<IpAddr>().is_err(), "class {:?}", r.class);
        assert_ne!(r.class, crate::enrich::classify::OTHER_CLASS);
        // Nor with the kernel's class words or a redacted peer.
        let kernel = r.class == "anonymous"
            || r.class
                .strip_prefix("class-")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        let pseudonym = r
            .class
            .strip_prefix("anon-")
            .is_some_and(|h| h.len() == 12 && h.bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(!kernel && !pseudonym, "class {:?}", r.class);
    }
    for r in m.rules().iter().take(256) {
        let peer = PeerKey {
            netns: 0,
            addr: Endpoint::from_socket_addr(SocketAddr::new(r.net, 0)),
        };
        let got = m.classify(&peer);
        let want = m
            .rules()
            .iter()
            .filter(|o| contains(o.net, o.prefix_len, r.net))
            .max_by_key(|o| o.prefix_len)
            .expect("a rule holds its own network");
        assert_eq!(got.class, want.class, "{}/{}", r.net, r.prefix_len);
    }
    true
}

/// Does `net/len` hold `ip`? The plain definition, as an oracle.
fn contains(net: IpAddr, len: u8, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            u32::from(n) & mask == u32::from(a) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            u128::from(n) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

/// A scenario's text: an error names the origin; a scenario that parses
/// is valid, and (when small enough to build quickly) simulates a
/// millisecond without panicking, with every event inside that time.
pub fn check_scenario(text: &str) -> bool {
    let s = match Scenario::parse(text, "fuzz.toml") {
        Ok(s) => s,
        Err(e) => {
            let m = e.to_string();
            assert!(m.starts_with("fuzz.toml"), "{m}");
            return false;
        }
    };
    s.validate().expect("a parsed scenario is valid");
    let transports: u64 = s
        .clients
        .iter()
        .map(|c| u64::from(c.count) * u64::from(c.connections))
        .sum();
    if transports > SIM_MAX_TRANSPORTS {
        return true;
    }
    let mut sim = Simulator::new(s);
    let mut out = Vec::new();
    sim.run_until(SIM_NS, &mut out);
    assert!(out.iter().all(|e| e.ts_ns <= SIM_NS));
    true
}
