//! The recording format's constants and building blocks: the file
//! preamble, the header's fields, frame headers, varints and the event
//! codes. docs/recording-format.md is the specification; this file and it
//! must say the same thing.
//!
//! Here: the constants, codes and flags, the preamble and frame headers,
//! and `reseal` for fuzzers; the header's fields in `header`; varints,
//! endpoints and the reading cursor in `codec`.

mod codec;
mod header;

pub use codec::{put_endpoint, put_varint, Cursor, VarintError};
pub use header::{
    source_kind_code, source_kind_of, tracepoint_of, wait_source_code, wait_source_of, Header,
    HeaderError, NfsdConfig,
};

/// The first eight bytes of every recording.
pub const MAGIC: [u8; 8] = *b"NFSDTREC";

/// The format version this build writes, and the newest it reads. v2
/// added the executed record's byte counts ([`flag::BYTES`]), v3 the
/// procedure records ([`flag::PROCEDURE`]), v4 the NFSv4 operation
/// records ([`flag::OPERATION`]), v5 the enqueue's in-flight depth
/// ([`flag::INFLIGHT`]); an older file never sets those flags, so it
/// replays unchanged.
pub const FORMAT_VERSION: u16 = 5;

/// Procedure names a file defines at most (v3); a writer records any
/// further name as `(other)`.
pub const MAX_PROC_NAMES: usize = 256;

/// magic (8) + version (2) + flags (2) + header length (4) + header CRC (4).
pub const PREAMBLE_LEN: usize = 20;

/// A header larger than this is corrupt (the real one is a few hundred
/// bytes plus the class map text).
pub const MAX_HEADER_LEN: u32 = 1 << 20;

/// kind (1) + sequence (4) + event count (4) + payload length (4) +
/// payload CRC (4) + frame header CRC (4).
pub const FRAME_HEADER_LEN: usize = 21;

/// A frame payload larger than this is corrupt. Writers close a frame
/// long before: see [`FRAME_TARGET_EVENTS`] and [`FRAME_TARGET_BYTES`].
pub const MAX_FRAME_PAYLOAD: u32 = 1 << 20;

/// Writers close a frame after this many events...
pub const FRAME_TARGET_EVENTS: u32 = 4096;
/// ...or once its payload reaches this many bytes.
pub const FRAME_TARGET_BYTES: usize = 64 << 10;

/// Frame kinds.
pub const FRAME_EVENTS: u8 = b'E';
pub const FRAME_END: u8 = b'Z';

/// Header field tags (tag varint, length varint, value bytes).
pub mod tag {
    pub const HOST: u64 = 1;
    pub const KERNEL: u64 = 2;
    pub const GENERATION: u64 = 3;
    pub const WAIT_SOURCE: u64 = 4;
    pub const SOURCE_KIND: u64 = 5;
    pub const SOURCE_DETAIL: u64 = 6;
    pub const CLASS_MAP: u64 = 7;
    pub const START_UNIX_NS: u64 = 8;
    pub const START_MONO_NS: u64 = 9;
    pub const RECORDED_BY: u64 = 10;
    pub const FILE_ID: u64 = 11;
    /// Added within v1 (older files lack them; see [`super::NfsdConfig`]).
    pub const THREADS: u64 = 12;
    pub const POOLS: u64 = 13;
    /// nfsd's ports, 2 bytes each (little-endian).
    pub const NFSD_PORTS: u64 = 14;
}

/// Record codes: the low three bits of a record's tag byte.
pub mod code {
    pub const ENQUEUE: u8 = 0;
    pub const DEQUEUE: u8 = 1;
    pub const EXECUTED: u8 = 2;
    pub const ACCEPTED: u8 = 3;
    pub const CLOSED: u8 = 4;
    pub const LOST: u8 = 5;
    /// Not an event: defines the next transport id.
    pub const DEFINE_XPRT: u8 = 6;
    /// Not an event: forget every transport id (the table is full).
    pub const RESET_XPRTS: u8 = 7;
}

/// The transport table never holds more ids than this: a writer resets it
/// before defining one more, and a reader refuses a file that does not.
pub const MAX_XPRTS: usize = 1 << 20;

