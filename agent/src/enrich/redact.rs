//! Client-address redaction for servers whose client list is sensitive.
//!
//! A peer is shown as `anon-` and 12 hex digits of a keyed SipHash-2-4 of
//! its address. Keyed, because an unkeyed hash of the IPv4 space can be
//! reversed by trying all 2^32 addresses. The key is random per process
//! unless given, so pseudonyms are stable within one run (and across runs
//! of a daemon given the same key) but unlinkable otherwise.

use std::net::IpAddr;

use crate::model::{ClientName, Endpoint, PeerKey};

#[derive(Clone, Debug)]
pub struct Redactor {
    k0: u64,
    k1: u64,
}

impl Redactor {
    pub fn with_key(key: &str) -> Redactor {
        // Derive the two SipHash keys from the user's key text.
        let a = siphash(0x6e66_7364_746f_7021, 0x7265_6461_6374_2121, key.as_bytes());
        let b = siphash(a, 0x0123_4567_89ab_cdef, key.as_bytes());
        Redactor { k0: a, k1: b }
    }

    pub fn random() -> Redactor {
        use std::hash::{BuildHasher, Hasher};
        let rs = std::collections::hash_map::RandomState::new();
        let mut h = rs.build_hasher();
        h.write_u64(std::process::id() as u64);
        let a = h.finish();
        let mut h = rs.build_hasher();
        h.write_u64(a);
        Redactor {
            k0: a,
            k1: h.finish(),
        }
    }

    pub fn pseudonym(&self, ip: IpAddr) -> String {
        let bytes: Vec<u8> = match ip {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        };
        format!("anon-{:012x}", siphash(self.k0, self.k1, &bytes) >> 16)
    }

    /// How a peer is shown: its pseudonym, or `(listener)`.
    pub fn peer_name(&self, peer: &PeerKey) -> String {
        match peer.addr.ip() {
            Some(ip) => self.pseudonym(ip),
            None => peer.to_string(),
        }
    }

    pub fn endpoint_name(&self, e: &Endpoint) -> String {
        match e.ip() {
            Some(ip) => format!("{}:{}", self.pseudonym(ip), e.port()),
            None => e.to_string(),
        }
    }

    /// An NFSv4 client's name as shown: `anon-` and 12 hex digits of the
    /// keyed hash of the name (apart from any address's: the input is
    /// prefixed), so clients behind one address stay told apart. The
    /// implementation is free text the client chose: dropped.
    pub fn client_name(&self, c: &ClientName) -> ClientName {
        let mut bytes = b"nfs-client-name\0".to_vec();
        bytes.extend_from_slice(c.name.as_bytes());
        ClientName {
            name: format!("anon-{:012x}", siphash(self.k0, self.k1, &bytes) >> 16),
            minor_version: c.minor_version,
            implementation: None,
        }
    }

    /// A peer's host name (`--resolve`) as shown: `anon-` and 12 hex
    /// digits of the keyed hash of the name, apart from the addresses'
    /// and the client names' (the input is prefixed).
    pub fn hostname(&self, name: &str) -> String {
        let mut bytes = b"hostname\0".to_vec();
        bytes.extend_from_slice(name.as_bytes());
        format!("anon-{:012x}", siphash(self.k0, self.k1, &bytes) >> 16)
    }

    /// A stand-in address for recordings: fd72:6564:6163:7421::/64 plus 64
    /// bits of the keyed hash, port kept (it tells transports apart).
    pub fn endpoint(&self, e: &Endpoint) -> Endpoint {
        let Some(ip) = e.ip() else {
            return Endpoint::None;
        };
        let bytes: Vec<u8> = match ip {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        };
        let h = siphash(self.k0, self.k1, &bytes);
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&[0xfd, 0x72, 0x65, 0x64, 0x61, 0x63, 0x74, 0x21]);
        out[8..].copy_from_slice(&h.to_be_bytes());
        Endpoint::V6 {
            ip: out,
            port: e.port(),
        }
    }
}

