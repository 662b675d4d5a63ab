//! Replay of a recording made by `nfsdtop record`. The clock is virtual:
//! it runs on the recorded timestamps, as fast as the pipeline asks
//! (`--speed 0`) or at recorded speed times a factor.
//!
//! Opening scans the whole file once, so that before anything is shown
//! the source knows how many events are intact and whether (and where)
//! the file is damaged: [`ReplaySource::damage`], [`Source::notice`] and
//! the `detail` of [`SourceInfo`] all say so. The replay then delivers
//! every intact event and finishes.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::{Poll, Source};
use crate::classify::ClassMap;
use crate::model::{Event, SourceInfo, SourceKind};
use crate::record::{Damage, Header, Reader};

/// What the opening scan found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scan {
    /// Intact events.
    pub events: u64,
    pub first_ts: Option<u64>,
    pub last_ts: Option<u64>,
    pub damage: Option<Damage>,
}

pub struct ReplaySource {
    path: PathBuf,
    reader: Reader<BufReader<File>>,
    scan: Scan,
    buf: Vec<Event>,
    pos: usize,
    now: u64,
    done: bool,
    /// Damage met while streaming that the scan did not see (the file
    /// changed under us).
    late_damage: Option<Damage>,
    info: SourceInfo,
}

fn open_reader(path: &Path) -> anyhow::Result<Reader<BufReader<File>>> {
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
            reader,
            scan,
            buf: Vec::new(),
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
    let damage = loop {
        buf.clear();
        match r.read_frame(&mut buf) {
            Ok(Some(_)) => {
                if first_ts.is_none() {
                    first_ts = buf.first().map(|e| e.ts_ns);
                }
                last_ts = buf.iter().map(|e| e.ts_ns).max().max(last_ts);
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
    }
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
    fn info(&self) -> SourceInfo {
        self.info.clone()
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
                self.pos += 1;
            }
            if self.done {
                return Ok(Poll::Finished);
            }
            self.buf.clear();
            self.pos = 0;
            match self.reader.read_frame(&mut self.buf) {
                Ok(Some(_)) => {}
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
        self.damage().map(|d| damage_note(&self.path, d))
    }

    fn recorded_wall_clock(&self, now_ns: u64) -> Option<f64> {
        let h = self.reader.header();
        let since = now_ns as i128 - h.start_mono_ns as i128;
        Some((h.start_unix_ns as i128 + since) as f64 / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::utc;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_825_600_000_000_000), "2000-02-29 12:00:00");
        assert_eq!(utc(1_796_009_330_000_000_000), "2026-11-30 03:28:50");
    }
}
