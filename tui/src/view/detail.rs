//! The drill-down into one peer or class: its numbers now, its share and
//! fair share over time, its wait histogram, its transports (a class:
//! its peers).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Block, Borders, Cell, Chart, Dataset, GraphType, Paragraph, Row, Sparkline, Table,
};
use ratatui::Frame;

use nfsdtop_agent::model::{ClientName, DepthHistogram, EntityKind, EntityStats, DEPTH_BUCKETS};
use nfsdtop_agent::present::output;

use super::mini_histogram::WaitBars;
use super::styles;
use super::table::row_style;
use crate::state::{Column, Screen, State};
use crate::warnings::{fmt_us, is_starved};
use nfsdtop_agent::present::fields::{
    BYTES_IN_RATE, BYTES_OUT_RATE, DEPTH0_SHARE, DEPTH_MAX, DEPTH_MEAN, DISPATCH_RATE, EXEC_SHARE,
    FAIRNESS, FAIR_SHARE, INFLIGHT, REQUEST_RATE, SHARE, WAIT_P50, WAIT_P99,
};
use nfsdtop_agent::present::units::fmt_bytes;
use nfsdtop_agent::present::units::{fmt_ratio as ratio, pct, per_second as rate};

pub fn draw(f: &mut Frame, area: Rect, state: &State) {
    let Screen::Detail { kind, name, .. } = &state.screen else {
        return;
    };
    let entity = state.detail_entity();
    let title = match entity {
        Some(e) if e.kind == EntityKind::Peer => {
            format!(" peer {} (class {}) | Esc back ", e.name, e.class)
        }
        _ => format!(" {} {} | Esc back ", kind.as_str(), name),
    };
    let block = Block::new()
        .borders(Borders::TOP)
        .border_style(styles::dim())
        .title(Span::styled(title, styles::title()));
    let inner = block.inner(area);
    f.render_widget(block, area);

    let summary_text = summary_lines(entity, state);
    let [summary, sparks, chart, bottom] = Layout::vertical([
        Constraint::Length(summary_text.len() as u16),
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Fill(1),
    ])
    .areas(inner);
    f.render_widget(Paragraph::new(summary_text), summary);
    draw_sparklines(f, sparks, state, *kind, name);
    // Requests per procedure, where counted, beside the chart: the
    // transports below keep their width.
    // NFSv4 operations (`--nfs4-ops`) in the same panel, below them.
    let with_procs = entity.is_some_and(|e| !e.procedures.is_empty());
    let with_ops = entity.is_some_and(|e| !e.nfs4_operations.is_empty());
    let [chart, side] = if with_procs || with_ops {
        Layout::horizontal([Constraint::Fill(1), Constraint::Length(PROCS_WIDTH)]).areas(chart)
    } else {
        [chart, Rect::default()]
    };
    draw_chart(f, chart, state, *kind, name);

    let [hist, xprts] =
        Layout::horizontal([Constraint::Percentage(45), Constraint::Percentage(55)]).areas(bottom);
    let hist_title = match kind {
        EntityKind::Peer => " queue wait (this interval) ",
        EntityKind::Class => " queue wait (since start) ",
    };
    let hb = Block::new()
        .borders(Borders::TOP)
        .border_style(styles::dim())
        .title(Span::styled(hist_title, styles::title()));
    let mut hi = hb.inner(hist);
    hi.width = hi.width.saturating_sub(1); // a gap before the transports
    f.render_widget(hb, hist);
    if let Some(e) = entity {
        f.render_widget(
            WaitBars {
                hist: &e.wait_histogram,
            },
            hi,
        );
    }
    match kind {
        EntityKind::Peer => draw_transports(f, xprts, entity),
        EntityKind::Class => draw_class_peers(f, xprts, state, entity),
    }
    if let Some(e) = entity {
        let [procs, ops] = match (with_procs, with_ops) {
            (true, true) => {
                Layout::vertical([Constraint::Fill(1), Constraint::Fill(1)]).areas(side)
            }
            (true, false) => [side, Rect::default()],
            _ => [Rect::default(), side],
        };
        if with_procs {
            draw_procedures(f, procs, e);
        }
        if with_ops {
            draw_operations(f, ops, e);
        }
    }
}

