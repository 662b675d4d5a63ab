//! Replay of a recording made by `nfsdtop record`. The clock is virtual:
//! it runs on the recorded timestamps, as fast as the pipeline asks
//! (`--speed 0`) or at recorded speed times a factor.
//!
//! Opening scans the whole file once, so that before anything is shown
//! the source knows how many events are intact and whether (and where)
//! the file is damaged: [`ReplaySource::damage`], [`Source::notice`] and
//! the `detail` of [`SourceInfo`] all say so. The replay then delivers
//! every intact event and finishes.
//!
//! Time the recording spent on nothing is not replayed: a stretch of more
//! than [`GAP_NS`] without events (or a clock that jumps back as far) is
//! replayed as [`GAP_KEPT_NS`] and said once ([`Source::notice`]), so a
//! corrupt timestamp cannot make a replay wait for years or emit a
//! snapshot per interval of empty time.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::{Poll, Source};
use crate::enrich::classify::ClassMap;
use crate::model::{Event, SourceInfo, SourceKind};
use crate::record::{Damage, Header, Reader};

/// A stretch without events longer than this is a gap in the recording...
pub const GAP_NS: u64 = 60_000_000_000;
/// ...and is replayed as this much time.
pub const GAP_KEPT_NS: u64 = 1_000_000_000;

/// What the opening scan found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scan {
    /// Intact events.
    pub events: u64,
    /// On the replay's clock (gaps closed).
    pub first_ts: Option<u64>,
    pub last_ts: Option<u64>,
    pub damage: Option<Damage>,
    pub gaps: Gaps,
}

/// The gaps met in a recording: how many, and the first one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gaps {
    pub count: u64,
    /// Recorded time (ns) where the first gap starts, and its length;
    /// negative when the recorded clock jumps back.
    pub first: Option<(u64, i128)>,
}

/// Recorded timestamps → the replay's clock. Every stretch of the
/// recording keeps its own time exactly (events a few microseconds out
/// of order stay so); only the gaps between stretches are closed.
#[derive(Clone, Debug)]
struct Timeline {
    /// recorded − replayed, in the current stretch.
    shift: i128,
    /// The latest replayed timestamp so far.
    hi: u64,
    gaps: Gaps,
}

impl Timeline {
    fn new(start_ns: u64) -> Self {
        Timeline {
            shift: 0,
            hi: start_ns,
            gaps: Gaps::default(),
        }
    }

    fn map(&mut self, ts: u64) -> u64 {
        let v = i128::from(ts) - self.shift;
        let hi = i128::from(self.hi);
        let gap = i128::from(GAP_NS);
        if v > hi + gap || v < hi - gap {
            let to = hi + i128::from(GAP_KEPT_NS);
            self.gaps.count += 1;
            if self.gaps.first.is_none() {
                let from = (hi + self.shift).clamp(0, i128::from(u64::MAX)) as u64;
                self.gaps.first = Some((from, v - hi));
            }
            self.shift = i128::from(ts) - to;
            self.hi = to.min(i128::from(u64::MAX)) as u64;
            return self.hi;
        }
        let v = v.clamp(0, i128::from(u64::MAX)) as u64;
        self.hi = self.hi.max(v);
        v
    }
}

pub struct ReplaySource {
    path: PathBuf,
    reader: Reader<BufReader<File>>,
    scan: Scan,
    timeline: Timeline,
    /// The frame being delivered, on the replay's clock, and each event's
    /// recorded − replayed shift (for the wall clock).
    buf: Vec<Event>,
    shifts: Vec<i128>,
    /// The shift of the last event delivered.
    shift: i128,
    pos: usize,
    now: u64,
    done: bool,
    /// Damage met while streaming that the scan did not see (the file
    /// changed under us).
    late_damage: Option<Damage>,
    info: SourceInfo,
}

fn open_reader(path: &Path) -> anyhow::Result<Reader<BufReader<File>>> {
    // Opening is reading twice (the scan, then the replay): a pipe or a
    // FIFO would hang or look empty the second time.
    if let Ok(m) = std::fs::metadata(path) {
        if m.is_dir() {
            anyhow::bail!(
                "cannot replay {}: it is a directory; pass a recording made by nfsdtop record",
                path.display()
            );
        }
        if !m.is_file() {
            anyhow::bail!(
                "cannot replay {}: it is not a regular file (a pipe, FIFO or device); a replay \
                 reads the recording twice, so save it to a file first (e.g. cat > rec.nfsdrec)",
                path.display()
            );
        }
    }
    Reader::open(path).with_context(|| format!("cannot replay {}", path.display()))
}

