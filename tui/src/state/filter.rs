//! The table's filter: what the user typed after `/`, read as words that
//! must all match. A word is an address prefix (`10.20.0.0/24`,
//! `fd00:1234::/32`), `<fair` (below fair share: ratio under 1) or
//! `>fair` (above it), a comparison of a column with a number
//! (`ratio<0.6`, `wait99>20ms`, `share>=10%`, `conn>4`: any number of
//! the field table with a TUI column, see [`names`]),
//! or else a case-insensitive substring of the name or the class.
//! Parsing is by `std::net` (addresses) and a bit mask; a word that is not
//! a valid prefix (`customers/10.2.0.1`, `10.0.0.0/40`) is a substring like
//! any other. A word that reads as a comparison but names no column or no
//! number is left out of the match and said back ([`Filter::problems`]),
//! never silently matching nothing.

use std::net::IpAddr;

use nfsdtop_agent::model::EntityStats;
use nfsdtop_agent::present::fields;

#[derive(Clone, Debug, PartialEq)]
enum Term {
    /// Lower-cased.
    Substring(String),
    /// The address with its host bits cleared, and the prefix length.
    Prefix(IpAddr, u8),
    BelowFair,
    AboveFair,
    /// A column's value (as the table shows it) against a number.
    Compare(Field, Op, f64),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
}

/// A column a comparison may name: a number of the field table with a
/// TUI column.
type Field = &'static fields::Field;

/// The name a comparison gives `f`: its title in lower case, without a
/// trailing `/s` ("disp", "ops", "in"; "disp/s" reads too).
fn name_of(f: Field) -> Option<String> {
    let title = f.tui?.title.to_ascii_lowercase();
    Some(
        title
            .strip_suffix("/s")
            .map_or(title.clone(), str::to_string),
    )
}

/// The columns a comparison may name, as the table titles them.
pub fn names() -> String {
    fields::FIELDS
        .iter()
        .filter_map(name_of)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The column `name` stands for.
fn named(name: &str) -> Option<Field> {
    let name = name.strip_suffix("/s").unwrap_or(name);
    fields::FIELDS
        .iter()
        .find(|f| name_of(f).is_some_and(|n| n == name))
}

/// What a comparison reads of an entity: the field's value in the
/// numbers typed for its unit (shares in percent, waits in microseconds).
fn of(f: Field, e: &EntityStats) -> Option<f64> {
    f.get(e).map(|v| f.unit.typed(v))
}

/// `word` as a comparison (`NAME OP NUMBER`): None when it does not read
/// as one (no operator, or nothing before it), else the term or what is
/// wrong with it.
fn comparison(word: &str) -> Option<Result<Term, String>> {
    let at = word.find(['<', '>', '='])?;
    let name = &word[..at];
    if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    let rest = &word[at..];
    let (op, value) = [
        ("<=", Op::Le),
        (">=", Op::Ge),
        ("<", Op::Lt),
        (">", Op::Gt),
        ("==", Op::Eq),
        ("=", Op::Eq),
    ]
    .iter()
    .find_map(|(s, op)| rest.strip_prefix(s).map(|v| (*op, v)))?;
    let Some(field) = named(name) else {
        return Some(Err(format!("{word}: no column {name:?} (use {})", names())));
    };
    Some(match field.unit.read(value) {
        Some(v) => Ok(Term::Compare(field, op, v)),
        None => Err(format!(
            "{word}: {value:?} is not a number{}",
            field.unit.how_typed()
        )),
    })
}

/// A parsed filter; the empty filter matches everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filter {
    terms: Vec<Term>,
    /// Words read as comparisons that could not be understood.
    problems: Vec<String>,
}