/// SipHash-2-4 (Aumasson & Bernstein), 64-bit output.
fn siphash(k0: u64, k1: u64, data: &[u8]) -> u64 {
    let mut v0 = k0 ^ 0x736f_6d65_7073_6575;
    let mut v1 = k1 ^ 0x646f_7261_6e64_6f6d;
    let mut v2 = k0 ^ 0x6c79_6765_6e65_7261;
    let mut v3 = k1 ^ 0x7465_6462_7974_6573;
    let round = |v0: &mut u64, v1: &mut u64, v2: &mut u64, v3: &mut u64| {
        *v0 = v0.wrapping_add(*v1);
        *v1 = v1.rotate_left(13) ^ *v0;
        *v0 = v0.rotate_left(32);
        *v2 = v2.wrapping_add(*v3);
        *v3 = v3.rotate_left(16) ^ *v2;
        *v0 = v0.wrapping_add(*v3);
        *v3 = v3.rotate_left(21) ^ *v0;
        *v2 = v2.wrapping_add(*v1);
        *v1 = v1.rotate_left(17) ^ *v2;
        *v2 = v2.rotate_left(32);
    };
    let chunks = data.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        let m = u64::from_le_bytes(c.try_into().expect("8-byte chunk"));
        v3 ^= m;
        round(&mut v0, &mut v1, &mut v2, &mut v3);
        round(&mut v0, &mut v1, &mut v2, &mut v3);
        v0 ^= m;
    }
    let mut last = (data.len() as u64 & 0xff) << 56;
    for (i, b) in tail.iter().enumerate() {
        last |= (*b as u64) << (8 * i);
    }
    v3 ^= last;
    round(&mut v0, &mut v1, &mut v2, &mut v3);
    round(&mut v0, &mut v1, &mut v2, &mut v3);
    v0 ^= last;
    v2 ^= 0xff;
    for _ in 0..4 {
        round(&mut v0, &mut v1, &mut v2, &mut v3);
    }
    v0 ^ v1 ^ v2 ^ v3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siphash_reference_vector() {
        // The SipHash paper's test: key 00..0f, message 00..0e.
        let k0 = u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]);
        let k1 = u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15]);
        let msg: Vec<u8> = (0..15).collect();
        assert_eq!(siphash(k0, k1, &msg), 0xa129_ca61_49be_45e5);
    }

    #[test]
    fn pseudonyms_are_stable_per_key_and_hide_the_address() {
        let a = Redactor::with_key("k");
        let ip: IpAddr = "10.0.0.2".parse().unwrap();
        assert_eq!(a.pseudonym(ip), Redactor::with_key("k").pseudonym(ip));
        assert_ne!(a.pseudonym(ip), Redactor::with_key("other").pseudonym(ip));
        assert!(!a.pseudonym(ip).contains("10.0.0.2"));
        let e = a.endpoint(&Endpoint::from_socket_addr("10.0.0.2:700".parse().unwrap()));
        assert!(e.to_string().starts_with("[fd72:6564:6163:7421:"), "{e}");
        assert!(e.to_string().ends_with("]:700"));
    }

    #[test]
    fn client_names_become_pseudonyms_without_the_free_text() {
        let a = Redactor::with_key("k");
        let c = ClientName {
            name: "Linux NFSv4.2 secret-host".into(),
            minor_version: Some(2),
            implementation: Some("Linux 6.12.0 secret-host".into()),
        };
        let r = a.client_name(&c);
        assert!(
            r.name.starts_with("anon-") && !r.name.contains("secret"),
            "{r:?}"
        );
        assert_eq!(r.minor_version, Some(2));
        assert_eq!(r.implementation, None);
        assert_eq!(r, Redactor::with_key("k").client_name(&c));
        assert_ne!(r, Redactor::with_key("other").client_name(&c));
    }

    #[test]
    fn host_names_become_pseudonyms() {
        let a = Redactor::with_key("k");
        let h = a.hostname("secret-host.example.org");
        assert!(h.starts_with("anon-") && !h.contains("secret"), "{h}");
        assert_eq!(
            h,
            Redactor::with_key("k").hostname("secret-host.example.org")
        );
        assert_ne!(h, a.hostname("other.example.org"));
        assert_ne!(
            h,
            Redactor::with_key("other").hostname("secret-host.example.org")
        );
        // Not the pseudonym of a client of that name.
        let c = ClientName {
            name: "secret-host.example.org".into(),
            ..Default::default()
        };
        assert_ne!(h, a.client_name(&c).name);
    }
}
