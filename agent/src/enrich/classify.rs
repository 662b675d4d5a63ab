//! Peers → classes. A class map is a text file of CIDR prefixes:
//!
//! ```text
//! # prefix            class       [per-peer]
//! 10.1.0.0/24         movers
//! 0.0.0.0/0           customers   per-peer
//! fd00:1::/64         lab
//! ```
//!
//! The longest matching prefix wins. `per-peer` mirrors the kernel series'
//! class word flag: one entity per address inside the class. A peer that
//! matches nothing is its own class, as it is when there is no map.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::path::Path;

use crate::model::PeerKey;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassRule {
    pub net: IpAddr,
    pub prefix_len: u8,
    pub class: String,
    pub per_peer: bool,
}

/// Where a peer's dispatches are accounted when grouping by class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    /// The class name shown in the peer's "class" column.
    pub class: String,
    /// The class entity: the class itself, or "class/address" for per-peer.
    pub entity: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassMap {
    /// Sorted by prefix length, longest first.
    rules: Vec<ClassRule>,
    /// (network, length) → index into `rules`: parsing checks duplicates
    /// and lookups find a rule in O(distinct lengths), not O(rules).
    index: HashMap<(IpAddr, u8), usize>,
    /// The distinct (is IPv4, length) pairs present, longest first.
    lengths: Vec<(bool, u8)>,
}

/// Every bad line of a class map, the first in `line` and `reason`, the
/// next ones (at most [`MAX_BAD_LINES`] in all) in `more`, so that one run
/// shows what to fix rather than one line per run. Said in one line:
/// "map:3: reason; map:7: reason; and 2 more bad lines".
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{origin}:{line}: {reason}{}", self.rest())]
pub struct ClassMapError {
    pub origin: String,
    pub line: usize,
    pub reason: String,
    /// The other bad lines listed: (line, reason).
    pub more: Vec<(usize, String)>,
    /// Bad lines past those listed.
    pub unlisted: usize,
}

/// Bad lines a class map error lists (the others are counted).
pub const MAX_BAD_LINES: usize = 10;

impl ClassMapError {
    fn rest(&self) -> String {
        let mut s = String::new();
        for (line, reason) in &self.more {
            s.push_str(&format!("; {}:{line}: {reason}", self.origin));
        }
        match self.unlisted {
            0 => {}
            1 => s.push_str("; and 1 more bad line"),
            n => s.push_str(&format!("; and {n} more bad lines")),
        }
        s
    }
}

/// Why a class name cannot be used, if it cannot: names every output
/// already gives to something else would merge with it silently.
fn reserved_name(class: &str) -> Option<String> {
    if class.chars().any(char::is_control) {
        // Shown as it is in text and CSV output: an escape would reach the
        // operator's terminal.
        return Some(format!(
            "class name {class:?} contains a control character: use printable ones"
        ));
    }
    if class.contains('/') {
        return Some(format!(
            "class name {class:?} may not contain '/' (it separates class and address)"
        ));
    }
    if class.parse::<IpAddr>().is_ok() {
        return Some(format!(
            "class name {class:?} is an address: a peer outside every prefix is shown by its \
             address, so the two would merge; name the class differently (e.g. host-{class})"
        ));
    }
    if class.starts_with('(') && class.ends_with(')') {
        // `(listener)`, `(other)`, `(none)`...: the form of every
        // pseudo-entity nfsdtop shows, now or later.
        return Some(format!(
            "class name {class:?} is in parentheses, the form nfsdtop's pseudo-entities \
             ((listener), (other)...) are shown in, so the two would merge; name the class \
             differently"
        ));
    }
    if class == OTHER_CLASS {
        return Some(format!(
            "class name {class:?} is reserved: the exporter sums the peers and classes beyond \
             its top-k into \"{OTHER_CLASS}\"; name the class differently"
        ));
    }
    let kernel = class == "anonymous"
        || class
            .strip_prefix("class-")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    if kernel {
        return Some(format!(
            "class name {class:?} is how the kernel's class words are shown (anonymous, \
             class-N), so the two would merge; name the class differently"
        ));
    }
    let pseudonym = class
        .strip_prefix("anon-")
        .is_some_and(|h| h.len() == 12 && h.bytes().all(|b| b.is_ascii_hexdigit()));
    if pseudonym {
        return Some(format!(
            "class name {class:?} looks like a redacted peer's pseudonym; name the class differently"
        ));
    }
    None
}

/// The series everything beyond the exporter's top-k is summed into.
pub const OTHER_CLASS: &str = "other";

