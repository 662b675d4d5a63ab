//! Scenario "lagging", what a held-back agent shows live, against what
//! the guest sampled beside it (scripts/vm/scenario-lagging.sh):
//! - nfsdtopd's /api/v1/unfair, polled every 2 s: every client whose
//!   ratio over the run ends below 0.4 is listed in every answer that
//!   covers its load from 10 s after the load began (fio's own start) to
//!   its end. "Covers" in the events' time, the `time` of the answer's
//!   snapshot: an agent 30 s behind answers now about 30 s ago, and says
//!   so (`lag_s`); what it says must be right for the time it is about;
//! - each snapshot's `connections` per client equals the server's
//!   established sockets, wherever the samples just before and just after
//!   the snapshot agree (between them nothing is known).
//!
//! Times: the polls and samples are stamped with the guest's uptime, the
//! snapshots and fio's reports with the wall clock (`lagging.clock.TAG`
//! gives the offset).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::net::IpAddr;
use std::path::Path;

use serde_json::Value;

use super::batch::Line;
use super::clients::Client;
use super::report::Report;

/// A client whose ratio over the run ends below this is a victim the
/// unfair list must show.
const STARVED: f64 = 0.4;
/// How soon after its load began.
const LISTED_WITHIN_S: f64 = 10.0;

/// One answer of the unfair poll: when it arrived (uptime), the time of
/// the snapshot it answers from (wall clock, the events' time) and the
/// peers it listed (None: no answer, e.g. the daemon stopped past the
/// read's timeout).
struct Poll {
    at: f64,
    time: Option<f64>,
    peers: Option<BTreeSet<IpAddr>>,
}

fn read_polls(path: &Path) -> Vec<Poll> {
    let text = fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (at, body) = l.split_once(' ').unwrap_or((l, ""));
            let v = serde_json::from_str::<Value>(body).ok();
            let peers = v.as_ref().and_then(|v| {
                v["peers"].as_array().map(|rows| {
                    rows.iter()
                        .filter_map(|r| r["name"].as_str()?.parse().ok())
                        .collect()
                })
            });
            Some(Poll {
                at: at.parse().ok()?,
                time: v.as_ref().and_then(|v| v["time"].as_f64()),
                peers,
            })
        })
        .collect()
}

