//! The header: where the numbers come from, the totals of the interval,
//! the link to the source, the notice and the lints' summaries.

use std::time::Duration;

use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use nfsdtop_agent::model::{EntityKind, ServerView};

use super::styles;
use crate::state::{LinkLabel, State};
use crate::warnings::fmt_us;

/// Warning lines shown at most (the rest are behind `w`).
const MAX_WARNING_LINES: usize = 2;

pub fn height(state: &State) -> u16 {
    2 + state.snapshot().is_some() as u16
        + link_line(&state.link()) as u16
        + state.notice.is_some() as u16
        + state.warnings.len().min(MAX_WARNING_LINES) as u16
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

fn link_span(link: &LinkLabel, age: Option<Duration>) -> Option<Span<'static>> {
    Some(match link {
        LinkLabel::Ok => return None,
        LinkLabel::Connecting => Span::styled("connecting...", styles::warn()),
        LinkLabel::Connected => Span::styled("connected", styles::good()),
        LinkLabel::Stale(d) => Span::styled(
            format!("stale: no data for {:.0}s", d.as_secs_f64()),
            styles::bad(),
        ),
        LinkLabel::Reconnecting { attempt, error } => Span::styled(
            match age {
                Some(a) => format!(
                    "reconnecting (attempt {attempt}): {error} | data from {:.0}s ago",
                    a.as_secs_f64()
                ),
                None => format!("reconnecting (attempt {attempt}): {error}"),
            },
            styles::bad(),
        ),
        LinkLabel::Ended(Ok(())) => Span::styled("source ended", styles::warn()),
        LinkLabel::Ended(Err(e)) => Span::styled(format!("source failed: {e}"), styles::bad()),
    })
}

/// Most important first on each line, so a narrow terminal cuts only the
/// free text at the end.
pub fn draw(f: &mut Frame, area: Rect, state: &State) {
    let mut lines: Vec<Line> = Vec::with_capacity(6);
    let link = state.link();
    let mut l1 = vec![Span::styled("nfsdtop", styles::title())];
    let badge = styles::warn().add_modifier(Modifier::REVERSED | Modifier::BOLD);
    let play = state.playback.as_ref();
    if state.paused || play.is_some_and(|p| p.paused && !p.ended) {
        l1.push(Span::raw(" "));
        l1.push(Span::styled(" PAUSED ", badge));
    }
    if let Some(p) = play {
        if p.ended {
            l1.push(Span::raw(" "));
            l1.push(Span::styled(" END ", badge));
        }
    }
    if link == LinkLabel::Connected {
        l1.push(Span::raw(" "));
        l1.extend(link_span(&link, None));
    }
    let mut l2 = Vec::new();
    match state.snapshot() {
        Some(s) => {
            let src = &s.source;
            l1.push(sep());
            l1.push(Span::raw(format!("wait: {}", src.wait_source.as_str())));
            l1.push(sep());
            // A remote agent keeps its own pace: show the one it sends.
            let every = if state.remote.is_some() && s.interval_s > 0.0 {
                s.interval_s
            } else {
                state.interval.as_secs_f64()
            };
            l1.push(Span::raw(format!("every {}", fmt_secs(every))));
            if let Some(t) = clock(s.time) {
                l1.push(Span::raw(format!(" at {t}")));
            }
            l1.push(sep());
            l1.push(Span::raw(format!(
                "kernel {} ({})",
                src.kernel, src.generation
            )));
            l1.push(sep());
            l1.push(Span::styled(src.kind.as_str(), styles::title()));
            if !src.detail.is_empty() {
                l1.push(Span::raw(format!(": {}", src.detail)));
            }

            let t = &s.totals;
            let (backlogged, jain, of, what) = match state.group {
                EntityKind::Peer => (t.backlogged, t.jain, s.peers.len(), "peers"),
                EntityKind::Class => (
                    t.backlogged_classes,
                    t.jain_classes,
                    s.classes.len(),
                    "classes",
                ),
            };
            l2.push(Span::styled(
                format!("{:.0}", t.dispatch_rate),
                styles::title(),
            ));
            l2.push(Span::raw(" disp/s"));
            l2.push(gap());
            l2.push(Span::raw(format!("backlogged {backlogged}/{of} {what}")));
            l2.push(gap());
            let jain_style = if jain < 0.8 {
                styles::warn()
            } else {
                Style::default()
            };
            l2.push(Span::styled(format!("Jain {jain:.3}"), jain_style));
            l2.push(gap());
            let lost = format!("lost {}", t.events_lost);
            l2.push(if t.events_lost > 0 {
                Span::styled(lost, styles::bad().add_modifier(Modifier::REVERSED))
            } else {
                Span::raw(lost)
            });
            l2.push(gap());
            l2.push(Span::raw(format!(
                "wait p50 {} p99 {}",
                fmt_us(t.wait_p50_us),
                fmt_us(t.wait_p99_us)
            )));
        }
        None => {
            l1.push(sep());
            l1.push(Span::raw(format!(
                "every {}",
                fmt_secs(state.interval.as_secs_f64())
            )));
            l2.push(Span::styled(
                "waiting for the first snapshot...",
                styles::dim(),
            ))
        }
    }
    lines.push(Line::from(l1));
    lines.push(Line::from(l2));
    if let Some(s) = state.snapshot() {
        let mut l3 = server_line(&s.server, area.width);
        if let Some(p) = play {
            // Where the demo or replay is (source time since its start),
            // before the server (its figures are of that moment).
            let of = p.length_s.map_or(String::new(), |l| format!("/{l:.1}"));
            let at = format!(
                "{} at {:.1}{of}s x{} | ",
                src_word(s),
                p.position_s,
                p.speed
            );
            let keep = at.chars().count() + l3.width() <= area.width as usize;
            if keep || l3.spans.is_empty() {
                l3.spans.insert(0, Span::raw(at));
            }
        }
        lines.push(l3);
    }
    if link_line(&link) {
        lines.extend(link_span(&link, state.data_age()).map(Line::from));
    }
    if let Some(n) = &state.notice {
        // E.g. "DEMO DATA, NOT THIS HOST": meant to be impossible to miss.
        let loud = styles::warn().add_modifier(Modifier::REVERSED | Modifier::BOLD);
        lines.push(Line::styled(n.clone(), loud));
    }
    let more = state.warnings.len().saturating_sub(MAX_WARNING_LINES);
    for (i, w) in state.warnings.iter().take(MAX_WARNING_LINES).enumerate() {
        let mut spans = vec![
            Span::styled("! ", styles::severity(w.severity)),
            Span::styled(w.summary.clone(), styles::severity(w.severity)),
        ];
        if i + 1 == MAX_WARNING_LINES && more > 0 {
            spans.push(Span::styled(format!("  (+{more} more: w)"), styles::dim()));
        }
        lines.push(Line::from(spans));
    }
    f.render_widget(Paragraph::new(lines), area);
}

