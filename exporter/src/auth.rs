//! HTTP basic authentication, as Prometheus exporter-toolkit's web config
//! does it: users with bcrypt hashes (`$2y$...`, e.g. from `htpasswd -nB`)
//! or, for setups without bcrypt tooling, `sha256:<hex>` of the password.
//!
//! bcrypt is deliberately slow, so a successful check is cached (keyed by a
//! SHA-256 of the credentials, never the password itself, and the source
//! address that presented them) for a bounded number of credentials. Keyed
//! by source too: a guesser whose budget is spent gets 429 for each wrong
//! guess, and must get it for the right one as well (a 200 from another
//! client's login would tell it the password); a client that logged in
//! from an address keeps passing from it whatever the failures there (a
//! flood from behind the same NAT does not lock out its scrapes). Every other check costs the same whoever the
//! user (see [`Auth::verify`]), runs off the async workers a few at a
//! time, and only within the failure budgets of [`crate::auth_limit`].
//! Checks refused for a budget are logged, a line a minute at most for
//! each budget (an attacker decides how many there are).

use std::collections::{BTreeMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use base64::Engine as _;
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::auth_limit::{FailureLimiter, FailureLimits, Limited, Spent};
use crate::json_error::json_error;
use crate::log::log;
use crate::ratelog::RateLog;

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

/// What a password check costs, in bcrypt rounds (2^cost), sha256 being
/// nothing next to it.
fn work(h: Option<&PasswordHash>) -> u64 {
    match h {
        Some(PasswordHash::Bcrypt(s)) => 1u64 << bcrypt_cost(s),
        _ => 0,
    }
}

fn bcrypt_cost(hash: &str) -> u32 {
    // Validated by `PasswordHash::parse`: "$2y$NN$...".
    hash.get(4..6).and_then(|c| c.parse().ok()).unwrap_or(4)
}

/// A bcrypt hash of nothing in particular at `cost`, verified to spend
/// the time a real one takes (bcrypt's cost is in the hash text).
fn dummy_bcrypt(cost: u32) -> String {
    format!("$2b${cost:02}$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy")
}

/// bcrypt costs whose rounds add up to `rounds` (a power-of-two sum).
fn padding(mut rounds: u64) -> Vec<u32> {
    let mut costs = Vec::new();
    for cost in (4..=31).rev() {
        while rounds >= 1u64 << cost {
            rounds -= 1u64 << cost;
            costs.push(cost);
        }
    }
    costs
}

/// The users who may log in (replaced when `--web.config.file` changes).
struct Users {
    hashes: BTreeMap<String, PasswordHash>,
    /// The rounds of the dearest configured user: every check costs that.
    rounds: u64,
}

impl Users {
    fn new(hashes: BTreeMap<String, PasswordHash>) -> Arc<Users> {
        let rounds = hashes.values().map(|h| work(Some(h))).max().unwrap_or(0);
        Arc::new(Users { hashes, rounds })
    }
}

pub struct Auth {
    users: Mutex<Arc<Users>>,
    cache: Mutex<HashSet<([u8; 32], IpAddr)>>,
    limiter: FailureLimiter,
    /// Checks hashing at once: a flood of them cannot take every core.
    hashing: Semaphore,
    /// Refusals for a source's budget, and for the common one.
    source_log: RateLog,
    total_log: RateLog,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("users", &self.users().hashes.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum AuthError {
    Missing,
    Malformed,
    Denied,
    /// Too many failed checks: which budget is spent, and how long until
    /// a try.
    Limited(Limited),
}

impl Auth {
    pub fn new(users: BTreeMap<String, PasswordHash>) -> Auth {
        Auth::with_limits(users, FailureLimits::default())
    }

    pub fn with_limits(users: BTreeMap<String, PasswordHash>, limits: FailureLimits) -> Auth {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Auth {
            users: Mutex::new(Users::new(users)),
            cache: Mutex::new(HashSet::new()),
            limiter: FailureLimiter::new(limits),
            hashing: Semaphore::new((cores / 2).max(1)),
            source_log: RateLog::new(Duration::from_secs(60)),
            total_log: RateLog::new(Duration::from_secs(60)),
        }
    }

    pub fn enabled(&self) -> bool {
        !self.users().hashes.is_empty()
    }

    fn users(&self) -> Arc<Users> {
        self.users.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Log in with these users from now on (the failure budgets go on);
    /// logins already checked are checked again.
    pub fn set_users(&self, users: BTreeMap<String, PasswordHash>) {
        *self.users.lock().unwrap_or_else(|p| p.into_inner()) = Users::new(users);
        if let Ok(mut c) = self.cache.lock() {
            c.clear();
        }
    }

    /// Check an `Authorization` header value from `source`: credentials
    /// already seen to be good pass at once; others are hashed off the
    /// async workers, a few at a time, within the failure budgets.
    pub async fn check(
        self: &Arc<Self>,
        header: Option<&str>,
        source: IpAddr,
    ) -> Result<(), AuthError> {
        if !self.enabled() {
            return Ok(());
        }
        let (credentials, user, pass) = parse_basic(header)?;
        let key = (credentials, crate::auth_limit::source_of(source));
        if self.cache.lock().map(|c| c.contains(&key)).unwrap_or(false) {
            return Ok(());
        }
        let now = Instant::now();
        let permit = self.limiter.try_check(source, now).map_err(|l| {
            if let Some(line) = self.limited_line(l, now) {
                log(line);
            }
            AuthError::Limited(l)
        })?;
        let ok = {
            let _hashing = self.hashing.acquire().await;
            let me = self.clone();
            tokio::task::spawn_blocking(move || me.verify(&user, &pass))
                .await
                .unwrap_or(false)
        };
        if !ok {
            return Err(AuthError::Denied);
        }
        self.limiter.succeeded(permit);
        if let Ok(mut c) = self.cache.lock() {
            if c.len() >= CACHE_MAX {
                c.clear();
            }
            c.insert(key);
        }
        Ok(())
    }

    /// The log line of a refusal, if one is due.
    fn limited_line(&self, l: Limited, now: Instant) -> Option<String> {
        match l.by {
            Spent::Source(n) => self.source_log.line(now, || {
                format!(
                    "login checks refused (429): an address failed more than \
auth_failures_per_source ({n} a minute)"
                )
            }),
            Spent::Total(n) => self.total_log.line(now, || {
                format!(
                    "login checks refused (429): addresses failed more than auth_failures_total \
({n} a minute) together; those that failed lately wait, others are still checked"
                )
            }),
        }
    }

    /// The password check, blocking. Its cost does not depend on who
    /// asks: a user whose hash is cheaper than the dearest configured one
    /// (sha256, a lower bcrypt cost) and an unknown user are made up to
    /// it with bcrypt rounds on a dummy hash, so the time does not tell
    /// which users exist or how they are stored.
    pub fn verify(&self, user: &str, pass: &str) -> bool {
        let users = self.users();
        let h = users.hashes.get(user);
        let ok = h.is_some_and(|h| h.verify(pass));
        for cost in padding(users.rounds.saturating_sub(work(h))) {
            let _ = bcrypt::verify(pass, &dummy_bcrypt(cost));
        }
        ok
    }
}

/// The credentials of a Basic `Authorization` header: the cache key (a
/// SHA-256 of "user:password"), the user and the password.
fn parse_basic(header: Option<&str>) -> Result<([u8; 32], String, String), AuthError> {
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
    Ok((key, user.to_string(), pass.to_string()))
}

/// The router's authentication layer: 401 (with a challenge) for missing
/// or wrong credentials, 429 (with Retry-After) once a failure budget is
/// spent.
pub async fn layer(State(auth): State<Arc<Auth>>, req: Request, next: Next) -> Response {
    if !auth.enabled() {
        return next.run(req).await;
    }
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    // Set by the listener for every request.
    let source = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |ConnectInfo(a)| a.ip());
    let msg = match auth.check(header.as_deref(), source).await {
        Ok(()) => return next.run(req).await,
        Err(AuthError::Limited(l)) => {
            let secs = l.wait.as_secs().max(1);
            let mut r = json_error(StatusCode::TOO_MANY_REQUESTS, limited_message(l));
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
            return r;
        }
        Err(AuthError::Missing) => "authentication required",
        Err(AuthError::Malformed) => "malformed Authorization header: expected Basic credentials",
        Err(AuthError::Denied) => "invalid user name or password",
    };
    let mut r = json_error(StatusCode::UNAUTHORIZED, msg);
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"nfsdtopd\""),
    );
    r
}

/// Why a check was refused, and when to try again.
fn limited_message(l: Limited) -> String {
    let secs = l.wait.as_secs().max(1);
    match l.by {
        Spent::Source(n) => format!(
            "too many failed logins from this address (at most {n} a minute): \
try again in {secs} s"
        ),
        Spent::Total(n) => format!(
            "too many failed logins from many addresses (more than {n} a minute \
together), this one among them: an address that failed lately waits; try again in {secs} s"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user: &str, pass: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"))
        )
    }

    fn sha(pass: &str) -> String {
        format!(
            "sha256:{}",
            Sha256::digest(pass.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        )
    }

    const HOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    #[tokio::test]
    async fn bcrypt_and_sha256_users() {
        let bc = bcrypt::hash("secret", 4).unwrap();
        let mut users = BTreeMap::new();
        users.insert("alice".into(), PasswordHash::parse(&bc).unwrap());
        users.insert("bob".into(), PasswordHash::parse(&sha("hunter2")).unwrap());
        let a = Arc::new(Auth::new(users));
        assert_eq!(a.check(None, HOST).await, Err(AuthError::Missing));
        assert_eq!(
            a.check(Some("Bearer x"), HOST).await,
            Err(AuthError::Malformed)
        );
        assert_eq!(
            a.check(Some("Basic !!!"), HOST).await,
            Err(AuthError::Malformed)
        );
        assert_eq!(a.check(Some(&basic("alice", "secret")), HOST).await, Ok(()));
        assert_eq!(
            a.check(Some(&basic("alice", "secret")), HOST).await,
            Ok(()),
            "cached"
        );
        assert_eq!(
            a.check(Some(&basic("alice", "wrong")), HOST).await,
            Err(AuthError::Denied)
        );
        assert_eq!(a.check(Some(&basic("bob", "hunter2")), HOST).await, Ok(()));
        assert_eq!(
            a.check(Some(&basic("bob", "hunter3")), HOST).await,
            Err(AuthError::Denied)
        );
        assert_eq!(
            a.check(Some(&basic("carol", "x")), HOST).await,
            Err(AuthError::Denied)
        );
    }

    #[tokio::test]
    async fn failures_beyond_the_budget_get_limited_but_good_credentials_pass() {
        let mut users = BTreeMap::new();
        users.insert("bob".into(), PasswordHash::parse(&sha("hunter2")).unwrap());
        let limits = FailureLimits {
            per_source: 3,
            total: 100,
        };
        let a = Arc::new(Auth::with_limits(users, limits));
        assert_eq!(a.check(Some(&basic("bob", "hunter2")), HOST).await, Ok(()));
        for _ in 0..3 {
            assert_eq!(
                a.check(Some(&basic("bob", "nope")), HOST).await,
                Err(AuthError::Denied)
            );
        }
        assert!(matches!(
            a.check(Some(&basic("bob", "nope")), HOST).await,
            Err(AuthError::Limited(_))
        ));
        // Credentials this source logged in with are not checked again, so
        // not limited.
        assert_eq!(a.check(Some(&basic("bob", "hunter2")), HOST).await, Ok(()));
        let other = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
        assert_eq!(
            a.check(Some(&basic("bob", "nope")), other).await,
            Err(AuthError::Denied),
            "another source has its own budget"
        );
    }

    #[tokio::test]
    async fn other_addresses_failures_do_not_lock_out_good_credentials() {
        let mut users = BTreeMap::new();
        users.insert(
            "prom".into(),
            PasswordHash::parse(&sha("goodpass")).unwrap(),
        );
        let a = Arc::new(Auth::new(users));
        for n in 2..=9 {
            let from = IpAddr::V4(Ipv4Addr::new(127, 0, 0, n));
            for _ in 0..12 {
                let r = a.check(Some(&basic("prom", "guess")), from).await;
                assert!(matches!(r, Err(AuthError::Denied | AuthError::Limited(_))));
            }
        }
        // Never failed: checked, and let in.
        assert_eq!(
            a.check(Some(&basic("prom", "goodpass")), HOST).await,
            Ok(())
        );
        // Other credentials from it are checked too; once one has failed,
        // this address waits with the others, and is told so.
        let other = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));
        assert_eq!(
            a.check(Some(&basic("prom", "typo")), other).await,
            Err(AuthError::Denied)
        );
        let Err(AuthError::Limited(l)) = a.check(Some(&basic("prom", "typo")), other).await else {
            panic!("not limited");
        };
        let msg = limited_message(l);
        assert!(
            msg.contains("many addresses") && msg.contains("this one among them"),
            "{msg}"
        );
        // Logged, once a minute at most.
        let now = Instant::now();
        let line = a.limited_line(l, now + Duration::from_secs(61)).unwrap();
        assert!(line.contains("auth_failures_total (60 a minute)"), "{line}");
        assert!(a.limited_line(l, now + Duration::from_secs(62)).is_none());
    }

    /// Credentials another client logged in with do not pass from a
    /// source the budgets refuse: its wrong guesses get 429 without a
    /// check, and so does its right one, which would otherwise tell it the
    /// password at once.
    #[tokio::test]
    async fn a_refused_source_is_refused_with_good_credentials_too() {
        let mut users = BTreeMap::new();
        users.insert(
            "prom".into(),
            PasswordHash::parse(&sha("goodpass")).unwrap(),
        );
        let a = Arc::new(Auth::new(users));
        let good = basic("prom", "goodpass");
        assert_eq!(a.check(Some(&good), HOST).await, Ok(()), "now cached");
        let guesser = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 77));
        let mut denied = 0;
        for n in 0..50 {
            match a
                .check(Some(&basic("prom", &format!("guess{n}"))), guesser)
                .await
            {
                Err(AuthError::Denied) => denied += 1,
                Err(AuthError::Limited(_)) => {}
                r => panic!("guess {n}: {r:?}"),
            }
        }
        assert_eq!(denied, 10, "its own budget of failed checks");
        assert!(matches!(
            a.check(Some(&good), guesser).await,
            Err(AuthError::Limited(_))
        ));
        // The client that logged in is not held up by it.
        assert_eq!(a.check(Some(&good), HOST).await, Ok(()));
    }

    #[test]
    fn every_check_costs_the_rounds_of_the_dearest_user() {
        assert_eq!(padding(0), Vec::<u32>::new());
        assert_eq!(padding(1 << 10), vec![10]);
        assert_eq!(padding((1 << 12) - (1 << 10)), vec![11, 10]);
        let mut users = BTreeMap::new();
        let bc5 = bcrypt::hash("a", 5).unwrap();
        let bc7 = bcrypt::hash("b", 7).unwrap();
        users.insert("five".into(), PasswordHash::parse(&bc5).unwrap());
        users.insert("seven".into(), PasswordHash::parse(&bc7).unwrap());
        users.insert("sha".into(), PasswordHash::parse(&sha("c")).unwrap());
        let a = Auth::new(users.clone());
        assert_eq!(a.users().rounds, 1 << 7);
        for (user, own) in [
            ("five", 1 << 5),
            ("seven", 1 << 7),
            ("sha", 0),
            ("nobody", 0),
        ] {
            let h = users.get(user);
            assert_eq!(work(h), own);
            let pad: u64 = padding(a.users().rounds - work(h))
                .iter()
                .map(|c| 1u64 << c)
                .sum();
            assert_eq!(own + pad, 1 << 7, "{user}");
        }
        assert!(a.verify("five", "a") && a.verify("seven", "b") && a.verify("sha", "c"));
        assert!(!a.verify("nobody", "a"));
        // The dummy hash is one bcrypt accepts at any cost.
        for cost in 4..=8 {
            assert_eq!(
                bcrypt::verify("x", &dummy_bcrypt(cost)).map_err(|e| e.to_string()),
                Ok(false)
            );
        }
    }

    #[test]
    fn bad_hashes_are_rejected_with_reasons() {
        assert!(PasswordHash::parse("plain").is_err());
        assert!(PasswordHash::parse("sha256:abc").is_err());
        assert!(PasswordHash::parse("$2y$10$short").is_err());
    }
}