/// Each client's load as its fio reported it: (start, end) on the wall
/// clock, from fio-TAG-NAME.json's `job_start` and `job_runtime` (ms).
pub fn load_windows(results: &Path, tag: &str, clients: &[Client]) -> BTreeMap<IpAddr, (f64, f64)> {
    let mut out = BTreeMap::new();
    for c in clients {
        let path = results.join(format!("fio-{tag}-{}.json", c.name));
        let Some(v) = fs::read_to_string(path)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        else {
            continue;
        };
        let jobs = v["jobs"].as_array().cloned().unwrap_or_default();
        let spans = jobs.iter().filter_map(|j| {
            let start = j["job_start"].as_f64()? / 1000.0;
            Some((start, start + j["job_runtime"].as_f64()? / 1000.0))
        });
        let window = spans.fold(None, |acc: Option<(f64, f64)>, (a, b)| {
            Some(acc.map_or((a, b), |(x, y)| (x.min(a), y.max(b))))
        });
        if let Some(w) = window {
            out.insert(c.ip, w);
        }
    }
    out
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
    let windows = load_windows(results, tag, &super::clients::from_summary(summary));
    // Wall clock = uptime + this, for how far behind an answer was.
    let wall_offset = summary.get(&format!("lagging.clock.{tag}")).and_then(|v| {
        let (wall, up) = v.split_once(' ')?;
        Some(wall.parse::<f64>().ok()? - up.parse::<f64>().ok()?)
    });
    let Some(last) = hooked_last else {
        rep.check(
            false,
            format!("{tag}: unfair list: the hooked instance's last line is needed"),
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
        let Some(&(start, end)) = windows.get(&ip) else {
            rep.check(false, format!("{tag}: {ip}: no fio report of its load"));
            continue;
        };
        let listed = |p: &Poll| p.peers.as_ref().map(|s| s.contains(&ip));
        let judged: Vec<(f64, bool)> = polls
            .iter()
            .filter_map(|p| Some((p.time?, listed(p)?)))
            .filter(|(t, _)| *t >= start + LISTED_WITHIN_S && *t <= end)
            .collect();
        let missing: Vec<String> = judged
            .iter()
            .filter(|(_, yes)| !yes)
            .map(|(t, _)| format!("{:.1}", t - start))
            .collect();
        let first = polls
            .iter()
            .find(|p| p.time.is_some_and(|t| t >= start) && listed(p) == Some(true));
        let first = first.map_or("never".to_string(), |p| {
            let t = p.time.unwrap_or(start);
            let behind = wall_offset.map_or(String::new(), |w| {
                format!(", the agent {:.1} s behind", p.at + w - t)
            });
            format!("first {:.1} s into it{behind}", t - start)
        });
        rep.check(
            !judged.is_empty() && missing.is_empty(),
            format!(
                "{tag}: {ip} (ratio {ratio:.2} over the run) listed by /api/v1/unfair in every answer about its load from {LISTED_WITHIN_S} s after it began to its end, in the events' time ({} such answers; {first}; not in those at {missing:?} s)",
                judged.len()
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
    fn an_unanswered_poll_is_neither_listed_nor_unlisted() {
        let dir = std::env::temp_dir().join(format!("nfsdtop-polls-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let f = dir.join("unfair-x.txt");
        fs::write(
            &f,
            "10.5 {\"time\":7.5,\"peers\":[{\"name\":\"10.99.2.2\"},{\"name\":\"(listener)\"}]}\n12.5 \n14.5 {\"peers\":[]}\n",
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
        assert_eq!(
            polls.iter().map(|p| p.time).collect::<Vec<_>>(),
            [Some(7.5), None, None]
        );
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

    /// The victim's fio ran from wall clock 1000.0 for 16 s.
    fn results(polls: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "nfsdtop-victims-{}-{}",
            std::process::id(),
            polls.len()
        ));
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("fio-lagging-c1.json"),
            r#"{"jobs":[{"job_start":1000000,"job_runtime":16000}]}"#,
        )
        .unwrap();
        fs::write(dir.join("unfair-lagging.txt"), polls).unwrap();
        dir
    }

    fn check(polls: &str) -> Vec<String> {
        let dir = results(polls);
        let summary: BTreeMap<String, String> = [
            ("lagging.daemon.lagging", "up"),
            ("lagging.clock.lagging", "1000.0 100.0"),
            ("client.c1", "10.0.0.2 nconnect=1 vers=3 fio=randread/4k/16"),
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

    /// An answer arriving at uptime `at` about the snapshot of `time`.
    fn poll(at: f64, time: f64, listed: bool) -> String {
        let peers = if listed { r#"{"name":"10.0.0.2"}"# } else { "" };
        format!("{at} {{\"time\":{time},\"peers\":[{peers}]}}\n")
    }

    #[test]
    fn a_victim_listed_in_time_and_kept_passes() {
        // Not yet listed 5 s into its load; then in every answer about
        // 10 s on, one lost answer between; not after its load.
        let polls = [
            poll(105.0, 1005.0, false),
            poll(107.0, 1007.0, true),
            "109.0 \n".to_string(),
            poll(111.0, 1011.0, true),
            poll(125.0, 1020.0, false),
        ]
        .concat();
        assert_eq!(check(&polls), Vec::<String>::new());
    }

    #[test]
    fn an_agent_behind_is_judged_by_the_time_it_answers_about() {
        // 30 s behind: the answers arrive after the load has ended, but
        // each is about a moment of it.
        let behind = [poll(140.0, 1011.0, true), poll(145.0, 1015.0, true)].concat();
        let failures = check(&behind);
        assert_eq!(failures, Vec::<String>::new());
        // The same answers read by when they arrived would have missed it;
        // read by what they are about, a gap is still a gap.
        let gap = [poll(140.0, 1011.0, true), poll(145.0, 1015.0, false)].concat();
        let failures = check(&gap);
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(
            failures[0].contains("not in those at [\"15.0\"]"),
            "{failures:?}"
        );
    }

    #[test]
    fn a_victim_listed_late_dropped_or_never_fails() {
        let late = [
            poll(105.0, 1005.0, false),
            poll(111.0, 1011.0, false),
            poll(113.0, 1013.0, true),
        ]
        .concat();
        assert_eq!(check(&late).len(), 1, "not listed 11 s into its load");
        let dropped = [
            poll(111.0, 1011.0, true),
            poll(113.0, 1013.0, false),
            poll(115.0, 1015.0, true),
        ]
        .concat();
        assert!(
            check(&dropped)[0].contains("not in those at [\"13.0\"]"),
            "{:?}",
            check(&dropped)
        );
        let never = [poll(111.0, 1011.0, false), poll(113.0, 1013.0, false)].concat();
        assert!(check(&never)[0].contains("never"), "{:?}", check(&never));
        // No answer about its load from 10 s on at all: nothing shown, so
        // nothing proven.
        let none = poll(105.0, 1005.0, true);
        assert_eq!(check(&none).len(), 1);
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
