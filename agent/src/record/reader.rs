//! A recording → events, checking everything. A frame is delivered whole
//! or not at all: at the first damage (truncation, a checksum mismatch, a
//! malformed record) reading stops, every frame before it having been
//! delivered intact, and [`Damage`] says where and why. No input makes
//! the reader panic or allocate more than a frame's worth.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use super::format::{
    code, flag, tracepoint_of, Cursor, FrameHeader, Header, FORMAT_VERSION, FRAME_END,
    FRAME_EVENTS, FRAME_HEADER_LEN, MAGIC, MAX_FRAME_PAYLOAD, MAX_HEADER_LEN, MAX_PROC_NAMES,
    MAX_XPRTS, PREAMBLE_LEN,
};
use crate::model::{Bytes, Event, EventKind, ProcName, XprtKey};

/// Versions past [`FORMAT_VERSION`] that are taken for a newer nfsdtop's
/// rather than for damage.
const FUTURE_VERSIONS: u16 = 64;

pub use super::damage::{Damage, DamageKind, OpenError};

enum State {
    Reading,
    Ended,
    Damaged(Damage),
}

pub struct Reader<R: Read> {
    src: R,
    header: Header,
    /// Offset of the next unread byte.
    offset: u64,
    /// The next frame's number.
    seq: u64,
    events: u64,
    xprts: Vec<XprtKey>,
    prev_xprt: Option<usize>,
    prev_ts: u64,
    /// v3: the procedure names the file has defined; `None` before v3
    /// (where the procedure flag is reserved).
    proc_names: Option<Vec<ProcName>>,
    /// v4+: NFSv4 operation records ([`flag::OPERATION`]).
    operations: bool,
    /// v5+: enqueues with their in-flight depth ([`flag::INFLIGHT`]).
    inflight: bool,
    payload: Vec<u8>,
    state: State,
}

impl Reader<BufReader<File>> {
    pub fn open(path: &Path) -> Result<Self, OpenError> {
        let f = File::open(path)?;
        Reader::new(BufReader::with_capacity(256 << 10, f))
    }
}

/// A procedure record's name: an index into `names`, or the next one,
/// defined here.
fn read_proc_name(c: &mut Cursor<'_>, names: &mut Vec<ProcName>) -> Result<ProcName, String> {
    let i = c.varint().map_err(|e| format!("procedure name: {e}"))?;
    let i = usize::try_from(i).unwrap_or(usize::MAX);
    if let Some(n) = names.get(i) {
        return Ok(*n);
    }
    if i != names.len() || i >= MAX_PROC_NAMES {
        return Err(format!(
            "procedure name {i} is not defined ({} are)",
            names.len()
        ));
    }
    let len = c.byte().ok_or("ends inside a procedure name")? as usize;
    if len > ProcName::MAX {
        return Err(format!(
            "procedure name of {len} bytes (at most {})",
            ProcName::MAX
        ));
    }
    let bytes = c.take(len).ok_or("ends inside a procedure name")?;
    let name = ProcName::new(&String::from_utf8_lossy(bytes));
    names.push(name);
    Ok(name)
}

