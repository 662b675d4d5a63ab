//! `nfsdtop record -o FILE`: run the pipeline with a tap that writes every
//! event to a recording (format: docs/recording-format.md), until
//! `--duration` of source time, `--count` events, the end of the source,
//! Ctrl-C, SIGTERM or SIGHUP. However it stops, the file is finished (last frame,
//! end marker, fsync) and replays cleanly; a summary goes to stderr.
//! An existing file is overwritten only with `--force`, and never when it
//! is the recording being replayed.

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use nfsdtop_agent::enrich::classify::ClassMap;
use nfsdtop_agent::enrich::redact::Redactor;
use nfsdtop_agent::model::{Event, EventKind, SourceKind};
use nfsdtop_agent::pipeline::{Control, Flow, Pipeline};
use nfsdtop_agent::record::{as_recorded, Header, Reader, Writer};
use nfsdtop_agent::session::{NoNfsd, Session};
use nfsdtop_agent::source::SourceSpec;

use crate::cli::RecordArgs;

/// How often a recording is flushed to disk while running: what a crash
/// or `kill -9` can lose.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

fn exists_error(out: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "{} already exists: pass --force to overwrite it, or choose another -o FILE",
        out.display()
    )
}

/// Refuse, before anything is opened, to overwrite a file unasked, and
/// ever to write over the recording being replayed (same device and
/// inode: also through a link or another name).
fn check_output(args: &RecordArgs, spec: &SourceSpec) -> anyhow::Result<()> {
    let Ok(out) = std::fs::metadata(&args.output) else {
        return Ok(());
    };
    if let SourceSpec::Replay { path } = spec {
        if let Ok(input) = std::fs::metadata(path) {
            if (input.dev(), input.ino()) == (out.dev(), out.ino()) {
                anyhow::bail!(
                    "{} is the recording being replayed ({}): recording over it would destroy \
                     it; write to another -o FILE",
                    args.output.display(),
                    path.display()
                );
            }
        }
    }
    // A device or FIFO (/dev/null, a pipe to another tool) holds no file
    // to lose.
    if !args.force && out.is_file() {
        return Err(exists_error(&args.output));
    }
    Ok(())
}

/// May `out` be written over? With --force, or when it is no regular file.
fn may_overwrite(args: &RecordArgs) -> bool {
    args.force || std::fs::metadata(&args.output).is_ok_and(|m| !m.is_file())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    SourceEnded,
    Duration,
    Count,
    Signal,
}