/// Tag byte flags.
pub mod flag {
    pub const CODE_MASK: u8 = 0x07;
    /// The event's transport is the previous event's: no id follows.
    pub const SAME_XPRT: u8 = 0x08;
    /// Dequeue only: a qtime varint follows.
    pub const QTIME: u8 = 0x10;
    /// Dequeue only: a kernel class varint follows.
    pub const CLASS: u8 = 0x20;
    /// Enqueue only, v5 (the bit QTIME has on a dequeue): the transport's
    /// requests in flight at the enqueue (a varint) follow; without it
    /// they were not measured.
    pub const INFLIGHT: u8 = 0x10;
    /// Executed only (the bit QTIME has on a dequeue): a request-count
    /// varint follows; without it the record is one request.
    pub const REQUESTS: u8 = 0x10;
    /// Executed only, v2 (the bit CLASS has on a dequeue): bytes received
    /// and sent (two varints) follow the execution time; without it the
    /// bytes were not measured.
    pub const BYTES: u8 = 0x20;
    /// The timestamp delta is backwards (the source's clock is per CPU).
    pub const TS_BACK: u8 = 0x40;
    /// Executed only, v3: not the requests themselves but their
    /// procedure (an `EventKind::Procedure`): after the execution time, a
    /// name index varint; an index equal to the names defined so far
    /// defines the next one (a length byte, at most 16, and the name).
    /// Never with [`BYTES`].
    pub const PROCEDURE: u8 = 0x80;
    /// Executed only, v4: both [`PROCEDURE`] and [`BYTES`] mark an NFSv4
    /// operation record (an `EventKind::Operation`): a count varint, then
    /// the operation's number (one byte: `nfsdtop_common::nfs4ops`).
    pub const OPERATION: u8 = PROCEDURE | BYTES;
    /// Reserved: must be zero (v1, v2; v3 but on an executed record).
    pub const RESERVED: u8 = 0x80;
}

/// Endpoint type bytes inside a transport definition.
pub mod ep {
    pub const NONE: u8 = 0;
    pub const V4: u8 = 4;
    pub const V6: u8 = 6;
}

/// The 20-byte preamble that starts every file.
pub fn encode_preamble(header: &[u8]) -> [u8; PREAMBLE_LEN] {
    let mut p = [0u8; PREAMBLE_LEN];
    p[..8].copy_from_slice(&MAGIC);
    p[8..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    // bytes 10..12: flags, zero in v1
    p[12..16].copy_from_slice(&(header.len() as u32).to_le_bytes());
    p[16..20].copy_from_slice(&crc32(0, header).to_le_bytes());
    p
}

/// A frame header as written (see [`FRAME_HEADER_LEN`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    pub kind: u8,
    pub seq: u32,
    pub count: u32,
    pub len: u32,
    pub payload_crc: u32,
}

impl FrameHeader {
    pub fn encode(&self, file_id: u64) -> [u8; FRAME_HEADER_LEN] {
        let mut b = [0u8; FRAME_HEADER_LEN];
        b[0] = self.kind;
        b[1..5].copy_from_slice(&self.seq.to_le_bytes());
        b[5..9].copy_from_slice(&self.count.to_le_bytes());
        b[9..13].copy_from_slice(&self.len.to_le_bytes());
        b[13..17].copy_from_slice(&self.payload_crc.to_le_bytes());
        let crc = frame_header_crc(file_id, &b[..17]);
        b[17..21].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decode and check a frame header; `Err` says why it is corrupt.
    pub fn decode(b: &[u8; FRAME_HEADER_LEN], file_id: u64) -> Result<FrameHeader, String> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let stored = u32_at(17);
        let computed = frame_header_crc(file_id, &b[..17]);
        if stored != computed {
            return Err(format!(
                "frame header checksum mismatch (stored {stored:08x}, computed {computed:08x})"
            ));
        }
        Ok(FrameHeader {
            kind: b[0],
            seq: u32_at(1),
            count: u32_at(5),
            len: u32_at(9),
            payload_crc: u32_at(13),
        })
    }
}

fn frame_header_crc(file_id: u64, fields: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&file_id.to_le_bytes());
    h.update(fields);
    h.finalize()
}

/// CRC-32 (IEEE 802.3, the one of zlib and PNG), continuing from `init`.
pub fn crc32(init: u32, bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(init);
    h.update(bytes);
    h.finalize()
}

