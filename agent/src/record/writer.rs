//! Events → a recording. Buffered into frames of up to
//! [`FRAME_TARGET_EVENTS`] events; every frame is written whole, with its
//! length and checksums, so a recorder killed mid-write leaves a file whose
//! every complete frame replays.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use crate::model::ProcName;

use super::format::{
    code, encode_preamble, flag, put_endpoint, put_varint, FrameHeader, Header, FRAME_END,
    FRAME_EVENTS, FRAME_HEADER_LEN, FRAME_TARGET_BYTES, FRAME_TARGET_EVENTS, MAX_PROC_NAMES,
    MAX_XPRTS,
};
use crate::model::{Endpoint, Event, EventKind, XprtKey};

/// What a finished recording holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub events: u64,
    /// Bytes in the file, preamble and header included.
    pub bytes: u64,
    pub frames: u64,
    /// Distinct transports defined (after any table resets).
    pub transports: u64,
}

impl Summary {
    pub fn bytes_per_event(&self) -> f64 {
        if self.events == 0 {
            0.0
        } else {
            self.bytes as f64 / self.events as f64
        }
    }
}

pub struct Writer<W: Write> {
    out: W,
    file_id: u64,
    /// The open frame's payload: `frame[..plen]`. Fixed size, so an
    /// event is encoded in place with no capacity checks or copies.
    frame: Box<[u8]>,
    plen: usize,
    /// Scratch for the rare records (transport definitions, end marker).
    tmp: Vec<u8>,
    frame_events: u32,
    frame_target: u32,
    seq: u32,
    /// Seeded: clients choose their ports (`crate::keyhash`).
    xprts: crate::keyhash::PeerHashMap<XprtKey, u64>,
    /// Recently used transports, direct-mapped by client port and address:
    /// most lookups end here without hashing the whole key.
    recent: Box<[Option<(XprtKey, u64)>; RECENT]>,
    /// The previous event's transport and id: most consecutive events of a
    /// dispatch share it, and then cost no id at all.
    prev: Option<(XprtKey, u64)>,
    prev_ts: u64,
    proc_names: ProcNames,
    summary: Summary,
}

impl Writer<BufWriter<File>> {
    /// Create (or truncate) `path` and write the header.
    pub fn create(path: &Path, header: &Header) -> io::Result<Self> {
        let fifo = std::fs::metadata(path)
            .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_fifo(&m.file_type()));
        let f = if fifo {
            open_fifo(path)?
        } else {
            File::create(path)?
        };
        Writer::new(BufWriter::with_capacity(256 << 10, f), header)
    }

    /// As `create`, but fail (`AlreadyExists`) if `path` exists: nothing
    /// is overwritten unless the user asked for it.
    pub fn create_new(path: &Path, header: &Header) -> io::Result<Self> {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)?;
        Writer::new(BufWriter::with_capacity(256 << 10, f), header)
    }

    /// Finish the recording and make it durable (fsync).
    pub fn finish_file(self) -> io::Result<Summary> {
        let (w, summary) = self.finish()?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        match f.sync_all() {
            // A device or pipe (-o /dev/null) has nothing to make durable.
            Err(e) if e.kind() == io::ErrorKind::InvalidInput && !f.metadata()?.is_file() => {}
            r => r?,
        }
        Ok(summary)
    }

    /// [`Writer::finish_file`], then make sure `path` still names the file
    /// written: a recording whose file (or directory) was deleted, or
    /// replaced, while it was being written is lost, and saying
    /// "recorded N events to PATH" would be a lie.
    pub fn finish_file_at(self, path: &Path) -> io::Result<Summary> {
        let (w, summary) = self.finish()?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        let written = f.metadata()?;
        match f.sync_all() {
            Err(e) if e.kind() == io::ErrorKind::InvalidInput && !written.is_file() => {}
            r => r?,
        }
        if written.is_file() {
            still_named(path, &written)?;
        }
        Ok(summary)
    }
}

/// Whether `path` still names the file whose metadata is `written`.
fn still_named(path: &Path, written: &std::fs::Metadata) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    // NotFound: the caller tells it from a failure to write the end.
    let gone = |what: &str| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{what} while recording, so the recording is lost: record to a file and \
             directory nothing else removes (e.g. not one a cleaner empties)"
            ),
        )
    };
    if written.nlink() == 0 {
        return Err(gone("the file was deleted (or its directory)"));
    }
    match std::fs::metadata(path) {
        Ok(now) if now.dev() == written.dev() && now.ino() == written.ino() => Ok(()),
        Ok(_) => Err(gone("the path was given to another file")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            Err(gone("the file was moved away (or its directory)"))
        }
        Err(e) => Err(e),
    }
}

