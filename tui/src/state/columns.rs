//! The table's columns: titles, widths, which to drop first on a narrow
//! terminal, and how each one sorts.

use std::cmp::Ordering;

use nfsdtop_agent::model::EntityStats;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Column {
    Name,
    Class,
    Conn,
    Rate,
    Share,
    Fair,
    Ratio,
    WaitP50,
    WaitP99,
    Exec,
    /// What-if columns (a replay with `--whatif`): the predicted share,
    /// ratio and wait p99 under the chosen policy. Not in `ALL`: shown
    /// only when there is a prediction, and not sortable.
    WhatifShare,
    WhatifRatio,
    WhatifWaitP99,
}

impl Column {
    /// Display order.
    pub const ALL: [Column; 10] = [
        Column::Name,
        Column::Class,
        Column::Conn,
        Column::Rate,
        Column::Share,
        Column::Fair,
        Column::Ratio,
        Column::WaitP50,
        Column::WaitP99,
        Column::Exec,
    ];

    pub const WHATIF: [Column; 3] = [
        Column::WhatifShare,
        Column::WhatifRatio,
        Column::WhatifWaitP99,
    ];

    /// Dropped in this order when the terminal is too narrow for all.
    pub const DROP_ORDER: [Column; 7] = [
        Column::Class,
        Column::WhatifWaitP99,
        Column::Exec,
        Column::WaitP50,
        Column::Conn,
        Column::Fair,
        Column::Rate,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Column::Name => "NAME",
            Column::Class => "CLASS",
            Column::Conn => "CONN",
            Column::Rate => "DISP/S",
            Column::Share => "SHARE",
            Column::Fair => "FAIR",
            Column::Ratio => "RATIO",
            Column::WaitP50 => "WAIT50",
            Column::WaitP99 => "WAIT99",
            Column::Exec => "EXEC",
            Column::WhatifShare => "→SHARE",
            Column::WhatifRatio => "→RATIO",
            Column::WhatifWaitP99 => "→WAIT99",
        }
    }

    /// The name used in "sort: …".
    pub fn label(self) -> &'static str {
        match self {
            Column::Name => "name",
            Column::Class => "class",
            Column::Conn => "connections",
            Column::Rate => "dispatches/s",
            Column::Share => "share",
            Column::Fair => "fair share",
            Column::Ratio => "ratio",
            Column::WaitP50 => "wait p50",
            Column::WaitP99 => "wait p99",
            Column::Exec => "exec share",
            Column::WhatifShare => "what-if share",
            Column::WhatifRatio => "what-if ratio",
            Column::WhatifWaitP99 => "what-if wait p99",
        }
    }

    /// Width in cells, including room for the sort arrow. The name column
    /// takes whatever is left (at least this much).
    pub fn width(self) -> u16 {
        match self {
            Column::Name => 16,
            Column::Class => 14,
            Column::Conn => 5,
            Column::Rate => 7,
            Column::Share => 6,
            Column::Fair => 6,
            Column::Ratio => 6,
            Column::WaitP50 => 7,
            Column::WaitP99 => 7,
            Column::Exec => 6,
            Column::WhatifShare => 7,
            Column::WhatifRatio => 7,
            Column::WhatifWaitP99 => 8,
        }
    }

    pub fn numeric(self) -> bool {
        !matches!(self, Column::Name | Column::Class)
    }

    /// Names sort A→Z first; numbers biggest first.
    pub fn default_descending(self) -> bool {
        self.numeric()
    }

    pub fn next(self) -> Column {
        let i = Column::ALL.iter().position(|c| *c == self).unwrap_or(0);
        Column::ALL[(i + 1) % Column::ALL.len()]
    }

    /// Ascending order of two entities by this column; ties go by name so
    /// the order is stable from one snapshot to the next.
    pub fn compare(self, a: &EntityStats, b: &EntityStats) -> Ordering {
        let by = |x: f64, y: f64| x.total_cmp(&y);
        let o = match self {
            Column::Name => Ordering::Equal,
            Column::Class => a.class.cmp(&b.class),
            Column::Conn => a.connections.cmp(&b.connections),
            Column::Rate => by(a.dispatch_rate, b.dispatch_rate),
            Column::Share => by(a.share, b.share),
            Column::Fair => by(a.fair_share, b.fair_share),
            // Nothing to judge sorts below any ratio.
            Column::Ratio => by(a.fairness.unwrap_or(-1.0), b.fairness.unwrap_or(-1.0)),
            Column::WaitP50 => by(a.wait_p50_us, b.wait_p50_us),
            Column::WaitP99 => by(a.wait_p99_us, b.wait_p99_us),
            Column::Exec => by(a.exec_share, b.exec_share),
            Column::WhatifShare | Column::WhatifRatio | Column::WhatifWaitP99 => Ordering::Equal,
        };
        o.then_with(|| a.name.cmp(&b.name))
    }
}

/// The columns that fit in `width` cells (one space between columns),
/// dropping low-priority ones first. `show_class` is false when the rows
/// are classes (their class is their name); `whatif` adds the what-if
/// columns.
pub fn fitting(width: u16, show_class: bool, whatif: bool) -> Vec<Column> {
    let extra = if whatif { &Column::WHATIF[..] } else { &[] };
    let mut cols: Vec<Column> = Column::ALL
        .iter()
        .chain(extra)
        .copied()
        .filter(|c| show_class || *c != Column::Class)
        .collect();
    let need =
        |cols: &[Column]| -> u32 { cols.iter().map(|c| c.width() as u32 + 1).sum::<u32>() - 1 };
    for drop in Column::DROP_ORDER {
        if need(&cols) <= width as u32 {
            break;
        }
        cols.retain(|c| *c != drop);
    }
    cols
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eighty_columns_keep_the_essentials() {
        let c = fitting(80, true, false);
        assert!(!c.contains(&Column::Class));
        for want in [
            Column::Name,
            Column::Share,
            Column::Fair,
            Column::Ratio,
            Column::WaitP99,
        ] {
            assert!(c.contains(&want), "{want:?} dropped at 80 columns");
        }
        assert_eq!(fitting(200, true, false).len(), 10);
        assert!(!fitting(200, false, false).contains(&Column::Class));
        // Very narrow: still something to show, never a panic.
        assert!(fitting(10, true, false).contains(&Column::Name));
        // What-if columns: all of them when wide, the share even at 80.
        assert_eq!(fitting(200, true, true).len(), 13);
        assert!(fitting(80, true, true).contains(&Column::WhatifShare));
    }

    #[test]
    fn next_cycles_through_every_column() {
        let mut c = Column::Name;
        for _ in 0..Column::ALL.len() {
            c = c.next();
        }
        assert_eq!(c, Column::Name);
    }
}