/// The entity's NFSv4 operations, most this interval first: each one's
/// rate, its share of the entity's operations this interval, and its
/// count since the start.
fn draw_operations(f: &mut Frame, area: Rect, e: &EntityStats) {
    let mut ops: Vec<_> = e.nfs4_operations.iter().collect();
    ops.sort_by(|a, b| {
        b.1.rate
            .total_cmp(&a.1.rate)
            .then(b.1.count.cmp(&a.1.count))
            .then(a.0.cmp(b.0))
    });
    let all: f64 = ops.iter().map(|o| o.1.rate).sum();
    let inner = side_panel(f, area, format!(" NFSv4 operations ({}) ", ops.len()));
    let right = |t: String| Cell::from(Line::from(t).right_aligned());
    let rows: Vec<Row> = ops
        .iter()
        .take(inner.height.saturating_sub(1) as usize)
        .map(|(name, o)| {
            Row::new([
                Cell::from(name.to_string()),
                right(rate(o.rate)),
                right(if all > 0.0 {
                    pct(o.rate / all)
                } else {
                    "-".into()
                }),
                right(o.count.to_string()),
            ])
        })
        .collect();
    let table = side_table(rows, "OP", [("OPS/S", 6), ("SHARE", 6), ("TOTAL", 8)]);
    f.render_widget(table, inner);
}

/// Cells of the procedures panel: a name of up to 11, four numbers of 6,
/// the gaps and a margin.
const PROCS_WIDTH: u16 = 1 + 11 + 4 * 7;

/// The entity's requests per RPC procedure, most this interval first:
/// each one's rate, its share of the entity's requests this interval, its
/// mean execution time since the start, and the 99th percentile of those
/// timed one by one ("-" where the kernel only added them up).
fn draw_procedures(f: &mut Frame, area: Rect, e: &EntityStats) {
    let mut procs: Vec<_> = e.procedures.iter().collect();
    procs.sort_by(|a, b| {
        b.1.request_rate
            .total_cmp(&a.1.request_rate)
            .then(b.1.requests.cmp(&a.1.requests))
            .then(a.0.cmp(b.0))
    });
    let all: f64 = procs.iter().map(|p| p.1.request_rate).sum();
    let inner = side_panel(f, area, format!(" procedures ({}) ", procs.len()));
    let right = |t: String| Cell::from(Line::from(t).right_aligned());
    let rows: Vec<Row> = procs
        .iter()
        .take(inner.height.saturating_sub(1) as usize)
        .map(|(name, p)| {
            let mean_us = if p.requests > 0 {
                p.exec_seconds * 1e6 / p.requests as f64
            } else {
                0.0
            };
            Row::new([
                Cell::from(name.to_string()),
                right(rate(p.request_rate)),
                right(if all > 0.0 {
                    pct(p.request_rate / all)
                } else {
                    "-".into()
                }),
                right(fmt_us(mean_us)),
                right(p.exec_p99_us.map_or("-".into(), fmt_us)),
            ])
        })
        .collect();
    let table = side_table(
        rows,
        "PROC",
        [("REQ/S", 6), ("SHARE", 6), ("MEAN", 6), ("P99", 6)],
    );
    f.render_widget(table, inner);
}

/// A side panel's frame titled `title`; the area inside it.
fn side_panel(f: &mut Frame, area: Rect, title: String) -> Rect {
    let block = Block::new()
        .borders(Borders::TOP)
        .border_style(styles::dim())
        .title(Span::styled(title, styles::title()));
    let mut inner = block.inner(area);
    inner.x += 1;
    inner.width = inner.width.saturating_sub(1);
    f.render_widget(block, area);
    inner
}

/// A table of the drill-down's side panels: a name, then numbers
/// right-aligned under `cols` (header, width).
fn side_table<'a, const N: usize>(
    rows: Vec<Row<'a>>,
    name: &'a str,
    cols: [(&'a str, u16); N],
) -> Table<'a> {
    let right = |t: &'a str| Cell::from(Line::from(t).right_aligned());
    let widths = std::iter::once(Constraint::Fill(1))
        .chain(cols.iter().map(|&(_, w)| Constraint::Length(w)));
    let header = std::iter::once(Cell::from(name)).chain(cols.iter().map(|&(h, _)| right(h)));
    Table::new(rows, widths)
        .column_spacing(1)
        .header(Row::new(header).style(styles::table_header()))
}

