//! Scenario "lagging" (scripts/vm/scenario-lagging.sh): on 6.16+, nfsdtop
//! held back while the load runs (a CPU quota of a tenth of a CPU, then
//! SIGSTOP bursts), with an `--enqueue-hooks` instance beside it that is
//! not (on classic tracepoints, which this kernel does not preempt: a raw
//! enqueue program there misses hits, counted as lost). The held-back agent must stay right, only late:
//! - against ftrace, as every measurement (vm/measure.rs): dispatches
//!   exact and entitled dispatches within 1% of the definition applied to
//!   the trace's own enqueue and dequeue records, or loss counted;
//! - it said it was behind (`totals.lag_s` above the interval);
//! - at each of its snapshots, every client's entitled dispatches within
//!   5% of what the hooked instance gave it by the same dispatch count;
//! - a client whose ratio over the run ends below 0.4 reads below 0.5 in
//!   every line from 10 s after its load began (fio's own start; before,
//!   its mount's few requests were all it asked for);
//! - what it shows live, nfsdtopd's unfair list and each snapshot's
//!   connections, against what the guest sampled beside it
//!   (vm/lagging_live.rs).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use super::batch::{self, Line};
use super::measure::{check_measurement, check_nfsdtop_run};
use super::report::Report;
use super::{clients, kernel_version, lagging_live};

/// How far the two instances' entitled dispatches may be apart at one
/// dispatch count: the hooked lines are interpolated between.
const AGREE: f64 = 0.05;
/// Compared from this many dispatches of a client on: below it the
/// hooked lines' one-second steps through the load's ramp are coarser
/// than the 5% (a step of 150 dispatches at 300).
const AGREE_FLOOR: f64 = 500.0;
/// Compared only between hooked lines at most this far apart (a fraction
/// of the count): on a saturated guest the hooked instance itself prints
/// a line only every few seconds, and a straight line drawn over such a
/// gap is no measurement (one of 224 dispatches missed by 5.6%).
const AGREE_STEP: f64 = 0.02;

pub fn check(results: &Path, summary: &BTreeMap<String, String>, rep: &mut Report) {
    let kernel = summary.get("kernel").cloned().unwrap_or_default();
    let run = summary.get("lagging.run").map(String::as_str);
    if kernel_version(&kernel).is_some_and(|v| v < (6, 16)) {
        rep.check(
            run.is_some_and(|r| r.starts_with("no")),
            format!("lagging: not run on {kernel}, whose enqueues are hooked ({run:?})"),
        );
        return;
    }
    rep.check(
        run == Some("yes"),
        format!("lagging: run on {kernel} ({run:?})"),
    );
    if let Some(s) = summary.get("lagging.quota.cpu_stat") {
        rep.note(format!("lagging: the quota's cgroup: {s}"));
    }
    rep.note(format!(
        "lagging: SIGSTOP bursts {}",
        summary.get("lagging.stops").map_or("?", String::as_str)
    ));
    for tag in ["lagging", "lagstop"] {
        let read = |run: &str| batch::read(&results.join(format!("nfsdtop-{run}.jsonl")));
        let (Ok(held), Ok(hooked)) = (read(tag), read(&format!("{tag}-hooks"))) else {
            rep.check(false, format!("{tag}: cannot read both instances' lines"));
            continue;
        };
        let lost = held.last().map_or(0, |l| l.totals.events_lost);
        rep.note(format!("{tag}: held-back instance lost {lost} events"));
        check_measurement(results, tag, summary, rep, lost == 0);
        check_nfsdtop_run(results, &format!("{tag}-hooks"), tag, summary, rep, true);
        let most = held
            .iter()
            .filter_map(|l| l.totals.lag_s.map(|g| (g, l.interval_s)))
            .fold((0.0f64, 1.0), |a, b| if b.0 > a.0 { b } else { a });
        rep.check(
            most.0 > most.1,
            format!("{tag}: the held-back instance said it was behind: lag up to {:.1} s (interval {:.1} s)", most.0, most.1),
        );
        agree(tag, &held, &hooked, rep);
        let windows = lagging_live::load_windows(results, tag, &clients::from_summary(summary));
        starved_stay_listed(tag, &held, &windows, rep);
        lagging_live::unfair_list(results, tag, summary, hooked.last(), rep);
        let ran = clients::from_summary(summary);
        lagging_live::connections(results, tag, summary, &ran, &held, rep);
    }
}