impl Filter {
    pub fn parse(text: &str) -> Filter {
        let mut f = Filter::default();
        for w in text.split_whitespace() {
            let lower = w.to_ascii_lowercase();
            let term = match lower.as_str() {
                "<fair" => Term::BelowFair,
                ">fair" => Term::AboveFair,
                l => match comparison(l) {
                    Some(Ok(t)) => t,
                    Some(Err(why)) => {
                        f.problems.push(why);
                        continue;
                    }
                    None => prefix(w).unwrap_or_else(|| Term::Substring(w.to_lowercase())),
                },
            };
            f.terms.push(term);
        }
        f
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// What was typed but not understood (left out of the match).
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    pub fn matches(&self, e: &EntityStats) -> bool {
        self.terms.iter().all(|t| match t {
            Term::Substring(s) => {
                e.name.to_lowercase().contains(s) || e.class.to_lowercase().contains(s)
            }
            Term::Prefix(net, len) => address_of(&e.name).is_some_and(|a| within(a, *net, *len)),
            Term::BelowFair => e.fairness.is_some_and(|r| r < 1.0),
            Term::AboveFair => e.fairness.is_some_and(|r| r > 1.0),
            Term::Compare(field, op, v) => of(field, e).is_some_and(|x| match op {
                Op::Lt => x < *v,
                Op::Le => x <= *v,
                Op::Gt => x > *v,
                Op::Ge => x >= *v,
                Op::Eq => (x - v).abs() < 1e-9,
            }),
        })
    }
}

fn prefix(word: &str) -> Option<Term> {
    let (addr, len) = word.split_once('/')?;
    let addr: IpAddr = addr.trim_matches(['[', ']']).parse().ok()?;
    let len: u8 = len.parse().ok()?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    (len <= max).then(|| Term::Prefix(masked(addr, len), len))
}

/// The address a name stands for: a peer's name is its address; a
/// per-peer class's name ends in one (`customers/10.2.0.1`).
fn address_of(name: &str) -> Option<IpAddr> {
    let last = name.rsplit('/').next().unwrap_or(name);
    last.trim_matches(['[', ']']).parse().ok()
}

fn masked(a: IpAddr, len: u8) -> IpAddr {
    match a {
        IpAddr::V4(v) => {
            let m = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4((u32::from(v) & m).into())
        }
        IpAddr::V6(v) => {
            let m = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6((u128::from(v) & m).into())
        }
    }
}

fn within(a: IpAddr, net: IpAddr, len: u8) -> bool {
    // An IPv4 client seen through an IPv6 socket (::ffff:10.0.0.1) is
    // still in 10.0.0.0/8.
    let a = match (a, net) {
        (IpAddr::V6(v6), IpAddr::V4(_)) => v6.to_ipv4_mapped().map_or(a, IpAddr::V4),
        _ => a,
    };
    a.is_ipv4() == net.is_ipv4() && masked(a, len) == net
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(name: &str, class: &str, fairness: Option<f64>) -> EntityStats {
        EntityStats {
            name: name.into(),
            class: class.into(),
            fairness,
            ..Default::default()
        }
    }

    #[test]
    fn prefixes_fair_share_and_substrings() {
        let rows = [
            e("10.20.0.1", "a", Some(0.5)),
            e("10.20.0.255", "b", Some(1.5)),
            e("10.20.1.1", "a", Some(0.9)),
            e("fd00:1234:5678::9", "v6", Some(2.0)),
            e("fd00:1234:9999::1", "v6", None),
            e("::ffff:10.20.0.7", "mapped", Some(1.0)),
            e("customers/10.20.0.3", "customers/10.20.0.3", Some(0.2)),
            e("anon-3f2a", "x", Some(0.1)),
        ];
        let names = |f: &str| -> Vec<&str> {
            let f = Filter::parse(f);
            rows.iter()
                .filter(|r| f.matches(r))
                .map(|r| r.name.as_str())
                .collect()
        };
        assert_eq!(
            names("10.20.0.0/24"),
            [
                "10.20.0.1",
                "10.20.0.255",
                "::ffff:10.20.0.7",
                "customers/10.20.0.3"
            ]
        );
        assert_eq!(names("10.20.0.1/32"), ["10.20.0.1"]);
        assert_eq!(names("10.0.0.0/8").len(), 5);
        assert_eq!(names("0.0.0.0/0").len(), 5, "every IPv4 address");
        assert_eq!(
            names("fd00:1234:5678::/48"),
            ["fd00:1234:5678::9"],
            "IPv6 prefix"
        );
        assert_eq!(names("fd00::/16").len(), 2);
        assert_eq!(
            names("<fair"),
            ["10.20.0.1", "10.20.1.1", "customers/10.20.0.3", "anon-3f2a"]
        );
        assert_eq!(names(">FAIR"), ["10.20.0.255", "fd00:1234:5678::9"]);
        // Words combine: all must match.
        assert_eq!(
            names("10.20.0.0/24 <fair"),
            ["10.20.0.1", "customers/10.20.0.3"]
        );
        // Not a prefix: a substring (of the class too).
        assert_eq!(names("customers/10"), ["customers/10.20.0.3"]);
        assert_eq!(names("10.20.0.0/33"), Vec::<&str>::new());
        assert_eq!(names("MAPPED"), ["::ffff:10.20.0.7"]);
        assert_eq!(names("").len(), rows.len());
    }

    #[test]
    fn comparisons_match_the_columns_as_shown() {
        let mut a = e("10.0.0.2", "a", Some(0.22));
        a.share = 0.111;
        a.wait_p99_us = 18_000.0;
        a.connections = 2;
        let mut b = e("10.0.0.3", "b", Some(1.78));
        b.share = 0.889;
        b.wait_p99_us = 31_000.0;
        b.connections = 16;
        let rows = [a, b, e("idle", "c", None)];
        let names = |f: &str| -> Vec<&str> {
            let f = Filter::parse(f);
            assert!(f.problems().is_empty(), "{:?}", f.problems());
            rows.iter()
                .filter(|r| f.matches(r))
                .map(|r| r.name.as_str())
                .collect()
        };
        assert_eq!(names("ratio<0.6"), ["10.0.0.2"]);
        assert_eq!(names("RATIO>=1"), ["10.0.0.3"]);
        assert_eq!(names("wait99>20ms"), ["10.0.0.3"]);
        assert_eq!(names("wait99>20"), ["10.0.0.3"], "ms by default");
        assert_eq!(names("wait99<0.02s"), ["10.0.0.2", "idle"]);
        assert_eq!(names("share>50%"), ["10.0.0.3"]);
        assert_eq!(names("share<=11.1"), ["10.0.0.2", "idle"]);
        assert_eq!(names("conn=16"), ["10.0.0.3"]);
        assert_eq!(names("conn>1 ratio<1"), ["10.0.0.2"]);
        // Every numeric column of the field table, by its title.
        assert_eq!(names("disp/s>=0 conn=2"), ["10.0.0.2"]);
        let mut rows = rows;
        rows[1].bytes_in_rate = Some(4096.0);
        rows[1].inflight_mean = 2.5;
        let names = |f: &str| -> Vec<String> {
            let f = Filter::parse(f);
            assert!(f.problems().is_empty(), "{:?}", f.problems());
            rows.iter()
                .filter(|r| f.matches(r))
                .map(|r| r.name.clone())
                .collect()
        };
        assert_eq!(names("in/s>=4KiB"), ["10.0.0.3"]);
        assert_eq!(names("in>1000"), ["10.0.0.3"]);
        assert_eq!(names("inflt>2"), ["10.0.0.3"]);
    }

    #[test]
    fn what_is_not_understood_is_said_and_left_out() {
        let f = Filter::parse("10.0 rate<3 wait99>soon");
        assert_eq!(f.problems().len(), 2, "{:?}", f.problems());
        assert!(
            f.problems()[0].starts_with("rate<3: no column \"rate\""),
            "{:?}",
            f.problems()
        );
        assert!(
            f.problems()[1].contains("\"soon\" is not a number (e.g. 20ms"),
            "{:?}",
            f.problems()
        );
        // The rest still filters.
        assert!(f.matches(&e("10.0.0.2", "a", None)));
        assert!(!f.matches(&e("192.168.0.1", "a", None)));
        // Not comparisons: prefixes, substrings, <fair.
        for w in ["<fair", "10.0.0.0/8", "customers/10.2.0.1", "movers"] {
            assert!(Filter::parse(w).problems().is_empty(), "{w}");
        }
    }
}
