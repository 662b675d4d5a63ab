//! Where `--connect` goes and as whom: the URL (http:// or https://, host,
//! port, path prefix) and the basic-auth credentials, taken from the URL's
//! user info, else `$NFSDTOP_AUTH`, else a netrc file. A [`RemoteUrl`]
//! holds no credentials and its `Display` is what status lines, errors and
//! the JSON `source` field show; [`Credentials`] never print their
//! password, not even with `{:?}`.

use std::path::{Path, PathBuf};

use base64::Engine as _;

pub const DEFAULT_PORT: u16 = 9847;
/// `user:password` for the agent's basic auth.
pub const AUTH_ENV: &str = "NFSDTOP_AUTH";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteUrl {
    pub scheme: Scheme,
    pub host: String,
    pub port: u16,
    /// Path prefix before `/api/v1/...`, without a trailing slash.
    pub base: String,
}

impl RemoteUrl {
    /// `host:port` as the Host header and error messages write it.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl std::fmt::Display for RemoteUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        write!(f, "{scheme}://{}{}", self.authority(), self.base)
    }
}

#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub user: String,
    password: String,
    /// Where they came from, for error messages ("the URL", "$NFSDTOP_AUTH", a file).
    pub from: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Credentials({} from {}, password hidden)",
            self.user, self.from
        )
    }
}

impl Credentials {
    pub fn new(user: &str, password: &str, from: &str) -> Credentials {
        Credentials {
            user: user.to_string(),
            password: password.to_string(),
            from: from.to_string(),
        }
    }

    /// The `Authorization` header's value.
    pub fn basic(&self) -> String {
        let raw = format!("{}:{}", self.user, self.password);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
    }
}

/// The URL's `user[:password]`, percent-decoded.
pub type UserInfo = (String, Option<String>);

/// `[http[s]://][user[:password]@]host[:port][/prefix]`; a v6 host in
/// brackets. Errors show the URL without its user info.
pub fn parse_url(s: &str) -> anyhow::Result<(RemoteUrl, Option<UserInfo>)> {
    let s = s.trim();
    let (scheme, rest) = match s.split_once("://") {
        Some((sch, rest)) if sch.eq_ignore_ascii_case("http") => (Scheme::Http, rest),
        Some((sch, rest)) if sch.eq_ignore_ascii_case("https") => (Scheme::Https, rest),
        Some((sch, _)) => anyhow::bail!(
            "--connect: {sch}:// is not supported: use http:// or https:// (e.g. https://server:{DEFAULT_PORT})"
        ),
        None => (Scheme::Http, s),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    // What errors may show: never the user info.
    let shown = format!(
        "{}://{hostport}{path}",
        if scheme == Scheme::Https {
            "https"
        } else {
            "http"
        }
    );
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or_else(|| anyhow::anyhow!("--connect {shown:?}: unclosed [ in the address"))?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => anyhow::bail!("--connect {shown:?}: unexpected {after:?} after the address"),
        };
        (h.to_string(), port)
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (hostport.to_string(), None),
        }
    };
    if host.is_empty() {
        anyhow::bail!("--connect {shown:?}: no host (try http://127.0.0.1:{DEFAULT_PORT})");
    }
    let port =
        match port {
            Some(p) => p.parse::<u16>().ok().filter(|p| *p != 0).ok_or_else(|| {
                anyhow::anyhow!("--connect {shown:?}: {p:?} is not a port number")
            })?,
            None => DEFAULT_PORT,
        };
    let base = path.trim_end_matches('/').to_string();
    let userinfo = match userinfo {
        None => None,
        Some(u) => {
            let (user, pass) = match u.split_once(':') {
                Some((user, pass)) => (user, Some(pass)),
                None => (u, None),
            };
            let decode = |x: &str| {
                percent_encoding::percent_decode_str(x)
                    .decode_utf8()
                    .map(|c| c.into_owned())
                    .map_err(|_| {
                        anyhow::anyhow!(
                            "--connect {shown:?}: the user info is not UTF-8 once decoded"
                        )
                    })
            };
            Some((decode(user)?, pass.map(decode).transpose()?))
        }
    };
    Ok((
        RemoteUrl {
            scheme,
            host,
            port,
            base,
        },
        userinfo,
    ))
}