/// A FIFO opened for writing, or an error at once if nothing reads it
/// (opening it blocking would wait, without a word, for a reader that may
/// never come).
fn open_fifo(path: &Path) -> io::Result<File> {
    use rustix::fs::OFlags;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(code) if code == rustix::io::Errno::NXIO.raw_os_error() => io::Error::other(
                "it is a FIFO that no process has open for reading: start its reader first",
            ),
            _ => e,
        })?;
    // Writes wait for the reader as with any pipe.
    rustix::fs::fcntl_setfl(&f, OFlags::empty())?;
    Ok(f)
}

impl<W: Write> Writer<W> {
    pub fn new(mut out: W, header: &Header) -> io::Result<Self> {
        let h = header.encode();
        out.write_all(&encode_preamble(&h))?;
        out.write_all(&h)?;
        Ok(Writer {
            out,
            file_id: header.file_id,
            frame: vec![0u8; FRAME_BUF].into_boxed_slice(),
            plen: 0,
            tmp: Vec::with_capacity(64),
            frame_events: 0,
            frame_target: FRAME_TARGET_EVENTS,
            seq: 0,
            xprts: crate::keyhash::PeerHashMap::default(),
            recent: Box::new([None; RECENT]),
            prev: None,
            prev_ts: header.start_mono_ns,
            proc_names: ProcNames::default(),
            summary: Summary {
                bytes: (super::format::PREAMBLE_LEN + h.len()) as u64,
                ..Summary::default()
            },
        })
    }

    /// Close frames after `events` events instead of the default
    /// [`FRAME_TARGET_EVENTS`] (smaller frames lose less to damage and
    /// cost a 21-byte header each; tests use them for many frames).
    pub fn set_frame_events(&mut self, events: u32) {
        self.frame_target = events.clamp(1, FRAME_TARGET_EVENTS);
    }

    /// Events written so far (including those still in the open frame).
    pub fn events(&self) -> u64 {
        self.summary.events + u64::from(self.frame_events)
    }

    /// Bytes written so far, not counting the open frame.
    pub fn bytes(&self) -> u64 {
        self.summary.bytes
    }

    pub fn write_all(&mut self, events: &[Event]) -> io::Result<()> {
        for e in events {
            self.write(e)?;
        }
        Ok(())
    }

    /// Writes `ev` as the file holds it (see [`as_recorded`]).
    pub fn write(&mut self, ev: &Event) -> io::Result<()> {
        let (first, second) = as_recorded(ev);
        self.write_one(&first)?;
        match second {
            Some(e) => self.write_one(&e),
            None => Ok(()),
        }
    }

    #[inline]
    fn write_one(&mut self, ev: &Event) -> io::Result<()> {
        let (code, mut flags) = match ev.kind {
            EventKind::Procedure { requests, .. } => (
                code::EXECUTED,
                flag::PROCEDURE | if requests != 1 { flag::REQUESTS } else { 0 },
            ),
            EventKind::Operation { .. } => (code::EXECUTED, flag::OPERATION),
            EventKind::Enqueue { inflight } => (
                code::ENQUEUE,
                if inflight.is_some() {
                    flag::INFLIGHT
                } else {
                    0
                },
            ),
            EventKind::Dequeue { qtime_ns, class } => (
                code::DEQUEUE,
                if qtime_ns.is_some() { flag::QTIME } else { 0 }
                    | if class.is_some() { flag::CLASS } else { 0 },
            ),
            EventKind::Executed {
                requests, bytes, ..
            } => (
                code::EXECUTED,
                if requests != 1 { flag::REQUESTS } else { 0 }
                    | if bytes.is_some() { flag::BYTES } else { 0 },
            ),
            EventKind::Accepted => (code::ACCEPTED, 0),
            EventKind::Closed => (code::CLOSED, 0),
            EventKind::Lost { .. } => (code::LOST, 0),
        };
        let id = match self.prev {
            Some((k, id)) if k == ev.xprt => {
                flags |= flag::SAME_XPRT;
                id
            }
            _ => {
                let id = self.xprt_id(&ev.xprt);
                self.prev = Some((ev.xprt, id));
                id
            }
        };
        let (delta, back) = match ev.ts_ns.checked_sub(self.prev_ts) {
            Some(d) => (d, 0),
            None => (self.prev_ts - ev.ts_ns, flag::TS_BACK),
        };
        self.prev_ts = ev.ts_ns;
        // Room: the frame closes at FRAME_TARGET_BYTES, and one event
        // (with its transport definition) adds at most EVENT_MAX + DEF_MAX bytes.
        let room: &mut [u8; EVENT_MAX] = (&mut self.frame[self.plen..self.plen + EVENT_MAX])
            .try_into()
            .expect("a slice of EVENT_MAX bytes");
        let mut e = Scratch { buf: room, n: 0 };
        e.byte(code | flags | back);
        e.varint(delta);
        if flags & flag::SAME_XPRT == 0 {
            e.varint(id);
        }
        match ev.kind {
            EventKind::Dequeue { qtime_ns, class } => {
                if let Some(q) = qtime_ns {
                    e.varint(q);
                }
                if let Some(c) = class {
                    e.varint(u64::from(c));
                }
            }
            EventKind::Executed {
                exec_ns,
                requests,
                bytes,
                ..
            } => {
                if requests != 1 {
                    e.varint(requests);
                }
                e.varint(exec_ns);
                if let Some(b) = bytes {
                    e.varint(b.received);
                    e.varint(b.sent);
                }
            }
            EventKind::Lost { tracepoint, count } => {
                e.byte(tracepoint.index() as u8);
                e.varint(count);
            }
            EventKind::Procedure {
                name,
                requests,
                exec_ns,
            } => {
                if requests != 1 {
                    e.varint(requests);
                }
                e.varint(exec_ns);
                self.proc_names.put(name, &mut e);
            }
            EventKind::Operation { op, count } => {
                e.varint(u64::from(count));
                e.byte(op);
            }
            EventKind::Enqueue { inflight } => {
                if let Some(n) = inflight {
                    e.varint(u64::from(n));
                }
            }
            EventKind::Accepted | EventKind::Closed => {}
        }
        self.plen += e.n;
        self.frame_events += 1;
        if self.frame_events >= self.frame_target || self.plen >= FRAME_TARGET_BYTES {
            self.end_frame()?;
        }
        Ok(())
    }

