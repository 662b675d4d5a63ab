//! Bytes and byte rates as a person reads them (`4.20KiB/s`, `210MiB`):
//! the TUI's workload columns, its drill-down and the batch text share
//! these, and [`parse_bytes`] reads the text back so that a table sorts
//! on the values as shown.

/// Binary units, each 1024 times the last.
const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

/// At most four digits and a unit (`1023B`, `4.20KiB`, `42.0MiB`,
/// `420GiB`), so a column of them stays 9 cells wide with `/s`; past
/// the last unit, `>1023EiB`. None for what cannot be a count of bytes
/// (NaN, infinite, negative).
fn human(x: f64) -> Option<String> {
    if !x.is_finite() || x < 0.0 {
        return None;
    }
    // Whole bytes below 1 KiB: a fraction of a byte says nothing.
    if x < 1023.5 {
        return Some(format!("{x:.0}B"));
    }
    let mut v = x;
    for unit in &UNITS[1..] {
        v /= 1024.0;
        // Rounded to what is printed, still under 1024: this unit.
        if v < 1023.5 {
            let text = if v < 9.995 {
                format!("{v:.2}")
            } else if v < 99.95 {
                format!("{v:.1}")
            } else {
                format!("{v:.0}")
            };
            return Some(format!("{text}{unit}"));
        }
    }
    Some(">1023EiB".into())
}

/// Cumulative bytes: `-` where not measured (never `0B` for unknown).
pub fn fmt_bytes(b: Option<u64>) -> String {
    b.and_then(|b| human(b as f64))
        .unwrap_or_else(|| "-".into())
}

/// Bytes per second: `4.20KiB/s`; `-` where not measured.
pub fn fmt_byte_rate(r: Option<f64>) -> String {
    r.and_then(human)
        .map_or_else(|| "-".into(), |t| format!("{t}/s"))
}

/// The bytes (per second) a [`fmt_bytes`] or [`fmt_byte_rate`] text
/// stands for, as shown (rounded); `-1` for `-` (below any value), and
/// infinity for `>1023EiB`.
pub fn parse_bytes(text: &str) -> f64 {
    let t = text.strip_suffix("/s").unwrap_or(text);
    if t.starts_with('>') {
        return f64::INFINITY;
    }
    // Longest suffix first: "B" ends every unit.
    for (i, unit) in UNITS.iter().enumerate().rev() {
        if let Some(n) = t.strip_suffix(unit) {
            return n
                .parse::<f64>()
                .map_or(-1.0, |n| n * 1024f64.powi(i as i32));
        }
    }
    -1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_of_each_unit() {
        let r = |x: f64| fmt_byte_rate(Some(x));
        assert_eq!(r(0.0), "0B/s");
        assert_eq!(r(1.0), "1B/s");
        assert_eq!(r(1023.0), "1023B/s");
        // Would print as 1024B: the next unit instead.
        assert_eq!(r(1023.6), "1.00KiB/s");
        assert_eq!(r(1024.0), "1.00KiB/s");
        assert_eq!(r(4300.0), "4.20KiB/s");
        assert_eq!(r(9.999 * 1024.0), "10.0KiB/s");
        assert_eq!(r(99.96 * 1024.0), "100KiB/s");
        assert_eq!(r(1023.0 * 1024.0), "1023KiB/s");
        assert_eq!(r(1023.7 * 1024.0), "1.00MiB/s");
        assert_eq!(r(1.5 * 1024f64.powi(3)), "1.50GiB/s");
        assert_eq!(fmt_bytes(Some(0)), "0B");
        assert_eq!(fmt_bytes(Some(1023)), "1023B");
        assert_eq!(fmt_bytes(Some(1024)), "1.00KiB");
    }

    #[test]
    fn huge_and_not_a_count() {
        assert_eq!(fmt_bytes(Some(u64::MAX)), "16.0EiB");
        assert_eq!(fmt_byte_rate(Some(1e300)), ">1023EiB/s");
        assert_eq!(fmt_byte_rate(Some(f64::MAX)), ">1023EiB/s");
        for x in [f64::NAN, f64::INFINITY, -1.0] {
            assert_eq!(fmt_byte_rate(Some(x)), "-", "{x}");
        }
        // Not measured is never 0.
        assert_eq!(fmt_byte_rate(None), "-");
        assert_eq!(fmt_bytes(None), "-");
    }

    /// Every text is at most 9 cells with `/s` (the table's columns).
    #[test]
    fn never_wider_than_nine_cells() {
        let mut x = 0.5;
        while x < 1e22 {
            for f in [1.0, 1.0004, 1.02, 1.5, 9.99, 99.9, 999.9, 1023.4, 1023.6] {
                let t = fmt_byte_rate(Some(x * f));
                assert!(t.chars().count() <= 10, "{} is {t}", x * f);
                assert!(t.len() <= 9 || t.starts_with('>'), "{} is {t}", x * f);
            }
            x *= 2.0;
        }
    }

    /// Read back: what shows the same is the same; more never reads as
    /// less.
    #[test]
    fn parse_reads_the_shown_value_back() {
        assert_eq!(parse_bytes("-"), -1.0);
        assert_eq!(parse_bytes("1023B/s"), 1023.0);
        assert_eq!(parse_bytes("4.20KiB/s"), 4.2 * 1024.0);
        assert_eq!(parse_bytes("2.00MiB"), 2.0 * 1024.0 * 1024.0);
        assert_eq!(parse_bytes(">1023EiB/s"), f64::INFINITY);
        let mut last = -1.0;
        let mut x = 0.0;
        while x < 1e20 {
            let t = fmt_byte_rate(Some(x));
            let k = parse_bytes(&t);
            assert!(k >= last, "{x}: {t} reads {k} < {last}");
            assert!((k - x).abs() <= x * 0.006 + 0.5, "{x}: {t} reads {k}");
            last = k;
            x = x * 1.013 + 1.0;
        }
    }
}