impl ClassMap {
    pub fn load(path: &Path) -> anyhow::Result<ClassMap> {
        let text = crate::input::read_text(
            path,
            "class map",
            "--class-map",
            crate::input::MAX_TEXT_FILE,
        )?;
        Ok(ClassMap::parse(&text, &path.display().to_string())?)
    }

    pub fn parse(text: &str, origin: &str) -> Result<ClassMap, ClassMapError> {
        let mut rules = Vec::new();
        let mut seen: HashMap<(IpAddr, u8), usize> = HashMap::new();
        let mut bad: Vec<(usize, String)> = Vec::new();
        let mut unlisted = 0;
        for (i, raw) in text.lines().enumerate() {
            match parse_line(raw, &seen, &rules) {
                Ok(None) => {}
                Ok(Some(rule)) => {
                    seen.insert((rule.net, rule.prefix_len), rules.len());
                    rules.push(rule);
                }
                Err(reason) if bad.len() < MAX_BAD_LINES => bad.push((i + 1, reason)),
                Err(_) => unlisted += 1,
            }
        }
        let mut bad = bad.into_iter();
        match bad.next() {
            None => Ok(ClassMap::from_rules(rules)),
            Some((line, reason)) => Err(ClassMapError {
                origin: origin.to_string(),
                line,
                reason,
                more: bad.collect(),
                unlisted,
            }),
        }
    }

    pub fn from_rules(mut rules: Vec<ClassRule>) -> ClassMap {
        rules.sort_by_key(|r| std::cmp::Reverse(r.prefix_len));
        let mut index = HashMap::with_capacity(rules.len());
        let mut lengths = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            // The first of two equal prefixes wins, as in a linear scan.
            index.entry((r.net, r.prefix_len)).or_insert(i);
            let l = (r.net.is_ipv4(), r.prefix_len);
            if !lengths.contains(&l) {
                lengths.push(l);
            }
        }
        ClassMap {
            rules,
            index,
            lengths,
        }
    }

    pub fn rules(&self) -> &[ClassRule] {
        &self.rules
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn classify(&self, peer: &PeerKey) -> Assignment {
        let shown = peer.addr.ip().map(|ip| ip.to_string()).unwrap_or_default();
        self.classify_as(peer, &shown)
    }

    /// As `classify`, with the peer shown as `shown` in entity names (a
    /// pseudonym when client addresses are redacted).
    pub fn classify_as(&self, peer: &PeerKey, shown: &str) -> Assignment {
        let Some(ip) = peer.addr.ip() else {
            let name = peer.to_string();
            return Assignment {
                class: name.clone(),
                entity: name,
            };
        };
        // An IPv4-mapped IPv6 peer (::ffff:a.b.c.d) matches IPv4 prefixes.
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        let hit = self
            .lengths
            .iter()
            .filter(|(v4, _)| *v4 == ip.is_ipv4())
            .find_map(|&(_, len)| self.index.get(&(masked(ip, len), len)));
        if let Some(&i) = hit {
            let rule = &self.rules[i];
            let entity = if rule.per_peer {
                format!("{}/{}", rule.class, shown)
            } else {
                rule.class.clone()
            };
            return Assignment {
                class: rule.class.clone(),
                entity,
            };
        }
        Assignment {
            class: shown.to_string(),
            entity: shown.to_string(),
        }
    }

    /// The kernel's class word (the round-robin series' v2): 0 is the anonymous client; the
    /// top bit asks for one client per peer address within the class.
    pub fn kernel_class(word: u32, shown: &str) -> Assignment {
        const PER_PEER: u32 = 1 << 31;
        let id = word & !PER_PEER;
        let class = if id == 0 {
            "anonymous".to_string()
        } else {
            format!("class-{id}")
        };
        let entity = if word & PER_PEER != 0 {
            format!("{class}/{shown}")
        } else {
            class.clone()
        };
        Assignment { class, entity }
    }
}

impl fmt::Display for ClassMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for r in &self.rules {
            write!(f, "{}/{} {}", r.net, r.prefix_len, r.class)?;
            if r.per_peer {
                f.write_str(" per-peer")?;
            }
            f.write_str("\n")?;
        }
        Ok(())
    }
}

