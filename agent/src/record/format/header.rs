//! The recording's header: what a replay needs to know about where the
//! events came from, its fields' codes, and its encoding as tagged fields.

use super::{put_varint, tag, Cursor};
use crate::model::{SourceKind, Tracepoint, WaitSource};

/// Everything a replay needs to know about where the events came from.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Header {
    pub host: String,
    /// Kernel release (`uname -r`) or the source's description of itself.
    pub kernel: String,
    /// Tracepoint generation, e.g. "6.6+" or "demo".
    pub generation: String,
    pub wait_source: WaitSource,
    /// What was recorded: live, demo, or a replay (re-recorded).
    pub source_kind: SourceKind,
    /// The source's own detail (scenario and policy for demo).
    pub source_detail: String,
    /// The class map in force while recording, as `ClassMap`'s text.
    pub class_map: String,
    /// Wall clock when the recording started, Unix nanoseconds.
    pub start_unix_ns: u64,
    /// The source clock when the recording started: event timestamps are
    /// on this clock.
    pub start_mono_ns: u64,
    /// "nfsdtop 0.1.0": the program that wrote the file.
    pub recorded_by: String,
    /// Random per file; every frame's checksum covers it, so frames of
    /// another recording cannot be spliced in unnoticed.
    pub file_id: u64,
    /// The server's thread configuration at record time, where known.
    pub nfsd: NfsdConfig,
}

/// nfsd's threads and pools when the recording started (`nfsdtop
/// whatif` models the server with them). `None`: not recorded (a file
/// written before these fields existed, or a source that could not tell).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct NfsdConfig {
    /// Threads over all pools (`/proc/fs/nfsd/threads`).
    pub threads: Option<u32>,
    /// Thread pools (entries of `/proc/fs/nfsd/pool_threads`).
    pub pools: Option<u32>,
    /// The ports nfsd listened on (`/proc/fs/nfsd/portlist`): a replay
    /// keeps the other services' transports apart by them.
    pub ports: Option<crate::aggregate::services::NfsdPorts>,
}

pub fn wait_source_code(w: WaitSource) -> u8 {
    match w {
        WaitSource::None => 0,
        WaitSource::Qtime => 1,
        WaitSource::EnqueueDequeue => 2,
    }
}

pub fn wait_source_of(code: u8) -> Option<WaitSource> {
    match code {
        0 => Some(WaitSource::None),
        1 => Some(WaitSource::Qtime),
        2 => Some(WaitSource::EnqueueDequeue),
        _ => None,
    }
}

pub fn source_kind_code(k: SourceKind) -> u8 {
    match k {
        SourceKind::Live => 0,
        SourceKind::Demo => 1,
        SourceKind::Replay => 2,
        SourceKind::Remote => 3,
    }
}

pub fn source_kind_of(code: u8) -> Option<SourceKind> {
    match code {
        0 => Some(SourceKind::Live),
        1 => Some(SourceKind::Demo),
        2 => Some(SourceKind::Replay),
        3 => Some(SourceKind::Remote),
        _ => None,
    }
}

pub fn tracepoint_of(code: u8) -> Option<Tracepoint> {
    Tracepoint::ALL.get(code as usize).copied()
}

/// Why a header could not be decoded (the reader adds the offset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderError {
    /// Offset of the problem within the header bytes.
    pub at: usize,
    pub reason: String,
}

