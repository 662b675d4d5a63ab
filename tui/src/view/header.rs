//! The header: where the numbers come from, the totals of the interval,
//! the link to the source, the notice and the lints' summaries.

use std::time::Duration;

use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use nfsdtop_agent::model::{EntityKind, ServerView};

use super::parts::Parts;
use super::styles;
use crate::state::{served_kind, LinkLabel, State};
use crate::warnings::fmt_us;

/// Warning lines shown at most (the rest are behind `w`).
const MAX_WARNING_LINES: usize = 2;

/// Lines the notice (e.g. "DEMO DATA, NOT THIS HOST") may take: wrapped
/// whole rather than cut, short of crowding out the table.
const MAX_NOTICE_LINES: usize = 3;

/// The notice's lines at `width`.
fn notice_lines(state: &State, width: u16) -> Vec<String> {
    state.notice.as_deref().map_or_else(Vec::new, |n| {
        super::parts::wrap(n, width as usize, MAX_NOTICE_LINES)
    })
}

pub fn height(state: &State, width: u16) -> u16 {
    2 + state.snapshot().is_some() as u16
        + link_line(&state.link()) as u16
        + behind(state).is_some() as u16
        + notice_lines(state, width).len() as u16
        + state.warnings.len().min(MAX_WARNING_LINES) as u16
}

/// How far behind the kernel the snapshot is, where it is behind (see
/// `Snapshot::behind_s`): a line of its own.
fn behind(state: &State) -> Option<f64> {
    state.snapshot().and_then(|s| s.behind_s())
}

/// Whether the link gets a line of its own (anything worse than
/// "connected": it may carry an error message).
fn link_line(link: &LinkLabel) -> bool {
    !matches!(link, LinkLabel::Ok | LinkLabel::Connected)
}

fn sep() -> Span<'static> {
    Span::styled(" | ", styles::dim())
}

fn gap() -> Span<'static> {
    Span::raw("  ")
}

fn fmt_secs(d: f64) -> String {
    if d >= 1.0 && d.fract() == 0.0 {
        format!("{d:.0}s")
    } else {
        format!("{d:.2}s")
    }
}

/// Unix seconds as a UTC time of day (the snapshot's, which for a
/// replay is when it was recorded).
pub fn clock(unix: f64) -> Option<String> {
    if !(unix.is_finite() && unix >= 86_400.0) {
        return None; // no wall clock (tests, simulated time from zero)
    }
    let s = unix as u64 % 86_400;
    Some(format!("{:02}:{:02}:{:02}Z", s / 3600, s / 60 % 60, s % 60))
}

/// The link's state and, reconnecting, the age of the data shown.
fn link_parts(link: &LinkLabel, age: Option<Duration>) -> Option<Parts> {
    let mut p = Parts::new(sep());
    let (text, style) = match link {
        LinkLabel::Ok => return None,
        LinkLabel::Connecting => ("connecting...".to_string(), styles::warn()),
        LinkLabel::Connected => ("connected".to_string(), styles::good()),
        LinkLabel::Stale(d) => (
            format!("stale: no data for {:.0}s", d.as_secs_f64()),
            styles::bad(),
        ),
        LinkLabel::Reconnecting { attempt, error } => {
            p.push(
                0,
                vec![Span::styled(
                    format!("reconnecting (attempt {attempt})"),
                    styles::bad(),
                )],
            );
            p.text(2, true, ": ", error.clone(), styles::bad());
            if let Some(a) = age {
                let ago = format!("data from {:.0}s ago", a.as_secs_f64());
                p.push(1, vec![Span::styled(ago, styles::bad())]);
            }
            return Some(p);
        }
        LinkLabel::Ended(Ok(())) => ("source ended".to_string(), styles::warn()),
        LinkLabel::Ended(Err(e)) => {
            p.push(0, vec![Span::styled("source failed", styles::bad())]);
            p.text(1, true, ": ", e.to_string(), styles::bad());
            return Some(p);
        }
    };
    p.push(0, vec![Span::styled(text, style)]);
    Some(p)
}

