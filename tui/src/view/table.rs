//! The main table of peers or classes. Only the rows on screen are built,
//! so the cost of a frame does not grow with the number of entities.

use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table};
use ratatui::Frame;

use nfsdtop_agent::model::{EntityKind, EntityStats};
use nfsdtop_agent::whatif::Numbers;

use super::styles;
use crate::state::columns::{self, Column};
use crate::state::whatif::WhatIf;
use crate::state::{Geometry, State};
use nfsdtop_agent::present::output::client_label;
use nfsdtop_agent::present::units::{fmt_ratio, fmt_us, pct};

pub const ARROW_DOWN: &str = "▼";
pub const ARROW_UP: &str = "▲";

fn cell_text(
    c: Column,
    e: &EntityStats,
    offender: bool,
    peers: Option<u32>,
    wi: Option<&WhatIf>,
) -> String {
    // A prediction whose fit was off carries a '?'.
    let predicted = |f: fn(&Numbers) -> String| match wi.and_then(|w| w.get(e.kind, &e.name)) {
        Some((n, true)) => f(n),
        Some((n, false)) => format!("{}?", f(n)),
        None => "-".into(),
    };
    match c {
        Column::Name => format!("{}{}", if offender { "* " } else { "  " }, e.name),
        Column::Class => e.class.clone(),
        Column::Peers => peers.map_or_else(|| "-".into(), |n| n.to_string()),
        Column::Field(f) => f.show(e),
        Column::WhatifShare => predicted(|n| pct(n.share)),
        Column::WhatifRatio => predicted(|n| fmt_ratio(n.fairness)),
        Column::WhatifWaitP99 => predicted(|n| fmt_us(n.wait_p99_us)),
    }
}

/// The style of an entity's row (before selection), by the level its
/// ratio steadily holds (a ratio wobbling around 0.5 does not blink).
pub fn row_style(state: &State, e: &EntityStats, offender: bool) -> Style {
    if offender {
        styles::offender()
    } else {
        styles::level(state.ratio_level(e))
    }
}

pub fn title(state: &State) -> String {
    let what = match state.group {
        EntityKind::Peer => "peers",
        EntityKind::Class => "classes",
    };
    let arrow = if state.descending {
        ARROW_DOWN
    } else {
        ARROW_UP
    };
    let mut t = format!(
        " {what} {}/{} | {} | sort: {} {arrow} ",
        state.rows().len(),
        state.entities().len(),
        state.view.label(),
        state.sort.label()
    );
    let filter = state.active_filter();
    if !filter.is_empty() {
        t.push_str(&format!("| filter: {filter} "));
    }
    if let Some(w) = &state.whatif {
        t.push_str(&format!(
            "| → what-if {} over the whole recording{} ",
            w.policy,
            if w.fit_ok { "" } else { " (fit off: ? rows)" }
        ));
    }
    t
}

pub fn draw(f: &mut Frame, area: Rect, state: &mut State) {
    let block = Block::new()
        .borders(Borders::TOP)
        .border_style(styles::dim())
        .title(Span::styled(title(state), styles::title()));
    let inner = block.inner(area);
    f.render_widget(block, area);
    if inner.height == 0 {
        return;
    }
    let cols = columns::fitting(
        inner.width,
        state.group == EntityKind::Peer,
        state.whatif.is_some(),
        state.view,
        &state.hidden,
    );
    let body_height = inner.height.saturating_sub(1) as usize;
    state.fit(body_height);
    state.geometry = Some(geometry(inner, &cols));

    if state.rows().is_empty() {
        let msg = if state.snapshot().is_none() {
            "waiting for data..."
        } else if !state.active_filter().is_empty() {
            "nothing matches the filter (Esc clears it)"
        } else {
            "no entities yet"
        };
        let header = header_row(state, &cols);
        f.render_widget(
            Table::new(Vec::<Row>::new(), widths(inner, &cols)).header(header),
            inner,
        );
        if inner.height > 1 {
            let r = Rect {
                y: inner.y + 1,
                height: 1,
                ..inner
            };
            f.render_widget(Paragraph::new(Line::styled(msg, styles::dim())), r);
        }
        return;
    }

    let entities = state.entities();
    let start = state.offset();
    let end = (start + body_height).min(state.rows().len());
    let selected = state.selected();
    let rows: Vec<Row> = state.rows()[start..end]
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let e = &entities[i as usize];
            let off = state.is_offender(i);
            let cells = cols.iter().map(|c| {
                let text = cell_text(*c, e, off, state.peer_count(i), state.whatif.as_ref());
                if c.numeric() {
                    Cell::from(Line::from(text).right_aligned())
                } else if *c == Column::Name && (!e.client_names.is_empty() || e.hostname.is_some())
                {
                    // Cut at the column's edge when it does not fit.
                    Cell::from(Line::from(vec![
                        Span::raw(text),
                        Span::styled(format!(" {}", client_label(e)), styles::dim()),
                    ]))
                } else {
                    Cell::from(text)
                }
            });
            let mut style = row_style(state, e, off);
            if start + k == selected {
                style = style.patch(styles::selected());
            }
            Row::new(cells).style(style)
        })
        .collect();
    let table = Table::new(rows, widths(inner, &cols))
        .header(header_row(state, &cols))
        .column_spacing(1);
    f.render_widget(table, inner);
}

/// The widest the NAME column gets: room for an IPv6 address, a per-peer
/// class and a client's name beside it. On a wide terminal the rest of
/// the width stays empty at the right, so the numbers sit next to the
/// names they belong to rather than at the far edge.
pub const NAME_MAX: u16 = 56;

/// The NAME column's width: what the other columns leave, at most
/// [`NAME_MAX`].
fn name_width(inner: Rect, cols: &[Column]) -> u16 {
    let fixed: u16 = cols
        .iter()
        .filter(|c| **c != Column::Name)
        .map(|c| c.width() + 1)
        .sum();
    inner.width.saturating_sub(fixed).min(NAME_MAX)
}

/// Where each column's cells are: the fixed widths as given, one space
/// between columns, the name column as [`name_width`] (as the table lays
/// them out).
fn geometry(inner: Rect, cols: &[Column]) -> Geometry {
    let name = name_width(inner, cols);
    let mut x = inner.x;
    let columns = cols
        .iter()
        .map(|c| {
            let w = match c {
                Column::Name => name,
                _ => c.width(),
            };
            let at = (*c, x, x.saturating_add(w));
            x = x.saturating_add(w + 1);
            at
        })
        .collect();
    Geometry {
        header_y: inner.y,
        body_rows: inner.height.saturating_sub(1),
        columns,
    }
}

fn widths(inner: Rect, cols: &[Column]) -> Vec<Constraint> {
    let name = name_width(inner, cols);
    cols.iter()
        .map(|c| match c {
            Column::Name => Constraint::Length(name),
            _ => Constraint::Length(c.width()),
        })
        .collect()
}

fn header_row(state: &State, cols: &[Column]) -> Row<'static> {
    let arrow = if state.descending {
        ARROW_DOWN
    } else {
        ARROW_UP
    };
    Row::new(cols.iter().map(|c| {
        let mut t = c.title().to_string();
        if *c == state.sort {
            t.push_str(arrow);
        }
        if *c == Column::Name {
            t.insert_str(0, "  ");
        }
        if c.numeric() {
            Cell::from(Line::from(t).right_aligned())
        } else {
            Cell::from(t)
        }
    }))
    .style(styles::table_header())
}