impl Header {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256 + self.class_map.len());
        let mut field = |tag: u64, value: &[u8]| {
            put_varint(&mut out, tag);
            put_varint(&mut out, value.len() as u64);
            out.extend_from_slice(value);
        };
        field(tag::HOST, self.host.as_bytes());
        field(tag::KERNEL, self.kernel.as_bytes());
        field(tag::GENERATION, self.generation.as_bytes());
        field(tag::WAIT_SOURCE, &[wait_source_code(self.wait_source)]);
        field(tag::SOURCE_KIND, &[source_kind_code(self.source_kind)]);
        field(tag::SOURCE_DETAIL, self.source_detail.as_bytes());
        field(tag::CLASS_MAP, self.class_map.as_bytes());
        field(tag::START_UNIX_NS, &self.start_unix_ns.to_le_bytes());
        field(tag::START_MONO_NS, &self.start_mono_ns.to_le_bytes());
        field(tag::RECORDED_BY, self.recorded_by.as_bytes());
        field(tag::FILE_ID, &self.file_id.to_le_bytes());
        if let Some(n) = self.nfsd.threads {
            field(tag::THREADS, &n.to_le_bytes());
        }
        if let Some(n) = self.nfsd.pools {
            field(tag::POOLS, &n.to_le_bytes());
        }
        if let Some(p) = &self.nfsd.ports {
            let bytes: Vec<u8> = p.ports().iter().flat_map(|p| p.to_le_bytes()).collect();
            field(tag::NFSD_PORTS, &bytes);
        }
        out
    }

    /// Decode the header's fields. Unknown tags are skipped (a later v1
    /// writer may add fields); known ones are checked; a repeated field
    /// is corrupt. Every field is required except those added later.
    pub fn decode(bytes: &[u8]) -> Result<Header, HeaderError> {
        let mut h = Header::default();
        let mut seen: u32 = 0;
        let mut c = Cursor::new(bytes);
        while !c.is_empty() {
            let at = c.pos();
            let err = |reason: String| HeaderError { at, reason };
            let tag = c.varint().map_err(|e| err(format!("field tag: {e}")))?;
            let len = c
                .varint()
                .map_err(|e| err(format!("length of field {tag}: {e}")))?;
            let value = usize::try_from(len)
                .ok()
                .and_then(|n| c.take(n))
                .ok_or_else(|| {
                    err(format!(
                        "field {tag} declares {len} bytes but only {} remain",
                        bytes.len() - c.pos()
                    ))
                })?;
            if (1..=31).contains(&tag) {
                let bit = 1u32 << tag;
                if seen & bit != 0 {
                    return Err(err(format!("field {} appears twice", tag_name(tag))));
                }
                seen |= bit;
            }
            let text = |what: &str| {
                std::str::from_utf8(value)
                    .map(str::to_owned)
                    .map_err(|_| err(format!("{what} is not valid UTF-8")))
            };
            // What is shown as one line (the file may come from anyone).
            let line = |what: &str| text(what).map(|t| crate::text::displayable(&t));
            let fixed_u64 = |what: &str| {
                <[u8; 8]>::try_from(value)
                    .map(u64::from_le_bytes)
                    .map_err(|_| err(format!("{what} must be 8 bytes, found {}", value.len())))
            };
            let fixed_u32 = |what: &str| {
                <[u8; 4]>::try_from(value)
                    .map(u32::from_le_bytes)
                    .map_err(|_| err(format!("{what} must be 4 bytes, found {}", value.len())))
            };
            let one_byte = |what: &str| match value {
                [b] => Ok(*b),
                _ => Err(err(format!("{what} must be 1 byte, found {}", value.len()))),
            };
            match tag {
                tag::HOST => h.host = line("host")?,
                tag::KERNEL => h.kernel = line("kernel")?,
                tag::GENERATION => h.generation = line("generation")?,
                tag::WAIT_SOURCE => {
                    let b = one_byte("wait source")?;
                    h.wait_source = wait_source_of(b)
                        .ok_or_else(|| err(format!("unknown wait source code {b}")))?;
                }
                tag::SOURCE_KIND => {
                    let b = one_byte("source kind")?;
                    h.source_kind = source_kind_of(b)
                        .ok_or_else(|| err(format!("unknown source kind code {b}")))?;
                }
                tag::SOURCE_DETAIL => h.source_detail = line("source detail")?,
                tag::CLASS_MAP => h.class_map = text("class map")?,
                tag::START_UNIX_NS => h.start_unix_ns = fixed_u64("start time")?,
                tag::START_MONO_NS => h.start_mono_ns = fixed_u64("start clock")?,
                tag::RECORDED_BY => h.recorded_by = line("recorded-by")?,
                tag::FILE_ID => h.file_id = fixed_u64("file id")?,
                tag::THREADS => h.nfsd.threads = Some(fixed_u32("threads")?),
                tag::POOLS => h.nfsd.pools = Some(fixed_u32("pools")?),
                tag::NFSD_PORTS => {
                    if value.is_empty() || value.len() % 2 != 0 {
                        return Err(err(format!(
                            "nfsd ports must be 2 bytes each, found {} bytes",
                            value.len()
                        )));
                    }
                    let ports: Vec<u16> = value
                        .chunks_exact(2)
                        .map(|c| u16::from_le_bytes([c[0], c[1]]))
                        .collect();
                    h.nfsd.ports = Some(crate::aggregate::services::NfsdPorts::from_ports(&ports));
                }
                _ => {} // a field added later within v1: skip it
            }
        }
        for t in [
            tag::HOST,
            tag::KERNEL,
            tag::GENERATION,
            tag::WAIT_SOURCE,
            tag::SOURCE_KIND,
            tag::SOURCE_DETAIL,
            tag::CLASS_MAP,
            tag::START_UNIX_NS,
            tag::START_MONO_NS,
            tag::FILE_ID,
        ] {
            if seen & (1 << t) == 0 {
                return Err(HeaderError {
                    at: bytes.len(),
                    reason: format!("required field {} is missing", tag_name(t)),
                });
            }
        }
        Ok(h)
    }
}

fn tag_name(t: u64) -> String {
    match t {
        tag::HOST => "host".into(),
        tag::KERNEL => "kernel".into(),
        tag::GENERATION => "generation".into(),
        tag::WAIT_SOURCE => "wait-source".into(),
        tag::SOURCE_KIND => "source-kind".into(),
        tag::SOURCE_DETAIL => "source-detail".into(),
        tag::CLASS_MAP => "class-map".into(),
        tag::START_UNIX_NS => "start-unix-ns".into(),
        tag::START_MONO_NS => "start-mono-ns".into(),
        tag::RECORDED_BY => "recorded-by".into(),
        tag::FILE_ID => "file-id".into(),
        tag::THREADS => "threads".into(),
        tag::POOLS => "pools".into(),
        tag::NFSD_PORTS => "nfsd-ports".into(),
        t => format!("#{t}"),
    }
}