fn src_word(s: &nfsdtop_agent::model::Snapshot) -> &'static str {
    s.source.kind.as_str()
}

/// "nfsd threads 8, busy 7.9 (99%) | pools 4+4 | netns 2": each part
/// only if it fits whole, most important first.
pub fn server_line(v: &ServerView, width: u16) -> Line<'static> {
    let threads = v.threads.map_or("?".into(), |n| n.to_string());
    let mut first = vec![Span::raw(format!("nfsd threads {threads}"))];
    match (v.busy_threads, v.threads) {
        (Some(b), Some(n)) if n > 0 => {
            let sat = b / f64::from(n);
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
    let mut parts: Vec<Vec<Span<'static>>> = vec![first];
    if v.pools.len() > 1 {
        let each: Vec<String> = v
            .pools
            .iter()
            .map(|p| p.threads.map_or("?".into(), |n| n.to_string()))
            .collect();
        parts.push(vec![Span::raw(format!("pools {}", each.join("+")))]);
    }
    if v.netns.len() > 1 {
        parts.push(vec![Span::raw(format!("netns {}", v.netns.len()))]);
    }
    let mut spans = Vec::new();
    let mut used = 0usize;
    for (i, p) in parts.into_iter().enumerate() {
        let w: usize =
            p.iter().map(|s| s.content.chars().count()).sum::<usize>() + 3 * (i > 0) as usize;
        if used + w > width as usize {
            break;
        }
        used += w;
        if i > 0 {
            spans.push(sep());
        }
        spans.extend(p);
    }
    Line::from(spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_is_utc_time_of_day() {
        assert_eq!(clock(1_700_000_000.5).as_deref(), Some("22:13:20Z"));
        assert_eq!(clock(3.0), None);
        assert_eq!(clock(f64::NAN), None);
    }

    #[test]
    fn server_line_keeps_whole_parts_and_says_unknown() {
        let text = |v: &ServerView, w: u16| -> String {
            server_line(v, w)
                .spans
                .iter()
                .map(|s| s.content.to_string())
                .collect()
        };
        let mut v = ServerView {
            threads: Some(8),
            busy_threads: Some(6.0),
            pools: (0..2)
                .map(|pool| nfsdtop_agent::model::PoolView {
                    pool,
                    threads: Some(4),
                    busy_threads: None,
                })
                .collect(),
            netns: vec![1, 2],
        };
        assert_eq!(
            text(&v, 80),
            "nfsd threads 8, busy 6.0 (75%) | pools 4+4 | netns 2"
        );
        assert_eq!(text(&v, 45), "nfsd threads 8, busy 6.0 (75%) | pools 4+4");
        assert_eq!(text(&v, 41), "nfsd threads 8, busy 6.0 (75%)");
        v.threads = None;
        v.busy_threads = None;
        assert!(text(&v, 80).starts_with("nfsd threads ?, busy ?"));
    }
}
