//! A what-if report as text (one row per client, one column group per
//! policy, the recording's own numbers first) or as JSON for scripts.

use std::fmt::Write as _;

use super::{Numbers, Report, Row};

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

/// Width of one column group (`group`'s output).
const GROUP: usize = 37;

fn group(n: &Numbers) -> String {
    format!(
        "{:>6.1}% {:>5} {:>7} {:>7} {:>7.0}",
        n.share * 100.0,
        n.fairness.map_or("-".to_string(), |f| format!("{f:.2}")),
        wait(n.wait_p50_us),
        wait(n.wait_p99_us),
        n.requests_per_s
    )
}

fn table(out: &mut String, what: &str, rows: &[Row], r: &Report) {
    let name_w = rows
        .iter()
        .map(|x| x.name.len())
        .max()
        .unwrap_or(4)
        .max(what.len());
    let sub = format!(
        "{:>7} {:>5} {:>7} {:>7} {:>7}",
        "share", "fair", "p50", "p99", "req/s"
    );
    let _ = write!(out, "{:name_w$} | {:GROUP$} | ", "", "measured");
    let _ = write!(
        out,
        "{:GROUP$} {:>6} |",
        format!("{} (fit)", r.fit.policy),
        "err"
    );
    // The recording's own policy is the fit column already.
    let shown = |p: &str| p != r.fit.policy;
    for p in r.policies.iter().filter(|p| shown(p)) {
        let _ = write!(out, " {p:GROUP$} |");
    }
    out.push('\n');
    let _ = write!(out, "{what:name_w$} | {sub} | {sub} {:>6} |", "pts");
    for _ in r.policies.iter().filter(|p| shown(p)) {
        let _ = write!(out, " {sub} |");
    }
    out.push('\n');
    for x in rows {
        let _ = write!(
            out,
            "{:name_w$} | {} | {} {:>+6.1}{}|",
            x.name,
            group(&x.measured),
            group(&x.fit),
            x.fit_error_points,
            if x.fit_ok { " " } else { "!" }
        );
        for p in x.predicted.iter().filter(|p| shown(&p.policy)) {
            let _ = write!(
                out,
                " {}{}|",
                group(&p.numbers),
                if x.fit_ok { " " } else { "?" }
            );
        }
        out.push('\n');
    }
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
        "model: {} transports backlogged throughout, {} sending bursts with think times; \
         {:.1} s simulated per policy after a {:.1} s warm-up",
        m.backlogged, m.bursty, m.simulated_seconds, m.warmup_seconds
    );
    if r.fit.ok {
        let _ = writeln!(
            out,
            "fit: under {} the model reproduces every client's share within {:.1} points \
             (tolerance {:.0})",
            r.fit.policy, r.fit.max_error_points, r.fit.tolerance_points
        );
    } else {
        let _ = writeln!(
            out,
            "WARNING: the model does not reproduce this recording: under {} it misses {} by \
             {:.1} points (tolerance {:.0}). Predictions for clients marked '?' are not to be \
             trusted; see README.md (What if: limits).",
            r.fit.policy,
            r.fit.worst.as_deref().unwrap_or("?"),
            r.fit.max_error_points,
            r.fit.tolerance_points
        );
    }
    for n in &r.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out.push('\n');
    table(&mut out, "PEER", &r.peers, r);
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