/// A class's peers, busiest first: each one's share of all dispatches
/// and its own fairness ratio.
fn draw_class_peers(f: &mut Frame, area: Rect, state: &State, class: Option<&EntityStats>) {
    let mut peers: Vec<&EntityStats> = match (state.snapshot(), class) {
        (Some(s), Some(c)) => output::peers_of(s, c).collect(),
        _ => Vec::new(),
    };
    peers.sort_by(|a, b| Column::SHARE.compare(a, b, true));
    let block = Block::new()
        .borders(Borders::TOP)
        .border_style(styles::dim())
        .title(Span::styled(
            format!(" peers ({}) ", peers.len()),
            styles::title(),
        ));
    let inner = block.inner(area);
    f.render_widget(block, area);
    if class.is_some() && peers.is_empty() {
        let msg = "no peers in this snapshot";
        f.render_widget(Paragraph::new(Line::styled(msg, styles::dim())), inner);
        return;
    }
    let right = |t: String| Cell::from(Line::from(t).right_aligned());
    let rows: Vec<Row> = peers
        .iter()
        .take(inner.height.saturating_sub(1) as usize)
        .map(|p| {
            Row::new([
                Cell::from(p.name.clone()),
                right(pct(p.share)),
                right(ratio(p.fairness)),
                right(fmt_us(p.wait_p99_us)),
            ])
            .style(row_style(state, p, false))
        })
        .collect();
    let table = side_table(rows, "PEER", [("SHARE", 6), ("RATIO", 6), ("WAIT99", 7)]);
    f.render_widget(table, inner);
}

fn summary_lines<'a>(e: Option<&'a EntityStats>, state: &State) -> Vec<Line<'a>> {
    let Some(e) = e else {
        return vec![Line::styled(
            "not in the current snapshot (gone, or filtered by the source)",
            styles::warn(),
        )];
    };
    let off = state
        .offender()
        .is_some_and(|o| o.name == e.name && o.kind == e.kind);
    let mut ratio_span = Span::styled(
        format!("ratio {}", FAIRNESS.show(e)),
        row_style(state, e, off),
    );
    if off {
        ratio_span.content = format!("{} (top offender)", ratio_span.content).into();
    }
    let backlog = if is_starved(e) {
        Span::styled("STARVED: backlogged, 0 dispatches", styles::bad())
    } else if e.backlogged {
        Span::raw(format!("backlogged ({} queued)", e.queued_transports))
    } else {
        Span::raw("idle")
    };
    let mut lines = vec![
        Line::from(vec![
            Span::styled(
                format!("share {}", SHARE.show(e)),
                Style::default().fg(styles::SHARE),
            ),
            Span::raw("  "),
            Span::styled(
                format!("fair share {}", FAIR_SHARE.show(e)),
                Style::default().fg(styles::FAIR),
            ),
            Span::raw("  "),
            ratio_span,
            Span::raw(format!("  {} disp/s", DISPATCH_RATE.show(e))),
        ]),
        Line::raw(format!(
            "wait p50 {} p99 {}  exec share {} ({:.2}s thread time, {} in flight)",
            WAIT_P50.show(e),
            WAIT_P99.show(e),
            EXEC_SHARE.show(e),
            e.exec_seconds,
            INFLIGHT.show(e)
        )),
        Line::from(vec![
            backlog,
            Span::raw(format!("  {} connections", e.connections)),
            Span::raw(netns(e, state)),
        ]),
        // What it asks of the server: since start and per second (at
        // most 79 cells: whole on an 80-column terminal).
        Line::raw(format!(
            "requests {} ({}/s)  in {} ({})  out {} ({})",
            e.requests,
            REQUEST_RATE.show(e),
            fmt_bytes(e.bytes_in),
            BYTES_IN_RATE.show(e),
            fmt_bytes(e.bytes_out),
            BYTES_OUT_RATE.show(e)
        )),
        // A line of its own: whole on an 80-column terminal.
        Line::styled(
            format!(
                "since start: {} dispatches, {:.1} entitled, {:.1}s backlogged",
                e.dispatches, e.entitled, e.backlogged_seconds
            ),
            styles::dim(),
        ),
    ];
    lines.extend(e.enqueue_depth.map(|d| Line::raw(depth_line(e, &d))));
    lines.extend(client_line(e));
    lines.extend(e.hostname.as_ref().map(|h| {
        // Cut at the edge rather than wrapped, like the client's line.
        Line::styled(format!("host {h}"), Style::default().fg(styles::FAIR))
    }));
    lines
}

