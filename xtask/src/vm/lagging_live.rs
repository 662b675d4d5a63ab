//! Scenario "lagging", what a held-back agent shows live, against what
//! the guest sampled beside it (scripts/vm/scenario-lagging.sh):
//! - nfsdtopd's /api/v1/unfair, polled every 2 s: every client whose
//!   ratio over the run ends below 0.4 is listed within 10 s of its first
//!   dispatch (ftrace's record) and stays listed while the load runs;
//! - each snapshot's `connections` per client equals the server's
//!   established sockets, wherever the samples just before and just after
//!   the snapshot agree (between them nothing is known).
//!
//! Times: the polls and samples are stamped with the guest's uptime, the
//! snapshots with the wall clock (`lagging.clock.TAG` gives the offset),
//! ftrace's records with the trace clock (a `nfsdtop-clock UPTIME`
//! marker written into the trace gives that offset).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use serde_json::Value;

use super::batch::Line;
use super::clients::Client;
use super::ftrace::field;
use super::report::Report;

/// A client whose ratio over the run ends below this is a victim the
/// unfair list must show.
const STARVED: f64 = 0.4;
/// How soon after its first dispatch.
const LISTED_WITHIN_S: f64 = 10.0;
/// The guest's clock marker in the trace, as ftrace prints it.
const MARKER: &str = ": tracing_mark_write: nfsdtop-clock ";

/// One answer of the unfair poll: when it arrived (uptime) and the peers
/// it listed (None: no answer, e.g. the daemon stopped past the read's
/// timeout).
struct Poll {
    at: f64,
    peers: Option<BTreeSet<IpAddr>>,
}

fn read_polls(path: &Path) -> Vec<Poll> {
    let text = fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (at, body) = l.split_once(' ').unwrap_or((l, ""));
            let peers = serde_json::from_str::<Value>(body).ok().and_then(|v| {
                v["peers"].as_array().map(|rows| {
                    rows.iter()
                        .filter_map(|r| r["name"].as_str()?.parse().ok())
                        .collect()
                })
            });
            Some(Poll {
                at: at.parse().ok()?,
                peers,
            })
        })
        .collect()
}

/// The trace clock's offset from uptime (uptime = trace + offset), and
/// each client's first nfsd dispatch in trace time.
fn trace_times(trace: &str) -> (Option<f64>, BTreeMap<IpAddr, f64>) {
    let mut offset = None;
    let mut first = BTreeMap::new();
    for line in trace.lines() {
        let Some((head, rest)) = line
            .split_once(" svc_xprt_dequeue: ")
            .or_else(|| line.split_once(MARKER))
        else {
            continue;
        };
        let Some(ts) = head
            .split_whitespace()
            .last()
            .and_then(|t| t.trim_end_matches(':').parse::<f64>().ok())
        else {
            continue;
        };
        if line.contains(MARKER) {
            if let Ok(up) = rest.trim().parse::<f64>() {
                offset.get_or_insert(up - ts);
            }
            continue;
        }
        if let Some(c) = field(rest, "client").and_then(|c| c.parse::<SocketAddr>().ok()) {
            first.entry(c.ip()).or_insert(ts);
        }
    }
    (offset, first)
}

/// The unfair list against the run's victims (their ratio from the
/// hooked instance's last line, which is checked against ftrace).
pub fn unfair_list(
    results: &Path,
    tag: &str,
    summary: &BTreeMap<String, String>,
    hooked_last: Option<&Line>,
    rep: &mut Report,
) {
    let daemon = summary.get(&format!("lagging.daemon.{tag}"));
    if daemon.map(String::as_str) != Some("up") {
        rep.check(
            false,
            format!("{tag}: nfsdtopd in the guest, for its unfair list: {daemon:?}"),
        );
        return;
    }
    let polls = read_polls(&results.join(format!("unfair-{tag}.txt")));
    let trace = fs::read_to_string(results.join(format!("trace-{tag}.txt"))).unwrap_or_default();
    let (offset, first) = trace_times(&trace);
    let fio_done: Option<f64> = summary
        .get(&format!("t_fio_done.{tag}"))
        .and_then(|v| v.parse().ok());
    let (Some(offset), Some(fio_done), Some(last)) = (offset, fio_done, hooked_last) else {
        rep.check(
            false,
            format!("{tag}: unfair list: the trace's clock marker ({offset:?}), fio's end ({fio_done:?}) and the hooked instance's last line are all needed"),
        );
        return;
    };
    let answered = polls.iter().filter(|p| p.peers.is_some()).count();
    rep.note(format!(
        "{tag}: nfsdtopd's unfair list polled {} times, {answered} answered",
        polls.len()
    ));
    let mut victims = 0;
    for e in &last.entities {
        let Ok(ip) = e.name.parse::<IpAddr>() else {
            continue;
        };
        let ratio = e.dispatches as f64 / e.entitled.max(1e-9);
        if e.entitled < 1.0 || ratio >= STARVED {
            continue;
        }
        victims += 1;
        let Some(first_up) = first.get(&ip).map(|t| t + offset) else {
            rep.check(false, format!("{tag}: {ip}: no dispatch in the trace"));
            continue;
        };
        let during: Vec<&Poll> = polls
            .iter()
            .filter(|p| p.at >= first_up && p.at <= fio_done)
            .collect();
        let Some(since) = during
            .iter()
            .find(|p| p.peers.as_ref().is_some_and(|s| s.contains(&ip)))
        else {
            rep.check(
                false,
                format!("{tag}: {ip} (ratio {ratio:.2} over the run) never listed by /api/v1/unfair while the load ran ({} polls)", during.len()),
            );
            continue;
        };
        let dropped: Vec<String> = during
            .iter()
            .filter(|p| p.at > since.at && p.peers.as_ref().is_some_and(|s| !s.contains(&ip)))
            .map(|p| format!("{:.1}", p.at - first_up))
            .collect();
        rep.check(
            since.at - first_up <= LISTED_WITHIN_S && dropped.is_empty(),
            format!(
                "{tag}: {ip} (ratio {ratio:.2} over the run) listed by /api/v1/unfair {:.1} s after its first dispatch (at most {LISTED_WITHIN_S} s) and in every answer after until fio ended (not at {dropped:?} s)",
                since.at - first_up
            ),
        );
    }
    if victims == 0 {
        rep.note(format!(
            "{tag}: no client ended below {STARVED} of its fair share: the unfair list had no victim to show"
        ));
    }
}