    /// The id of `key`, defining it in the stream first if it is new.
    #[inline]
    fn xprt_id(&mut self, key: &XprtKey) -> u64 {
        let slot = recent_slot(key);
        if let Some((k, id)) = &self.recent[slot] {
            if k == key {
                return *id;
            }
        }
        let id = self.xprt_id_slow(key);
        self.recent[slot] = Some((*key, id));
        id
    }

    fn xprt_id_slow(&mut self, key: &XprtKey) -> u64 {
        if let Some(&id) = self.xprts.get(key) {
            return id;
        }
        self.tmp.clear();
        if self.xprts.len() >= MAX_XPRTS {
            // Keep memory bounded under a flood of short-lived transports:
            // start the table afresh (readers do the same).
            self.tmp.push(code::RESET_XPRTS);
            self.xprts.clear();
            self.recent.fill(None);
        }
        let id = self.xprts.len() as u64;
        self.tmp.push(code::DEFINE_XPRT);
        put_varint(&mut self.tmp, u64::from(key.netns));
        put_endpoint(&mut self.tmp, &key.server);
        put_endpoint(&mut self.tmp, &key.client);
        self.append_tmp();
        self.xprts.insert(*key, id);
        self.summary.transports += 1;
        id
    }

    /// Append `tmp` (at most [`DEF_MAX`] bytes) to the open frame.
    fn append_tmp(&mut self) {
        let n = self.tmp.len();
        self.frame[self.plen..self.plen + n].copy_from_slice(&self.tmp);
        self.plen += n;
    }

    fn emit(&mut self, kind: u8, count: u32) -> io::Result<()> {
        let h = FrameHeader {
            kind,
            seq: self.seq,
            count,
            len: self.plen as u32,
            payload_crc: super::format::crc32(0, &self.frame[..self.plen]),
        };
        self.out.write_all(&h.encode(self.file_id))?;
        self.out.write_all(&self.frame[..self.plen])?;
        self.summary.bytes += (FRAME_HEADER_LEN + self.plen) as u64;
        self.seq = self.seq.wrapping_add(1);
        self.plen = 0;
        Ok(())
    }

    fn end_frame(&mut self) -> io::Result<()> {
        if self.frame_events == 0 {
            return Ok(());
        }
        let n = self.frame_events;
        self.emit(FRAME_EVENTS, n)?;
        self.summary.events += u64::from(n);
        self.summary.frames += 1;
        self.frame_events = 0;
        Ok(())
    }

    /// Close the open frame (if any) and flush it to the file, so that
    /// what has been recorded so far survives a crash. Costs a frame
    /// header (21 bytes): call it every second or so, not per event.
    pub fn flush(&mut self) -> io::Result<()> {
        self.end_frame()?;
        self.out.flush()
    }