/// Its transports' in-flight depth at enqueue: this interval's share at
/// depth 0 and mean, and since the start the shares of depth 0, 1, 2-7
/// and 8 or more (at most 79 cells).
fn depth_line(e: &EntityStats, d: &DepthHistogram) -> String {
    let n = d.count().max(1) as f64;
    let part = |r: std::ops::Range<usize>| {
        let c: u64 = d.counts[r].iter().sum();
        format!("{:.0}", 100.0 * c as f64 / n)
    };
    format!(
        "at enqueue: {} at depth 0, mean {}, max {}; since start 0|1|2-7|8+: {}|{}|{}|{}%",
        DEPTH0_SHARE.show(e),
        DEPTH_MEAN.show(e),
        DEPTH_MAX.show(e),
        part(0..1),
        part(1..2),
        part(2..4),
        part(4..DEPTH_BUCKETS)
    )
}

/// A peer's network namespace (its inode), where nfsd serves more than
/// one: the same address may then be two clients in two containers.
fn netns(e: &EntityStats, state: &State) -> String {
    let several = state.snapshot().is_some_and(|s| s.server.netns.len() > 1);
    if e.kind == EntityKind::Peer && several {
        format!("  netns {}", e.netns)
    } else {
        String::new()
    }
}

/// Who the peer is, where the server knows: its NFSv4 client's name,
/// minor version and implementation (several clients: their names).
/// One line, cut at the edge rather than wrapped.
fn client_line(e: &EntityStats) -> Option<Line<'static>> {
    let version = |c: &ClientName| match c.minor_version {
        Some(m) => format!("NFSv4.{m}"),
        None => "NFSv4".into(),
    };
    let text = match e.client_names.as_slice() {
        [] => return None,
        [c] => {
            let mut t = format!("client \"{}\" ({})", c.name, version(c));
            if let Some(i) = &c.implementation {
                t.push_str(&format!("  implementation \"{i}\""));
            }
            t
        }
        many => {
            let names: Vec<String> = many
                .iter()
                .map(|c| format!("\"{}\" ({})", c.name, version(c)))
                .collect();
            format!("{} clients: {}", many.len(), names.join(", "))
        }
    };
    Some(Line::styled(text, Style::default().fg(styles::FAIR)))
}

/// One line: the fairness ratio and the p99 wait over the history, as
/// sparklines with their latest values.
fn draw_sparklines(f: &mut Frame, area: Rect, state: &State, kind: EntityKind, name: &str) {
    let pts = state.history.points(kind, name, state.shown_seq());
    let [l, r] = Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
        .spacing(1)
        .areas(area);
    let last_ratio = pts.last().map(|p| p.ratio).filter(|r| r.is_finite());
    let ratio_label = format!(
        "ratio {:>5} ",
        last_ratio
            .map(|r| format!("{r:.2}"))
            .unwrap_or_else(|| "-".into())
    );
    let ratio: Vec<u64> = pts
        .iter()
        .map(|p| {
            if p.ratio.is_finite() {
                (p.ratio.clamp(0.0, 10.0) * 100.0) as u64
            } else {
                0
            }
        })
        .collect();
    let style = styles::ratio(last_ratio.map(f64::from));
    // A fixed scale, full at 1.5x fair: 1.0 draws at two thirds, 0.2 as
    // the lowest bar, a starved interval (0) as nothing.
    sparkline(f, l, &ratio_label, &ratio, Some(150), style);
    let wait_label = format!(
        "p99 wait {:>6} ",
        fmt_us(pts.last().map(|p| p.wait_p99_us as f64).unwrap_or(0.0))
    );
    let wait: Vec<u64> = pts.iter().map(|p| p.wait_p99_us.max(0.0) as u64).collect();
    sparkline(
        f,
        r,
        &wait_label,
        &wait,
        None,
        Style::default().fg(styles::BAR),
    );
}

fn sparkline(f: &mut Frame, area: Rect, label: &str, data: &[u64], max: Option<u64>, style: Style) {
    let lw = (label.chars().count() as u16).min(area.width);
    let [la, sa] = Layout::horizontal([Constraint::Length(lw), Constraint::Fill(1)]).areas(area);
    f.render_widget(Paragraph::new(Span::styled(label.to_string(), style)), la);
    // The newest points that fit, right-aligned like the chart's "now".
    let n = (sa.width as usize).min(data.len());
    let data = &data[data.len() - n..];
    let mut w = Sparkline::default().data(data).style(style);
    if let Some(m) = max {
        w = w.max(m.max(data.iter().copied().max().unwrap_or(0)));
    }
    f.render_widget(w, sa);
}

