//! Record a demo run through the pipeline's tap, replay the file through a
//! new aggregator, and get exactly the numbers of the live run; damage a
//! copy and get exactly the intact prefix, with where and why.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nfsdtop_agent::aggregate::{Aggregator, Limits};
use nfsdtop_agent::model::{EntityStats, Event, Snapshot, SourceKind};
use nfsdtop_agent::pipeline::{Flow, Pace, Pipeline};
use nfsdtop_agent::record::{self, DamageKind, Header, Reader, Writer};
use nfsdtop_agent::source::replay::ReplaySource;
use nfsdtop_agent::source::{Source, SourceSpec};

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nfsdtop-record-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Run `scenario` for `secs` of simulated time as fast as possible, with a
/// tap writing every event to `path`. Returns the run's final snapshot.
fn record_demo(scenario: &str, policy: Option<&str>, secs: u64, path: &Path) -> Snapshot {
    record_demo_framed(scenario, policy, secs, path, None)
}

fn record_demo_framed(
    scenario: &str,
    policy: Option<&str>,
    secs: u64,
    path: &Path,
    frame_events: Option<u32>,
) -> Snapshot {
    let spec = SourceSpec::Demo {
        scenario: scenario.into(),
        policy: policy.map(|p| p.parse().unwrap()),
    };
    let classmap = spec.builtin_classmap().unwrap().unwrap_or_default();
    let source = spec.open().unwrap();
    let header = Header::for_source(&source.info(), &classmap, source.now_ns());
    let mut writer = Writer::create(path, &header).unwrap();
    if let Some(n) = frame_events {
        writer.set_frame_events(n);
    }
    let mut last = None;
    {
        let w = &mut writer;
        let pipeline = Pipeline {
            pace: Pace::AsFastAsPossible,
            max_source_ns: Some(secs * 1_000_000_000),
            tap: Some(Box::new(move |evs: &[Event]| Ok(w.write_all(evs)?))),
            ..Pipeline::new(
                source,
                Aggregator::new(classmap, Limits::default()),
                Duration::from_secs(1),
            )
        };
        pipeline
            .run(None, |s| {
                last = Some(s);
                Flow::Continue
            })
            .unwrap();
    }
    let summary = writer.finish_file().unwrap();
    assert_eq!(summary.bytes, std::fs::metadata(path).unwrap().len());
    last.expect("a final snapshot")
}

/// Replay `path` through a new pipeline and aggregator (with the class map
/// recorded in the file), as fast as possible. The final snapshot and the
/// source's damage note.
fn replay(path: &Path) -> (Snapshot, Option<String>) {
    let spec = SourceSpec::Replay {
        path: path.to_path_buf(),
    };
    let classmap = spec.builtin_classmap().unwrap().unwrap_or_default();
    let source = spec.open().unwrap();
    let notice = source.notice();
    let mut last = None;
    Pipeline {
        pace: Pace::AsFastAsPossible,
        ..Pipeline::new(
            source,
            Aggregator::new(classmap, Limits::default()),
            Duration::from_secs(1),
        )
    }
    .run(None, |s| {
        last = Some(s);
        Flow::Continue
    })
    .unwrap();
    (last.unwrap(), notice)
}

/// The same events straight into an aggregator: the truth for a prefix.
fn aggregate(events: &[Event], classmap_text: &str) -> Snapshot {
    let classmap = nfsdtop_agent::enrich::classify::ClassMap::parse(classmap_text, "test").unwrap();
    let mut agg = Aggregator::new(classmap, Limits::default());
    agg.ingest_all(events);
    let end = events.iter().map(|e| e.ts_ns).max().unwrap_or(0);
    agg.snapshot(end, 0.0, &Default::default())
}

fn key(e: &EntityStats) -> (String, u64, u64, u64, u64) {
    // Floats compared bit for bit: the same events in the same order must
    // give the very same sums.
    (
        e.name.clone(),
        e.dispatches,
        e.entitled.to_bits(),
        e.exec_seconds.to_bits(),
        e.connections,
    )
}

fn assert_same_counts(live: &Snapshot, replayed: &Snapshot, what: &str) {
    assert_eq!(
        live.totals.dispatches, replayed.totals.dispatches,
        "{what}: total dispatches"
    );
    assert_eq!(
        live.totals.exec_seconds.to_bits(),
        replayed.totals.exec_seconds.to_bits(),
        "{what}: exec"
    );
    assert_eq!(live.totals.events, replayed.totals.events, "{what}: events");
    for (a, b) in [
        (&live.peers, &replayed.peers),
        (&live.classes, &replayed.classes),
    ] {
        let mut a: Vec<_> = a.iter().map(key).collect();
        let mut b: Vec<_> = b.iter().map(key).collect();
        a.sort();
        b.sort();
        assert!(!a.is_empty(), "{what}: no entities");
        assert_eq!(a, b, "{what}: per-entity cumulative counts");
    }
}

