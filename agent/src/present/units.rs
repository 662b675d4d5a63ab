//! Numbers as a person reads them, one formatter per unit: shares as
//! `38.4%`, rates as `50.0`, waits as `18ms`, byte rates as `4.20KiB/s`.
//! Each [`Unit`] rounds a value to the digits it prints and prints that
//! rounded value, so the sort key ([`Unit::key`]) and the text come from
//! one number: values that show the same sort as equal (8.3% and 8.3%
//! tie, and go by name), without reading text back.

/// What a per-entity number is, for showing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// A whole number: `3`.
    Count,
    /// Per second: one decimal below 100 (`50.0`), none above (`120`).
    PerSecond,
    /// A fraction shown in percent with one decimal: `38.4%`.
    Percent,
    /// A ratio or a mean, two decimals: `1.00`, `0.38`.
    Ratio,
    /// Microseconds: `960us`, `9.2ms`, `74ms`, `1.20s`.
    Micros,
    /// Bytes per second in binary units: `4.20KiB/s`.
    BytesPerSecond,
}

/// A value as shown: its text, and the value that text stands for (the
/// sort key). `-` (nothing to show) sorts below every value.
#[derive(Clone, Debug, PartialEq)]
pub struct Shown {
    pub key: f64,
    pub text: String,
}

/// A value rounded to what its unit prints, before any text is made (so
/// a sort key costs no allocation).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Form {
    /// `-`: not measured, nothing to judge, not a number.
    Nothing,
    /// `0` (a wait of nothing).
    Zero,
    /// `>1023EiB`: past the last binary unit.
    Over,
    /// `number` printed with `decimals`, then `suffix`; `key` is the
    /// value that stands for, in the unit's own terms.
    Number {
        key: f64,
        number: f64,
        decimals: usize,
        suffix: &'static str,
    },
}

/// `x` rounded to `decimals` (ties to even, as the formatter rounds).
fn round_to(x: f64, decimals: usize) -> f64 {
    let p = 10f64.powi(decimals as i32);
    (x * p).round_ties_even() / p
}

/// `x` printed with `decimals` and `suffix`, the key its value times
/// `scale`.
fn number(x: f64, decimals: usize, scale: f64, suffix: &'static str) -> Form {
    let number = round_to(x, decimals);
    Form::Number {
        key: number * scale,
        number,
        decimals,
        suffix,
    }
}

impl Unit {
    fn form(self, v: Option<f64>) -> Form {
        let Some(x) = v else {
            return Form::Nothing;
        };
        match self {
            Unit::Count => number(x, 0, 1.0, ""),
            Unit::PerSecond => number(x, if x < 100.0 { 1 } else { 0 }, 1.0, ""),
            Unit::Percent => number(x * 100.0, 1, 1.0, "%"),
            Unit::Ratio if x.is_finite() => number(x, 2, 1.0, ""),
            Unit::Ratio => Form::Nothing,
            Unit::Micros => micros(x),
            Unit::BytesPerSecond => human(x, &RATE_UNITS),
        }
    }

    /// `v` as shown in this unit (`None`, NaN and the like: `-`).
    pub fn show(self, v: Option<f64>) -> Shown {
        let form = self.form(v);
        Shown {
            key: key_of(form),
            text: text_of(form, self == Unit::BytesPerSecond),
        }
    }

    /// The text of `v` in this unit.
    pub fn text(self, v: Option<f64>) -> String {
        text_of(self.form(v), self == Unit::BytesPerSecond)
    }

    /// The sort key of `v`: the value its text stands for.
    pub fn key(self, v: Option<f64>) -> f64 {
        key_of(self.form(v))
    }

    /// `v` in the numbers a person types for this unit ([`Unit::read`]):
    /// a fraction in percent, everything else as it is.
    pub fn typed(self, v: f64) -> f64 {
        match self {
            Unit::Percent => v * 100.0,
            _ => v,
        }
    }

