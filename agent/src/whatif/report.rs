//! A what-if report as text (one row per client, one column group per
//! policy, the recording's own numbers first) or as JSON for scripts.

use std::fmt::Write as _;

use super::{Numbers, Report, Row};
use crate::text::displayable;

pub fn json(r: &Report) -> String {
    serde_json::to_string_pretty(r).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// "850us", "12.3ms", "1.20s".
fn wait(us: f64) -> String {
    if us < 1_000.0 {
        format!("{us:.0}us")
    } else if us < 1_000_000.0 {
        format!("{:.1}ms", us / 1e3)
    } else {
        format!("{:.2}s", us / 1e6)
    }
}

/// One policy's numbers: SHARE RATIO P50 P99 (waits) BURST50 BURST99
/// REQ/S (the TUI's names: its RATIO is dispatches / entitled, its FAIR a
/// share); `-` where there is no number (no burst completed).
fn group(n: &Numbers) -> String {
    let or_dash = |x: Option<f64>| x.map_or("-".to_string(), wait);
    format!(
        "{:>6.1}% {:>5} {:>7} {:>7} {:>7} {:>7} {:>7.0}",
        n.share * 100.0,
        n.fairness.map_or("-".to_string(), |f| format!("{f:.2}")),
        wait(n.wait_p50_us),
        wait(n.wait_p99_us),
        or_dash(n.burst_p50_us),
        or_dash(n.burst_p99_us),
        n.requests_per_s
    )
}

/// Width of the POLICY column: "sparse-flow (fit)" and the like.
const POLICY: usize = 17;

/// What the fit line adds when think times were calibrated: the model's
/// miss as fitted, before.
fn calibrated(r: &Report) -> String {
    match r.fit.calibration_rounds {
        0 => String::new(),
        n => format!(
            " after calibrating think times (round {n} of {} kept; as fitted it missed by {:.1} \
             points)",
            r.fit.calibration_rounds_run, r.fit.fitted_error_points
        ),
    }
}

/// One block per client, one line per policy (what was measured, the
/// model under the recording's own policy with its error, then each
/// predicted policy): about 80 columns beside the name, so the table of
/// IPv4 clients reads at 100 columns whatever the number of policies. A fit off by more than
/// the tolerance is marked `!`, the predictions it makes doubtful `?`.
fn table(out: &mut String, what: &str, rows: &[Row], r: &Report) {
    // Names as a terminal can draw them (crate::text).
    let names: Vec<String> = rows.iter().map(|x| displayable(&x.name)).collect();
    let name_w = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(4)
        .max(what.len());
    let _ = writeln!(
        out,
        "{what:name_w$}  {:POLICY$} {:>7} {:>5} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}",
        "POLICY", "SHARE", "RATIO", "P50", "P99", "BURST50", "BURST99", "REQ/S", "ERR"
    );
    // The recording's own policy is the fit line already.
    let fit = format!("{} (fit)", r.fit.policy);
    for (x, name) in rows.iter().zip(&names) {
        let mut line = |name: &str, policy: &str, numbers: String, tail: String| {
            let l = format!("{name:name_w$}  {policy:POLICY$} {numbers}{tail}");
            let _ = writeln!(out, "{}", l.trim_end());
        };
        line(name, "measured", group(&x.measured), String::new());
        let mark = if x.fit_ok { "" } else { "!" };
        let err = format!(" {:>+7.1}{mark}", x.fit_error_points);
        line("", &fit, group(&x.fit), err);
        for p in x.predicted.iter().filter(|p| p.policy != r.fit.policy) {
            let doubt = if x.fit_ok { "" } else { "       ?" };
            line("", &p.policy, group(&p.numbers), doubt.into());
        }
    }
}

/// "1 transport", "2 transports".
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

pub fn text(r: &Report) -> String {
    let mut out = String::new();
    let rec = &r.recording;
    let _ = writeln!(
        out,
        "nfsdtop whatif {}: {} recording, {:.1} s, {} dispatches over {} transports; \
         recorded under {}",
        rec.file, rec.source_kind, rec.seconds, rec.dispatches, rec.transports, rec.policy
    );
    let _ = writeln!(
        out,
        "server: {} threads ({}), {}",
        rec.threads,
        rec.threads_from,
        match rec.pools {
            Some(1) => "1 pool".to_string(),
            Some(p) => format!("{p} pools"),
            None => "pools not recorded".to_string(),
        }
    );
    let m = &r.model;
    let _ = writeln!(
        out,
        "model: {} backlogged throughout, {}, {} sending bursts with think times; {:.1} s \
         simulated per policy after a {:.1} s warm-up",
        count(m.backlogged, "transport", "transports"),
        count(m.closed_loops, "closed loop", "closed loops"),
        count(m.bursty, "transport", "transports"),
        m.simulated_seconds,
        m.warmup_seconds
    );
    if r.fit.ok {
        let _ = writeln!(
            out,
            "fit: under {} the model reproduces every client's share within {:.1} points \
             (tolerance {:.0}){}",
            r.fit.policy,
            r.fit.max_error_points,
            r.fit.tolerance_points,
            calibrated(r)
        );
    } else {
        let _ = writeln!(
            out,
            "WARNING: the model does not reproduce this recording under {}: {}. Predictions \
             for clients marked '?' are not to be trusted; see the book's What if chapter (Limits).{}",
            r.fit.policy,
            displayable(r.fit.reason.as_deref().unwrap_or("it misses a client")),
            calibrated(r)
        );
    }
    for n in &r.notes {
        let _ = writeln!(out, "note: {}", displayable(n));
    }
    out.push('\n');
    table(&mut out, "PEER", &r.peers, r);
    let names: Vec<String> = r.peers.iter().map(|p| displayable(&p.name)).collect();
    let w = names.iter().map(|n| n.chars().count()).max().unwrap_or(4);
    out.push_str("\nthe model per peer (its transports):\n");
    for (p, name) in r.peers.iter().zip(&names) {
        let _ = writeln!(out, "  {name:w$}  {}", p.demand);
    }
    // Without a class map every peer is its own class: nothing to add.
    if r.classes.len() != r.peers.len()
        || r.classes
            .iter()
            .zip(&r.peers)
            .any(|(c, p)| c.name != p.name)
    {
        out.push('\n');
        table(&mut out, "CLASS", &r.classes, r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{FitCheck, ModelSummary, Predicted, Recording};
    use super::*;

    fn row(name: &str, measured: f64, fit: f64) -> Row {
        let n = |share| Numbers {
            share,
            fairness: Some(1.0),
            wait_p50_us: 900.0,
            wait_p99_us: 12_000.0,
            requests_per_s: 100.0,
            burst_p50_us: Some(40_000.0),
            burst_p99_us: None,
            depth0_share: Some(0.5),
        };
        let err = (fit - measured) * 100.0;
        Row {
            name: name.into(),
            class: name.into(),
            connections: 1,
            demand: "1 backlogged".into(),
            measured: n(measured),
            fit: n(fit),
            fit_error_points: err,
            fit_ok: err.abs() <= super::super::FIT_TOLERANCE_POINTS,
            predicted: vec![Predicted {
                policy: "rr-peer".into(),
                numbers: n(0.5),
            }],
        }
    }

    fn report(rows: Vec<Row>) -> Report {
        let worst = rows
            .iter()
            .max_by(|a, b| {
                a.fit_error_points
                    .abs()
                    .total_cmp(&b.fit_error_points.abs())
            })
            .unwrap();
        let max = worst.fit_error_points.abs();
        Report {
            schema: Default::default(),
            recording: Recording {
                file: "f.nfsdrec".into(),
                source_kind: "live".into(),
                kernel: "6.12".into(),
                generation: "6.6+".into(),
                seconds: 60.0,
                events: 1,
                dispatches: 1,
                transports: 2,
                policy: "flat".into(),
                threads: 8,
                threads_from: "recorded".into(),
                pools: Some(1),
            },
            model: ModelSummary {
                transports: 2,
                backlogged: 1,
                closed_loops: 0,
                bursty: 1,
                simulated_seconds: 54.0,
                warmup_seconds: 6.0,
                seed: 1,
            },
            fit: FitCheck {
                policy: "flat".into(),
                tolerance_points: 3.0,
                max_error_points: max,
                worst: Some(worst.name.clone()),
                ok: max <= 3.0,
                fitted_error_points: max,
                calibration_rounds: 0,
                calibration_rounds_run: 0,
                rate_ratio: 1.0,
                reason: (max > 3.0)
                    .then(|| format!("it misses {}'s share by {max:.1} points", worst.name)),
            },
            policies: vec!["rr-peer".into()],
            peers: rows.clone(),
            classes: rows,
            notes: vec![],
        }
    }

    #[test]
    fn a_fit_off_by_more_than_the_tolerance_says_so_and_marks_the_client() {
        let t = text(&report(vec![
            row("10.0.0.2", 0.30, 0.36),
            row("10.0.0.3", 0.70, 0.64),
        ]));
        assert!(
            t.contains("WARNING: the model does not reproduce this recording"),
            "{t}"
        );
        assert!(t.contains("misses 10.0.0.2's share by 6.0 points"), "{t}");
        let block: Vec<&str> = t
            .lines()
            .skip_while(|l| !l.starts_with("10.0.0.2"))
            .take(3)
            .collect();
        assert!(
            block[1].contains("flat (fit)") && block[1].ends_with("+6.0!"),
            "{t}"
        );
        assert!(
            block[2].contains("rr-peer") && block[2].ends_with('?'),
            "{t}"
        );
    }

    #[test]
    fn a_good_fit_is_stated_with_its_error() {
        let t = text(&report(vec![
            row("10.0.0.2", 0.30, 0.31),
            row("10.0.0.3", 0.70, 0.69),
        ]));
        assert!(!t.contains("WARNING"), "{t}");
        assert!(t.contains("within 1.0 points"), "{t}");
        assert!(!t.contains('?'), "{t}");
        // The TUI's names (its FAIR is a share, the ratio is RATIO); one
        // bursty transport in the singular.
        assert!(t.contains(" SHARE RATIO ") && !t.contains("fair "), "{t}");
        assert!(t.contains("1 transport sending bursts"), "{t}");
        let table: Vec<&str> = t
            .lines()
            .skip_while(|l| !l.starts_with("PEER"))
            .take_while(|l| !l.is_empty())
            .collect();
        assert!(
            table.len() == 7 && table.iter().all(|l| l.len() <= 100),
            "{t}"
        );
        // Waits, then burst completion: a dash where no burst completed.
        assert!(table[0].contains(" P99 BURST50 BURST99   REQ/S "), "{t}");
        assert!(table[1].contains(" 12.0ms  40.0ms       -     100"), "{t}");
        let j: serde_json::Value =
            serde_json::from_str(&json(&report(vec![row("a", 0.3, 0.31)]))).unwrap();
        let p = &j["peers"][0]["predicted"][0];
        assert_eq!(p["policy"], "rr-peer");
        assert_eq!(p["share"], 0.5);
        assert_eq!(p["burst_p50_us"], 40_000.0);
        assert_eq!(p["burst_p99_us"], serde_json::Value::Null);
        assert_eq!(p["depth0_share"], 0.5);
    }

    /// A recorded class name or client name that would garble a terminal
    /// is shown with `?`, its columns in place; the JSON keeps it.
    #[test]
    fn names_are_shown_as_a_terminal_can_draw_them() {
        let evil = "lab\u{202E}\u{2028}x";
        let t = text(&report(vec![
            row(evil, 0.30, 0.31),
            row("10.0.0.3", 0.70, 0.69),
        ]));
        assert!(!t.contains(['\u{202E}', '\u{2028}']), "{t}");
        let line = t.lines().find(|l| l.starts_with("lab??x")).unwrap();
        let other = t.lines().find(|l| l.starts_with("10.0.0.3")).unwrap();
        assert_eq!(line.find("measured"), other.find("measured"), "{t}");
        assert!(line.contains("measured"), "{t}");
        assert!(json(&report(vec![row(evil, 0.3, 0.31)])).contains('\u{202E}'));
    }
}