/// Every line is made of whole parts; on a narrow terminal the least
/// important go first (see each line's ranks), so no figure is ever cut.
pub fn draw(f: &mut Frame, area: Rect, state: &State) {
    let mut lines: Vec<Line> = Vec::with_capacity(6);
    let link = state.link();
    let snap = state.snapshot();
    lines.push(title_line(state, &link).line(area.width));
    lines.push(match snap {
        Some(s) => totals_line(s, state.group).line(area.width),
        None => Line::styled("waiting for the first snapshot...", styles::dim()),
    });
    if let Some(s) = snap {
        // Where the demo or replay is (source time since its start),
        // before the server (its figures are of that moment).
        let at = state.playback.as_ref().map(|p| {
            let of = p.length_s.map_or(String::new(), |l| format!("/{l:.1}"));
            format!("{} at {:.1}{of}s x{}", src_word(s), p.position_s, p.speed)
        });
        lines.push(server_line(&s.server, at, area.width));
    }
    if link_line(&link) {
        lines.extend(link_parts(&link, state.data_age()).map(|p| p.line(area.width)));
    }
    if let Some(lag) = behind(state) {
        let mut p = Parts::new(gap());
        let what = format!("BEHIND: {lag:.1}s behind the kernel");
        p.push(0, vec![Span::styled(what, styles::bad())]);
        let why = "the server keeps nfsdtop from the CPU; the numbers stay right, shown late, and catch up in order";
        p.text(1, true, ": ", why.to_string(), styles::bad());
        lines.push(p.line(area.width));
    }
    // E.g. "DEMO DATA, NOT THIS HOST": meant to be impossible to miss,
    // so wrapped whole rather than cut.
    let loud = styles::warn().add_modifier(Modifier::REVERSED | Modifier::BOLD);
    for l in notice_lines(state, area.width) {
        lines.push(Line::styled(l, loud));
    }
    let more = state.warnings.len().saturating_sub(MAX_WARNING_LINES);
    for (i, w) in state.warnings.iter().take(MAX_WARNING_LINES).enumerate() {
        // The summary first; the count of the others (also in the
        // footer's "w warnings") only where it fits too.
        let style = styles::severity(w.severity);
        let mut p = Parts::new(gap());
        p.text(0, false, "! ", w.summary.clone(), style);
        if i + 1 == MAX_WARNING_LINES && more > 0 {
            p.push(
                1,
                vec![Span::styled(format!("(+{more} more: w)"), styles::dim())],
            );
        }
        lines.push(p.line(area.width));
    }
    f.render_widget(Paragraph::new(lines), area);
}

/// "nfsdtop | wait: qtime | every 1s at 12:00:00Z | kernel 6.12 (6.16+) |
/// live: ...". Kept longest, in this order: the name with its badges,
/// the interval, the source's kind, the wait source, the clock, the
/// kernel, the source's free text (shortened at a word first).
fn title_line(state: &State, link: &LinkLabel) -> Parts {
    let mut name = vec![Span::styled("nfsdtop", styles::title())];
    let badge = styles::warn().add_modifier(Modifier::REVERSED | Modifier::BOLD);
    let play = state.playback.as_ref();
    if state.paused || play.is_some_and(|p| p.paused && !p.ended) {
        name.push(Span::raw(" "));
        name.push(Span::styled(" PAUSED ", badge));
    }
    if play.is_some_and(|p| p.ended) {
        name.push(Span::raw(" "));
        name.push(Span::styled(" END ", badge));
    }
    if *link == LinkLabel::Connected {
        name.push(Span::raw(" "));
        name.push(Span::styled("connected", styles::good()));
    }
    let mut p = Parts::new(sep());
    p.push(0, name);
    let Some(s) = state.snapshot() else {
        let every = fmt_secs(state.interval.as_secs_f64());
        p.push(1, vec![Span::raw(format!("every {every}"))]);
        return p;
    };
    let src = &s.source;
    p.push(
        3,
        vec![Span::raw(format!("wait: {}", src.wait_source.as_str()))],
    );
    // A remote nfsdtopd keeps its own pace: show the one it sends.
    let every = if state.remote.is_some() && s.interval_s > 0.0 {
        s.interval_s
    } else {
        state.interval.as_secs_f64()
    };
    p.push(1, vec![Span::raw(format!("every {}", fmt_secs(every)))]);
    if let Some(t) = clock(s.time) {
        p.glue(4, vec![Span::raw(format!(" at {t}"))]);
    }
    let kernel = format!("kernel {} ({})", src.kernel, src.generation);
    p.push(5, vec![Span::raw(kernel)]);
    // A remote nfsdtopd serving a demo or a replay says so as loudly as a
    // local one would: its numbers are not a live server's.
    let kind = match served_kind(src) {
        Some(k @ ("demo" | "replay")) => Span::styled(format!("remote {k}"), badge),
        _ => Span::styled(src.kind.as_str(), styles::title()),
    };
    p.push(2, vec![kind]);
    if !src.detail.is_empty() {
        p.text(6, true, ": ", src.detail.clone(), Style::default());
    }
    p
}

