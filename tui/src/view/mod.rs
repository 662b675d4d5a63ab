//! Drawing. One function per screen or widget; all of them read
//! [`State`] and none of them sorts, filters or scans every entity.

pub mod detail;
pub mod header;
pub mod help;
pub mod mini_histogram;
mod parts;
pub mod services;
pub mod styles;
pub mod table;

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

use crate::state::{Screen, State, View};

/// Draw the whole screen.
pub fn draw(f: &mut Frame, state: &mut State) {
    let area = f.area();
    if area.width < 20 || area.height < 6 {
        // Wrapped, so the message itself is whole in the smallest window.
        let msg = format!(
            "nfsdtop: terminal too small ({}x{}, need 20x6)",
            area.width, area.height
        );
        f.render_widget(Paragraph::new(msg).wrap(Wrap { trim: true }), area);
        return;
    }
    let [head, body, foot] = Layout::vertical([
        Constraint::Length(header::height(state, area.width)),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(area);
    header::draw(f, head, state);
    state.geometry = None;
    match state.screen {
        Screen::Table => table::draw(f, body, state),
        Screen::Detail { .. } => detail::draw(f, body, state),
    }
    footer(f, foot, state);
    if let Some(at) = state.column_menu {
        help::draw_column_menu(f, area, state, at);
    } else if let Some(at) = state.sort_menu {
        help::draw_sort_menu(f, area, state, at);
    } else if state.show_help {
        help::draw_help(f, area);
    } else if state.show_warnings {
        help::draw_warnings(f, area, state);
    } else if state.show_services {
        services::draw_services(f, area, state);
    }
}

fn footer(f: &mut Frame, area: Rect, state: &State) {
    // Words of the filter that were not understood (left out of it).
    let problems = (!state.filter_problems.is_empty())
        .then(|| format!("not understood: {}", state.filter_problems.join("; ")));
    let line = if let Some(input) = &state.filter_input {
        let mut l = Line::from(vec![
            Span::styled("filter: ", styles::key()),
            Span::raw(input.clone()),
            Span::styled("_", styles::dim()),
        ]);
        match problems {
            Some(p) => l.push_span(Span::styled(format!("  {p}"), styles::warn())),
            None => l.push_span(Span::styled("  (Enter keeps, Esc clears)", styles::dim())),
        }
        l
    } else if let Some(m) = &state.message {
        Line::styled(m.clone(), styles::warn())
    } else if let Some(p) = problems {
        Line::styled(format!("filter {p} (/ edits, Esc clears)"), styles::warn())
    } else {
        // In order of priority: what does not fit is left out whole.
        let keys: &[(&str, &str)] = match state.screen {
            Screen::Table => &[
                ("q", "quit"),
                ("?", "help"),
                ("w", "warnings"),
                ("s/S", "sort"),
                ("g", "group"),
                (
                    "v",
                    match state.view {
                        View::Fairness => "workload",
                        View::Workload => "fairness",
                    },
                ),
                ("/", "filter"),
                ("Enter", "detail"),
                ("p", "pause"),
                ("+/-", "interval"),
                ("R", "services"),
            ],
            Screen::Detail { .. } => &[
                ("q", "quit"),
                ("?", "help"),
                ("Esc", "back"),
                ("up/down", "next entity"),
                ("p", "pause"),
            ],
        };
        let mut spans = Vec::new();
        let mut used = 0usize;
        for (k, what) in keys {
            let item = format!(" {what}  ");
            let w = k.chars().count() + item.chars().count();
            // The trailing gap may go past the edge; the words may not.
            if used + w - 2 > area.width as usize {
                break;
            }
            used += w;
            spans.push(Span::styled(*k, styles::key()));
            spans.push(Span::raw(item));
        }
        Line::from(spans)
    };
    f.render_widget(Paragraph::new(line), area);
}