impl ReplaySource {
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let scan = scan(open_reader(path)?);
        let reader = open_reader(path)?;
        let info = describe(path, reader.header(), &scan);
        Ok(ReplaySource {
            path: path.to_path_buf(),
            now: reader.header().start_mono_ns,
            timeline: Timeline::new(reader.header().start_mono_ns),
            reader,
            scan,
            buf: Vec::new(),
            shifts: Vec::new(),
            shift: 0,
            pos: 0,
            done: false,
            late_damage: None,
            info,
        })
    }

    pub fn header(&self) -> &Header {
        self.reader.header()
    }

    pub fn scan(&self) -> &Scan {
        &self.scan
    }

    /// Where and why the recording is damaged, if it is.
    pub fn damage(&self) -> Option<&Damage> {
        self.late_damage.as_ref().or(self.scan.damage.as_ref())
    }

    /// The class map that was in force while recording.
    pub fn class_map(&self) -> anyhow::Result<ClassMap> {
        self.header()
            .class_map(&format!("class map recorded in {}", self.path.display()))
    }
}

/// The recorded class map of `path` (only the header is read).
pub fn recorded_class_map(path: &Path) -> anyhow::Result<ClassMap> {
    open_reader(path)?
        .header()
        .class_map(&format!("class map recorded in {}", path.display()))
}

fn scan(mut r: Reader<BufReader<File>>) -> Scan {
    let mut buf = Vec::new();
    let (mut first_ts, mut last_ts) = (None, None);
    let mut timeline = Timeline::new(r.header().start_mono_ns);
    let damage = loop {
        buf.clear();
        match r.read_frame(&mut buf) {
            Ok(Some(_)) => {
                for e in &buf {
                    let t = timeline.map(e.ts_ns);
                    first_ts = first_ts.or(Some(t));
                    last_ts = last_ts.max(Some(t));
                }
            }
            Ok(None) => break None,
            Err(d) => break Some(d),
        }
    };
    Scan {
        events: r.events(),
        first_ts,
        last_ts,
        damage,
        gaps: timeline.gaps,
    }
}

/// The user-facing sentence about gaps.
pub fn gaps_note(path: &Path, start_unix_ns: u64, start_mono_ns: u64, g: &Gaps) -> Option<String> {
    let (at, len) = g.first?;
    let when = utc(start_unix_ns.saturating_add(at.saturating_sub(start_mono_ns)));
    let secs = len.unsigned_abs() / 1_000_000_000;
    let what = if len < 0 {
        format!(
            "the clock of recording {} jumps back {secs} s",
            path.display()
        )
    } else {
        format!("gap of {secs} s in the recording {}", path.display())
    };
    let more = match g.count {
        0 | 1 => String::new(),
        n => format!(" ({} more such gaps closed too)", n - 1),
    };
    Some(format!(
        "{what} after {when} UTC: replayed as {} s{more}",
        GAP_KEPT_NS / 1_000_000_000
    ))
}

/// The user-facing sentence about damage.
pub fn damage_note(path: &Path, d: &Damage) -> String {
    format!(
        "recording {} is {d}; replaying the {} events before it",
        path.display(),
        d.events_before
    )
}

fn describe(path: &Path, h: &Header, scan: &Scan) -> SourceInfo {
    let span = match (scan.first_ts, scan.last_ts) {
        (Some(a), Some(b)) => b.saturating_sub(a.min(h.start_mono_ns)) as f64 / 1e9,
        _ => 0.0,
    };
    let mut detail = format!(
        "{}: {} {}, recorded {} UTC on {}; {} events over {span:.1} s",
        path.display(),
        h.source_kind.as_str(),
        h.source_detail,
        utc(h.start_unix_ns),
        if h.host.is_empty() { "?" } else { &h.host },
        scan.events,
    );
    if let Some(d) = &scan.damage {
        detail.push_str(&format!("; DAMAGED: {d}"));
    }
    SourceInfo {
        kind: SourceKind::Replay,
        kernel: h.kernel.clone(),
        generation: h.generation.clone(),
        wait_source: h.wait_source,
        detail,
        host: h.host.clone(),
    }
}

/// "2026-11-30 03:28:50" from Unix nanoseconds (proleptic Gregorian).
fn utc(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let sod = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    )
}

