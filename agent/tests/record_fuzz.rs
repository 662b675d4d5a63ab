//! A deterministic, bounded mutation fuzzer for the recording reader (the
//! cargo-fuzz target in fuzz/ does the same, open-ended, where cargo-fuzz
//! runs). Thousands of seeded random mutations and truncations of a valid
//! recording: the reader must never panic, and must only ever deliver a
//! prefix of the original events (so never more of them). A second pass
//! recomputes the checksums after mutating, so the decoder behind them is
//! exercised too.

use std::panic;

use nfsdtop_agent::model::{Endpoint, Event, EventKind, Tracepoint, XprtKey};
use nfsdtop_agent::record::format::reseal;
use nfsdtop_agent::record::{self, Header, Reader, Writer};
use nfsdtop_agent::source::demo::{Scenario, Simulator};

mod common;
use common::Rng;

/// A small recording with many frames and every kind of record.
fn sample() -> (Vec<u8>, Vec<Event>) {
    let mut sim = Simulator::new(Scenario::builtin("movers").unwrap());
    let mut events = Vec::new();
    sim.run_until(1_000_000_000, &mut events);
    let v6 = XprtKey {
        netns: 7,
        server: Endpoint::V6 {
            ip: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            port: 2049,
        },
        client: Endpoint::V6 {
            ip: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9],
            port: 901,
        },
    };
    let t = events.last().map_or(0, |e| e.ts_ns);
    events.extend([
        Event {
            ts_ns: t + 5,
            xprt: v6,
            kind: EventKind::Accepted,
        },
        Event {
            ts_ns: t + 3,
            xprt: v6,
            kind: EventKind::Dequeue {
                qtime_ns: Some(1234),
                class: Some(0x8000_0003),
            },
        },
        Event {
            ts_ns: t + 9,
            xprt: XprtKey::default(),
            kind: EventKind::Lost {
                tracepoint: Tracepoint::Dequeue,
                count: 17,
            },
        },
        Event {
            ts_ns: t + 10,
            xprt: v6,
            kind: EventKind::Closed,
        },
    ]);
    let header = Header {
        host: "fuzz".into(),
        kernel: "6.16".into(),
        generation: "6.16+".into(),
        class_map: "10.1.0.0/24 movers\n".into(),
        file_id: 99,
        ..Header::default()
    };
    let mut w = Writer::new(Vec::new(), &header).unwrap();
    w.set_frame_events(97);
    w.write_all(&events).unwrap();
    let (bytes, _) = w.finish().unwrap();
    // What the file holds: a named execution is two events there.
    let events = events
        .iter()
        .flat_map(|e| {
            let (first, second) = record::as_recorded(e);
            std::iter::once(first).chain(second)
        })
        .collect();
    (bytes, events)
}

fn mutate(rng: &mut Rng, orig: &[u8]) -> Vec<u8> {
    let mut b = orig.to_vec();
    for _ in 0..1 + rng.below(3) {
        let len = b.len();
        match rng.below(9) {
            0 => {
                let i = rng.below(len);
                if let Some(x) = b.get_mut(i) {
                    *x ^= 1 << rng.below(8);
                }
            }
            1 => {
                let i = rng.below(len);
                if let Some(x) = b.get_mut(i) {
                    *x = rng.next() as u8;
                }
            }
            2 => b.truncate(rng.below(len + 1)),
            3 => {
                let i = rng.below(len + 1);
                let n = 1 + rng.below(16);
                let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                b.splice(i..i, junk);
            }
            4 => {
                let i = rng.below(len);
                let n = rng.below(64).min(len - i.min(len));
                b.drain(i..i + n);
            }
            5 => {
                // Duplicate a chunk (frames repeated).
                let i = rng.below(len);
                let n = rng.below(4096).min(len - i.min(len));
                let chunk = b[i..i + n].to_vec();
                let at = rng.below(b.len() + 1);
                b.splice(at..at, chunk);
            }
            6 => {
                // Interesting values in a 4-byte field.
                let i = rng.below(len.saturating_sub(4));
                let v: u32 = [0, 1, 0x7fff_ffff, 0xffff_ffff, 0x0010_0001][rng.below(5)];
                if i + 4 <= b.len() {
                    b[i..i + 4].copy_from_slice(&v.to_le_bytes());
                }
            }
            7 => {
                // Swap two chunks of equal size (frames reordered).
                let n = 1 + rng.below(512);
                if len > 2 * n {
                    let i = rng.below(len - n);
                    let j = rng.below(len - n);
                    for k in 0..n {
                        b.swap(i + k, j + k);
                    }
                }
            }
            _ => {
                // Zero a run (a hole in the file).
                let i = rng.below(len);
                let n = rng.below(256).min(len - i.min(len));
                b[i..i + n].fill(0);
            }
        }
    }
    b
}

/// Read `bytes` frame by frame, catching panics: the events delivered.
fn read(bytes: &[u8]) -> Option<Vec<Event>> {
    let r = panic::catch_unwind(|| {
        let mut out = Vec::new();
        if let Ok(mut r) = Reader::new(bytes) {
            let _ = r.read_all(&mut out);
            // Damage is sticky; reading on neither panics nor adds events.
            let n = out.len();
            let _ = r.read_frame(&mut out);
            assert_eq!(out.len(), n);
        }
        out
    });
    r.ok()
}

#[test]
fn raw_mutations_never_panic_and_only_ever_yield_a_prefix() {
    let (orig, events) = sample();
    assert!(record::read_bytes(&orig).unwrap().events == events);
    assert!(
        events.len() > 2_000 && orig.len() > 8_000,
        "{} events",
        events.len()
    );
    let mut rng = Rng(0x5eed_0001);
    let (mut damaged, mut some_events) = (0, 0);
    for i in 0..10_000 {
        let b = mutate(&mut rng, &orig);
        let got = read(&b).unwrap_or_else(|| panic!("case {i}: the reader panicked"));
        assert!(
            got.len() <= events.len(),
            "case {i}: more events than recorded"
        );
        assert!(
            got[..] == events[..got.len()],
            "case {i}: not a prefix of the original"
        );
        if b != orig {
            damaged += 1;
        }
        if !got.is_empty() {
            some_events += 1;
        }
    }
    // The fuzzer really damaged files, and the reader still replayed most.
    assert!(damaged > 9_750, "{damaged}");
    assert!(some_events > 5_000, "{some_events}");
}

#[test]
fn resealed_mutations_reach_the_decoder_and_never_panic() {
    let (orig, events) = sample();
    let mut rng = Rng(0x5eed_0002);
    let mut decoded_past_damage = 0;
    for i in 0..5_000 {
        let mut b = mutate(&mut rng, &orig);
        reseal(&mut b);
        let got = read(&b).unwrap_or_else(|| panic!("case {i}: the reader panicked"));
        // Checksums no longer protect: still bounded by the input.
        assert!(got.len() <= b.len() / 2, "case {i}");
        if got.len() > events.len() / 2 {
            decoded_past_damage += 1;
        }
    }
    assert!(decoded_past_damage > 150, "{decoded_past_damage}");
}
