//! The table's columns: the identity columns (NAME, CLASS or PEERS), the
//! per-entity numbers of the agent's field table
//! (`nfsdtop_agent::present::fields`: title, width, unit, place in each
//! view), the what-if columns; which to drop first on a narrow terminal,
//! and how each one sorts; and the two views (fairness, workload) that
//! each show a set of them.

use std::cmp::Ordering;

use nfsdtop_agent::model::EntityStats;
use nfsdtop_agent::present::fields::{self, Field, Place, Tui};
use nfsdtop_agent::present::output::name_order;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Column {
    Name,
    Class,
    /// A class's peer count (the class table only, in place of CLASS).
    Peers,
    /// A per-entity number of the field table (one with a TUI column).
    Field(&'static Field),
    /// What-if columns (a replay with `--whatif`): the predicted share,
    /// ratio and wait p99 under the chosen policy. Shown only when there
    /// is a prediction, and not sortable.
    WhatifShare,
    WhatifRatio,
    WhatifWaitP99,
}

impl Column {
    pub const CONN: Column = Column::Field(&fields::CONNECTIONS);
    pub const RATE: Column = Column::Field(&fields::DISPATCH_RATE);
    pub const SHARE: Column = Column::Field(&fields::SHARE);
    pub const FAIR: Column = Column::Field(&fields::FAIR_SHARE);
    pub const RATIO: Column = Column::Field(&fields::FAIRNESS);
    pub const WAIT_P50: Column = Column::Field(&fields::WAIT_P50);
    pub const WAIT_P99: Column = Column::Field(&fields::WAIT_P99);
    pub const EXEC: Column = Column::Field(&fields::EXEC_SHARE);
    pub const OPS: Column = Column::Field(&fields::REQUEST_RATE);
    pub const BYTES_IN: Column = Column::Field(&fields::BYTES_IN_RATE);
    pub const BYTES_OUT: Column = Column::Field(&fields::BYTES_OUT_RATE);

    pub const WHATIF: [Column; 3] = [
        Column::WhatifShare,
        Column::WhatifRatio,
        Column::WhatifWaitP99,
    ];

    /// The field's TUI column (every `Column::Field` has one).
    fn tui(f: &Field) -> Tui {
        f.tui.unwrap_or(Tui {
            title: f.json,
            label: f.json,
            width: 8,
            fairness: None,
            workload: None,
        })
    }

    pub fn title(self) -> &'static str {
        match self {
            Column::Name => "NAME",
            Column::Class => "CLASS",
            Column::Peers => "PEERS",
            Column::Field(f) => Column::tui(f).title,
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
            Column::Peers => "peers",
            Column::Field(f) => Column::tui(f).label,
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
            Column::Peers => 6,
            Column::Field(f) => Column::tui(f).width,
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

    /// The next column in `view`'s display order (a class table's PEERS
    /// stands where CLASS does).
    pub fn next(self, view: View) -> Column {
        let all = view.columns();
        let i = all.iter().position(|c| *c == self.as_peer_column());
        all[(i.unwrap_or(0) + 1) % all.len()]
    }

    /// PEERS stands for CLASS (same place in the table).
    fn as_peer_column(self) -> Column {
        match self {
            Column::Peers => Column::Class,
            c => c,
        }
    }

    /// The column a table of `peers` (true) or classes shows in this
    /// one's place.
    pub fn for_table(self, peers: bool) -> Column {
        match self {
            Column::Class | Column::Peers if peers => Column::Class,
            Column::Class | Column::Peers => Column::Peers,
            c => c,
        }
    }

    /// The column sorted by digit key `d` ('1' = the first in `view`'s
    /// display order, ..., '0' = the tenth).
    pub fn by_digit(d: char, peers: bool, view: View) -> Option<Column> {
        let i = match d.to_digit(10)? {
            0 => 9,
            n => n as usize - 1,
        };
        Some(view.columns().get(i)?.for_table(peers))
    }

    /// Ascending order of two entities by this column, on the values as
    /// the table shows them: rows that look equal (8.3% and 8.3%) are
    /// equal, and go by name, so shares that differ by a dispatch or two
    /// from one interval to the next do not swap rows on every refresh.
    /// Ties always go A→Z (by address value), whichever way the column
    /// sorts; a name column sorts on the name itself.
    pub fn compare(self, a: &EntityStats, b: &EntityStats, descending: bool) -> Ordering {
        self.compare_keyed((self.sort_key(a), a), (self.sort_key(b), b), descending)
    }

    fn compare_keyed(
        self,
        (ka, a): (f64, &EntityStats),
        (kb, b): (f64, &EntityStats),
        descending: bool,
    ) -> Ordering {
        let o = match self {
            Column::Name => name_order(&a.name, &b.name),
            Column::Class => name_order(&a.class, &b.class),
            _ => ka.total_cmp(&kb),
        };
        let o = if descending { o.reverse() } else { o };
        o.then_with(|| name_order(&a.name, &b.name))
            .then_with(|| a.netns.cmp(&b.netns))
    }

    /// Sort `rows` (indices into `list`) by this column, each key
    /// computed once. `peers` holds a class table's peer counts by index
    /// (the PEERS column's key).
    pub fn sort(self, list: &[EntityStats], peers: &[u32], rows: &mut Vec<u32>, descending: bool) {
        let key = |i: u32| match self {
            Column::Peers => peers.get(i as usize).map_or(0.0, |n| f64::from(*n)),
            _ => self.sort_key(&list[i as usize]),
        };
        let mut keyed: Vec<(f64, u32)> = rows.iter().map(|i| (key(*i), *i)).collect();
        keyed.sort_unstable_by(|(ka, a), (kb, b)| {
            self.compare_keyed(
                (*ka, &list[*a as usize]),
                (*kb, &list[*b as usize]),
                descending,
            )
        });
        rows.clear();
        rows.extend(keyed.into_iter().map(|(_, i)| i));
    }

    /// A numeric column's sort key: the value as the table shows it (the
    /// field's unit rounds it to the digits it prints; "-" sorts below
    /// every value). Name, class, peers (see [`Column::sort`]) and
    /// what-if columns have no key here (0).
    pub fn sort_key(self, e: &EntityStats) -> f64 {
        match self {
            Column::Field(f) => f.key(e),
            _ => 0.0,
        }
    }

    /// Its rank among the columns `view` gives up on a narrow terminal
    /// (lowest first; `None`: never). The fields' ranks are in the field
    /// table; the TUI's own columns stand between them.
    fn drop_rank(self, view: View) -> Option<u8> {
        match (self, view) {
            (Column::Field(f), _) => view.place(f)?.drop,
            (Column::WhatifWaitP99, View::Fairness) => Some(20),
            (Column::Class, View::Fairness) => Some(40),
            (Column::Peers, View::Fairness) => Some(50),
            (Column::Class, View::Workload) => Some(30),
            (Column::Peers, View::Workload) => Some(40),
            _ => None,
        }
    }
}

/// What the table shows: fairness (today's turns against fair shares)
/// or workload (what each client asks: requests and bytes). `v` switches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum View {
    #[default]
    Fairness,
    Workload,
}

impl View {
    /// Where this view shows `f`, if it does.
    fn place(self, f: &Field) -> Option<Place> {
        let t = f.tui?;
        match self {
            View::Fairness => t.fairness,
            View::Workload => t.workload,
        }
    }

    /// The columns in display order (the digits' and the sort menu's):
    /// NAME, CLASS, then the fields this view shows in their order.
    pub fn columns(self) -> Vec<Column> {
        let mut shown: Vec<(u8, &'static Field)> = fields::FIELDS
            .iter()
            .filter_map(|f| Some((self.place(f)?.order, f)))
            .collect();
        shown.sort_by_key(|(order, _)| *order);
        [Column::Name, Column::Class]
            .into_iter()
            .chain(shown.into_iter().map(|(_, f)| Column::Field(f)))
            .collect()
    }

    /// Its name in the table's title.
    pub fn label(self) -> &'static str {
        match self {
            View::Fairness => "fairness",
            View::Workload => "workload",
        }
    }

    pub fn other(self) -> View {
        match self {
            View::Fairness => View::Workload,
            View::Workload => View::Fairness,
        }
    }

    /// The columns a table of peers in this view gives up on a narrow
    /// terminal, first first (without what-if columns).
    pub fn drop_order(self) -> Vec<Column> {
        let mut cols: Vec<(u8, Column)> = self
            .columns()
            .into_iter()
            .filter_map(|c| Some((c.drop_rank(self)?, c)))
            .collect();
        cols.sort_by_key(|(rank, _)| *rank);
        cols.into_iter().map(|(_, c)| c).collect()
    }

    /// Does this view show `c` (CLASS and PEERS stand for each other)?
    pub fn shows(self, c: Column) -> bool {
        self.columns().contains(&c.as_peer_column())
    }
}

/// The columns of `view` that fit in `width` cells (one space between
/// columns), dropping low-priority ones first. `show_class` is false
/// when the rows are classes (their class is their name); `whatif` adds
/// the what-if columns (to the fairness view: they predict its numbers);
/// `hidden` are left out first (the column chooser's; NAME never is).
pub fn fitting(
    width: u16,
    show_class: bool,
    whatif: bool,
    view: View,
    hidden: &[Column],
) -> Vec<Column> {
    let extra = if whatif && view == View::Fairness {
        &Column::WHATIF[..]
    } else {
        &[]
    };
    // Classes show their peer count where peers show their class.
    let mut cols: Vec<Column> = view
        .columns()
        .iter()
        .chain(extra)
        .filter(|c| **c == Column::Name || !hidden.contains(c))
        .map(|c| match c {
            Column::Class if !show_class => Column::Peers,
            c => *c,
        })
        .collect();
    let need =
        |cols: &[Column]| -> u32 { cols.iter().map(|c| c.width() as u32 + 1).sum::<u32>() - 1 };
    let mut droppable: Vec<(u8, Column)> = cols
        .iter()
        .filter_map(|c| Some((c.drop_rank(view)?, *c)))
        .collect();
    droppable.sort_by_key(|(rank, _)| *rank);
    for (_, drop) in droppable {
        if need(&cols) <= width as u32 {
            break;
        }
        cols.retain(|c| *c != drop);
    }
    cols
}

#[cfg(test)]
#[path = "columns_tests.rs"]
mod tests;
