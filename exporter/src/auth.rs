//! HTTP basic authentication, as Prometheus exporter-toolkit's web config
//! does it: users with bcrypt hashes (`$2y$...`, e.g. from `htpasswd -nB`)
//! or, for setups without bcrypt tooling, `sha256:<hex>` of the password.
//!
//! bcrypt is deliberately slow, so a successful check is cached (keyed by a
//! SHA-256 of the credentials, never the password itself) for a bounded
//! number of credentials.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

use base64::Engine as _;
use sha2::{Digest, Sha256};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PasswordHash {
    Bcrypt(String),
    Sha256([u8; 32]),
}

impl PasswordHash {
    pub fn parse(s: &str) -> Result<PasswordHash, String> {
        if let Some(hex) = s.strip_prefix("sha256:") {
            let hex = hex.trim();
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err("a sha256 hash is \"sha256:\" followed by 64 hex digits".into());
            }
            let mut out = [0u8; 32];
            for (i, o) in out.iter_mut().enumerate() {
                *o = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
                    .map_err(|e| format!("bad hex: {e}"))?;
            }
            return Ok(PasswordHash::Sha256(out));
        }
        if ["$2a$", "$2b$", "$2x$", "$2y$"]
            .iter()
            .any(|p| s.starts_with(p))
        {
            if s.len() != 60 {
                return Err(format!(
                    "a bcrypt hash is 60 characters long, this one is {}",
                    s.len()
                ));
            }
            // Let the bcrypt crate validate cost and encoding now rather
            // than fail every request later.
            if let Err(e) = bcrypt::verify("", s) {
                return Err(format!("invalid bcrypt hash: {e}"));
            }
            return Ok(PasswordHash::Bcrypt(s.to_string()));
        }
        Err("expected a bcrypt hash ($2y$...) or \"sha256:<64 hex digits>\"".into())
    }

    fn verify(&self, password: &str) -> bool {
        match self {
            PasswordHash::Bcrypt(h) => bcrypt::verify(password, h).unwrap_or(false),
            PasswordHash::Sha256(want) => {
                let got: [u8; 32] = Sha256::digest(password.as_bytes()).into();
                constant_time_eq(&got, want)
            }
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

const CACHE_MAX: usize = 256;

#[derive(Debug, Default)]
pub struct Auth {
    users: BTreeMap<String, PasswordHash>,
    cache: Mutex<HashSet<[u8; 32]>>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum AuthError {
    Missing,
    Malformed,
    Denied,
}

impl Auth {
    pub fn new(users: BTreeMap<String, PasswordHash>) -> Auth {
        Auth {
            users,
            cache: Mutex::new(HashSet::new()),
        }
    }

    pub fn enabled(&self) -> bool {
        !self.users.is_empty()
    }

    /// Check an `Authorization` header value. Blocking (bcrypt): call from
    /// a blocking-capable context.
    pub fn check(&self, header: Option<&str>) -> Result<(), AuthError> {
        if !self.enabled() {
            return Ok(());
        }
        let h = header.ok_or(AuthError::Missing)?;
        let (scheme, b64) = h.trim().split_once(' ').ok_or(AuthError::Malformed)?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return Err(AuthError::Malformed);
        }
        let raw = base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .map_err(|_| AuthError::Malformed)?;
        let text = String::from_utf8(raw).map_err(|_| AuthError::Malformed)?;
        let (user, pass) = text.split_once(':').ok_or(AuthError::Malformed)?;
        let key: [u8; 32] = Sha256::digest(text.as_bytes()).into();
        if self.cache.lock().map(|c| c.contains(&key)).unwrap_or(false) {
            return Ok(());
        }
        let ok = match self.users.get(user) {
            Some(h) => h.verify(pass),
            None => {
                // Same work for unknown users, so timing does not tell
                // which users exist.
                let _ = bcrypt::verify(pass, DUMMY_BCRYPT);
                false
            }
        };
        if !ok {
            return Err(AuthError::Denied);
        }
        if let Ok(mut c) = self.cache.lock() {
            if c.len() >= CACHE_MAX {
                c.clear();
            }
            c.insert(key);
        }
        Ok(())
    }
}

/// bcrypt("x", cost 10), only burnt for unknown users.
const DUMMY_BCRYPT: &str = "$2b$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy";

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user: &str, pass: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"))
        )
    }

    #[test]
    fn bcrypt_and_sha256_users() {
        let bc = bcrypt::hash("secret", 4).unwrap();
        let sha = format!(
            "sha256:{}",
            Sha256::digest(b"hunter2")
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
        let mut users = BTreeMap::new();
        users.insert("alice".into(), PasswordHash::parse(&bc).unwrap());
        users.insert("bob".into(), PasswordHash::parse(&sha).unwrap());
        let a = Auth::new(users);
        assert_eq!(a.check(None), Err(AuthError::Missing));
        assert_eq!(a.check(Some("Bearer x")), Err(AuthError::Malformed));
        assert_eq!(a.check(Some("Basic !!!")), Err(AuthError::Malformed));
        assert_eq!(a.check(Some(&basic("alice", "secret"))), Ok(()));
        assert_eq!(a.check(Some(&basic("alice", "secret"))), Ok(()), "cached");
        assert_eq!(
            a.check(Some(&basic("alice", "wrong"))),
            Err(AuthError::Denied)
        );
        assert_eq!(a.check(Some(&basic("bob", "hunter2"))), Ok(()));
        assert_eq!(
            a.check(Some(&basic("bob", "hunter3"))),
            Err(AuthError::Denied)
        );
        assert_eq!(a.check(Some(&basic("carol", "x"))), Err(AuthError::Denied));
    }

    #[test]
    fn bad_hashes_are_rejected_with_reasons() {
        assert!(PasswordHash::parse("plain").is_err());
        assert!(PasswordHash::parse("sha256:abc").is_err());
        assert!(PasswordHash::parse("$2y$10$short").is_err());
    }
}
