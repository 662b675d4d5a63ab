//! The recording reader on arbitrary bytes: it must never panic, never
//! allocate beyond a frame's worth, and never deliver more events than the
//! input could hold. Each input is read twice: as it is (the checksums
//! stop almost everything at the first damaged frame) and resealed, with
//! every checksum recomputed, so the decoder behind them is fuzzed too.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nfsdtop_agent::record::format::reseal;
use nfsdtop_agent::record::Reader;

fn check(data: &[u8]) {
    let Ok(mut r) = Reader::new(data) else {
        return;
    };
    let mut out = Vec::new();
    let damage = r.read_all(&mut out);
    // Every event takes at least two bytes of input.
    assert!(out.len() <= data.len() / 2);
    assert_eq!(out.len() as u64, r.events());
    if let Some(d) = damage {
        assert!(d.offset <= data.len() as u64);
        assert_eq!(d.events_before, r.events());
        // Damage is sticky: nothing more comes out.
        let n = out.len();
        assert!(r.read_frame(&mut out).is_err());
        assert_eq!(out.len(), n);
    } else {
        assert!(r.ended_cleanly());
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    let mut resealed = data.to_vec();
    reseal(&mut resealed);
    check(&resealed);
});