/// The credentials to send, in this order: the URL's `user:password`,
/// `$NFSDTOP_AUTH` (`user:password`), the netrc file's entry for the host
/// (`--netrc-file`, else `$NETRC`, else `~/.netrc` if it exists). None when
/// nothing names any; an error when the URL names a user whose password is
/// nowhere.
pub fn credentials(
    url: &RemoteUrl,
    userinfo: Option<UserInfo>,
    env: Option<String>,
    netrc: Option<&Path>,
) -> anyhow::Result<Option<Credentials>> {
    let url_user = match userinfo {
        Some((user, Some(pass))) => return Ok(Some(Credentials::new(&user, &pass, "the URL"))),
        Some((user, None)) => Some(user),
        None => None,
    };
    if let Some(v) = env.filter(|v| !v.is_empty()) {
        let (user, pass) = v.split_once(':').ok_or_else(|| {
            anyhow::anyhow!("${AUTH_ENV} must be USER:PASSWORD (it has no colon)")
        })?;
        return Ok(Some(Credentials::new(user, pass, &format!("${AUTH_ENV}"))));
    }
    let file = match netrc {
        Some(p) => Some(p.to_path_buf()),
        None => default_netrc().filter(|p| p.is_file()),
    };
    if let Some(file) = file {
        let text = nfsdtop_agent::input::read_text(&file, "netrc file", "--netrc-file", 1 << 20)?;
        if let Some((user, pass)) = netrc_lookup(&text, &url.host, url_user.as_deref()) {
            return Ok(Some(Credentials::new(
                &user,
                &pass,
                &file.display().to_string(),
            )));
        }
    }
    match url_user {
        Some(user) => anyhow::bail!(
            "--connect names the user {user:?} but no password: give it in ${AUTH_ENV} (USER:PASSWORD) \
             or a netrc file (machine {} login {user} password ...)",
            url.host
        ),
        None => Ok(None),
    }
}

fn default_netrc() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NETRC") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".netrc"))
}