/// One line of a class map: a rule, nothing (blank, a comment), or why
/// not. `seen` and `rules` are the rules of the lines before (duplicates).
fn parse_line(
    raw: &str,
    seen: &HashMap<(IpAddr, u8), usize>,
    rules: &[ClassRule],
) -> Result<Option<ClassRule>, String> {
    let line = raw.split('#').next().unwrap_or("").trim();
    if line.is_empty() {
        return Ok(None);
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.len() < 2 || words.len() > 3 {
        return Err(format!(
            "expected \"PREFIX CLASS [per-peer]\", found {} word(s) in {line:?}",
            words.len()
        ));
    }
    let (net, prefix_len) = parse_cidr(words[0])?;
    let class = words[1].to_string();
    if let Some(reason) = reserved_name(&class) {
        return Err(reason);
    }
    let per_peer = match words.get(2) {
        None => false,
        Some(&"per-peer") => true,
        Some(other) => {
            return Err(format!(
                "unknown flag {other:?}: the only flag is \"per-peer\""
            ))
        }
    };
    if let Some(&dup) = seen.get(&(net, prefix_len)) {
        return Err(format!(
            "prefix {} is already mapped to class {:?}",
            words[0], rules[dup].class
        ));
    }
    Ok(Some(ClassRule {
        net,
        prefix_len,
        class,
        per_peer,
    }))
}

fn parse_cidr(s: &str) -> Result<(IpAddr, u8), String> {
    let (addr, len) = s
        .split_once('/')
        .ok_or_else(|| format!("prefix {s:?} has no \"/length\" (write 10.0.0.0/8 or fd00::/8)"))?;
    let net: IpAddr = addr
        .parse()
        .map_err(|_| format!("{addr:?} is not an IPv4 or IPv6 address"))?;
    let max = if net.is_ipv4() { 32 } else { 128 };
    let prefix_len: u8 = len
        .parse()
        .ok()
        .filter(|l| *l <= max)
        .ok_or_else(|| format!("prefix length {len:?} must be a number from 0 to {max}"))?;
    if !prefix_matches(net, prefix_len, net) || masked(net, prefix_len) != net {
        return Err(format!(
            "{s} has host bits set: did you mean {}/{prefix_len}?",
            masked(net, prefix_len)
        ));
    }
    Ok((net, prefix_len))
}

fn masked(ip: IpAddr, len: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            IpAddr::V4((u32::from(a) & mask).into())
        }
        IpAddr::V6(a) => {
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            IpAddr::V6((u128::from(a) & mask).into())
        }
    }
}

