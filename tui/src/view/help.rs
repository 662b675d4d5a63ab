//! The `?` help overlay and the `w` warnings panel.

use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};
use ratatui::Frame;

use super::styles;
use crate::state::State;

pub const KEYS: &[(&str, &str)] = &[
    ("q, Ctrl-C", "quit"),
    ("?", "this help (Esc closes)"),
    ("space, p", "pause / resume the display (data keeps coming)"),
    ("s / S", "sort by the next column / reverse the order"),
    ("g", "group by peer or by class"),
    ("/", "filter by name or class (Enter keeps, Esc clears)"),
    ("Enter, Esc", "drill into the selection / back"),
    ("up/down, j/k", "move the selection"),
    ("PgUp/PgDn", "a page up / down"),
    ("Home/End", "first / last row"),
    ("+ / -", "longer / shorter refresh interval"),
    ("w", "warnings, one line per entity"),
];

/// A centred rectangle at most `w`×`h`, inside `area`.
pub fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let [r] = Layout::vertical([Constraint::Length(h.min(area.height))])
        .flex(Flex::Center)
        .areas(area);
    let [r] = Layout::horizontal([Constraint::Length(w.min(area.width))])
        .flex(Flex::Center)
        .areas(r);
    r
}

pub fn draw_help(f: &mut Frame, area: Rect) {
    let mut lines: Vec<Line> = KEYS
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(format!("{k:>14}  "), styles::key()),
                Span::raw(*what),
            ])
        })
        .collect();
    lines.push(Line::raw(""));
    lines.push(Line::from(vec![
        Span::styled("  ratio", styles::title()),
        Span::raw(" = dispatches / fair share while backlogged; "),
    ]));
    lines.push(Line::from(vec![
        Span::raw("  "),
        Span::styled("< 0.9 yellow", styles::warn()),
        Span::raw(", "),
        Span::styled("< 0.5 red", styles::ratio(Some(0.0))),
        Span::raw(", "),
        Span::styled("* top offender", styles::offender()),
    ]));
    let r = centered(area, 72, lines.len() as u16 + 2);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" nfsdtop help ")),
        r,
    );
}

pub fn draw_warnings(f: &mut Frame, area: Rect, state: &State) {
    let mut lines: Vec<Line> = Vec::new();
    if state.warnings.is_empty() {
        lines.push(Line::raw(
            "no warnings: every entity gets about its fair turn",
        ));
    }
    for w in &state.warnings {
        lines.push(Line::styled(
            format!("{}: {}", w.lint, w.summary),
            styles::severity(w.severity),
        ));
        for d in &w.details {
            lines.push(Line::raw(format!("  {d}")));
        }
    }
    let h = (lines.len() as u16 + 2)
        .min(area.height.saturating_sub(2))
        .max(3);
    let r = centered(area, area.width.saturating_sub(4).min(100), h);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(" warnings (Esc closes) ")),
        r,
    );
}
