//! A remote client's view of the real `nfsdtopd`: the daemon run through
//! a prefix (prlimit), with its log lines, raw requests with a deadline,
//! and credentials (basic auth, sha256 hashes) for its config.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{parse_response, write, Response, BIN};

/// nfsdtopd (run through `prefix`, e.g. prlimit), with the lines it
/// printed before "listening on" and a channel of the later ones.
pub struct Proc {
    pub child: Child,
    pub addr: SocketAddr,
    pub startup: Vec<String>,
    pub lines: mpsc::Receiver<String>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn launch(prefix: &[&str], args: &[&str]) -> Proc {
    let mut cmd = match prefix.split_first() {
        Some((p, rest)) => {
            let mut c = Command::new(p);
            c.args(rest).arg(BIN);
            c
        }
        None => Command::new(BIN),
    };
    let mut child = cmd
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nfsdtopd");
    let stderr = child.stderr.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let mut startup = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = lines.recv_timeout(left) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no \"listening on\" within 20 s: {startup:?}");
        };
        if let Some(url) = line.split("listening on ").nth(1) {
            let addr = url.split("://").nth(1).unwrap().trim().parse().unwrap();
            return Proc {
                child,
                addr,
                startup,
                lines,
            };
        }
        startup.push(line);
    }
}

pub fn sha256_hex(s: &str) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub fn basic(user: &str, pass: &str) -> String {
    use base64::Engine as _;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"))
    )
}

/// A demo daemon's config file with `extra` appended.
pub fn config(dir: &std::path::Path, extra: &str) -> String {
    write(
        dir,
        "nfsdtopd.toml",
        &format!(
            "listen = \"127.0.0.1:0\"\ninterval = 0.2\n[source]\nkind = \"demo\"\nscenario = \"seed-k4\"\n{extra}"
        ),
    )
}

/// One request on a fresh connection, with a deadline for all of it.
pub fn request(addr: SocketAddr, raw: &[u8], within: Duration) -> Result<Vec<u8>, String> {
    let mut s = TcpStream::connect_timeout(&addr, within).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(within)).unwrap();
    s.set_write_timeout(Some(within)).unwrap();
    s.write_all(raw).map_err(|e| format!("send: {e}"))?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).map_err(|e| format!("read: {e}"))?;
    Ok(out)
}

pub fn get(
    addr: SocketAddr,
    path: &str,
    auth: Option<&str>,
    within: Duration,
) -> Result<Response, String> {
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    if let Some(a) = auth {
        req.push_str(&format!("Authorization: {a}\r\n"));
    }
    req.push_str("\r\n");
    let raw = request(addr, req.as_bytes(), within)?;
    if raw.is_empty() {
        return Err("closed without an answer".into());
    }
    Ok(parse_response(&raw))
}
