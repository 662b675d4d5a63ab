//! The `R` panel: the RPC services other than nfsd (lockd, the NFS
//! client's callback service, any other port), each with its own peers'
//! shares and fair shares among that service's threads. Every other view
//! is nfsd's alone.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};
use ratatui::Frame;

use nfsdtop_agent::present::units::{fmt_ratio, pct, per_second};

use super::help::centered;
use super::styles;
use crate::state::State;
use nfsdtop_agent::model::ServiceView;

/// The panel's lines for these services (nfsd's row is left out: it is
/// every other view).
pub fn lines(services: &[ServiceView]) -> Vec<Line<'static>> {
    let others: Vec<&ServiceView> = services.iter().filter(|s| s.service != "nfsd").collect();
    if others.is_empty() {
        return vec![Line::raw(
            "no other RPC service dispatched: lockd and the NFS callback service show here when they do",
        )];
    }
    let mut out = Vec::new();
    for s in others {
        let port = match s.ports.as_slice() {
            [] => "other ports".to_string(),
            ports => format!(
                "port {}",
                ports
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        };
        let jain = s.jain.map_or("-".to_string(), |j| format!("{j:.2}"));
        out.push(Line::from(vec![
            Span::styled(format!("{} ", s.service), styles::key()),
            Span::raw(format!(
                "{port}: {} dispatches, {} requests, {} peers, Jain {jain}",
                s.dispatches,
                s.requests,
                s.peer_count.unwrap_or(0)
            )),
        ]));
        if s.peers.is_empty() {
            continue;
        }
        out.push(Line::styled(
            format!(
                "  {:<24} {:>10} {:>8} {:>7} {:>6}",
                "PEER", "DISP", "DISP/S", "SHARE", "FAIR"
            ),
            styles::dim(),
        ));
        for p in &s.peers {
            let queued = if p.backlogged { " queued" } else { "" };
            out.push(Line::raw(format!(
                "  {:<24} {:>10} {:>8} {:>7} {:>6}{queued}",
                p.peer,
                p.dispatches,
                per_second(p.dispatch_rate),
                pct(p.share),
                fmt_ratio(p.fairness)
            )));
        }
    }
    out
}

/// Each line wider than `cols` broken between words into lines that fit
/// (in the style of its last span).
fn wrapped(lines: Vec<Line<'static>>, cols: usize) -> Vec<Line<'static>> {
    let mut out = Vec::with_capacity(lines.len());
    for l in lines {
        if l.width() <= cols {
            out.push(l);
            continue;
        }
        let style = l.spans.last().map(|s| s.style).unwrap_or_default();
        let text: String = l.spans.iter().map(|s| s.content.as_ref()).collect();
        for part in super::parts::wrap(&text, cols, usize::MAX) {
            out.push(Line::styled(part, style));
        }
    }
    out
}

pub fn draw_services(f: &mut Frame, area: Rect, state: &State) {
    let services = state
        .snapshot()
        .map(|s| s.server.services.as_slice())
        .unwrap_or(&[]);
    let width = area.width.saturating_sub(4).min(90);
    // Wrapped to the panel, so a narrow terminal cuts no line.
    let all = wrapped(lines(services), width.saturating_sub(2) as usize);
    let r = centered(area, width, area.height);
    let h = (all.len() as u16 + 2)
        .min(area.height.saturating_sub(2))
        .max(3);
    let r = centered(area, r.width, h);
    let fit = h.saturating_sub(2) as usize;
    // Not scrolled: what does not fit is said, and is in the JSON.
    let title = if all.len() > fit {
        format!(
            " other RPC services: {fit} of {} lines (all in --format json; Esc) ",
            all.len()
        )
    } else {
        " other RPC services: shares among their own peers (Esc closes) ".to_string()
    };
    let visible: Vec<Line> = all.into_iter().take(fit).collect();
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(visible).block(Block::bordered().title(title)),
        r,
    );
}