/// Read until `buf` is full or the input ends; the count read.
fn fill(src: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match src.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl<R: Read> Reader<R> {
    /// Read and check the preamble and header.
    pub fn new(mut src: R) -> Result<Self, OpenError> {
        let mut pre = [0u8; PREAMBLE_LEN];
        let n = fill(&mut src, &mut pre)?;
        if n < MAGIC.len() || pre[..8] != MAGIC {
            return Err(OpenError::NotARecording(pre[..n.min(8)].to_vec()));
        }
        if n < 10 {
            return Err(OpenError::Header {
                offset: n as u64,
                reason: format!("the file ends after {n} bytes, inside the preamble"),
            });
        }
        let version = u16::from_le_bytes([pre[8], pre[9]]);
        // A version far beyond this one is a damaged word, not a newer
        // nfsdtop: the format changes a few times a year at most.
        if version > FORMAT_VERSION.saturating_add(FUTURE_VERSIONS) {
            return Err(OpenError::BadVersion(version));
        }
        if version > FORMAT_VERSION {
            return Err(OpenError::NewerVersion {
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        if version == 0 {
            return Err(OpenError::BadVersion(version));
        }
        if n < PREAMBLE_LEN {
            return Err(OpenError::Header {
                offset: n as u64,
                reason: format!(
                    "the file ends after {n} bytes, inside the {PREAMBLE_LEN}-byte preamble"
                ),
            });
        }
        let len = u32::from_le_bytes([pre[12], pre[13], pre[14], pre[15]]);
        let crc = u32::from_le_bytes([pre[16], pre[17], pre[18], pre[19]]);
        if len > MAX_HEADER_LEN {
            return Err(OpenError::Header {
                offset: 12,
                reason: format!("header length {len} exceeds the limit of {MAX_HEADER_LEN}"),
            });
        }
        let mut hbytes = vec![0u8; len as usize];
        let got = fill(&mut src, &mut hbytes)?;
        if got < hbytes.len() {
            return Err(OpenError::Header {
                offset: (PREAMBLE_LEN + got) as u64,
                reason: format!(
                    "the file ends inside the header ({got} of its {len} bytes are there)"
                ),
            });
        }
        let computed = super::format::crc32(0, &hbytes);
        if computed != crc {
            return Err(OpenError::Header {
                offset: PREAMBLE_LEN as u64,
                reason: format!(
                    "header checksum mismatch (stored {crc:08x}, computed {computed:08x})"
                ),
            });
        }
        let header = Header::decode(&hbytes).map_err(|e| OpenError::Header {
            offset: (PREAMBLE_LEN + e.at) as u64,
            reason: e.reason,
        })?;
        Ok(Reader {
            src,
            prev_ts: header.start_mono_ns,
            header,
            offset: (PREAMBLE_LEN as u64) + u64::from(len),
            seq: 0,
            events: 0,
            xprts: Vec::new(),
            prev_xprt: None,
            proc_names: (version >= 3).then(Vec::new),
            operations: version >= 4,
            inflight: version >= 5,
            payload: Vec::new(),
            state: State::Reading,
        })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Events delivered so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The damage reading stopped at, once it has.
    pub fn damage(&self) -> Option<&Damage> {
        match &self.state {
            State::Damaged(d) => Some(d),
            _ => None,
        }
    }

    /// True once the end marker was read and nothing followed it.
    pub fn ended_cleanly(&self) -> bool {
        matches!(self.state, State::Ended)
    }

    /// Append the next frame's events to `out`: `Ok(Some(n))` for a frame
    /// of `n` events, `Ok(None)` at the end marker, `Err` at damage (then
    /// `out` is as it was, and every later call returns the same damage).
    pub fn read_frame(&mut self, out: &mut Vec<Event>) -> Result<Option<usize>, Damage> {
        match &self.state {
            State::Ended => return Ok(None),
            State::Damaged(d) => return Err(d.clone()),
            State::Reading => {}
        }
        let before = out.len();
        match self.next(out) {
            Ok(r) => Ok(r),
            Err(d) => {
                out.truncate(before);
                self.state = State::Damaged(d.clone());
                Err(d)
            }
        }
    }

    /// Read to the end: every intact event, and the damage if any.
    pub fn read_all(&mut self, out: &mut Vec<Event>) -> Option<Damage> {
        loop {
            match self.read_frame(out) {
                Ok(Some(_)) => {}
                Ok(None) => return None,
                Err(d) => return Some(d),
            }
        }
    }

    fn damage_at(&self, kind: DamageKind, offset: u64, reason: String) -> Damage {
        Damage {
            kind,
            offset,
            frame: self.seq,
            reason,
            events_before: self.events,
        }
    }

    fn next(&mut self, out: &mut Vec<Event>) -> Result<Option<usize>, Damage> {
        let frame_at = self.offset;
        let mut hb = [0u8; FRAME_HEADER_LEN];
        let n = fill(&mut self.src, &mut hb)
            .map_err(|e| self.damage_at(DamageKind::Io, frame_at, format!("read error: {e}")))?;
        if n == 0 {
            return Err(self.damage_at(
                DamageKind::Truncated,
                frame_at,
                format!(
                    "the recording ends after {} frames without its end marker \
                     (the recorder was killed, or is still writing)",
                    self.seq
                ),
            ));
        }
        if n < FRAME_HEADER_LEN {
            return Err(self.damage_at(
                DamageKind::Truncated,
                frame_at,
                format!("the file ends inside a frame header ({n} of {FRAME_HEADER_LEN} bytes)"),
            ));
        }
        let h = FrameHeader::decode(&hb, self.header.file_id)
            .map_err(|r| self.damage_at(DamageKind::Corrupt, frame_at, r))?;
        if u64::from(h.seq) != self.seq & 0xffff_ffff {
            return Err(self.damage_at(
                DamageKind::Corrupt,
                frame_at,
                format!(
                    "frame numbered {} where frame {} belongs (frames duplicated, \
                     reordered or spliced)",
                    h.seq, self.seq
                ),
            ));
        }
        if h.len > MAX_FRAME_PAYLOAD {
            return Err(self.damage_at(
                DamageKind::Corrupt,
                frame_at,
                format!(
                    "frame length {} exceeds the limit of {MAX_FRAME_PAYLOAD}",
                    h.len
                ),
            ));
        }
        let payload_at = frame_at + FRAME_HEADER_LEN as u64;
        let mut payload = std::mem::take(&mut self.payload);
        payload.resize(h.len as usize, 0);
        let got = fill(&mut self.src, &mut payload);
        let result = match got {
            Err(e) => Err(self.damage_at(DamageKind::Io, payload_at, format!("read error: {e}"))),
            Ok(got) if got < payload.len() => Err(self.damage_at(
                DamageKind::Truncated,
                frame_at,
                format!(
                    "the file ends inside the frame: {got} of its {} payload bytes are there",
                    h.len
                ),
            )),
            Ok(_) => {
                let computed = super::format::crc32(0, &payload);
                if computed != h.payload_crc {
                    Err(self.damage_at(
                        DamageKind::Corrupt,
                        payload_at,
                        format!(
                            "payload checksum mismatch over bytes {payload_at}..{} \
                             (stored {:08x}, computed {computed:08x})",
                            payload_at + u64::from(h.len),
                            h.payload_crc
                        ),
                    ))
                } else {
                    match h.kind {
                        FRAME_EVENTS => self.decode_events(&h, &payload, payload_at, out),
                        FRAME_END => self.decode_end(&h, &payload, payload_at),
                        k => Err(self.damage_at(
                            DamageKind::Corrupt,
                            frame_at,
                            format!("unknown frame kind {k:#04x}"),
                        )),
                    }
                }
            }
        };
        self.payload = payload;
        let r = result?;
        self.offset = payload_at + u64::from(h.len);
        self.seq += 1;
        if r.is_none() {
            // Nothing may follow the end marker.
            let mut one = [0u8; 1];
            let extra = fill(&mut self.src, &mut one).map_err(|e| {
                self.damage_at(DamageKind::Io, self.offset, format!("read error: {e}"))
            })?;
            if extra > 0 {
                return Err(self.damage_at(
                    DamageKind::Corrupt,
                    self.offset,
                    "unexpected data after the end marker".into(),
                ));
            }
            self.state = State::Ended;
        }
        Ok(r)
    }

    fn decode_end(
        &mut self,
        h: &FrameHeader,
        payload: &[u8],
        at: u64,
    ) -> Result<Option<usize>, Damage> {
        let mut c = Cursor::new(payload);
        let corrupt =
            |s: &Self, off: usize, r: String| s.damage_at(DamageKind::Corrupt, at + off as u64, r);
        if h.count != 0 {
            return Err(corrupt(self, 0, "end marker claims events".into()));
        }
        let events = c
            .varint()
            .map_err(|e| corrupt(self, c.pos(), format!("end marker: {e}")))?;
        let frames = c
            .varint()
            .map_err(|e| corrupt(self, c.pos(), format!("end marker: {e}")))?;
        if !c.is_empty() {
            return Err(corrupt(self, c.pos(), "end marker too long".into()));
        }
        if events != self.events || frames != self.seq {
            return Err(corrupt(
                self,
                0,
                format!(
                    "end marker counts {events} events in {frames} frames; \
                     the file holds {} in {}",
                    self.events, self.seq
                ),
            ));
        }
        Ok(None)
    }

    fn decode_events(
        &mut self,
        h: &FrameHeader,
        payload: &[u8],
        at: u64,
        out: &mut Vec<Event>,
    ) -> Result<Option<usize>, Damage> {
        // Every event takes at least two bytes (tag and timestamp).
        if h.count == 0 || h.count as usize > payload.len() / 2 {
            return Err(self.damage_at(
                DamageKind::Corrupt,
                at - FRAME_HEADER_LEN as u64,
                format!("frame claims {} events in {} bytes", h.count, payload.len()),
            ));
        }
        out.reserve(h.count as usize);
        let mut c = Cursor::new(payload);
        let mut n: usize = 0;
        while !c.is_empty() {
            let rec_at = c.pos();
            if let Err(reason) = self.decode_record(&mut c, out, &mut n) {
                return Err(self.damage_at(
                    DamageKind::Corrupt,
                    at + rec_at as u64,
                    format!("record {n} of the frame: {reason}"),
                ));
            }
            if n > h.count as usize {
                break;
            }
        }
        if n != h.count as usize {
            return Err(self.damage_at(
                DamageKind::Corrupt,
                at - FRAME_HEADER_LEN as u64,
                format!("frame claims {} events but holds {n}", h.count),
            ));
        }
        self.events += n as u64;
        Ok(Some(n))
    }

    /// One record: a transport definition, a reset, or an event.
    #[inline]
    fn decode_record(
        &mut self,
        c: &mut Cursor<'_>,
        out: &mut Vec<Event>,
        n: &mut usize,
    ) -> Result<(), String> {
        let tag = c.byte().ok_or("empty record")?;
        let code = tag & flag::CODE_MASK;
        let procedure = code == code::EXECUTED && self.proc_names.is_some();
        if tag & flag::RESERVED != 0 && !procedure {
            return Err(format!("reserved flag set in tag {tag:#04x}"));
        }
        match code {
            code::DEFINE_XPRT | code::RESET_XPRTS => {
                if tag != code {
                    return Err(format!("flags on a table record (tag {tag:#04x})"));
                }
                if code == code::RESET_XPRTS {
                    self.xprts.clear();
                    self.prev_xprt = None;
                    return Ok(());
                }
                if self.xprts.len() >= MAX_XPRTS {
                    return Err(format!(
                        "transport table exceeds {MAX_XPRTS} entries without a reset"
                    ));
                }
                let netns = c.varint().map_err(|e| format!("netns: {e}"))?;
                let netns = u32::try_from(netns).map_err(|_| format!("netns {netns} > 2^32"))?;
                let server = c.endpoint().map_err(|e| format!("server address: {e}"))?;
                let client = c.endpoint().map_err(|e| format!("client address: {e}"))?;
                self.xprts.push(XprtKey {
                    netns,
                    server,
                    client,
                });
                return Ok(());
            }
            code::DEQUEUE => {}
            // REQUESTS and BYTES: the bits QTIME and CLASS have on a dequeue.
            code::EXECUTED => {}
            code::ENQUEUE if self.inflight && tag & flag::CLASS == 0 => {}
            _ if tag & (flag::QTIME | flag::CLASS) != 0 => {
                return Err(format!(
                    "dequeue-only flags on another record (tag {tag:#04x})"
                ));
            }
            _ => {}
        }
        let delta = c.varint().map_err(|e| format!("timestamp: {e}"))?;
        let ts = if tag & flag::TS_BACK != 0 {
            self.prev_ts.checked_sub(delta)
        } else {
            self.prev_ts.checked_add(delta)
        }
        .ok_or("timestamp out of range")?;
        let xi = if tag & flag::SAME_XPRT != 0 {
            self.prev_xprt
                .ok_or("refers to the previous transport, but there is none")?
        } else {
            let id = c.varint().map_err(|e| format!("transport id: {e}"))?;
            let xi = usize::try_from(id).unwrap_or(usize::MAX);
            if xi >= self.xprts.len() {
                return Err(format!(
                    "transport id {id} is not defined ({} are)",
                    self.xprts.len()
                ));
            }
            xi
        };
        let kind = match code {
            code::ENQUEUE => {
                let inflight = if tag & flag::INFLIGHT != 0 {
                    let v = c.varint().map_err(|e| format!("in flight: {e}"))?;
                    Some(u32::try_from(v).map_err(|_| format!("in flight {v} > 2^32"))?)
                } else {
                    None
                };
                EventKind::Enqueue { inflight }
            }
            code::DEQUEUE => {
                let qtime_ns = if tag & flag::QTIME != 0 {
                    Some(c.varint().map_err(|e| format!("qtime: {e}"))?)
                } else {
                    None
                };
                let class = if tag & flag::CLASS != 0 {
                    let v = c.varint().map_err(|e| format!("class: {e}"))?;
                    Some(u32::try_from(v).map_err(|_| format!("class {v} > 2^32"))?)
                } else {
                    None
                };
                EventKind::Dequeue { qtime_ns, class }
            }
            code::EXECUTED if self.operations && tag & flag::OPERATION == flag::OPERATION => {
                if tag & flag::REQUESTS != 0 {
                    return Err("an operation record with a request count".into());
                }
                let count = c.varint().map_err(|e| format!("operation count: {e}"))?;
                let count =
                    u32::try_from(count).map_err(|_| format!("operation count {count} > 2^32"))?;
                let op = c.byte().ok_or("ends inside an operation record")?;
                EventKind::Operation { op, count }
            }
            code::EXECUTED => {
                let requests = if tag & flag::REQUESTS != 0 {
                    c.varint().map_err(|e| format!("request count: {e}"))?
                } else {
                    1
                };
                let exec_ns = c.varint().map_err(|e| format!("execution time: {e}"))?;
                let bytes = if tag & flag::BYTES != 0 {
                    Some(Bytes {
                        received: c.varint().map_err(|e| format!("bytes received: {e}"))?,
                        sent: c.varint().map_err(|e| format!("bytes sent: {e}"))?,
                    })
                } else {
                    None
                };
                match self.proc_names.as_mut() {
                    Some(names) if tag & flag::PROCEDURE != 0 => {
                        if bytes.is_some() {
                            return Err("a procedure record with bytes".into());
                        }
                        EventKind::Procedure {
                            name: read_proc_name(c, names)?,
                            requests,
                            exec_ns,
                        }
                    }
                    _ => EventKind::Executed {
                        exec_ns,
                        requests,
                        bytes,
                        procedure: None,
                    },
                }
            }
            code::ACCEPTED => EventKind::Accepted,
            code::CLOSED => EventKind::Closed,
            code::LOST => {
                let t = c.byte().ok_or("ends inside a lost-events record")?;
                let tracepoint = tracepoint_of(t).ok_or(format!("unknown tracepoint {t}"))?;
                let count = c.varint().map_err(|e| format!("lost count: {e}"))?;
                EventKind::Lost { tracepoint, count }
            }
            other => return Err(format!("unknown record code {other}")),
        };
        self.prev_ts = ts;
        self.prev_xprt = Some(xi);
        out.push(Event {
            ts_ns: ts,
            xprt: self.xprts[xi],
            kind,
        });
        *n += 1;
        Ok(())
    }
}
