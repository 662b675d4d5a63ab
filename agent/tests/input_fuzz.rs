//! A deterministic, bounded mutation fuzzer for the text inputs: demo
//! scenario TOML and class maps (the cargo-fuzz targets fuzz/scenario.rs
//! and fuzz/class_map.rs do the same, open-ended). Seeded mutations of
//! valid files, with the numbers and words that broke them before
//! (4000000000, 0.000001, an address as a class name, "other"); the
//! properties are nfsdtop_agent::fuzzing's.

use std::panic;

use nfsdtop_agent::fuzzing::{check_class_map, check_scenario};

mod common;
use common::Rng;

const SCENARIO: &str = "name = \"seed\"\nthreads = 16\nservice_ms = 10.0\njitter = 0.5\n\
policy = \"rr-class\"\nrtt_us = 100.0\n\n[[client]]\naddress = \"10.0.0.2\"\ncount = 3\n\
connections = 2\ninflight = 32\n\n[[client]]\naddress = \"fd00::9\"\nconnections = 1\n\
burst = 8\nthink_ms = 5.0\n\n[[class]]\nprefix = \"10.0.0.0/24\"\nname = \"movers\"\n\
per_peer = true\n";

const CLASS_MAP: &str =
    "# prefix class [per-peer]\n10.1.0.0/24 movers\n0.0.0.0/0 customers per-peer\n\
fd00:1::/64 lab\n10.1.0.128/25 special # longer wins\n::/0 rest\n";

/// Words worth splicing in: numbers at and past every bound, keys,
/// addresses, and the names a class may not have.
const WORDS: &[&str] = &[
    "0",
    "1",
    "-1",
    "4000000000",
    "4294967295",
    "18446744073709551615",
    "1e300",
    "nan",
    "inf",
    "0.000001",
    "0.0",
    "4096",
    "1024",
    "1025",
    "100000",
    "359",
    "360",
    "threads",
    "service_ms",
    "rtt_us",
    "jitter",
    "inflight",
    "burst",
    "count",
    "connections",
    "think_ms",
    "address",
    "[[client]]",
    "[[class]]",
    "=",
    "\"",
    "\n",
    " ",
    "#",
    "/",
    "/0",
    "/32",
    "/128",
    "per-peer",
    "other",
    "class-7",
    "anonymous",
    "10.2.0.1",
    "fd00::1",
    "anon-0123456789ab",
    "::ffff:10.0.0.1",
    "10.0.0.0/8",
    "é",
];

/// A value of one `key = value` line replaced by a word: mostly still
/// TOML, so it reaches the bounds and the simulator.
fn new_value(rng: &mut Rng, b: &mut Vec<u8>) {
    let lines: Vec<usize> = (0..b.len()).filter(|&i| b[i] == b'=').collect();
    if lines.is_empty() {
        return;
    }
    let eq = lines[rng.below(lines.len())];
    let end = (eq..b.len()).find(|&i| b[i] == b'\n').unwrap_or(b.len());
    let w = WORDS[rng.below(18)].as_bytes();
    let v: Vec<u8> = [b" ".as_slice(), w].concat();
    b.splice(eq + 1..end, v);
}

/// One to three mutations; `values` adds `new_value` to the choices.
fn mutate(rng: &mut Rng, orig: &str, values: bool) -> String {
    let mut b = orig.as_bytes().to_vec();
    for _ in 0..1 + rng.below(3) {
        let len = b.len();
        match rng.below(if values { 9 } else { 6 }) {
            6..=8 => new_value(rng, &mut b),
            0 => {
                let w = WORDS[rng.below(WORDS.len())].as_bytes();
                let at = rng.below(len + 1);
                b.splice(at..at, w.iter().copied());
            }
            1 => {
                // Replace a run with a word (a value changed).
                let at = rng.below(len + 1);
                let n = rng.below(12).min(len - at);
                let w = WORDS[rng.below(WORDS.len())].as_bytes();
                b.splice(at..at + n, w.iter().copied());
            }
            2 => {
                let at = rng.below(len + 1);
                let n = rng.below(24).min(len - at);
                b.drain(at..at + n);
            }
            3 => b.truncate(rng.below(len + 1)),
            4 => {
                // Repeat a chunk (tables or lines duplicated).
                let at = rng.below(len + 1);
                let n = rng.below(200).min(len - at);
                let chunk = b[at..at + n].to_vec();
                let to = rng.below(b.len() + 1);
                b.splice(to..to, chunk);
            }
            _ => {
                if let Some(x) = b.get_mut(rng.below(len)) {
                    *x = rng.next() as u8;
                }
            }
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

/// `cases` mutations of `orig` through `check`: how many differed from
/// it, and how many of those were accepted.
fn fuzz(seed: u64, orig: &str, cases: usize, check: fn(&str) -> bool) -> (usize, usize) {
    let values = orig.contains('=');
    let mut rng = Rng(seed);
    let (mut changed, mut accepted) = (0, 0);
    for i in 0..cases {
        let text = mutate(&mut rng, orig, values);
        if text == orig {
            continue;
        }
        changed += 1;
        match panic::catch_unwind(|| check(&text)) {
            Ok(ok) => accepted += usize::from(ok),
            Err(_) => panic!("case {i} failed on {text:?}"),
        }
    }
    (changed, accepted)
}

#[test]
fn mutated_scenarios_never_panic_and_what_parses_simulates() {
    assert!(check_scenario(SCENARIO));
    let (changed, accepted) = fuzz(0x5eed_0101, SCENARIO, 8_000, check_scenario);
    // Both the refusals and the simulator behind an accepted file are
    // exercised.
    assert!(changed > 7_800, "{changed}");
    assert!(
        accepted > 200 && accepted < changed / 2,
        "{accepted} of {changed}"
    );
}

#[test]
fn mutated_class_maps_never_panic_and_what_parses_round_trips() {
    assert!(check_class_map(CLASS_MAP));
    let (changed, accepted) = fuzz(0x5eed_0102, CLASS_MAP, 10_000, check_class_map);
    assert!(changed > 9_800, "{changed}");
    assert!(
        accepted > 500 && accepted < changed / 2,
        "{accepted} of {changed}"
    );
}
