//! Tests of the columns: what fits at 80 columns in each view, sort
//! order on the values as shown, digits and cycling.

use super::*;

#[test]
fn eighty_columns_keep_the_essentials() {
    let c = fitting(80, true, false, View::Fairness, &[]);
    assert!(c.contains(&Column::Class), "{c:?}");
    for want in [
        Column::Name,
        Column::SHARE,
        Column::FAIR,
        Column::RATIO,
        Column::WAIT_P99,
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
    for col in [Column::SHARE, Column::RATIO] {
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
    use nfsdtop_agent::present::units::{fmt_ratio as ratio, fmt_us, pct, per_second as rate};
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
        let c = Column::SHARE;
        check(
            "share",
            x,
            y,
            c.sort_key(&a),
            c.sort_key(&b),
            pct(x),
            pct(y),
        );
        let c = Column::RATIO;
        let (ta, tb) = (ratio(a.fairness), ratio(b.fairness));
        check("ratio", x, y, c.sort_key(&a), c.sort_key(&b), ta, tb);
        let c = Column::RATE;
        let (ta, tb) = (rate(a.dispatch_rate), rate(b.dispatch_rate));
        check("rate", x, y, c.sort_key(&a), c.sort_key(&b), ta, tb);
        let c = Column::WAIT_P99;
        let (ta, tb) = (fmt_us(a.wait_p99_us), fmt_us(b.wait_p99_us));
        check("wait", x, y, c.sort_key(&a), c.sort_key(&b), ta, tb);
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
    assert_eq!(Column::Peers.next(f), Column::CONN);
    assert_eq!(Column::by_digit('1', true, f), Some(Column::Name));
    assert_eq!(Column::by_digit('2', false, f), Some(Column::Peers));
    assert_eq!(Column::by_digit('0', true, f), Some(Column::EXEC));
    assert_eq!(Column::by_digit('x', true, f), None);
    let w = View::Workload;
    assert_eq!(Column::by_digit('4', true, w), Some(Column::OPS));
    assert_eq!(Column::by_digit('6', true, w), Some(Column::BYTES_OUT));
    assert_eq!(Column::by_digit('9', true, w), Some(Column::EXEC));
    assert_eq!(Column::by_digit('0', true, w), Some(Column::SHARE));
    assert_eq!(Column::SHARE.next(w), Column::Name);
    assert!(w.shows(Column::Peers) && !w.shows(Column::RATIO));
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
            Column::OPS,
            Column::BYTES_IN,
            Column::BYTES_OUT,
            Column::SHARE,
        ] {
            assert!(c.contains(&want), "{want:?} dropped at 80: {c:?}");
        }
        // A class's PEERS is narrower than a peer's CLASS: room for CONN.
        assert_eq!(c.contains(&Column::CONN), !show_class, "{c:?}");
        assert!(!c.iter().any(|c| Column::WHATIF.contains(c)), "{c:?}");
        let cells: u32 = c.iter().map(|c| u32::from(c.width()) + 1).sum::<u32>() - 1;
        assert!(cells <= 80, "{cells}: {c:?}");
    }
    assert_eq!(fitting(200, true, false, w, &[]), w.columns());
    let f = fitting(200, true, false, View::Fairness, &[]);
    assert!(!f.contains(&Column::OPS) && !f.contains(&Column::BYTES_OUT));
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
    let c = Column::BYTES_OUT;
    assert!(c.sort_key(&e(None)) < c.sort_key(&e(Some(0.0))));
    assert_eq!(c.sort_key(&e(Some(4300.0))), c.sort_key(&e(Some(4301.0))));
    let mut last = c.sort_key(&e(Some(0.0)));
    let mut x = 0.0;
    while x < 1e13 {
        let k = c.sort_key(&e(Some(x)));
        assert!(k >= last, "{x}");
        last = k;
        x = x * 1.07 + 3.0;
    }
}

/// Requests in flight: a workload column from the field table, shown on
/// a wide terminal, given up right after CONN on a narrow one (80
/// columns keep EXEC), sorted on its value.
#[test]
fn the_workload_view_shows_requests_in_flight() {
    use nfsdtop_agent::present::fields::INFLIGHT;
    let inflt = Column::Field(&INFLIGHT);
    assert_eq!(inflt.title(), "INFLT");
    let w = View::Workload;
    assert!(fitting(200, true, false, w, &[]).contains(&inflt));
    assert!(!fitting(80, true, false, w, &[]).contains(&inflt));
    assert!(!View::Fairness.columns().contains(&inflt));
    let e = |x: f64| EntityStats {
        inflight_mean: x,
        ..Default::default()
    };
    assert!(inflt.sort_key(&e(0.38)) < inflt.sort_key(&e(2.0)));
    assert_eq!(inflt.sort_key(&e(0.381)), inflt.sort_key(&e(0.379)));
}