fn peers(l: &Line) -> BTreeMap<IpAddr, (u64, f64, Option<f64>, u64)> {
    l.entities
        .iter()
        .filter_map(|e| {
            let ip = e.name.parse().ok()?;
            Some((ip, (e.dispatches, e.entitled, e.fairness, e.connections)))
        })
        .collect()
}

/// Each held-back line against the hooked instance: a client's entitled
/// dispatches by the time it had as many dispatches, interpolated
/// between the hooked lines around that count. Matched on the dispatch
/// count, not the clock: on a saturated guest the hooked instance is
/// itself late now and then, so its lines' times say little of what they
/// cover.
fn agree(tag: &str, held: &[Line], hooked: &[Line], rep: &mut Report) {
    let (mut compared, mut coarse, mut worst) = (0, 0, (0.0f64, String::new()));
    let series = |ip: &IpAddr| -> Vec<(f64, f64)> {
        hooked
            .iter()
            .filter_map(|h| peers(h).get(ip).map(|p| (p.0 as f64, p.1)))
            .collect()
    };
    for l in held {
        for (ip, (d, ent, _, _)) in peers(l) {
            let d = d as f64;
            if d < AGREE_FLOOR {
                continue;
            }
            let s = series(&ip);
            let Some(hi) = s.iter().position(|p| p.0 >= d) else {
                continue;
            };
            let (d1, e1) = s[hi];
            let (d0, e0) = if hi == 0 { s[hi] } else { s[hi - 1] };
            if d1 - d0 > AGREE_STEP * d {
                coarse += 1;
                continue;
            }
            let theirs = if d1 > d0 {
                e0 + (e1 - e0) * (d - d0) / (d1 - d0)
            } else {
                e1
            };
            compared += 1;
            let off = (ent - theirs).abs() / ent.max(theirs).max(1.0);
            if off > worst.0 {
                worst = (
                    off,
                    format!("{ip} at {d:.0} dispatches: entitled {ent:.1} vs {theirs:.1}"),
                );
            }
        }
    }
    rep.check(
        compared > 0 && worst.0 <= AGREE,
        format!(
            "{tag}: entitled dispatches at each snapshot agree with the hooked instance's at the same dispatch count within {:.0}% ({compared} compared, {coarse} between hooked lines too far apart; worst {:.1}%: {})",
            AGREE * 100.0,
            worst.0 * 100.0,
            worst.1
        ),
    );
}

/// A client starved over the run is shown so from 10 s after its load
/// began on (lines' times are the events' time, as fio's are wall clock).
fn starved_stay_listed(
    tag: &str,
    held: &[Line],
    windows: &BTreeMap<IpAddr, (f64, f64)>,
    rep: &mut Report,
) {
    let Some(last) = held.last() else { return };
    for (ip, (d, ent, _, _)) in peers(last) {
        if ent < AGREE_FLOOR || d as f64 / ent >= 0.4 {
            continue;
        }
        let Some(&(began, _)) = windows.get(&ip) else {
            rep.check(false, format!("{tag}: {ip}: no fio report of its load"));
            continue;
        };
        let missed: Vec<String> = held
            .iter()
            .filter(|l| l.time >= began + 10.0)
            .filter_map(|l| {
                let (d, ent, _, _) = *peers(l).get(&ip)?;
                (d as f64 / ent.max(1e-9) >= 0.5).then(|| format!("{:.1}", l.time))
            })
            .collect();
        rep.check(
            missed.is_empty(),
            format!(
                "{tag}: {ip} (ratio {:.2} over the run) below half its fair share in every line from 10 s on (not at {missed:?})",
                d as f64 / ent
            ),
        );
    }
}
