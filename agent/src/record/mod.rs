//! Recordings: events to a compact, checked file and back, so a run can be
//! replayed (`nfsdtop --replay FILE`, `nfsdtopd --replay FILE`) with the
//! same numbers it had live.
//!
//! The format is specified in `docs/recording-format.md`: a preamble
//! (magic, format version, header length and checksum), a header (host,
//! kernel, generation, wait source, source, class map, start times), then
//! frames of up to 4096 events, each with a sequence number, a length and
//! CRC-32s. Events are a tag byte, a delta-encoded timestamp and an id in
//! a transport table that defines each transport once: a dispatch costs a
//! few bytes.
//!
//! - [`writer::Writer`] writes one; [`reader::Reader`] reads one, stopping
//!   at the first damage with what was intact delivered;
//! - the replay source (`source::replay`) drives a pipeline from one.

pub mod damage;
pub mod format;
pub mod reader;
pub mod writer;

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

pub use format::{Header, NfsdConfig, FORMAT_VERSION};
pub use reader::{Damage, DamageKind, OpenError, Reader};
pub use writer::{as_recorded, Summary, Writer};

use crate::enrich::classify::ClassMap;
use crate::model::{Event, SourceInfo, SourceKind};

/// Conventional file extension of recordings.
pub const EXTENSION: &str = "nfsdrec";

impl Header {
    /// The header for recording `info`'s source, whose clock reads
    /// `start_mono_ns` now, with `classmap` in force.
    pub fn for_source(info: &SourceInfo, classmap: &ClassMap, start_mono_ns: u64) -> Header {
        let start = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Header {
            host: if info.host.is_empty() {
                hostname()
            } else {
                info.host.clone()
            },
            kernel: info.kernel.clone(),
            generation: info.generation.clone(),
            wait_source: info.wait_source,
            source_kind: info.kind,
            source_detail: info.detail.clone(),
            class_map: classmap.to_string(),
            start_unix_ns: u64::try_from(start.as_nanos()).unwrap_or(u64::MAX),
            start_mono_ns,
            recorded_by: format!("nfsdtop {}", env!("CARGO_PKG_VERSION")),
            file_id: new_file_id(),
            nfsd: nfsd_config(info),
        }
    }

    /// The recorded class map, parsed (`origin` names it in errors).
    pub fn class_map(&self, origin: &str) -> anyhow::Result<ClassMap> {
        ClassMap::parse(&self.class_map, origin).map_err(|e| {
            anyhow::anyhow!(
                "the class map recorded in the file is invalid: {e} \
                     (pass --class-map FILE to replay it with another)"
            )
        })
    }
}

/// A random 64-bit id: std's hasher keys are random per process.
fn new_file_id() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// What the source says of nfsd's threads: the demo scenario's, or this
/// host's `/proc/fs/nfsd` for a live source (`None` where unreadable).
fn nfsd_config(info: &SourceInfo) -> NfsdConfig {
    match info.kind {
        SourceKind::Demo => NfsdConfig {
            threads: info
                .detail
                .split_whitespace()
                .find_map(|w| w.strip_prefix("threads="))
                .and_then(|n| n.parse().ok()),
            pools: Some(1),
            ports: None,
        },
        SourceKind::Live => {
            let t = crate::server::read_proc(Path::new(crate::server::PROC_NFSD));
            NfsdConfig {
                threads: t.threads,
                pools: t.pools,
                ports: t.ports,
            }
        }
        SourceKind::Replay | SourceKind::Remote => NfsdConfig::default(),
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Everything in a recording: its header, every intact event, and the
/// damage reading stopped at (if any).
pub struct Contents {
    pub header: Header,
    pub events: Vec<Event>,
    pub damage: Option<Damage>,
}

/// Read a whole recording into memory (tests, tools; replays stream).
pub fn read_file(path: &Path) -> Result<Contents, OpenError> {
    let mut r = Reader::open(path)?;
    read_all(&mut r)
}

/// Read a whole recording from bytes.
pub fn read_bytes(bytes: &[u8]) -> Result<Contents, OpenError> {
    let mut r = Reader::new(bytes)?;
    read_all(&mut r)
}

fn read_all<R: std::io::Read>(r: &mut Reader<R>) -> Result<Contents, OpenError> {
    let mut events = Vec::new();
    let damage = r.read_all(&mut events);
    Ok(Contents {
        header: r.header().clone(),
        events,
        damage,
    })
}

#[cfg(test)]
mod tests;