/// The `login` and `password` of the first `machine HOST` entry (with
/// that login, if one is wanted), else of `default`. Tokens are separated
/// by white space; `macdef` bodies (up to a blank line) are skipped.
pub fn netrc_lookup(text: &str, host: &str, login: Option<&str>) -> Option<(String, String)> {
    struct Entry {
        machine: Option<String>,
        login: Option<String>,
        password: Option<String>,
    }
    let mut entries: Vec<Entry> = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let mut words = line.split_whitespace();
        while let Some(w) = words.next() {
            match w {
                "machine" => entries.push(Entry {
                    machine: words.next().map(str::to_string),
                    login: None,
                    password: None,
                }),
                "default" => entries.push(Entry {
                    machine: None,
                    login: None,
                    password: None,
                }),
                "login" | "password" | "account" => {
                    let v = words.next().map(str::to_string);
                    if let Some(e) = entries.last_mut() {
                        match w {
                            "login" => e.login = v,
                            "password" => e.password = v,
                            _ => {}
                        }
                    }
                }
                "macdef" => {
                    for l in lines.by_ref() {
                        if l.trim().is_empty() {
                            break;
                        }
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    let fits = |e: &&Entry| login.is_none_or(|l| e.login.as_deref() == Some(l));
    let found = entries
        .iter()
        .filter(|e| e.machine.as_deref() == Some(host))
        .find(fits)
        .or_else(|| entries.iter().filter(|e| e.machine.is_none()).find(fits))?;
    Some((found.login.clone()?, found.password.clone()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> RemoteUrl {
        parse_url(s).unwrap().0
    }

    #[test]
    fn urls() {
        let u = url("http://example.org");
        assert_eq!(
            (u.host.as_str(), u.port, u.base.as_str()),
            ("example.org", 9847, "")
        );
        let u = url("10.0.0.1:1234/nfsdtop/");
        assert_eq!(
            (u.host.as_str(), u.port, u.base.as_str()),
            ("10.0.0.1", 1234, "/nfsdtop")
        );
        let u = url("http://[::1]:9000");
        assert_eq!((u.host.as_str(), u.port), ("::1", 9000));
        assert_eq!(u.to_string(), "http://[::1]:9000");
        assert_eq!(url("[fe80::1]").port, DEFAULT_PORT);
        let u = url("HTTPS://server:443/x");
        assert_eq!(
            (u.scheme, u.to_string().as_str()),
            (Scheme::Https, "https://server:443/x")
        );
        for bad in [
            "ftp://x",
            "http://",
            "x:0",
            "x:99999",
            "[::1",
            "http://h:port",
        ] {
            assert!(parse_url(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn user_info_is_taken_out_of_the_url_and_never_shown() {
        let (u, info) = parse_url("http://bob:hunter%32@host:1234/p").unwrap();
        assert_eq!(u.to_string(), "http://host:1234/p");
        assert_eq!(info, Some(("bob".to_string(), Some("hunter2".to_string()))));
        let c = credentials(&u, info, None, None).unwrap().unwrap();
        assert_eq!(c.basic(), "Basic Ym9iOmh1bnRlcjI=");
        assert!(!format!("{c:?}").contains("hunter2"), "{c:?}");
        // A bad URL's error does not echo the password either.
        let e = parse_url("http://bob:hunter2@host:notaport").unwrap_err();
        let e = format!("{e:#}");
        assert!(!e.contains("hunter2") && e.contains("host:notaport"), "{e}");
    }

    #[test]
    fn env_then_netrc_then_nothing() {
        let u = url("http://agent.example:9847");
        let dir = std::env::temp_dir().join(format!("nfsdtop-netrc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let netrc = dir.join("netrc");
        std::fs::write(
            &netrc,
            "machine other login x password y\n\
             macdef init\nmachine agent.example login evil password evil\n\n\
             machine agent.example\n  login carol\n  password s3cret\n\
             default login anon password anon\n",
        )
        .unwrap();
        let c = credentials(&u, None, Some("alice:pw:with:colons".into()), Some(&netrc))
            .unwrap()
            .unwrap();
        assert_eq!(
            (c.user.as_str(), c.basic()),
            (
                "alice",
                Credentials::new("alice", "pw:with:colons", "").basic()
            )
        );
        let c = credentials(&u, None, None, Some(&netrc)).unwrap().unwrap();
        assert_eq!(
            c,
            Credentials::new("carol", "s3cret", &netrc.display().to_string())
        );
        // The user named in the URL picks the entry; `default` otherwise.
        let c = credentials(&url("http://x.example"), None, None, Some(&netrc))
            .unwrap()
            .unwrap();
        assert_eq!(c.user, "anon");
        let e = credentials(
            &u,
            Some(("dave".into(), None)),
            None,
            Some(&dir.join("absent")),
        );
        assert!(format!("{:#}", e.unwrap_err()).contains("cannot read netrc file"));
        // An endless file is refused at its limit, not read until memory
        // runs out.
        let e = credentials(&u, None, None, Some(Path::new("/dev/zero"))).unwrap_err();
        assert!(
            format!("{e:#}").contains("/dev/zero is larger than 1 MiB"),
            "{e:#}"
        );
        std::fs::write(
            &netrc,
            "machine agent.example login carol password s3cret\n",
        )
        .unwrap();
        let e = credentials(&u, Some(("dave".into(), None)), None, Some(&netrc)).unwrap_err();
        assert!(format!("{e:#}").contains("no password"), "{e:#}");
        assert!(credentials(&u, None, Some("nocolon".into()), None).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
