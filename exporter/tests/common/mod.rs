//! Helpers shared by the integration tests: start the real `nfsdtopd`,
//! find the port it bound (it prints "listening on URL" on stderr), and a
//! minimal HTTP/1.1 client (no extra dependencies, Connection: close).

#![allow(dead_code)]

pub mod prometheus;
pub mod remote;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_nfsdtopd");

/// The `nfsdtop` binary, for `--connect` against a daemon under test.
pub fn nfsdtop_bin() -> std::path::PathBuf {
    // Built beside nfsdtopd by `cargo test --workspace` (the README's test
    // command); build it here when this crate is tested alone.
    let bin = std::path::PathBuf::from(BIN).with_file_name("nfsdtop");
    if !bin.exists() {
        let st = Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "nfsdtop"])
            .status()
            .expect("cargo build -p nfsdtop");
        assert!(st.success());
    }
    bin
}

/// A running daemon, killed when dropped.
pub struct Daemon {
    pub child: Child,
    pub addr: SocketAddr,
    pub stderr: mpsc::Receiver<String>,
    /// Its stderr lines before the "listening on" line.
    pub early: Vec<String>,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    pub fn start(args: &[&str]) -> Daemon {
        Daemon::try_start(args).unwrap_or_else(|e| panic!("nfsdtopd {args:?}: {e}"))
    }

    pub fn try_start(args: &[&str]) -> Result<Daemon, String> {
        Daemon::spawn(args, true)
    }

    /// Start it, then close the read end of its stderr once it is
    /// listening: every later log line meets a broken pipe.
    pub fn start_then_close_stderr(args: &[&str]) -> Daemon {
        Daemon::spawn(args, false).unwrap_or_else(|e| panic!("nfsdtopd {args:?}: {e}"))
    }

    fn spawn(args: &[&str], keep_stderr: bool) -> Result<Daemon, String> {
        let mut child = Command::new(BIN)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {BIN}: {e}"))?;
        let stderr = child.stderr.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let listening = line.contains("listening on ");
                if tx.send(line).is_err() || (listening && !keep_stderr) {
                    break;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(url) = line.split("listening on ").nth(1) {
                        let hostport = url.split("://").nth(1).unwrap_or(url).trim();
                        let addr = hostport
                            .parse()
                            .map_err(|e| format!("bad address in {line:?}: {e}"))?;
                        return Ok(Daemon {
                            child,
                            addr,
                            stderr: rx,
                            early: seen,
                        });
                    }
                    seen.push(line);
                }
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "no \"listening on\" line within 20 s; stderr: {}",
                        seen.join("\n")
                    ));
                }
            }
        }
    }

    pub fn get(&self, path: &str) -> Response {
        http(self.addr, "GET", path, &[])
    }

    pub fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        http(self.addr, "GET", path, headers)
    }

    /// Poll `f` until it returns Some, or panic after `secs`.
    pub fn wait_for<T>(&self, what: &str, secs: u64, mut f: impl FnMut(&Daemon) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(v) = f(self) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {secs} s waiting for {what}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The latest snapshot, once the pipeline has produced one.
    pub fn snapshot(&self, query: &str) -> serde_json::Value {
        self.wait_for("a snapshot", 20, |d| {
            let r = d.get(&format!("/api/v1/snapshot{query}"));
            (r.status == 200).then(|| serde_json::from_str(&r.body).expect("snapshot JSON"))
        })
    }
}

/// Send `signal` (e.g. "HUP") to the daemon.
pub fn kill(pid: u32, signal: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(ok.success(), "kill -{signal} {pid}");
}

/// The process's exit status, once it has exited within `secs`.
pub fn wait_exit(child: &mut Child, secs: f64) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            return Some(st);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// All a piped stderr holds (read once the process has exited).
pub fn stderr_of(child: &mut Child) -> String {
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        std::io::Read::read_to_string(&mut e, &mut err).expect("read stderr");
    }
    err
}

/// (VmRSS, VmHWM) of a process in KiB, from /proc/PID/status.
pub fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// A demo scenario of `n` clients with one connection and one request in
/// flight each (10.0.0.1 and up): 16 threads x 1 ms serve 16,000 requests
/// a (simulated) second, so every client has been seen within n/16,000 s.
pub fn many_peers(dir: &Path, n: usize) -> String {
    write(
        dir,
        "flood.toml",
        &format!(
            "name = \"flood\"\ndescription = \"{n} clients, one connection and one request each\"\n\
threads = 16\nservice_ms = 1.0\n\n[[client]]\naddress = \"10.0.0.1\"\ncount = {n}\n\
connections = 1\ninflight = 1\n"
        ),
    )
}

/// Start a demo of `n` peers and wait until a snapshot has them all.
pub fn many_peers_daemon(dir: &Path, n: usize, extra: &[&str]) -> Daemon {
    let scenario = many_peers(dir, n);
    let mut args = vec!["--demo", &scenario, "--listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let d = Daemon::start(&args);
    d.wait_for(&format!("a snapshot with {n} peers"), 120, |d| {
        let r = d.get("/api/v1/snapshot?group=class&top=1");
        let s: serde_json::Value = serde_json::from_str(&r.body).ok()?;
        (s["totals"]["peers"].as_u64()? >= n as u64).then_some(())
    });
    d
}

/// Run nfsdtopd expecting it to exit (bad flags or config): (code, stderr).
pub fn run_to_exit(args: &[&str]) -> (i32, String) {
    let out = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run nfsdtopd");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }
}

pub fn http(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).expect("send");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read");
    parse_response(&raw)
}

pub fn parse_response(raw: &[u8]) -> Response {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("end of headers");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .expect("status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    if chunked {
        body = dechunk(&body);
    }
    Response {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

pub fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&b[..eol]).trim(), 16).unwrap_or(0);
        if size == 0 || b.len() < eol + 2 + size {
            break;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + size]);
        b = &b[(eol + 4 + size).min(b.len())..];
    }
    out
}

pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write file");
    p.display().to_string()
}

/// nfsdtopd on the built-in seed-k16 demo (flat policy) on a free
/// loopback port, with `extra` flags.
pub fn demo(extra: &[&str]) -> Daemon {
    let mut args = vec![
        "--demo",
        "seed-k16",
        "--policy",
        "flat",
        "--listen",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    Daemon::start(&args)
}

/// Read SSE events from /api/v1/stream until `n` have arrived.
pub fn read_events(d: &Daemon, n: usize) -> (String, Vec<String>) {
    let mut s = TcpStream::connect(d.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    // HTTP/1.0: the body is not chunked, it runs until the server closes.
    s.write_all(b"GET /api/v1/stream HTTP/1.0\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = String::from_utf8_lossy(&raw).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let events: Vec<String> = body
                .split_inclusive("\n\n")
                .filter(|e| e.ends_with("\n\n"))
                .map(str::to_owned)
                .collect();
            if events.len() >= n {
                return (head.to_string(), events);
            }
        }
        assert!(
            Instant::now() < deadline,
            "stream: fewer than {n} events in 20 s"
        );
        let k = s.read(&mut buf).expect("read stream");
        assert!(k > 0, "stream closed early");
        raw.extend_from_slice(&buf[..k]);
    }
}