    /// Close the last frame, write the end marker and flush. A file
    /// without its end marker still replays; readers say it was cut short.
    pub fn finish(mut self) -> io::Result<(W, Summary)> {
        self.end_frame()?;
        self.tmp.clear();
        put_varint(&mut self.tmp, self.summary.events);
        put_varint(&mut self.tmp, self.summary.frames);
        self.append_tmp();
        self.emit(FRAME_END, 0)?;
        self.out.flush()?;
        Ok((self.out, self.summary))
    }
}

const RECENT: usize = 64;

#[inline]
fn recent_slot(key: &XprtKey) -> usize {
    let h = match key.client {
        Endpoint::None => key.netns as usize,
        Endpoint::V4 { ip, port } => usize::from(port) ^ (usize::from(ip[3]) << 3),
        Endpoint::V6 { ip, port } => usize::from(port) ^ (usize::from(ip[15]) << 3),
    };
    (h ^ (h >> 6)) % RECENT
}

/// One encoded event: tag, delta, id and at most four more varints (an
/// executed record with bytes) fit in 1 + 6 * 10 bytes.
const EVENT_MAX: usize = 61;
/// A reset and a transport definition: 1 + 1 + 5 + 2 * 19 bytes (the end
/// marker's two varints are smaller).
const DEF_MAX: usize = 45;
/// The open frame's buffer: a frame closes once it reaches
/// FRAME_TARGET_BYTES, so it never holds more than this.
const FRAME_BUF: usize = FRAME_TARGET_BYTES + DEF_MAX + EVENT_MAX;

/// Encodes one event in place in the frame buffer.
/// The procedure names defined so far in the file, by name: a name is
/// written once (index, length, bytes), then by its index.
#[derive(Default)]
struct ProcNames {
    index: rustc_hash::FxHashMap<ProcName, u64>,
}

impl ProcNames {
    fn put(&mut self, name: ProcName, e: &mut Scratch<'_>) {
        let other = ProcName::new(ProcName::OTHER);
        let name = if self.index.len() + 1 >= MAX_PROC_NAMES && !self.index.contains_key(&name) {
            other
        } else {
            name
        };
        if let Some(&i) = self.index.get(&name) {
            e.varint(i);
            return;
        }
        let i = self.index.len() as u64;
        self.index.insert(name, i);
        e.varint(i);
        let b = name.as_str().as_bytes();
        e.byte(b.len() as u8);
        for &c in b {
            e.byte(c);
        }
    }
}

struct Scratch<'a> {
    buf: &'a mut [u8; EVENT_MAX],
    n: usize,
}

impl Scratch<'_> {
    #[inline]
    fn byte(&mut self, b: u8) {
        self.buf[self.n] = b;
        self.n += 1;
    }

    #[inline]
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.byte((v as u8) | 0x80);
            v >>= 7;
        }
        self.byte(v as u8);
    }
}

/// `ev` as a recording holds it: one event, or for a request named with
/// its execution (`EventKind::Executed` with a `procedure`) the two the
/// format has always had, its execution and then its procedure's
/// breakdown (same time, transport and counts), so that older readers
/// replay it.
pub fn as_recorded(ev: &Event) -> (Event, Option<Event>) {
    match ev.kind {
        EventKind::Executed {
            exec_ns,
            requests,
            bytes,
            procedure: Some(name),
        } => (
            Event {
                kind: EventKind::Executed {
                    exec_ns,
                    requests,
                    bytes,
                    procedure: None,
                },
                ..*ev
            },
            Some(Event {
                kind: EventKind::Procedure {
                    name,
                    requests,
                    exec_ns,
                },
                ..*ev
            }),
        ),
        _ => (*ev, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::format::PREAMBLE_LEN;

    /// Recording into a FIFO: refused at once, saying why, while nothing
    /// reads it (opening it would wait for good); written through once a
    /// reader has it open.
    #[test]
    fn a_fifo_without_a_reader_is_refused_and_one_with_a_reader_written() {
        let dir = std::env::temp_dir().join(format!("nfsdtop-rec-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("f");
        let st = std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .unwrap();
        assert!(st.success());
        let e = Writer::create(&p, &Header::default())
            .err()
            .expect("no reader: an error");
        assert!(
            e.to_string().contains("no process has open for reading"),
            "{e}"
        );
        let q = p.clone();
        let reader = std::thread::spawn(move || std::fs::read(&q).unwrap());
        // The reader's open may come after ours: the error until then.
        let w = loop {
            match Writer::create(&p, &Header::default()) {
                Ok(w) => break w,
                Err(e) if e.to_string().contains("no process has open") => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        };
        w.finish_file().unwrap();
        let bytes = reader.join().unwrap();
        assert!(bytes.len() > PREAMBLE_LEN, "{} bytes", bytes.len());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