pub fn run(args: &RecordArgs) -> anyhow::Result<()> {
    if args.source.connect.is_some() {
        anyhow::bail!(
            "cannot record a remote nfsdtopd's snapshots (--connect): \
             run `nfsdtop record` on the NFS server itself"
        );
    }
    let cfg = args.source.local.config()?;
    let spec = cfg.spec();
    check_output(args, &spec)?;
    let classmap = cfg.load_class_map(&spec)?;
    let session = Session::open(
        &cfg,
        NoNfsd::FailSaying(
            "cannot open the event source to record (use --demo to record the built-in simulator)",
        ),
    )?;
    if let Some(n) = session.notice() {
        crate::out::warn(n);
    }
    let source = session.source();
    let info = source.info();
    // A class map can name single hosts (a /32 is a client address), so a
    // redacted recording carries none: it replays grouped by pseudonym.
    let recorded_map = if args.source.redact {
        ClassMap::default()
    } else {
        classmap.clone()
    };
    let mut header = Header::for_source(&info, &recorded_map, source.now_ns());
    if let SourceSpec::Replay { path } = &spec {
        // Re-recording (e.g. a cut of a longer file): keep saying where
        // the events came from in the first place.
        if let Ok(r) = Reader::open(path) {
            let h = r.header();
            header.source_kind = h.source_kind;
            // The same clock as the original: its start times still hold.
            header.start_unix_ns = h.start_unix_ns;
            header.source_detail = format!("{} (via {})", h.source_detail, path.display());
            header.nfsd = h.nfsd;
        }
    }
    let created = if may_overwrite(args) {
        Writer::create(&args.output, &header)
    } else {
        Writer::create_new(&args.output, &header)
    };
    let mut writer = match created {
        Ok(w) => w,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(exists_error(&args.output))
        }
        Err(e) => {
            return Err(
                anyhow::Error::new(e).context(format!("cannot create {}", args.output.display()))
            )
        }
    };
    // The header on disk now: the file says at once that the source is
    // open, whenever the first events come (a live source without enqueue
    // hooks holds them a second).
    writer
        .flush()
        .with_context(|| format!("cannot write {}", args.output.display()))?;

    // Ctrl-C, SIGTERM or SIGHUP (the terminal went away): finish the
    // file. A second one while finishing exits at once.
    let signalled = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&signalled))?;
        signal_hook::flag::register(sig, Arc::clone(&signalled))?;
    }

    let (ctl, ctl_rx) = mpsc::channel();
    let mut written = 0u64;
    let mut dispatches = 0u64;
    let mut last_ts = None::<u64>;
    let mut stop = Stop::SourceEnded;
    let mut last_flush = Instant::now();
    let limit = args.count;
    let redactor = args.source.redact.then(Redactor::random);
    let result = {
        let writer = &mut writer;
        let (written, dispatches, last_ts, stop) =
            (&mut written, &mut dispatches, &mut last_ts, &mut stop);
        let signalled = Arc::clone(&signalled);
        // The events as the file holds them (a named execution is two
        // there), so that `--count` counts what a replay reads back.
        let mut recorded: Vec<Event> = Vec::new();
        let tap = move |events: &[Event]| -> anyhow::Result<()> {
            recorded.clear();
            for e in events {
                let (first, second) = as_recorded(e);
                recorded.push(first);
                recorded.extend(second);
            }
            // Clients become stand-in addresses before they reach the
            // file: a redacted recording holds no client address.
            if let Some(r) = &redactor {
                for e in &mut recorded {
                    e.xprt.client = r.endpoint(&e.xprt.client);
                }
            }
            let room = limit.map_or(usize::MAX, |n| {
                usize::try_from(n.saturating_sub(*written)).unwrap_or(usize::MAX)
            });
            let take = &recorded[..recorded.len().min(room)];
            writer.write_all(take)?;
            *written += take.len() as u64;
            *dispatches += take
                .iter()
                .filter(|e| matches!(e.kind, EventKind::Dequeue { .. }))
                .count() as u64;
            if let Some(e) = take.last() {
                *last_ts = Some(last_ts.map_or(e.ts_ns, |t| t.max(e.ts_ns)));
            }
            if last_flush.elapsed() >= FLUSH_EVERY {
                writer.flush()?;
                last_flush = Instant::now();
            }
            if limit.is_some_and(|n| *written >= n) {
                *stop = Stop::Count;
                let _ = ctl.send(Control::Stop);
            } else if signalled.load(Ordering::Relaxed) {
                *stop = Stop::Signal;
                let _ = ctl.send(Control::Stop);
            }
            Ok(())
        };
        let max_source_ns = args.duration.map(|d| (d * 1e9) as u64);
        let pipeline = Pipeline {
            tap: Some(Box::new(tap)),
            max_source_ns,
            ..session.with_class_map(classmap).pipeline()?
        };
        pipeline.run(Some(ctl_rx), |_| Flow::Continue)
    };
    if stop == Stop::SourceEnded && args.duration.is_some() {
        // The pipeline stops at --duration as it stops at the end of a
        // replay: tell which by the clock.
        let want = args.duration.map_or(0, |d| (d * 1e9) as u64);
        let reached =
            last_ts.is_some_and(|t| t.saturating_sub(header.start_mono_ns) + 1_000_000_000 >= want);
        if info.kind != SourceKind::Replay || reached {
            stop = Stop::Duration;
        }
    }
    // Finish the file whatever happened, so that what was recorded replays.
    let (summary, result) = match (writer.finish_file_at(&args.output), result) {
        (Ok(summary), result) => (summary, result),
        // Where writing failed already (a full disk, a reader gone), the
        // end fails too: say the first failure, and what the file holds.
        (Err(_), Err(first)) => {
            return Err(first.context(format!(
                "recording to {} stopped early, after {written} events, and could not be \
                 finished: the file holds at most those, without its end",
                args.output.display()
            )))
        }
        // Its file gone: nothing holds what was recorded.
        (Err(gone), _) if gone.kind() == std::io::ErrorKind::NotFound => {
            return Err(anyhow::anyhow!(
                "recording to {} failed after {written} events: {gone}",
                args.output.display()
            ))
        }
        (Err(end), Ok(_)) => {
            return Err(anyhow::Error::new(end).context(format!(
                "cannot finish {} after {written} events (it holds them, without its end)",
                args.output.display()
            )))
        }
    };
    let secs = last_ts.map_or(0.0, |t| t.saturating_sub(header.start_mono_ns) as f64 / 1e9);
    let why = match stop {
        Stop::SourceEnded => "the source ended",
        Stop::Duration => "--duration reached",
        Stop::Count => "--count reached",
        Stop::Signal => "interrupted",
    };
    crate::out::warn(format_args!(
        "recorded {} events ({} dispatches, {} transports) over {secs:.1} s of {} \
         to {} ({why}): {} bytes, {:.2} bytes/event",
        summary.events,
        dispatches,
        summary.transports,
        info.kind.as_str(),
        args.output.display(),
        summary.bytes,
        summary.bytes_per_event(),
    ));
    result
        .map(|_| ())
        .context("recording stopped early (the file holds what was recorded until then)")
}
