//! The `?` help overlay and the `w` warnings panel.

use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};
use ratatui::Frame;

use super::styles;
use crate::state::State;
use nfsdtop_agent::present::fairness::{BELOW_HALF, UNDER_SHARE};

pub const KEYS: &[(&str, &str)] = &[
    ("q, Ctrl-C", "quit"),
    ("?", "this help (Esc closes)"),
    ("space, p", "pause / resume (a demo or replay: its source)"),
    (
        ". / Left Right",
        "demo, replay: step one interval / seek back, on 10 s",
    ),
    ("< / >", "demo, replay: half / double speed"),
    (
        "1-9, 0",
        "sort by column 1-10 (again: reverse), or click a title",
    ),
    ("s / S", "next sort / reverse; F6, o: sort menu; c: columns"),
    (
        "g / v",
        "group by peer or by class / workload or fairness view",
    ),
    ("/", "filter: all of text, 10.0.0.0/24, <fair, ratio<0.6"),
    ("Enter, Esc", "drill into the selection / back"),
    (
        "up/down, j/k",
        "move the selection (or click a row, the wheel)",
    ),
    ("PgUp/PgDn", "a page up / down; Home/End: first / last row"),
    ("+ / -", "longer / shorter refresh interval"),
    ("w / R", "warnings, a line per entity / other RPC services"),
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
        Span::styled(format!("< {UNDER_SHARE} yellow"), styles::warn()),
        Span::raw(", "),
        Span::styled(format!("< {BELOW_HALF} red"), styles::ratio(Some(0.0))),
        Span::raw(", "),
        Span::styled("* top offender", styles::offender()),
    ]));
    lines.push(Line::raw(""));
    lines.push(Line::from(vec![
        Span::styled("  header", styles::title()),
        Span::raw(" = the whole server: disp/s and Jain over the last"),
    ]));
    for l in [
        "  interval, backlogged now; wait (all) p50/p99 over every dispatch,",
        "  whichever entity's (weighted by dispatches, not a row's p50);",
        "  nfsd threads, busy = thread time / interval (% of the threads)",
    ] {
        lines.push(Line::raw(l));
    }
    let r = centered(area, 72, lines.len() as u16 + 2);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" nfsdtop help ")),
        r,
    );
}

/// The sort menu (F6, `o`): every column in display order with its
/// digit, the one sorted by marked, the cursor on `at`.
pub fn draw_sort_menu(f: &mut Frame, area: Rect, state: &State, at: usize) {
    let peers = state.group == nfsdtop_agent::model::EntityKind::Peer;
    let lines: Vec<Line> = state
        .view
        .columns()
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let c = c.for_table(peers);
            let digit = (i + 1) % 10;
            let mark = if c == state.sort { "*" } else { " " };
            let text = format!(" {digit} {mark} {:<8} {}", c.title(), c.label());
            let style = if i == at {
                styles::selected()
            } else {
                Style::default()
            };
            Line::styled(text, style)
        })
        .collect();
    let r = centered(area, 34, lines.len() as u16 + 2);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" sort by (Enter) ")),
        r,
    );
}

/// The column chooser: each column of the view, `x` where shown, the one
/// under the cursor highlighted.
pub fn draw_column_menu(f: &mut Frame, area: Rect, state: &State, at: usize) {
    let peers = state.group == nfsdtop_agent::model::EntityKind::Peer;
    let lines: Vec<Line> = state
        .choosable()
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mark = if state.is_hidden(*c) { " " } else { "x" };
            let shown = c.for_table(peers);
            let text = format!(" [{mark}] {:<8} {}", shown.title(), shown.label());
            let style = if i == at {
                styles::selected()
            } else {
                Style::default()
            };
            Line::styled(text, style)
        })
        .collect();
    let r = centered(area, 36, lines.len() as u16 + 2);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" columns (space, Esc) ")),
        r,
    );
}

/// The warnings panel: every lint's summary and details, wrapped at
/// word boundaries to the panel's width, scrolled to
/// `state.warnings_scroll` (clamped here, where the line count is known).
pub fn draw_warnings(f: &mut Frame, area: Rect, state: &mut State) {
    let mut text: Vec<(String, Style)> = Vec::new();
    if state.warnings.is_empty() {
        text.push((
            "no warnings: every entity gets about its fair turn".into(),
            Style::default(),
        ));
    }
    for w in &state.warnings {
        text.push((
            format!("{}: {}", w.lint, w.summary),
            styles::severity(w.severity),
        ));
        for d in &w.details {
            text.push((format!("  {d}"), Style::default()));
        }
    }
    let r = centered(area, area.width.saturating_sub(4).min(100), area.height);
    let inner_w = r.width.saturating_sub(2).max(1) as usize;
    let lines: Vec<Line> = text
        .iter()
        .flat_map(|(t, style)| {
            wrap(t, inner_w)
                .into_iter()
                .map(|l| Line::styled(l, *style))
        })
        .collect();
    let h = (lines.len() as u16 + 2)
        .min(area.height.saturating_sub(2))
        .max(3);
    let r = centered(area, r.width, h);
    let page = h.saturating_sub(2).max(1) as usize;
    state.warnings_page = page;
    state.warnings_scroll = state.warnings_scroll.min(lines.len().saturating_sub(page));
    let first = state.warnings_scroll;
    let shown = lines.len().min(first + page);
    let title = if lines.len() > page {
        format!(
            " warnings, lines {}-{shown} of {} (arrows/PgUp/PgDn scroll, Esc closes) ",
            first + 1,
            lines.len()
        )
    } else {
        " warnings (Esc closes) ".to_string()
    };
    let visible: Vec<Line> = lines.into_iter().skip(first).take(page).collect();
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(visible).block(Block::bordered().title(title)),
        r,
    );
}

/// Greedy word wrap to `width` cells (a word longer than a line is cut).
/// Continuation lines are indented like the first.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let indent: String = text.chars().take_while(|c| *c == ' ').collect();
    let room = width.saturating_sub(indent.len()).max(1);
    let mut out: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        while !word.is_empty() {
            let cur = line.chars().count();
            let sep = usize::from(cur > 0);
            if cur + sep + word.len() <= room {
                if sep == 1 {
                    line.push(' ');
                }
                line.extend(word.drain(..));
            } else if cur > 0 {
                out.push(format!("{indent}{}", std::mem::take(&mut line)));
            } else {
                // A word wider than the line: cut it.
                line.extend(word.drain(..room));
                out.push(format!("{indent}{}", std::mem::take(&mut line)));
            }
        }
    }
    if !line.is_empty() || out.is_empty() {
        out.push(format!("{indent}{line}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn wrap_keeps_words_whole_and_lines_within_width() {
        let t = "  10.0.0.2 gets 0.22 of its fair share while backlogged";
        let w = wrap(t, 20);
        assert!(w.iter().all(|l| l.chars().count() <= 20), "{w:?}");
        assert!(w.iter().all(|l| l.starts_with("  ")), "{w:?}");
        assert_eq!(
            w.join(" ").split_whitespace().collect::<Vec<_>>().join(" "),
            t.trim()
        );
        assert_eq!(wrap("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap("", 4), [""]);
    }
}