/// One `ss` sample: established connections per client address, read
/// between `start` and `end` (uptime).
struct Sample {
    start: f64,
    end: f64,
    counts: BTreeMap<IpAddr, u64>,
}

/// conns-TAG.txt: "START END ADDR=N..." lines (or "AT ADDR=N...").
fn read_samples(path: &Path) -> Vec<Sample> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let start: f64 = words.first()?.parse().ok()?;
            let (end, rest) = match words.get(1).and_then(|w| w.parse::<f64>().ok()) {
                Some(end) => (end, &words[2..]),
                None => (start, &words[1..]),
            };
            let counts = rest
                .iter()
                .filter_map(|w| {
                    let (a, n) = w.split_once('=')?;
                    Some((a.parse().ok()?, n.parse().ok()?))
                })
                .collect();
            Some(Sample { start, end, counts })
        })
        .collect()
}

/// Each snapshot's connections against the server's established sockets.
pub fn connections(
    results: &Path,
    tag: &str,
    summary: &BTreeMap<String, String>,
    clients: &[Client],
    held: &[Line],
    rep: &mut Report,
) {
    let clock: Option<f64> = summary.get(&format!("lagging.clock.{tag}")).and_then(|v| {
        let (wall, up) = v.split_once(' ')?;
        Some(wall.parse::<f64>().ok()? - up.parse::<f64>().ok()?)
    });
    let samples = read_samples(&results.join(format!("conns-{tag}.txt")));
    let Some(wall_minus_up) = clock else {
        rep.check(
            false,
            format!("{tag}: connections: no clock pair in the summary"),
        );
        return;
    };
    let (mut compared, mut wrong) = (0, vec![]);
    for l in held {
        let at = l.time - wall_minus_up;
        // What a sample read holds at some moment between its start and
        // its end: before the snapshot only if it ended by then.
        let before = samples.iter().rev().find(|s| s.end <= at);
        let after = samples.iter().find(|s| s.start >= at);
        let (Some(before), Some(after)) = (before, after) else {
            continue;
        };
        for c in clients {
            let (b, a) = (
                before.counts.get(&c.ip).copied().unwrap_or(0),
                after.counts.get(&c.ip).copied().unwrap_or(0),
            );
            if a != b {
                continue;
            }
            let shown = l
                .entities
                .iter()
                .find(|e| e.name.parse::<IpAddr>().ok() == Some(c.ip))
                .map_or(0, |e| e.connections);
            compared += 1;
            if shown != a {
                wrong.push(format!(
                    "{} at {at:.1} s: {shown} shown, {a} established",
                    c.name
                ));
            }
        }
    }
    rep.check(
        compared > 0 && wrong.is_empty(),
        format!(
            "{tag}: each snapshot's connections == the server's established sockets per client ({compared} compared over {} samples; wrong: {wrong:?})",
            samples.len()
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trace_clock_and_first_dispatches_come_from_the_trace_text() {
        let trace = "\
# tracer: nop
          nfsd-812     [001] ..... 100.250000: svc_xprt_dequeue: server=10.99.1.1:2049 client=10.99.1.2:801 flags=BUSY|DATA wakeup-us=3 qtime-us=40
            bash-90    [000] ..... 100.500000: tracing_mark_write: nfsdtop-clock 130.75
          nfsd-812     [001] ..... 101.000000: svc_xprt_dequeue: server=[fd99:4::1]:2049 client=[fd99:4::2]:700 flags=BUSY|DATA wakeup-us=3 qtime-us=40
          nfsd-812     [001] ..... 102.000000: svc_xprt_dequeue: server=10.99.1.1:2049 client=10.99.1.2:801 flags=BUSY|DATA wakeup-us=3 qtime-us=40
";
        let (offset, first) = trace_times(trace);
        assert_eq!(offset, Some(30.25));
        assert_eq!(first.get(&"10.99.1.2".parse().unwrap()), Some(&100.25));
        assert_eq!(first.get(&"fd99:4::2".parse().unwrap()), Some(&101.0));
        assert_eq!(first.len(), 2);
    }

    #[test]
    fn an_unanswered_poll_is_neither_listed_nor_unlisted() {
        let dir = std::env::temp_dir().join(format!("nfsdtop-polls-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let f = dir.join("unfair-x.txt");
        fs::write(
            &f,
            "10.5 {\"peers\":[{\"name\":\"10.99.2.2\"},{\"name\":\"(listener)\"}]}\n12.5 \n14.5 {\"peers\":[]}\n",
        )
        .unwrap();
        let polls = read_polls(&f);
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(polls.len(), 3);
        let ip: IpAddr = "10.99.2.2".parse().unwrap();
        assert!(polls[0].peers.as_ref().unwrap().contains(&ip));
        assert_eq!(polls[0].peers.as_ref().unwrap().len(), 1);
        assert!(polls[1].peers.is_none());
        assert!(polls[2].peers.as_ref().unwrap().is_empty());
    }
}

#[cfg(test)]
mod victim_tests {
    use super::*;
    use std::path::PathBuf;

    /// The last line of nfsdtop's own batch output (the compare fixture)
    /// with peer 10.0.0.2 made a victim: 100 dispatches of 1,000 entitled.
    fn last_line() -> Line {
        let text = fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("src/compare/testdata/nfsdtop-main.jsonl"),
        )
        .unwrap();
        let mut v: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        for e in v["entities"].as_array_mut().unwrap() {
            if e["name"] == "10.0.0.2" {
                e["dispatches"] = 100.into();
                e["entitled"] = 1000.0.into();
            }
        }
        serde_json::from_value(v).unwrap()
    }

    fn results(polls: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "nfsdtop-victims-{}-{}",
            std::process::id(),
            polls.len()
        ));
        fs::create_dir_all(&dir).unwrap();
        // Trace clock 100.0 is uptime 130.0; the victim's first dispatch
        // at trace 101.0, so uptime 131.0.
        fs::write(
            dir.join("trace-lagging.txt"),
            "  bash-9 [000] ..... 100.000000: tracing_mark_write: nfsdtop-clock 130.0\n\
             nfsd-1 [001] ..... 101.000000: svc_xprt_dequeue: server=10.0.0.1:2049 client=10.0.0.2:700 flags=BUSY\n",
        )
        .unwrap();
        fs::write(dir.join("unfair-lagging.txt"), polls).unwrap();
        dir
    }

    fn check(polls: &str) -> Vec<String> {
        let dir = results(polls);
        let summary: BTreeMap<String, String> = [
            ("lagging.daemon.lagging", "up"),
            ("t_fio_done.lagging", "150.0"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into();
        let mut rep = Report {
            lines: vec![],
            failures: vec![],
        };
        unfair_list(&dir, "lagging", &summary, Some(&last_line()), &mut rep);
        fs::remove_dir_all(&dir).unwrap();
        rep.failures
    }

    const LISTED: &str = r#"{"peers":[{"name":"10.0.0.2"}]}"#;
    const EMPTY: &str = r#"{"peers":[]}"#;

    #[test]
    fn a_victim_listed_in_time_and_kept_passes() {
        let polls =
            format!("133.0 {EMPTY}\n135.0 {LISTED}\n137.0 \n139.0 {LISTED}\n155.0 {EMPTY}\n");
        assert_eq!(check(&polls), Vec::<String>::new());
    }

    #[test]
    fn a_victim_listed_late_dropped_or_never_fails() {
        let late = format!("133.0 {EMPTY}\n142.0 {LISTED}\n");
        assert_eq!(
            check(&late).len(),
            1,
            "listed 11 s after its first dispatch"
        );
        let dropped = format!("133.0 {LISTED}\n135.0 {EMPTY}\n137.0 {LISTED}\n");
        assert!(
            check(&dropped)[0].contains("not at [\"4.0\"]"),
            "{:?}",
            check(&dropped)
        );
        let never = format!("133.0 {EMPTY}\n135.0 {EMPTY}\n");
        assert!(check(&never)[0].contains("never listed"));
    }
}

#[cfg(test)]
mod sample_tests {
    use super::*;

    #[test]
    fn a_sample_holds_between_its_start_and_its_end() {
        let dir = std::env::temp_dir().join(format!("nfsdtop-samples-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let f = dir.join("conns-x.txt");
        fs::write(&f, "704.0 723.0 10.99.7.2=5 fd99:3::2=6\n756.5\n").unwrap();
        let s = read_samples(&f);
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].start, s[0].end), (704.0, 723.0));
        assert_eq!(s[0].counts.get(&"10.99.7.2".parse().unwrap()), Some(&5));
        assert_eq!(s[0].counts.get(&"fd99:3::2".parse().unwrap()), Some(&6));
        // The older form, one stamp: start and end alike, no counts.
        assert_eq!((s[1].start, s[1].end, s[1].counts.len()), (756.5, 756.5, 0));
    }
}
