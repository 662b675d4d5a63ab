//! Damaged recordings: truncated, a flipped bit, frames duplicated or
//! spliced, mutations resealed with valid checksums. Whole frames before
//! the damage are delivered, and the reader says where it stopped.

use super::*;

#[test]
fn truncation_anywhere_keeps_whole_frames_and_says_where() {
    let events = every_kind(3_000);
    let (bytes, _) = record(&events);
    let hlen = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    // Walk the frames to know each frame's start and events.
    let mut starts = Vec::new();
    let mut counts = Vec::new();
    let mut at = PREAMBLE_LEN + hlen;
    while at < bytes.len() {
        starts.push(at);
        counts.push(u32::from_le_bytes(bytes[at + 5..at + 9].try_into().unwrap()) as usize);
        at += FRAME_HEADER_LEN
            + u32::from_le_bytes(bytes[at + 9..at + 13].try_into().unwrap()) as usize;
    }
    assert_eq!(at, bytes.len());
    for cut in (PREAMBLE_LEN + hlen..bytes.len()).step_by(37) {
        let c = read_bytes(&bytes[..cut]).unwrap();
        let d = c.damage.expect("a cut file is damaged");
        assert_eq!(d.kind, DamageKind::Truncated, "{d}");
        let frame = starts.iter().rposition(|&s| s <= cut).unwrap();
        let intact: usize = counts[..frame].iter().sum();
        assert_eq!(c.events.len(), intact, "cut at {cut}: {d}");
        assert!(c.events[..] == events[..intact]);
        assert_eq!(d.frame, frame as u64);
        assert_eq!(d.offset, starts[frame] as u64);
        assert_eq!(d.events_before, intact as u64);
    }
    // Inside the header: nothing to replay, and it says so.
    for cut in 0..PREAMBLE_LEN + hlen {
        assert!(read_bytes(&bytes[..cut]).is_err(), "cut at {cut}");
    }
}

#[test]
fn a_flipped_bit_stops_at_its_frame() {
    let events = every_kind(3_000);
    let (bytes, _) = record(&events);
    let hlen = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    for pos in (PREAMBLE_LEN + hlen..bytes.len()).step_by(101) {
        let mut b = bytes.clone();
        b[pos] ^= 0x10;
        let c = read_bytes(&b).unwrap();
        let d = c.damage.expect("a flipped bit is noticed");
        assert_eq!(d.kind, DamageKind::Corrupt, "{d}");
        assert!(d.offset <= pos as u64, "{d} for byte {pos}");
        assert!(c.events[..] == events[..c.events.len()]);
    }
    for pos in 0..PREAMBLE_LEN + hlen {
        if (10..12).contains(&pos) {
            continue; // flags: reserved, ignored
        }
        let mut b = bytes.clone();
        b[pos] ^= 0x01;
        if pos == 8 {
            // Version 3 becomes 2, which exists: its first procedure
            // record (a reserved flag in v2) is damage.
            assert!(read_bytes(&b).map_or(true, |c| c.damage.is_some()));
            continue;
        }
        assert!(read_bytes(&b).is_err(), "header byte {pos}");
    }
}

#[test]
fn frames_cannot_be_duplicated_or_spliced() {
    let events = every_kind(3_000);
    let (bytes, _) = record(&events);
    let hlen = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let f0 = PREAMBLE_LEN + hlen;
    let len0 = u32::from_le_bytes(bytes[f0 + 9..f0 + 13].try_into().unwrap()) as usize;
    let f1 = f0 + FRAME_HEADER_LEN + len0;
    // Frame 0 twice.
    let mut dup = bytes[..f1].to_vec();
    dup.extend_from_slice(&bytes[f0..]);
    let c = read_bytes(&dup).unwrap();
    let d = c.damage.unwrap();
    assert_eq!((d.frame, d.offset), (1, f1 as u64), "{d}");
    assert!(d.reason.contains("numbered 0 where frame 1 belongs"), "{d}");
    // Frame 0 of another recording (another file id) in place of ours.
    let mut other_header = header();
    other_header.file_id = 78;
    let mut w = Writer::new(Vec::new(), &other_header).unwrap();
    w.write_all(&events).unwrap();
    let (other, _) = w.finish().unwrap();
    let mut spliced = bytes[..f0].to_vec();
    spliced.extend_from_slice(&other[f0..]);
    let d = read_bytes(&spliced).unwrap().damage.unwrap();
    assert_eq!((d.frame, d.offset), (0, f0 as u64), "{d}");
    // Data after the end marker: every event, then a complaint.
    let mut tail = bytes.clone();
    tail.push(0);
    let c = read_bytes(&tail).unwrap();
    assert_eq!(c.events.len(), events.len());
    let d = c.damage.unwrap();
    assert_eq!(d.offset, bytes.len() as u64);
}

#[test]
fn resealed_mutations_hit_the_decoder_without_panicking() {
    let events = every_kind(500);
    let (bytes, _) = record(&events);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..3_000 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let mut b = bytes.clone();
        let pos = PREAMBLE_LEN + (rng as usize >> 8) % (b.len() - PREAMBLE_LEN);
        b[pos] = (rng >> 3) as u8;
        format::reseal(&mut b);
        if let Ok(c) = read_bytes(&b) {
            assert!(c.events.len() <= b.len() / 2);
        }
    }
}