/// "1600 disp/s  backlogged 2/2 peers  Jain 0.623  lost 0  wait (all)
/// p50 9.2ms p99 18ms". Kept longest: the rate, events lost when there
/// are any, the backlog, Jain's index, the wait; "lost 0" goes first.
fn totals_line(s: &nfsdtop_agent::model::Snapshot, group: EntityKind) -> Parts {
    let t = &s.totals;
    let (backlogged, jain, of, what) = match group {
        EntityKind::Peer => (t.backlogged, t.jain, s.peers.len(), "peers"),
        EntityKind::Class => (
            t.backlogged_classes,
            t.jain_classes,
            s.classes.len(),
            "classes",
        ),
    };
    let mut p = Parts::new(gap());
    p.push(
        0,
        vec![
            Span::styled(format!("{:.0}", t.dispatch_rate), styles::title()),
            Span::raw(" disp/s"),
        ],
    );
    p.push(
        2,
        vec![Span::raw(format!("backlogged {backlogged}/{of} {what}"))],
    );
    let jain_style = if jain < 0.8 {
        styles::warn()
    } else {
        Style::default()
    };
    p.push(3, vec![Span::styled(format!("Jain {jain:.3}"), jain_style)]);
    let lost = format!("lost {}", t.events_lost);
    if t.events_lost > 0 {
        let loud = styles::bad().add_modifier(Modifier::REVERSED);
        p.push(1, vec![Span::styled(lost, loud)]);
    } else {
        p.push(5, vec![Span::raw(lost)]);
    }
    // Over every dispatch of the interval, whichever entity's (the help
    // says how that differs from a row's).
    p.push(
        4,
        vec![Span::raw(format!(
            "wait (all) p50 {} p99 {}",
            fmt_us(t.wait_p50_us),
            fmt_us(t.wait_p99_us)
        ))],
    );
    p
}

fn src_word(s: &nfsdtop_agent::model::Snapshot) -> &'static str {
    s.source.kind.as_str()
}