    /// A number typed in this unit (a filter's `share>=10%`): percent
    /// with or without `%`; microseconds from `us`, `ms` or `s` (ms
    /// without a suffix); bytes from `B`, `KiB`, `MiB`... with or
    /// without `/s`; a plain number otherwise. None when it is none.
    pub fn read(self, text: &str) -> Option<f64> {
        let number = |t: &str| t.parse::<f64>().ok().filter(|v| v.is_finite());
        match self {
            Unit::Percent => number(text.strip_suffix('%').unwrap_or(text)),
            Unit::Micros => {
                let (n, scale) = if let Some(n) = text.strip_suffix("us") {
                    (n, 1.0)
                } else if let Some(n) = text.strip_suffix("ms") {
                    (n, 1e3)
                } else if let Some(n) = text.strip_suffix('s') {
                    (n, 1e6)
                } else {
                    (text, 1e3)
                };
                number(n).map(|v| v * scale)
            }
            Unit::BytesPerSecond => {
                // In any case: a filter reads its words in lower case.
                let lower = text.to_ascii_lowercase();
                let t = lower.strip_suffix("/s").unwrap_or(&lower);
                // Longest suffix first: "b" ends every unit.
                for (i, unit) in BYTE_UNITS.iter().enumerate().rev() {
                    if let Some(n) = t.strip_suffix(unit.to_ascii_lowercase().as_str()) {
                        return number(n).map(|v| v * 1024f64.powi(i as i32));
                    }
                }
                number(t)
            }
            Unit::Count | Unit::PerSecond | Unit::Ratio => number(text),
        }
    }

    /// How a number in this unit is typed, for a message: empty where a
    /// plain number is all there is.
    pub fn how_typed(self) -> &'static str {
        match self {
            Unit::Percent => " (a percentage, e.g. 10 or 10%)",
            Unit::Micros => " (e.g. 20ms, 850us, 1.5s)",
            Unit::BytesPerSecond => " (bytes, e.g. 512, 4KiB, 1.5MiB)",
            _ => "",
        }
    }
}

fn key_of(form: Form) -> f64 {
    match form {
        Form::Nothing => -1.0,
        Form::Zero => 0.0,
        Form::Over => f64::INFINITY,
        Form::Number { key, .. } => key,
    }
}

fn text_of(form: Form, per_second: bool) -> String {
    match form {
        Form::Nothing => "-".into(),
        Form::Zero => "0".into(),
        Form::Over if per_second => ">1023EiB/s".into(),
        Form::Over => ">1023EiB".into(),
        Form::Number {
            number,
            decimals,
            suffix,
            ..
        } => format!("{number:.decimals$}{suffix}"),
    }
}

/// Microseconds (`0` for nothing measured).
fn micros(us: f64) -> Form {
    if !us.is_finite() || us <= 0.0 {
        Form::Zero
    } else if us < 1_000.0 {
        number(us, 0, 1.0, "us")
    } else if us < 10_000.0 {
        number(us / 1e3, 1, 1e3, "ms")
    } else if us < 1_000_000.0 {
        number(us / 1e3, 0, 1e3, "ms")
    } else {
        number(us / 1e6, 2, 1e6, "s")
    }
}

/// Microseconds as a person reads them: `960us`, `9.2ms`, `74ms`,
/// `1.20s` (the UI's and the batch text's waits).
pub fn fmt_us(us: f64) -> String {
    Unit::Micros.text(Some(us))
}

/// A fraction in percent: `38.4%`.
pub fn pct(x: f64) -> String {
    Unit::Percent.text(Some(x))
}

/// A rate as DISP/S and OPS/S show it: a decimal below 100.
pub fn per_second(x: f64) -> String {
    Unit::PerSecond.text(Some(x))
}

/// A ratio with two decimals; `-` when there is none.
pub fn fmt_ratio(r: Option<f64>) -> String {
    Unit::Ratio.text(r)
}

/// Binary units after a count of bytes, and after a rate.
const BYTE_UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
const RATE_UNITS: [&str; 7] = ["B/s", "KiB/s", "MiB/s", "GiB/s", "TiB/s", "PiB/s", "EiB/s"];