#[test]
fn replaying_a_demo_recording_gives_the_live_runs_numbers() {
    for (scenario, policy, secs) in [
        ("seed-k8", None, 20),
        ("movers", Some("rr-class"), 20),
        ("burst", Some("rr-peer"), 20),
    ] {
        let path = tmp(&format!("{scenario}.nfsdrec"));
        let live = record_demo(scenario, policy, secs, &path);
        assert!(
            live.totals.dispatches > 10_000,
            "{scenario}: too short a run"
        );
        let (replayed, notice) = replay(&path);
        assert_eq!(
            notice, None,
            "{scenario}: an intact file has nothing to say"
        );
        assert_same_counts(&live, &replayed, scenario);
        // The replay says what it is and where it came from.
        assert_eq!(replayed.source.kind, SourceKind::Replay);
        assert_eq!(replayed.source.generation, live.source.generation);
        assert_eq!(replayed.source.wait_source, live.source.wait_source);
        assert!(
            replayed.source.detail.contains(scenario),
            "{}",
            replayed.source.detail
        );
        // The class map went into the file: movers has one.
        if scenario == "movers" {
            assert!(replayed.classes.iter().any(|c| c.name == "movers"));
        }
    }
}

/// Frame boundaries of a recording: (start offset, events before it).
fn frames(path: &Path) -> Vec<(u64, u64)> {
    let mut r = Reader::open(path).unwrap();
    let mut out = Vec::new();
    let mut buf = Vec::new();
    loop {
        out.push((r.offset(), r.events()));
        match r.read_frame(&mut buf).unwrap() {
            Some(_) => {}
            None => return out,
        }
    }
}

#[test]
fn a_truncated_recording_replays_its_intact_prefix_and_says_where() {
    let path = tmp("cut-source.nfsdrec");
    record_demo_framed("seed-k4", None, 10, &path, Some(1000));
    let whole = record::read_file(&path).unwrap();
    assert!(whole.damage.is_none());
    let bounds = frames(&path);
    assert!(bounds.len() > 20, "{} frames", bounds.len());
    let bytes = std::fs::read(&path).unwrap();
    // Cut in the middle of frame k, for a few k.
    for k in [0usize, 1, bounds.len() / 2, bounds.len() - 2] {
        let (start, before) = bounds[k];
        let cut = start + (bounds[k + 1].0 - start) / 2;
        let cut_path = tmp(&format!("cut-{k}.nfsdrec"));
        std::fs::write(&cut_path, &bytes[..cut as usize]).unwrap();

        let src = ReplaySource::open(&cut_path).unwrap();
        let d = src.damage().expect("damage found at open").clone();
        assert_eq!(d.kind, DamageKind::Truncated, "{d}");
        assert_eq!((d.offset, d.frame), (start, k as u64), "{d}");
        assert!(d.reason.contains("ends inside"), "{d}");
        assert_eq!(d.events_before, before);
        assert!(
            src.info().detail.contains("DAMAGED"),
            "{}",
            src.info().detail
        );

        let (replayed, notice) = replay(&cut_path);
        let notice = notice.expect("a damage note");
        assert!(
            notice.contains(&format!("at byte {start} (frame {k})")),
            "{notice}"
        );
        let prefix = &whole.events[..before as usize];
        let c = record::read_file(&cut_path).unwrap();
        assert!(c.events == prefix, "cut at {cut}: not the exact prefix");
        if before > 0 {
            assert_same_counts(
                &aggregate(prefix, &whole.header.class_map),
                &replayed,
                "truncated",
            );
        } else {
            assert_eq!(replayed.totals.dispatches, 0);
        }
    }
    // Cut exactly at a frame boundary: every frame replays; the missing
    // end marker is still reported.
    let (start, before) = bounds[bounds.len() / 3];
    let c = record::read_bytes(&bytes[..start as usize]).unwrap();
    assert_eq!(c.events.len() as u64, before);
    let d = c.damage.unwrap();
    assert!(d.reason.contains("without its end marker"), "{d}");
}