fn prefix_matches(net: IpAddr, len: u8, ip: IpAddr) -> bool {
    // An IPv4-mapped IPv6 peer (::ffff:a.b.c.d) matches IPv4 prefixes.
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    };
    match (net, ip) {
        (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => masked(ip, len) == net,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Endpoint;

    fn peer(s: &str) -> PeerKey {
        let ip: IpAddr = s.parse().unwrap();
        PeerKey {
            netns: 1,
            addr: Endpoint::from_socket_addr(std::net::SocketAddr::new(ip, 0)),
        }
    }

    const MAP: &str = "# movers share one class\n10.1.0.0/24 movers\n0.0.0.0/0 customers per-peer\nfd00:1::/64 lab\n10.1.0.128/25 special # longer wins\n";

    #[test]
    fn longest_prefix_wins_and_per_peer_splits() {
        let m = ClassMap::parse(MAP, "test.map").unwrap();
        assert_eq!(m.classify(&peer("10.1.0.5")).entity, "movers");
        assert_eq!(m.classify(&peer("10.1.0.200")).entity, "special");
        let c = m.classify(&peer("192.168.3.4"));
        assert_eq!(c.class, "customers");
        assert_eq!(c.entity, "customers/192.168.3.4");
        assert_eq!(m.classify(&peer("fd00:1::9")).entity, "lab");
        // IPv6 outside every prefix: its own class.
        assert_eq!(m.classify(&peer("fd00:2::9")).entity, "fd00:2::9");
        // IPv4-mapped IPv6 matches the IPv4 rule.
        assert_eq!(m.classify(&peer("::ffff:10.1.0.7")).entity, "movers");
    }

    #[test]
    fn listener_is_never_mixed_with_real_peers() {
        let m = ClassMap::parse("0.0.0.0/0 all\n::/0 all\n", "x").unwrap();
        let l = PeerKey {
            netns: 1,
            addr: Endpoint::None,
        };
        assert_eq!(m.classify(&l).entity, "(listener)");
    }

    #[test]
    fn errors_name_file_line_and_reason() {
        let cases = [
            ("10.0.0.0/33 a\n", "prefix length"),
            ("\n\n10.0.0/8 a\n", "not an IPv4 or IPv6 address"),
            ("10.0.0.1/8 a\n", "host bits set"),
            ("10.0.0.0 a\n", "no \"/length\""),
            ("10.0.0.0/8\n", "expected"),
            ("10.0.0.0/8 a perpeer\n", "unknown flag"),
            ("10.0.0.0/8 a\n10.0.0.0/8 b\n", "already mapped"),
            ("10.0.0.0/8 a/b\n", "may not contain"),
            ("10.1.0.0/24 10.2.0.1\n", "is an address"),
            ("fd00::/8 fd00::1\n", "is an address"),
            ("10.0.0.0/8 other\n", "reserved"),
            ("10.0.0.0/8 (listener)\n", "pseudo-entities"),
            ("10.0.0.0/8 (other)\n", "pseudo-entities"),
            ("10.0.0.0/8 (none)\n", "pseudo-entities"),
            ("10.0.0.0/8 anon-0123456789ab\n", "pseudonym"),
            ("10.0.0.0/8 class-7\n", "kernel's class words"),
            ("10.0.0.0/8 anonymous\n", "kernel's class words"),
            ("10.0.0.0/8 lan\u{1b}[2J\n", "contains a control character"),
        ];
        for (text, want) in cases {
            let e = ClassMap::parse(text, "bad.map").unwrap_err();
            assert!(e.to_string().contains(want), "{text:?}: {e}");
            assert!(!e.to_string().contains('\u{1b}'), "{e:?}");
            assert!(e.to_string().starts_with("bad.map:"), "{e}");
        }
        let e = ClassMap::parse("\n\n10.0.0/8 a\n", "bad.map").unwrap_err();
        assert_eq!(e.line, 3);
    }

    #[test]
    fn every_bad_line_is_reported_in_one_line_up_to_a_bound() {
        let text = "10.0.0.0/8 a\n10.0.0.0/33 b\n# fine\n10.1.0.0/16 c extra\n11.0.0.0/8 d\n\
                    10.0.0.0/8 e\n";
        let e = ClassMap::parse(text, "m").unwrap_err().to_string();
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(e.starts_with("m:2: "), "{e}");
        assert!(e.contains("; m:4: unknown flag \"extra\""), "{e}");
        assert!(
            e.contains("; m:6: prefix 10.0.0.0/8 is already mapped to class \"a\""),
            "{e}"
        );
        assert!(
            !e.contains("m:1:") && !e.contains("m:5:") && !e.contains("more"),
            "{e}"
        );

        let many: String = (0..25).map(|i| format!("10.{i}.0.0/33 x\n")).collect();
        let e = ClassMap::parse(&many, "m").unwrap_err();
        assert_eq!(1 + e.more.len(), MAX_BAD_LINES);
        assert!(e.to_string().ends_with("; and 15 more bad lines"), "{e}");
    }

    #[test]
    fn kernel_class_word() {
        let p = "10.0.0.1";
        assert_eq!(ClassMap::kernel_class(0, p).entity, "anonymous");
        assert_eq!(ClassMap::kernel_class(3, p).entity, "class-3");
        assert_eq!(
            ClassMap::kernel_class(3 | 1 << 31, p).entity,
            "class-3/10.0.0.1"
        );
    }

    /// `n` distinct /32 rules, one a line.
    fn big_map(n: u32) -> String {
        (0..n)
            .map(|i| {
                format!(
                    "{}/32 c{}\n",
                    std::net::Ipv4Addr::from(0x0a00_0000 + i),
                    i % 7
                )
            })
            .collect()
    }

    /// This thread's CPU time: what other processes on a busy host do
    /// does not count in it, as it would in wall-clock time.
    fn thread_cpu() -> std::time::Duration {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        std::time::Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
    }

    /// Parsing and looking up every peer of an n-line map, best of three,
    /// in this thread's CPU time.
    fn parse_and_lookup(n: u32) -> std::time::Duration {
        let text = big_map(n);
        (0..3)
            .map(|_| {
                let t = thread_cpu();
                let m = ClassMap::parse(&text, "big.map").unwrap();
                for i in (0..n).step_by(10) {
                    let ip = std::net::Ipv4Addr::from(0x0a00_0000 + i).to_string();
                    assert_eq!(m.classify(&peer(&ip)).class, format!("c{}", i % 7));
                }
                thread_cpu() - t
            })
            .min()
            .unwrap()
    }

    #[test]
    fn parsing_and_lookup_grow_near_linearly() {
        let small = parse_and_lookup(10_000);
        let large = parse_and_lookup(100_000);
        // Ten times the lines: linear is 10x; quadratic was about 100x.
        assert!(
            large < small * 30,
            "100,000 lines took {large:?}, 10,000 took {small:?}"
        );
    }

    #[test]
    fn equal_maps_compare_equal_whatever_the_order() {
        let a = ClassMap::parse("10.0.0.0/8 a\n10.1.0.0/16 b\n", "x").unwrap();
        let b = ClassMap::parse("10.1.0.0/16 b\n10.0.0.0/8 a\n", "x").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.classify(&peer("10.1.2.3")).class, "b");
        assert_eq!(a.classify(&peer("10.2.2.3")).class, "a");
    }
}