/// At most four digits and a unit (`1023B`, `4.20KiB`, `42.0MiB`,
/// `420GiB`), so a column of them stays 9 cells wide with `/s`; past
/// the last unit, `>1023EiB`. Nothing for what cannot be a count of
/// bytes (NaN, infinite, negative).
fn human(x: f64, units: &[&'static str; 7]) -> Form {
    if !x.is_finite() || x < 0.0 {
        return Form::Nothing;
    }
    // Whole bytes below 1 KiB: a fraction of a byte says nothing.
    if x < 1023.5 {
        return number(x, 0, 1.0, units[0]);
    }
    let mut v = x;
    let mut scale = 1.0;
    for unit in &units[1..] {
        v /= 1024.0;
        scale *= 1024.0;
        // Rounded to what is printed, still under 1024: this unit.
        if v < 1023.5 {
            let d = if v < 9.995 {
                2
            } else if v < 99.95 {
                1
            } else {
                0
            };
            return number(v, d, scale, unit);
        }
    }
    Form::Over
}

/// Cumulative bytes: `-` where not measured (never `0B` for unknown).
pub fn fmt_bytes(b: Option<u64>) -> String {
    text_of(
        b.map_or(Form::Nothing, |b| human(b as f64, &BYTE_UNITS)),
        false,
    )
}

/// Bytes per second: `4.20KiB/s`; `-` where not measured.
pub fn fmt_byte_rate(r: Option<f64>) -> String {
    Unit::BytesPerSecond.text(r)
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

    /// The key is the value the text stands for: what shows the same
    /// sorts the same, more never sorts below less, and `-` below all.
    #[test]
    fn keys_follow_the_text() {
        let u = Unit::BytesPerSecond;
        assert_eq!(u.key(None), -1.0);
        assert_eq!(u.key(Some(1023.0)), 1023.0);
        assert_eq!(u.key(Some(4300.0)), 4.2 * 1024.0);
        assert_eq!(u.key(Some(1e300)), f64::INFINITY);
        for unit in [
            Unit::Count,
            Unit::PerSecond,
            Unit::Percent,
            Unit::Ratio,
            Unit::Micros,
            Unit::BytesPerSecond,
        ] {
            let mut last = u.key(None);
            let mut prev: Option<Shown> = None;
            let mut x = 0.0;
            while x < 1e20 {
                let s = unit.show(Some(x));
                assert!(
                    s.key >= last,
                    "{unit:?} {x}: {} keys {} < {last}",
                    s.text,
                    s.key
                );
                if let Some(p) = &prev {
                    if p.text == s.text {
                        assert_eq!(p.key, s.key, "{unit:?} {x}: {}", s.text);
                    }
                }
                last = s.key;
                prev = Some(s);
                x = x * 1.0013 + 0.000_7;
            }
        }
    }

    #[test]
    fn numbers_as_typed() {
        assert_eq!(Unit::Percent.read("10%"), Some(10.0));
        assert_eq!(Unit::Percent.read("10"), Some(10.0));
        assert_eq!(Unit::Micros.read("20"), Some(20_000.0));
        assert_eq!(Unit::Micros.read("850us"), Some(850.0));
        assert_eq!(Unit::Micros.read("1.5s"), Some(1_500_000.0));
        assert_eq!(Unit::BytesPerSecond.read("4KiB/s"), Some(4096.0));
        assert_eq!(
            Unit::BytesPerSecond.read("2MiB"),
            Some(2.0 * 1024.0 * 1024.0)
        );
        assert_eq!(Unit::BytesPerSecond.read("512"), Some(512.0));
        assert_eq!(Unit::BytesPerSecond.read("1kib"), Some(1024.0));
        assert_eq!(Unit::Ratio.read("soon"), None);
        assert_eq!(Unit::Count.read("inf"), None);
        assert_eq!(Unit::Percent.typed(0.25), 25.0);
    }

    #[test]
    fn each_unit_as_the_table_shows_it() {
        assert_eq!(pct(0.0834), "8.3%");
        assert_eq!(per_second(37.0), "37.0");
        assert_eq!(per_second(99.96), "100.0");
        assert_eq!(per_second(120.4), "120");
        assert_eq!(fmt_ratio(Some(0.995_1)), "1.00");
        assert_eq!(fmt_ratio(None), "-");
        assert_eq!(fmt_ratio(Some(f64::INFINITY)), "-");
        assert_eq!(fmt_us(850.0), "850us");
        assert_eq!(fmt_us(5_100.0), "5.1ms");
        assert_eq!(fmt_us(180_000.0), "180ms");
        assert_eq!(fmt_us(1_200_000.0), "1.20s");
        assert_eq!(fmt_us(f64::NAN), "0");
        assert_eq!(Unit::Count.text(Some(3.0)), "3");
    }
}