/// Recompute every checksum of a (possibly mutated) recording in place,
/// as far as its lengths allow, so that fuzzers reach the decoder behind
/// the checksums. Never panics; leaves what it cannot parse as it is.
#[doc(hidden)]
pub fn reseal(bytes: &mut [u8]) {
    if bytes.len() < PREAMBLE_LEN {
        return;
    }
    let hlen = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]) as usize;
    let Some(hend) = PREAMBLE_LEN.checked_add(hlen).filter(|&e| e <= bytes.len()) else {
        return;
    };
    let crc = crc32(0, &bytes[PREAMBLE_LEN..hend]);
    bytes[16..20].copy_from_slice(&crc.to_le_bytes());
    let file_id = Header::decode(&bytes[PREAMBLE_LEN..hend])
        .map(|h| h.file_id)
        .unwrap_or(0);
    let mut at = hend;
    while at + FRAME_HEADER_LEN <= bytes.len() {
        let len = u32::from_le_bytes([
            bytes[at + 9],
            bytes[at + 10],
            bytes[at + 11],
            bytes[at + 12],
        ]) as usize;
        let pstart = at + FRAME_HEADER_LEN;
        let pend = pstart.saturating_add(len).min(bytes.len());
        let pcrc = crc32(0, &bytes[pstart..pend]);
        bytes[at + 13..at + 17].copy_from_slice(&pcrc.to_le_bytes());
        let hcrc = frame_header_crc(file_id, &bytes[at..at + 17]);
        bytes[at + 17..at + 21].copy_from_slice(&hcrc.to_le_bytes());
        at = pend;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{SourceKind, WaitSource};

    #[test]
    fn varints_round_trip_and_reject_overlong() {
        for v in [0u64, 1, 127, 128, 300, 1 << 35, u64::MAX - 1, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert!(b.len() <= 10);
            let mut c = Cursor::new(&b);
            assert_eq!(c.varint(), Ok(v));
            assert!(c.is_empty());
        }
        let mut c = Cursor::new(&[0xff; 11]);
        assert_eq!(c.varint(), Err(VarintError::TooLong));
        // 10th byte may only carry the 64th bit.
        let mut b = vec![0xff; 9];
        b.push(0x02);
        assert_eq!(Cursor::new(&b).varint(), Err(VarintError::TooLong));
        assert_eq!(Cursor::new(&[0x80]).varint(), Err(VarintError::End));
    }

    #[test]
    fn header_round_trips_and_skips_unknown_fields() {
        let h = Header {
            host: "nfs1".into(),
            kernel: "6.12.0".into(),
            generation: "6.6+".into(),
            wait_source: WaitSource::Qtime,
            source_kind: SourceKind::Live,
            source_detail: "x".into(),
            class_map: "10.0.0.0/8 lab\n".into(),
            start_unix_ns: 1_700_000_000_000_000_000,
            start_mono_ns: 42,
            recorded_by: "nfsdtop test".into(),
            file_id: 0xdead_beef,
            nfsd: NfsdConfig {
                threads: Some(32),
                pools: Some(2),
                ports: Some(crate::aggregate::services::NfsdPorts::from_ports(&[
                    2049, 20049,
                ])),
            },
        };
        let mut b = h.encode();
        put_varint(&mut b, 99);
        put_varint(&mut b, 3);
        b.extend_from_slice(b"new");
        assert_eq!(Header::decode(&b), Ok(h.clone()));
        let mut twice = h.encode();
        twice.extend_from_slice(&h.encode()[..6]);
        assert!(Header::decode(&twice).is_err());
    }

    #[test]
    fn a_header_without_threads_and_pools_still_decodes() {
        // As written before tags 12 and 13 existed.
        let old = Header {
            host: "nfs1".into(),
            file_id: 7,
            ..Header::default()
        };
        let h = Header::decode(&old.encode()).unwrap();
        assert_eq!(h.nfsd, NfsdConfig::default());
        let mut bad = old.encode();
        put_varint(&mut bad, tag::THREADS);
        put_varint(&mut bad, 2);
        bad.extend_from_slice(&[16, 0]);
        let e = Header::decode(&bad).unwrap_err();
        assert!(e.reason.contains("threads must be 4 bytes"), "{e:?}");
        let mut odd = old.encode();
        put_varint(&mut odd, tag::NFSD_PORTS);
        put_varint(&mut odd, 3);
        odd.extend_from_slice(&[1, 8, 0]);
        let e = Header::decode(&odd).unwrap_err();
        assert!(
            e.reason.contains("nfsd ports must be 2 bytes each"),
            "{e:?}"
        );
    }

    #[test]
    fn crc_is_the_ieee_one() {
        assert_eq!(crc32(0, b"123456789"), 0xcbf4_3926);
    }
}