/// "demo at 2.5s x1 | nfsd threads 8, busy 7.9 (99%) | pools 4+4 |
/// netns 2" ("pools 3.9/4 4.0/4" where each pool's busy threads are
/// known): kept longest in this order: the threads and busy threads,
/// where the demo or replay is (`at`), the pools, the namespaces.
///
/// Where threads come and go (7.0+): "nfsd threads 3.2 ran (2-4 of
/// 1..8), busy 3.0 (94%) | +2 -1 threads": the mean that ran, the fewest
/// and most, the configured bounds, saturation over what ran, and the
/// starts and exits of the interval.
pub fn server_line(v: &ServerView, at: Option<String>, width: u16) -> Line<'static> {
    let (mut first, ran) = match &v.threads_running {
        Some(r) => {
            let bounds = match (r.configured_min, r.configured_max) {
                (Some(lo), Some(hi)) => format!(" of {lo}..{hi}"),
                _ => String::new(),
            };
            let text = format!(
                "nfsd threads {:.1} ran ({}-{}{bounds})",
                r.mean, r.min, r.max
            );
            (vec![Span::raw(text)], Some(r.mean))
        }
        None => {
            let threads = v.threads.map_or("?".into(), |n| n.to_string());
            let n = v.threads.map(f64::from);
            (vec![Span::raw(format!("nfsd threads {threads}"))], n)
        }
    };
    match (v.busy_threads, ran) {
        (Some(b), Some(n)) if n > 0.0 => {
            let sat = b / n;
            let style = if sat >= 0.9 {
                styles::warn()
            } else {
                Style::default()
            };
            first.push(Span::styled(
                format!(", busy {b:.1} ({:.0}%)", sat * 100.0),
                style,
            ));
        }
        (Some(b), _) => first.push(Span::raw(format!(", busy {b:.1}"))),
        (None, _) => first.push(Span::raw(", busy ?")),
    }
    let mut p = Parts::new(sep());
    if let Some(at) = at {
        p.push(1, vec![Span::raw(at)]);
    }
    p.push(0, first);
    if let Some(r) = v.threads_running.filter(|r| r.starts + r.exits > 0) {
        // Threads started because all were busy: saturation of its own.
        p.push(
            1,
            vec![Span::styled(
                format!("+{} -{} threads", r.starts, r.exits),
                if r.starts > 0 {
                    styles::warn()
                } else {
                    Style::default()
                },
            )],
        );
    }
    if v.pools.len() > 1 {
        // "pools 4+4" (threads), or "pools 1.5/4 3.9/4" (busy of threads)
        // where each pool's busy threads are known.
        let busy = v.pools.iter().all(|p| p.busy_threads.is_some());
        let each: Vec<String> = v
            .pools
            .iter()
            .map(|p| {
                let n = p.threads.map_or("?".into(), |n| n.to_string());
                match p.busy_threads.filter(|_| busy) {
                    Some(b) => format!("{b:.1}/{n}"),
                    None => n,
                }
            })
            .collect();
        let joined = each.join(if busy { " " } else { "+" });
        p.push(2, vec![Span::raw(format!("pools {joined}"))]);
    }
    if v.netns.len() > 1 {
        p.push(3, vec![Span::raw(format!("netns {}", v.netns.len()))]);
    }
    // lockd's and the callback service's dispatches, counted nowhere else.
    let other: u64 = v
        .services
        .iter()
        .filter(|s| s.service != "nfsd")
        .map(|s| s.dispatches)
        .sum();
    if other > 0 {
        p.push(4, vec![Span::raw(format!("other services {other} disp"))]);
    }
    p.line(width)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_demo_or_replay_says_so_at_80_columns() {
        use nfsdtop_agent::model::{Snapshot, SourceInfo, SourceKind};
        for (inner, want) in [
            ("demo seed-k16 policy=flat", "remote demo"),
            ("replay x.nfsdrec", "remote replay"),
            ("live 6.12", "remote"),
        ] {
            let mut st = State::new(Duration::from_secs(1), None);
            st.on_snapshot(Box::new(Snapshot {
                source: SourceInfo {
                    kind: SourceKind::Remote,
                    detail: format!("https://nfs1.example.org:9847 ({inner})"),
                    ..Default::default()
                },
                ..Default::default()
            }));
            let l = title_line(&st, &LinkLabel::Ok).line(80);
            let text: String = l.spans.iter().map(|s| s.content.to_string()).collect();
            assert!(text.contains(&format!("| {want}")), "{inner}: {text}");
            assert!(!text.contains("nfs1"), "the detail went first: {text}");
        }
    }

    #[test]
    fn clock_is_utc_time_of_day() {
        assert_eq!(clock(1_700_000_000.5).as_deref(), Some("22:13:20Z"));
        assert_eq!(clock(3.0), None);
        assert_eq!(clock(f64::NAN), None);
    }

    #[test]
    fn totals_line_says_whose_wait_and_drops_lost_0_first_but_never_losses() {
        let mut s = nfsdtop_agent::model::Snapshot::default();
        s.totals.dispatch_rate = 1569.0;
        s.totals.jain = 0.624;
        s.totals.wait_p50_us = 9_200.0;
        s.totals.wait_p99_us = 18_000.0;
        let text = |s: &nfsdtop_agent::model::Snapshot, w: u16| -> String {
            let l = totals_line(s, EntityKind::Peer).line(w);
            l.spans.iter().map(|s| s.content.to_string()).collect()
        };
        let all =
            "1569 disp/s  backlogged 0/0 peers  Jain 0.624  lost 0  wait (all) p50 9.2ms p99 18ms";
        assert_eq!(text(&s, 120), all);
        assert_eq!(
            text(&s, 80),
            "1569 disp/s  backlogged 0/0 peers  Jain 0.624  wait (all) p50 9.2ms p99 18ms"
        );
        s.totals.events_lost = 3;
        assert_eq!(
            text(&s, 80),
            "1569 disp/s  backlogged 0/0 peers  Jain 0.624  lost 3"
        );
        assert_eq!(text(&s, 30), "1569 disp/s  lost 3");
    }

    /// The server line at `w` columns, as text.
    fn server_text(v: &ServerView, w: u16) -> String {
        server_line(v, None, w)
            .spans
            .iter()
            .map(|s| s.content.to_string())
            .collect()
    }

    /// Threads that come and go: the mean that ran with its range and
    /// bounds, saturation over the mean (3.0 of 3.2: 94%), and the
    /// interval's starts and exits, dropped before the threads.
    #[test]
    fn server_line_says_how_many_threads_ran_where_they_come_and_go() {
        let v = ServerView {
            threads: Some(8),
            busy_threads: Some(3.0),
            threads_running: Some(nfsdtop_agent::model::ThreadsRunning {
                mean: 3.2,
                min: 2,
                max: 4,
                now: 4,
                starts: 2,
                exits: 1,
                configured_min: Some(1),
                configured_max: Some(8),
                ..Default::default()
            }),
            ..Default::default()
        };
        let text = server_text;
        assert_eq!(
            text(&v, 80),
            "nfsd threads 3.2 ran (2-4 of 1..8), busy 3.0 (94%) | +2 -1 threads"
        );
        assert_eq!(
            text(&v, 50),
            "nfsd threads 3.2 ran (2-4 of 1..8), busy 3.0 (94%)"
        );
        let mut quiet = v;
        if let Some(r) = quiet.threads_running.as_mut() {
            (r.starts, r.exits) = (0, 0);
        }
        assert_eq!(
            text(&quiet, 80),
            "nfsd threads 3.2 ran (2-4 of 1..8), busy 3.0 (94%)"
        );
    }

    #[test]
    fn server_line_keeps_whole_parts_and_says_unknown() {
        let text = server_text;
        let mut v = ServerView {
            threads: Some(8),
            busy_threads: Some(6.0),
            pools: (0..2)
                .map(|pool| nfsdtop_agent::model::PoolView {
                    pool,
                    threads: Some(4),
                    ..Default::default()
                })
                .collect(),
            netns: vec![1, 2],
            ..Default::default()
        };
        assert_eq!(
            text(&v, 80),
            "nfsd threads 8, busy 6.0 (75%) | pools 4+4 | netns 2"
        );
        assert_eq!(text(&v, 45), "nfsd threads 8, busy 6.0 (75%) | pools 4+4");
        assert_eq!(text(&v, 41), "nfsd threads 8, busy 6.0 (75%)");
        // Where a demo or replay is goes before the server, kept after it.
        let at = |w: u16| -> String {
            let l = server_line(&v, Some("demo at 2.5s x1".into()), w);
            l.spans.iter().map(|s| s.content.to_string()).collect()
        };
        assert_eq!(
            at(80),
            "demo at 2.5s x1 | nfsd threads 8, busy 6.0 (75%) | pools 4+4 | netns 2"
        );
        assert_eq!(at(50), "demo at 2.5s x1 | nfsd threads 8, busy 6.0 (75%)");
        assert_eq!(at(40), "nfsd threads 8, busy 6.0 (75%)");
        // Each pool's busy threads, where every pool's are known.
        let mut pooled = v.clone();
        pooled.pools[0].busy_threads = Some(2.04);
        assert_eq!(
            text(&pooled, 80),
            "nfsd threads 8, busy 6.0 (75%) | pools 4+4 | netns 2"
        );
        pooled.pools[1].busy_threads = Some(3.96);
        assert_eq!(
            text(&pooled, 80),
            "nfsd threads 8, busy 6.0 (75%) | pools 2.0/4 4.0/4 | netns 2"
        );
        // Other services' dispatches, where there were any, dropped first.
        let mut lockd = v.clone();
        lockd.services = vec![
            nfsdtop_agent::model::ServiceView {
                service: "nfsd".into(),
                dispatches: 900,
                ..Default::default()
            },
            nfsdtop_agent::model::ServiceView {
                service: "other".into(),
                ports: vec![4045],
                dispatches: 23,
                ..Default::default()
            },
        ];
        assert_eq!(
            text(&lockd, 80),
            "nfsd threads 8, busy 6.0 (75%) | pools 4+4 | netns 2 | other services 23 disp"
        );
        assert_eq!(
            text(&lockd, 76),
            "nfsd threads 8, busy 6.0 (75%) | pools 4+4 | netns 2"
        );
        v.threads = None;
        v.busy_threads = None;
        assert!(text(&v, 80).starts_with("nfsd threads ?, busy ?"));
    }
}