/// A recording cut while it is being replayed: the replay ends where the
/// cut is and says so from then on, as damage found at open is said.
#[test]
fn a_recording_cut_while_replaying_says_so() {
    let path = tmp("cut-late.nfsdrec");
    // Long enough that its end is past what the reader buffers (256 KiB).
    record_demo_framed("seed-k4", None, 30, &path, Some(1000));
    let bounds = frames(&path);
    let mut src = ReplaySource::open(&path).unwrap();
    assert!(src.damage().is_none());
    let mut out = Vec::new();
    // Read the first frame, then cut the file in the middle of its last
    // but one (past what the reader has buffered).
    src.poll(0, &mut out).unwrap();
    let k = bounds.len() - 2;
    assert!(bounds[k].0 > 512 << 10, "a frame past the reader's buffer");
    let (start, before) = bounds[k];
    let cut = start + (bounds[k + 1].0 - start) / 2;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(cut)
        .unwrap();
    while src.poll(u64::MAX, &mut out).unwrap() != nfsdtop_agent::source::Poll::Finished {}
    let d = src.damage().expect("the cut found").clone();
    assert_eq!(
        (d.offset, d.frame, d.events_before),
        (start, k as u64, before),
        "{d}"
    );
    let detail = src.info().detail;
    assert!(detail.contains("DAMAGED while replaying"), "{detail}");
    assert!(
        detail.contains(&format!("at byte {start} (frame {k})")),
        "{detail}"
    );
}

#[test]
fn a_corrupted_byte_mid_file_replays_the_frames_before_it() {
    let path = tmp("bad-source.nfsdrec");
    record_demo_framed("seed-k16", None, 10, &path, Some(1000));
    let whole = record::read_file(&path).unwrap();
    let bounds = frames(&path);
    let bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    let k = bounds
        .iter()
        .rposition(|&(s, _)| s as usize <= mid)
        .unwrap();
    let (start, before) = bounds[k];
    for flip in [0x01u8, 0x80, 0xff] {
        let mut b = bytes.clone();
        b[mid] ^= flip;
        let bad = tmp("bad.nfsdrec");
        std::fs::write(&bad, &b).unwrap();
        let c = record::read_file(&bad).unwrap();
        let d = c.damage.expect("corruption noticed");
        assert_eq!(d.kind, DamageKind::Corrupt, "{d}");
        assert_eq!(d.frame, k as u64, "{d}");
        assert!(d.offset >= start && d.offset <= mid as u64, "{d}");
        assert!(d.reason.contains("checksum"), "{d}");
        assert_eq!(c.events.len() as u64, before);
        assert!(c.events[..] == whole.events[..before as usize]);
        let (replayed, notice) = replay(&bad);
        assert!(notice.unwrap().contains("corrupt at byte"));
        assert_same_counts(
            &aggregate(&whole.events[..before as usize], &whole.header.class_map),
            &replayed,
            "corrupt",
        );
    }
}

#[test]
fn a_recording_from_a_newer_format_is_refused() {
    let path = tmp("v-next.nfsdrec");
    record_demo("seed-k4", None, 1, &path);
    let mut b = std::fs::read(&path).unwrap();
    let next = record::FORMAT_VERSION + 1;
    b[8..10].copy_from_slice(&next.to_le_bytes());
    std::fs::write(&path, &b).unwrap();
    let e = SourceSpec::Replay { path: path.clone() }
        .open()
        .err()
        .expect("refused");
    let msg = format!("{e:#}");
    assert!(
        msg.contains(&format!(
            "recorded by format v{next}; this nfsdtop ({}) reads up to v{}: upgrade nfsdtop",
            env!("CARGO_PKG_VERSION"),
            record::FORMAT_VERSION
        )),
        "{msg}"
    );
}

#[test]
fn replay_at_a_speed_factor_follows_the_recorded_clock() {
    let path = tmp("paced.nfsdrec");
    let live = record_demo("seed-k4", None, 4, &path);
    let source = ReplaySource::open(&path).unwrap();
    let t0 = Instant::now();
    let mut last = None;
    Pipeline {
        pace: Pace::Realtime { speed: 40.0 },
        ..Pipeline::new(
            Box::new(source),
            Aggregator::default(),
            Duration::from_millis(50),
        )
    }
    .run(None, |s| {
        last = Some(s);
        Flow::Continue
    })
    .unwrap();
    let took = t0.elapsed();
    // 4 s of recorded time at 40x cannot be over before 0.1 s of wall time.
    assert!(took >= Duration::from_millis(95), "{took:?}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert_eq!(last.unwrap().totals.dispatches, live.totals.dispatches);
}
