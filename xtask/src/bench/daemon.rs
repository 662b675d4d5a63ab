//! Part D: nfsdtopd's CPU and memory at steady demo dispatch rates, and
//! with 100,000 peers (exporter/tests/scale.rs).

use std::fmt::Write as _;
use std::fs;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context};

use super::text::{self, fill};
use super::util::{capture, first_num, fmt_rate, scale_test, sh};
use crate::{cargo, root};

fn proc_cpu_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

fn proc_status_kib(pid: u32, key: &str) -> Option<u64> {
    let st = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    st.lines()
        .find(|l| l.starts_with(key))
        .and_then(first_num)
        .map(|x| x as u64)
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_get(port: u16, path: &str) -> Option<String> {
    let out = Command::new("curl")
        .args(["-sf", "--max-time", "5"])
        .arg(format!("http://127.0.0.1:{port}{path}"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).to_string())
}

fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// Cumulative dispatches from a snapshot.
fn dispatches(port: u16) -> Option<u64> {
    let text = http_get(port, "/api/v1/snapshot?top=1")?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["totals"]["dispatches"].as_u64()
}

fn poll_until<T>(deadline: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + deadline;
    loop {
        if let Some(x) = f() {
            return Some(x);
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn part(quick: bool) -> anyhow::Result<String> {
    capture(
        "cargo build --release -p nfsdtop-exporter",
        cargo().args(["build", "-q", "--release", "-p", "nfsdtop-exporter"]),
    )?;
    let exe = root().join("target/release/nfsdtopd");
    let secs = if quick { 2.0 } else { 20.0 };
    let clk_tck = first_num(&sh("getconf CLK_TCK")).unwrap_or(100.0);
    let mut s = fill(text::DAEMON, "intro", &[("secs", &format!("{secs:.0}"))])?;
    let speeds: &[u32] = if quick { &[10] } else { &[1, 10, 100] };
    for &speed in speeds {
        let port = free_port()?;
        let child = Command::new(&exe)
            .args(["--demo", "seed-k8", "--speed", &speed.to_string()])
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start nfsdtopd")?;
        let d = Daemon(child);
        let pid = d.0.id();
        poll_until(Duration::from_secs(30), || {
            dispatches(port).filter(|&n| n > 0)
        })
        .ok_or_else(|| anyhow!("nfsdtopd (demo, speed {speed}) served no snapshot"))?;
        let c0 = proc_cpu_ticks(pid).unwrap_or(0);
        let n0 = dispatches(port).unwrap_or(0);
        let t0 = Instant::now();
        // Steady state: the daemon runs on; we only wait out the window.
        poll_until(Duration::from_secs_f64(secs + 1.0), || {
            (t0.elapsed().as_secs_f64() >= secs).then_some(())
        });
        let c1 = proc_cpu_ticks(pid).unwrap_or(0);
        let n1 = dispatches(port).unwrap_or(0);
        let el = t0.elapsed().as_secs_f64();
        let rss = proc_status_kib(pid, "VmRSS:").unwrap_or(0);
        let hwm = proc_status_kib(pid, "VmHWM:").unwrap_or(0);
        drop(d);
        let cpu = (c1 - c0) as f64 / clk_tck / el;
        let rate = n1.saturating_sub(n0) as f64 / el;
        ensure!(rate > 0.0, "nfsdtopd demo at speed {speed}: no dispatches");
        writeln!(
            s,
            "| {speed} | {} | {} | {cpu:.3} | {:.2} µs | {:.1} MiB | {:.1} MiB |",
            fmt_rate(rate),
            fmt_rate(rate * 3.0),
            cpu / rate * 1e6,
            rss as f64 / 1024.0,
            hwm as f64 / 1024.0
        )?;
    }
    s.push_str(&fill(text::DAEMON, "after", &[])?);
    if quick {
        s.push_str(&fill(text::DAEMON, "100k-skipped", &[])?);
    } else {
        let out = scale_test(
            "nfsdtopd with 100,000 peers (exporter/tests/scale.rs)",
            "daemon_with_100k_peers",
            &[("NFSDTOP_BENCH_SECS", "40")],
        )?;
        let rows: Vec<&str> = out
            .lines()
            .filter(|l| l.trim_start().starts_with('|'))
            .collect();
        ensure!(rows.len() >= 3, "the 100k test printed no table:\n{out}");
        s.push_str(&fill(text::DAEMON, "100k", &[])?);
        for r in rows.iter().filter(|r| !r.contains("---")) {
            writeln!(s, "{}", r.trim())?;
        }
        writeln!(s)?;
    }
    Ok(s)
}
