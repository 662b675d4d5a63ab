//! A real Prometheus (Debian's `prometheus`, installed by scripts/setup.sh)
//! run for a test: its own directory, a free port, the config given,
//! ready before it is returned, killed when dropped; instant queries
//! through its HTTP API.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::http;

pub const PROMETHEUS: &str = "/usr/bin/prometheus";

pub struct Prometheus {
    pub child: Child,
    pub addr: SocketAddr,
    log: PathBuf,
    /// Its own directory, where [`Prometheus::start_scraping`] made one.
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Percent-encoding for a query string.
pub fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Prometheus {
    /// Start Prometheus in `dir` with `config` (prometheus.yml's text) and
    /// `flags`; ready (its /-/ready answers 200) within 30 s or a panic.
    pub fn start(dir: &Path, config: &str, flags: &[&str]) -> Prometheus {
        assert!(
            Path::new(PROMETHEUS).exists(),
            "{PROMETHEUS} missing: install Debian's prometheus package (scripts/setup.sh does)"
        );
        let file = dir.join("prometheus.yml");
        std::fs::write(&file, config).unwrap();
        let port = free_port();
        let log = dir.join("prometheus.log");
        let log_file = std::fs::File::create(&log).unwrap();
        let child = Command::new(PROMETHEUS)
            .arg(format!("--config.file={}", file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .args(flags)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file)
            .spawn()
            .expect("start prometheus");
        let mut prom = Prometheus {
            child,
            addr: format!("127.0.0.1:{port}").parse().unwrap(),
            log,
            _dir: None,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        prom.wait_until("Prometheus ready", deadline, |p| {
            if let Ok(Some(st)) = p.child.try_wait() {
                panic!("prometheus exited ({st}):\n{}", p.log_tail());
            }
            std::net::TcpStream::connect(p.addr).ok()?;
            (http(p.addr, "GET", "/-/ready", &[]).status == 200).then_some(())
        });
        prom
    }

    /// Prometheus in a directory of its own, scraping every second with
    /// `scrape_configs` (YAML lines under `scrape_configs:`), with
    /// `--enable-feature` of each of `features`.
    pub fn start_scraping(scrape_configs: &[String], features: &[&str]) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let mut yaml = vec![
            "global:".to_string(),
            "  scrape_interval: 1s".into(),
            "  evaluation_interval: 1s".into(),
            "scrape_configs:".into(),
        ];
        yaml.extend(scrape_configs.iter().cloned());
        let flags: Vec<String> = features
            .iter()
            .map(|f| format!("--enable-feature={f}"))
            .collect();
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let mut prom = Prometheus::start(dir.path(), &yaml.join("\n"), &flags);
        prom._dir = Some(dir);
        prom
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Poll `f` every 100 ms until it gives Some, or panic at `deadline`
    /// with Prometheus's last log lines.
    pub fn wait_until<T>(
        &mut self,
        what: &str,
        deadline: Instant,
        mut f: impl FnMut(&mut Prometheus) -> Option<T>,
    ) -> T {
        loop {
            if let Some(v) = f(self) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; Prometheus's log:\n{}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Instant query: the API's result array as it is (a native
    /// histogram's sample is under "histogram", a float's under "value").
    pub fn query_raw(&self, q: &str) -> Vec<serde_json::Value> {
        let r = http(
            self.addr,
            "GET",
            &format!("/api/v1/query?query={}", encode(q)),
            &[],
        );
        assert_eq!(r.status, 200, "query {q}: {r:?}\n{}", self.log_tail());
        let v = r.json();
        assert_eq!(v["status"], "success", "{v}");
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// Instant query of floats: (labels, value) per series.
    pub fn query(&self, q: &str) -> Vec<(serde_json::Value, f64)> {
        self.query_raw(q)
            .iter()
            .map(|s| {
                let val = s["value"][1]
                    .as_str()
                    .unwrap_or_else(|| panic!("{q}: not a float sample: {s}"))
                    .parse::<f64>()
                    .unwrap();
                (s["metric"].clone(), val)
            })
            .collect()
    }
}

/// Poll `f` every 100 ms until it gives Some, or panic at `deadline`.
pub fn wait_until<T>(what: &str, deadline: Instant, mut f: impl FnMut() -> Option<T>) -> T {
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
