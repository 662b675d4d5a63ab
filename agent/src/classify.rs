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
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{origin}:{line}: {reason}")]
pub struct ClassMapError {
    pub origin: String,
    pub line: usize,
    pub reason: String,
}

impl ClassMap {
    pub fn load(path: &Path) -> anyhow::Result<ClassMap> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            anyhow::anyhow!(
                "cannot read class map {}: {e} (pass a readable file to --class-map)",
                path.display()
            )
        })?;
        Ok(ClassMap::parse(&text, &path.display().to_string())?)
    }

    pub fn parse(text: &str, origin: &str) -> Result<ClassMap, ClassMapError> {
        let mut rules = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let err = |reason: String| ClassMapError {
                origin: origin.to_string(),
                line: i + 1,
                reason,
            };
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.len() < 2 || words.len() > 3 {
                return Err(err(format!(
                    "expected \"PREFIX CLASS [per-peer]\", found {} word(s) in {line:?}",
                    words.len()
                )));
            }
            let (net, prefix_len) = parse_cidr(words[0]).map_err(err)?;
            let class = words[1].to_string();
            if class.contains('/') {
                return Err(err(format!(
                    "class name {class:?} may not contain '/' (it separates class and address)"
                )));
            }
            let per_peer = match words.get(2) {
                None => false,
                Some(&"per-peer") => true,
                Some(other) => {
                    return Err(err(format!(
                        "unknown flag {other:?}: the only flag is \"per-peer\""
                    )))
                }
            };
            if let Some(dup) = rules
                .iter()
                .find(|r: &&ClassRule| r.net == net && r.prefix_len == prefix_len)
            {
                return Err(err(format!(
                    "prefix {} is already mapped to class {:?}",
                    words[0], dup.class
                )));
            }
            rules.push(ClassRule {
                net,
                prefix_len,
                class,
                per_peer,
            });
        }
        rules.sort_by_key(|r| std::cmp::Reverse(r.prefix_len));
        Ok(ClassMap { rules })
    }

    pub fn from_rules(mut rules: Vec<ClassRule>) -> ClassMap {
        rules.sort_by_key(|r| std::cmp::Reverse(r.prefix_len));
        ClassMap { rules }
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
        for rule in &self.rules {
            if prefix_matches(rule.net, rule.prefix_len, ip) {
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
        ];
        for (text, want) in cases {
            let e = ClassMap::parse(text, "bad.map").unwrap_err();
            assert!(e.to_string().contains(want), "{text:?}: {e}");
            assert!(e.to_string().starts_with("bad.map:"), "{e}");
        }
        let e = ClassMap::parse("\n\n10.0.0/8 a\n", "bad.map").unwrap_err();
        assert_eq!(e.line, 3);
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
}
