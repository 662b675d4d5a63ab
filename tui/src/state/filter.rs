//! The table's filter: what the user typed after `/`, read as words that
//! must all match. A word is an address prefix (`10.20.0.0/24`,
//! `fd00:1234::/32`), `<fair` (below fair share: ratio under 1) or
//! `>fair` (above it), or else a case-insensitive substring of the name
//! or the class. Parsing is by `std::net` (addresses) and a bit mask; a
//! word that is not a valid prefix (`customers/10.2.0.1`, `10.0.0.0/40`)
//! is a substring like any other, so nothing typed is ever refused.

use std::net::IpAddr;

use nfsdtop_agent::model::EntityStats;

#[derive(Clone, Debug, PartialEq)]
enum Term {
    /// Lower-cased.
    Substring(String),
    /// The address with its host bits cleared, and the prefix length.
    Prefix(IpAddr, u8),
    BelowFair,
    AboveFair,
}

/// A parsed filter; the empty filter matches everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filter {
    terms: Vec<Term>,
}

impl Filter {
    pub fn parse(text: &str) -> Filter {
        let terms = text
            .split_whitespace()
            .map(|w| match w.to_ascii_lowercase().as_str() {
                "<fair" => Term::BelowFair,
                ">fair" => Term::AboveFair,
                _ => prefix(w).unwrap_or_else(|| Term::Substring(w.to_lowercase())),
            })
            .collect();
        Filter { terms }
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    pub fn matches(&self, e: &EntityStats) -> bool {
        self.terms.iter().all(|t| match t {
            Term::Substring(s) => {
                e.name.to_lowercase().contains(s) || e.class.to_lowercase().contains(s)
            }
            Term::Prefix(net, len) => address_of(&e.name).is_some_and(|a| within(a, *net, *len)),
            Term::BelowFair => e.fairness.is_some_and(|r| r < 1.0),
            Term::AboveFair => e.fairness.is_some_and(|r| r > 1.0),
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
}