fn draw_chart(f: &mut Frame, area: Rect, state: &State, kind: EntityKind, name: &str) {
    let pts = state.history.points(kind, name, state.shown_seq());
    let share: Vec<(f64, f64)> = pts
        .iter()
        .map(|p| (p.seq as f64, p.share as f64 * 100.0))
        .collect();
    let fair: Vec<(f64, f64)> = pts
        .iter()
        .map(|p| (p.seq as f64, p.fair_share as f64 * 100.0))
        .collect();
    let ymax = share
        .iter()
        .chain(&fair)
        .map(|p| p.1)
        .fold(1.0f64, f64::max)
        .min(100.0);
    let ymax = (ymax * 1.15).min(100.0);
    let x1 = state.shown_seq() as f64;
    let first = pts.first().map(|p| p.seq as f64).unwrap_or(x1);
    let x0 = (x1 - state.history.capacity() as f64 + 1.0).max(first);
    let datasets = vec![
        Dataset::default()
            .name("share")
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(Style::default().fg(styles::SHARE))
            .data(&share),
        Dataset::default()
            .name("fair share")
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(Style::default().fg(styles::FAIR))
            .data(&fair),
    ];
    let span = (x1 - x0)
        * state
            .snapshot()
            .map(|s| s.interval_s)
            .filter(|i| i.is_finite() && *i > 0.0)
            .unwrap_or(state.interval.as_secs_f64());
    // The legend is the title, each name in its line's colour: always
    // there, at any size, and never a box drawn over the lines.
    let legend = Line::from(vec![
        Span::raw(" "),
        Span::styled("share", styles::title().fg(styles::SHARE)),
        Span::styled(" vs ", styles::title()),
        Span::styled("fair share", styles::title().fg(styles::FAIR)),
        Span::styled(format!(", last {} snapshots ", pts.len()), styles::title()),
    ]);
    let chart = Chart::new(datasets)
        .legend_position(None)
        .block(
            Block::new()
                .borders(Borders::TOP)
                .border_style(styles::dim())
                .title(legend),
        )
        .x_axis(
            Axis::default()
                .bounds([x0, x1.max(x0 + 1.0)])
                .labels([format!("-{span:.0}s"), "now".to_string()])
                .style(styles::dim()),
        )
        .y_axis(
            Axis::default()
                .bounds([0.0, ymax])
                .labels(["0%".to_string(), format!("{ymax:.0}%")])
                .style(styles::dim()),
        );
    f.render_widget(chart, area);
}

fn draw_transports(f: &mut Frame, area: Rect, e: Option<&EntityStats>) {
    let n = e.map(|e| e.transports.len()).unwrap_or(0);
    let block = Block::new()
        .borders(Borders::TOP)
        .border_style(styles::dim())
        .title(Span::styled(format!(" transports ({n}) "), styles::title()));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let Some(e) = e else { return };
    if e.transports.is_empty() {
        let msg = "no transports known";
        f.render_widget(Paragraph::new(Line::styled(msg, styles::dim())), inner);
        return;
    }
    let mut list: Vec<_> = e.transports.iter().collect();
    list.sort_by(|a, b| {
        b.dispatches
            .cmp(&a.dispatches)
            .then(a.client.cmp(&b.client))
    });
    let rows: Vec<Row> = list
        .iter()
        .take(inner.height.saturating_sub(1) as usize)
        .map(|t| {
            Row::new([
                Cell::from(t.client.clone()),
                Cell::from(t.server.clone()),
                Cell::from(Line::from(t.dispatches.to_string()).right_aligned()),
                Cell::from(if t.queued { "yes" } else { "" }),
            ])
        })
        .collect();
    let table = Table::new(
        rows,
        [
            Constraint::Fill(1),
            Constraint::Fill(1),
            Constraint::Length(7),
            Constraint::Length(6),
        ],
    )
    .header(
        Row::new([
            Cell::from("CLIENT"),
            Cell::from("SERVER"),
            Cell::from(Line::from("DISP").right_aligned()),
            Cell::from("QUEUED"),
        ])
        .style(styles::table_header()),
    );
    f.render_widget(table, inner);
}