impl Source for ReplaySource {
    /// With damage met while replaying (the file cut or overwritten since
    /// it was opened) said, as damage found at open is: the opening scan's
    /// count and span no longer hold.
    fn info(&self) -> SourceInfo {
        let mut info = self.info.clone();
        if let Some(d) = &self.late_damage {
            info.detail.push_str(&format!(
                "; DAMAGED while replaying: {}",
                damage_note(&self.path, d)
            ));
        }
        info
    }

    fn poll(&mut self, until_ns: u64, out: &mut Vec<Event>) -> anyhow::Result<Poll> {
        loop {
            // In file order: a record older than its predecessor (per-CPU
            // clocks) goes out with it, exactly as it was recorded.
            while let Some(e) = self.buf.get(self.pos) {
                if e.ts_ns > until_ns {
                    self.now = self.now.max(until_ns);
                    return Ok(Poll::Pending);
                }
                out.push(*e);
                self.now = self.now.max(e.ts_ns);
                self.shift = self.shifts[self.pos];
                self.pos += 1;
            }
            if self.done {
                return Ok(Poll::Finished);
            }
            self.buf.clear();
            self.shifts.clear();
            self.pos = 0;
            match self.reader.read_frame(&mut self.buf) {
                Ok(Some(_)) => {
                    for e in &mut self.buf {
                        e.ts_ns = self.timeline.map(e.ts_ns);
                        self.shifts.push(self.timeline.shift);
                    }
                }
                Ok(None) => self.done = true,
                Err(d) => {
                    if self.scan.damage.as_ref() != Some(&d) {
                        self.late_damage = Some(d);
                    }
                    self.done = true;
                }
            }
        }
    }

    fn now_ns(&self) -> u64 {
        self.now
    }

    fn notice(&self) -> Option<String> {
        let h = self.reader.header();
        let gaps = gaps_note(
            &self.path,
            h.start_unix_ns,
            h.start_mono_ns,
            &self.scan.gaps,
        );
        let damage = self.damage().map(|d| damage_note(&self.path, d));
        match (gaps, damage) {
            (Some(g), Some(d)) => Some(format!("{g}; {d}")),
            (g, d) => g.or(d),
        }
    }

    fn length_ns(&self) -> Option<u64> {
        let start = self.reader.header().start_mono_ns;
        Some(self.scan.last_ts?.saturating_sub(start))
    }

    /// As recorded in the header (threads per pool were not).
    fn nfsd_threads(&self) -> crate::server::NfsdThreads {
        let n = self.reader.header().nfsd;
        crate::server::NfsdThreads {
            threads: n.threads,
            pools: n.pools,
            pool_threads: None,
            ports: n.ports,
            ..Default::default()
        }
    }

    fn recorded_wall_clock(&self, now_ns: u64) -> Option<f64> {
        let h = self.reader.header();
        let since = i128::from(now_ns) + self.shift - i128::from(h.start_mono_ns);
        Some((h.start_unix_ns as i128 + since) as f64 / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::{open_reader, utc, Timeline, GAP_KEPT_NS, GAP_NS};
    use std::path::Path;

    #[test]
    fn gaps_close_both_ways_and_stretches_keep_their_time() {
        let s = 1_000;
        let mut t = Timeline::new(s);
        // Out of order by a little: kept exactly.
        assert_eq!(t.map(s + 50), s + 50);
        assert_eq!(t.map(s + 40), s + 40);
        // A corrupt far-future stamp, then the clock carries on.
        let far = t.map(1 << 62);
        assert_eq!(far, s + 50 + GAP_KEPT_NS);
        assert_eq!(t.map((1 << 62) + 7), far + 7);
        let back = t.map(s + 60);
        assert_eq!(back, far + 7 + GAP_KEPT_NS);
        assert_eq!(t.gaps.count, 2);
        assert_eq!(t.gaps.first, Some((s + 50, (1i128 << 62) - 50 - 1_000)));
        // A quiet minute is not a gap.
        let mut t = Timeline::new(0);
        assert_eq!(t.map(GAP_NS), GAP_NS);
        assert_eq!(t.gaps.count, 0);
    }

    #[test]
    fn a_directory_or_a_fifo_is_named_for_what_it_is() {
        let e = open_reader(Path::new("/"))
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains("cannot replay /: it is a directory"), "{e}");
        let e = open_reader(Path::new("/dev/null"))
            .err()
            .expect("refused")
            .to_string();
        assert!(
            e.contains("not a regular file (a pipe, FIFO or device)"),
            "{e}"
        );
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_825_600_000_000_000), "2000-02-29 12:00:00");
        assert_eq!(utc(1_796_009_330_000_000_000), "2026-11-30 03:28:50");
    }
}
