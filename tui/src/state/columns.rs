//! The table's columns: titles, widths, which to drop first on a narrow
//! terminal, and how each one sorts; and the two views (fairness,
//! workload) that each show a set of them.

use std::cmp::Ordering;

use nfsdtop_agent::model::EntityStats;
use nfsdtop_agent::output::name_order;
use nfsdtop_agent::units::{fmt_byte_rate, parse_bytes};

use crate::view::table;
use crate::warnings::fmt_us;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Column {
    Name,
    Class,
    /// A class's peer count (the class table only, in place of CLASS).
    Peers,
    Conn,
    Rate,
    Share,
    Fair,
    Ratio,
    WaitP50,
    WaitP99,
    Exec,
    /// The workload view's: requests and bytes per second.
    Ops,
    BytesIn,
    BytesOut,
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

    /// The workload view's display order: what each client asks of the
    /// server, and its share of the turns and the thread time beside.
    pub const WORKLOAD: [Column; 8] = [
        Column::Name,
        Column::Class,
        Column::Conn,
        Column::Ops,
        Column::BytesIn,
        Column::BytesOut,
        Column::Exec,
        Column::Share,
    ];

    /// The workload view drops the connections first, then thread time
    /// and the class, so that 80 columns keep NAME, the rates and SHARE.
    pub const WORKLOAD_DROP_ORDER: [Column; 6] = [
        Column::Conn,
        Column::Exec,
        Column::Class,
        Column::Peers,
        Column::Share,
        Column::BytesIn,
    ];

    pub const WHATIF: [Column; 3] = [
        Column::WhatifShare,
        Column::WhatifRatio,
        Column::WhatifWaitP99,
    ];

    /// Dropped in this order when the terminal is too narrow for all:
    /// thread time and the median wait first (the p99 says more), then
    /// the class, so that 80 columns keep NAME, CLASS and every
    /// fairness number.
    pub const DROP_ORDER: [Column; 8] = [
        Column::Exec,
        Column::WhatifWaitP99,
        Column::WaitP50,
        Column::Class,
        Column::Peers,
        Column::Conn,
        Column::Fair,
        Column::Rate,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Column::Name => "NAME",
            Column::Class => "CLASS",
            Column::Peers => "PEERS",
            Column::Conn => "CONN",
            Column::Rate => "DISP/S",
            Column::Share => "SHARE",
            Column::Fair => "FAIR",
            Column::Ratio => "RATIO",
            Column::WaitP50 => "WAIT50",
            Column::WaitP99 => "WAIT99",
            Column::Exec => "EXEC",
            Column::Ops => "OPS/S",
            Column::BytesIn => "IN/S",
            Column::BytesOut => "OUT/S",
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
            Column::Conn => "connections",
            Column::Rate => "dispatches/s",
            Column::Share => "share",
            Column::Fair => "fair share",
            Column::Ratio => "ratio",
            Column::WaitP50 => "wait p50",
            Column::WaitP99 => "wait p99",
            Column::Exec => "exec share",
            Column::Ops => "ops/s",
            Column::BytesIn => "bytes in/s",
            Column::BytesOut => "bytes out/s",
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
            Column::Conn => 5,
            Column::Rate => 7,
            Column::Share => 6,
            Column::Fair => 6,
            Column::Ratio => 6,
            Column::WaitP50 => 7,
            Column::WaitP99 => 7,
            Column::Exec => 6,
            Column::Ops => 7,
            // "1023KiB/s" and the sort arrow's room.
            Column::BytesIn | Column::BytesOut => 10,
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
        self.compare_keyed((self.shown(a), a), (self.shown(b), b), descending)
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
            _ => self.shown(&list[i as usize]),
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

    /// A numeric column's value as the table displays it (the text of
    /// view/table.rs read back, so rounding is the same by construction).
    /// Name, class, peers (see [`Column::sort`]) and what-if columns
    /// have no key here (0).
    pub fn shown(self, e: &EntityStats) -> f64 {
        let num = |t: String| t.trim_end_matches('%').parse::<f64>().unwrap_or(-1.0);
        match self {
            Column::Name | Column::Class | Column::Peers => 0.0,
            Column::Conn => e.connections as f64,
            Column::Rate => num(table::rate(e.dispatch_rate)),
            Column::Share => num(table::pct(e.share)),
            Column::Fair => num(table::pct(e.fair_share)),
            // Nothing to judge ("-") sorts below any ratio.
            Column::Ratio => num(table::ratio(e.fairness)),
            Column::WaitP50 => shown_us(e.wait_p50_us),
            Column::WaitP99 => shown_us(e.wait_p99_us),
            Column::Exec => num(table::pct(e.exec_share)),
            Column::Ops => num(table::rate(e.request_rate)),
            // Not measured ("-") sorts below any rate.
            Column::BytesIn => parse_bytes(&fmt_byte_rate(e.bytes_in_rate)),
            Column::BytesOut => parse_bytes(&fmt_byte_rate(e.bytes_out_rate)),
            Column::WhatifShare | Column::WhatifRatio | Column::WhatifWaitP99 => 0.0,
        }
    }
}

/// Microseconds as `fmt_us` prints them ("9.2ms", "960us", "1.20s"),
/// read back in microseconds.
fn shown_us(us: f64) -> f64 {
    let t = fmt_us(us);
    let (n, scale) = if let Some(n) = t.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e6)
    } else {
        (t.as_str(), 1.0)
    };
    n.parse::<f64>().map_or(0.0, |v| v * scale)
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
    /// The columns in display order (the digits' and the sort menu's).
    pub fn columns(self) -> &'static [Column] {
        match self {
            View::Fairness => &Column::ALL,
            View::Workload => &Column::WORKLOAD,
        }
    }

    fn drop_order(self) -> &'static [Column] {
        match self {
            View::Fairness => &Column::DROP_ORDER,
            View::Workload => &Column::WORKLOAD_DROP_ORDER,
        }
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
    for drop in view.drop_order() {
        if need(&cols) <= width as u32 {
            break;
        }
        cols.retain(|c| c != drop);
    }
    cols
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eighty_columns_keep_the_essentials() {
        let c = fitting(80, true, false, View::Fairness, &[]);
        assert!(c.contains(&Column::Class), "{c:?}");
        for want in [
            Column::Name,
            Column::Share,
            Column::Fair,
            Column::Ratio,
            Column::WaitP99,
        ] {
            assert!(c.contains(&want), "{want:?} dropped at 80 columns");
        }
        assert_eq!(fitting(200, true, false, View::Fairness, &[]).len(), 10);
        assert!(!fitting(200, false, false, View::Fairness, &[]).contains(&Column::Class));
        assert_eq!(
            fitting(200, false, false, View::Fairness, &[])[1],
            Column::Peers
        );
        assert!(fitting(80, false, false, View::Fairness, &[]).contains(&Column::Peers));
        // Very narrow: still something to show, never a panic.
        assert!(fitting(10, true, false, View::Fairness, &[]).contains(&Column::Name));
        // What-if columns: all of them when wide, the share even at 80.
        assert_eq!(fitting(200, true, true, View::Fairness, &[]).len(), 13);
        assert!(fitting(80, true, true, View::Fairness, &[]).contains(&Column::WhatifShare));
    }

    fn peer(name: &str, share: f64) -> EntityStats {
        EntityStats {
            name: name.into(),
            share,
            fairness: Some(share * 12.0),
            ..Default::default()
        }
    }

    /// Shares within a dispatch of each other (all shown as 8.3%) sort by
    /// address, whatever their last digits; a shown difference still wins.
    #[test]
    fn near_equal_rows_sort_as_shown_then_by_address() {
        let rows = [
            peer("10.20.0.10", 0.083_34),
            peer("10.20.0.2", 0.083_31),
            peer("10.20.0.1", 0.083_30),
            peer("10.20.0.9", 0.083_33),
            peer("10.20.0.3", 0.085_0),
        ];
        for col in [Column::Share, Column::Ratio] {
            let mut v: Vec<&EntityStats> = rows.iter().collect();
            v.sort_by(|a, b| col.compare(a, b, true));
            let got: Vec<&str> = v.iter().map(|e| e.name.as_str()).collect();
            let want = [
                "10.20.0.3",
                "10.20.0.1",
                "10.20.0.2",
                "10.20.0.9",
                "10.20.0.10",
            ];
            assert_eq!(got, want, "{col:?} descending");
            v.sort_by(|a, b| col.compare(a, b, false));
            let got: Vec<&str> = v.iter().map(|e| e.name.as_str()).collect();
            let want = [
                "10.20.0.1",
                "10.20.0.2",
                "10.20.0.9",
                "10.20.0.10",
                "10.20.0.3",
            ];
            assert_eq!(got, want, "{col:?} ascending");
        }
        // Names alone: by address value, not as text.
        let mut names = ["10.20.0.100", "10.20.0.10", "fd00::1", "10.20.0.1", "box"];
        names.sort_by(|a, b| name_order(a, b));
        assert_eq!(
            names,
            ["10.20.0.1", "10.20.0.10", "10.20.0.100", "fd00::1", "box"]
        );
    }

    /// The sort key and the table's text agree: equal text, equal key,
    /// and the key never goes down as the value goes up.
    #[test]
    fn shown_values_match_the_displayed_text() {
        use crate::view::table::{pct, rate, ratio};
        let check = |what: &str, x: f64, y: f64, kx: f64, ky: f64, tx: String, ty: String| {
            assert!(kx <= ky, "{what}: {x} {y} keys {kx} {ky}");
            if tx == ty {
                assert_eq!(kx, ky, "{what}: {x} {y} both show {ty}");
            }
        };
        for i in 0..20_000u32 {
            let x = i as f64 * 0.000_137;
            let y = x + 0.000_049;
            let e = |share: f64, rate: f64, wait: f64| EntityStats {
                share,
                fairness: Some(share * 12.0),
                dispatch_rate: rate,
                wait_p99_us: wait,
                ..Default::default()
            };
            let (a, b) = (e(x, x * 2e3, x * 3e5), e(y, y * 2e3, y * 3e5));
            let c = Column::Share;
            check("share", x, y, c.shown(&a), c.shown(&b), pct(x), pct(y));
            let c = Column::Ratio;
            let (ta, tb) = (ratio(a.fairness), ratio(b.fairness));
            check("ratio", x, y, c.shown(&a), c.shown(&b), ta, tb);
            let c = Column::Rate;
            let (ta, tb) = (rate(a.dispatch_rate), rate(b.dispatch_rate));
            check("rate", x, y, c.shown(&a), c.shown(&b), ta, tb);
            let c = Column::WaitP99;
            let (ta, tb) = (fmt_us(a.wait_p99_us), fmt_us(b.wait_p99_us));
            check("wait", x, y, c.shown(&a), c.shown(&b), ta, tb);
        }
    }

    #[test]
    fn next_cycles_through_every_column() {
        for view in [View::Fairness, View::Workload] {
            let mut c = Column::Name;
            for _ in 0..view.columns().len() {
                c = c.next(view);
            }
            assert_eq!(c, Column::Name, "{view:?}");
        }
        let f = View::Fairness;
        assert_eq!(Column::Peers.next(f), Column::Conn);
        assert_eq!(Column::by_digit('1', true, f), Some(Column::Name));
        assert_eq!(Column::by_digit('2', false, f), Some(Column::Peers));
        assert_eq!(Column::by_digit('0', true, f), Some(Column::Exec));
        assert_eq!(Column::by_digit('x', true, f), None);
        let w = View::Workload;
        assert_eq!(Column::by_digit('4', true, w), Some(Column::Ops));
        assert_eq!(Column::by_digit('6', true, w), Some(Column::BytesOut));
        assert_eq!(Column::by_digit('9', true, w), None);
        assert_eq!(Column::Share.next(w), Column::Name);
        assert!(w.shows(Column::Peers) && !w.shows(Column::Ratio));
    }

    /// The workload view at 80 columns: the rates and the share whole,
    /// the connections given up first (peers; classes have room); the fairness view never shows
    /// them, and what-if columns stay with the fairness numbers.
    #[test]
    fn the_workload_view_fits_eighty_columns() {
        let w = View::Workload;
        for show_class in [true, false] {
            let c = fitting(80, show_class, true, w, &[]);
            for want in [
                Column::Name,
                Column::Ops,
                Column::BytesIn,
                Column::BytesOut,
                Column::Share,
            ] {
                assert!(c.contains(&want), "{want:?} dropped at 80: {c:?}");
            }
            // A class's PEERS is narrower than a peer's CLASS: room for CONN.
            assert_eq!(c.contains(&Column::Conn), !show_class, "{c:?}");
            assert!(!c.iter().any(|c| Column::WHATIF.contains(c)), "{c:?}");
            let cells: u32 = c.iter().map(|c| u32::from(c.width()) + 1).sum::<u32>() - 1;
            assert!(cells <= 80, "{cells}: {c:?}");
        }
        assert_eq!(fitting(200, true, false, w, &[]), Column::WORKLOAD);
        let f = fitting(200, true, false, View::Fairness, &[]);
        assert!(!f.contains(&Column::Ops) && !f.contains(&Column::BytesOut));
        assert!(fitting(10, true, false, w, &[]).contains(&Column::Name));
    }

    /// Byte rates sort as shown: equal text is equal, more never sorts
    /// below less, and not measured below everything.
    #[test]
    fn byte_rates_sort_on_their_shown_values() {
        let e = |r: Option<f64>| EntityStats {
            bytes_out_rate: r,
            ..Default::default()
        };
        let c = Column::BytesOut;
        assert!(c.shown(&e(None)) < c.shown(&e(Some(0.0))));
        assert_eq!(c.shown(&e(Some(4300.0))), c.shown(&e(Some(4301.0))));
        let mut last = c.shown(&e(Some(0.0)));
        let mut x = 0.0;
        while x < 1e13 {
            let k = c.shown(&e(Some(x)));
            assert!(k >= last, "{x}");
            last = k;
            x = x * 1.07 + 3.0;
        }
    }
}
