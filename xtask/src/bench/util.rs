//! Small helpers of the benchmark parts: shell and cargo invocations
//! (every `cargo bench` and `cargo test --ignored` bench goes through
//! [`cargo_bench`] or [`scale_test`]), markdown table parsing, numbers.

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context};

use crate::{cargo, root};

pub fn sh(cmd: &str) -> String {
    Command::new("sh")
        .args(["-c", cmd])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

pub fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

pub fn nproc() -> String {
    sh("nproc")
}

pub fn cpu_model() -> String {
    fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

pub fn commit() -> String {
    let c = sh("git -C \"$(pwd)\" rev-parse --short HEAD");
    // The output of an earlier run is not a change to what is measured.
    let dirty =
        !sh("git status --porcelain --untracked-files=no -- . ':!BENCHMARKS.md'").is_empty();
    if dirty {
        format!("{c} (with uncommitted changes)")
    } else {
        c
    }
}

/// Runs a command in the workspace, returns its stdout; fails on non-zero exit.
pub fn capture(step: &str, cmd: &mut Command) -> anyhow::Result<String> {
    let t = Instant::now();
    eprintln!("bench: ==> {step}");
    let out = cmd
        .current_dir(root())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot start {step}"))?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    eprintln!("bench: <== {step}: {} in {:.0?}", out.status, t.elapsed());
    if !out.status.success() {
        bail!("{step} failed ({}):\n{text}", out.status);
    }
    Ok(text)
}

/// Markdown table rows (`| a | b |`) of `text`, split into trimmed cells,
/// without separator rows.
pub fn table_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with('|') && l.ends_with('|'))
        .filter(|l| !l.chars().all(|c| matches!(c, '|' | '-' | ' ' | ':')))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

/// The first number in `s` ("12.5 M" → 12.5, "update 6.10 ms" → 6.10).
pub fn first_num(s: &str) -> Option<f64> {
    let start = s.find(|c: char| c.is_ascii_digit())?;
    let rest = &s[start..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
        .unwrap_or(rest.len());
    rest[..end].replace(',', "").parse().ok()
}

pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        f64::NAN
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

pub fn fmt_rate(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.1} M/s", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1} k/s", x / 1e3)
    } else {
        format!("{x:.0}/s")
    }
}

/// `cargo bench -q -p PACKAGE --bench NAME` (with `-- --quick` when
/// `quick`): its stdout.
pub fn cargo_bench(package: &str, name: &str, step: &str, quick: bool) -> anyhow::Result<String> {
    let mut cmd = cargo();
    cmd.args(["bench", "-q", "-p", package, "--bench", name]);
    if quick {
        cmd.args(["--", "--quick"]);
    }
    capture(step, &mut cmd)
}

/// The output of `cargo bench -p nfsdtop-agent --bench NAME`.
pub fn agent_bench(name: &str, step: &str, quick: bool) -> anyhow::Result<String> {
    cargo_bench("nfsdtop-agent", name, step, quick)
}

/// The executable of `cargo bench -p PACKAGE --bench NAME` (cargo prints
/// it for `--no-run`).
pub fn bench_exe(package: &str, name: &str) -> Option<PathBuf> {
    let out = cargo()
        .args(["bench", "-p", package, "--bench", name, "--no-run"])
        .current_dir(root())
        .output()
        .ok()?;
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err.lines().find(|l| l.contains("Executable"))?;
    let path = line.rsplit_once('(')?.1.trim_end_matches(')');
    Some(root().join(path))
}

/// One ignored test of exporter/tests/scale.rs, release, alone and with
/// its output: its stdout. `env`: extra environment.
pub fn scale_test(step: &str, test: &str, env: &[(&str, &str)]) -> anyhow::Result<String> {
    let mut cmd = cargo();
    cmd.args([
        "test",
        "-q",
        "--release",
        "-p",
        "nfsdtop-exporter",
        "--test",
        "scale",
        "--",
        "--ignored",
        "--nocapture",
        "--test-threads",
        "1",
        test,
    ]);
    cmd.envs(env.iter().copied());
    capture(step, &mut cmd)
}

/// Markdown rows back into a table, a separator after the first.
pub fn md_table(rows: &[Vec<String>]) -> String {
    let mut s = String::new();
    for (i, r) in rows.iter().enumerate() {
        s.push_str(&format!("| {} |\n", r.join(" | ")));
        if i == 0 {
            s.push_str(&format!("|{}\n", "---|".repeat(r.len())));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tables_and_numbers() {
        let t = "x\n| a | b |\n|---|---|\n| 1 | 12.5 M |\n";
        let r = table_rows(t);
        assert_eq!(r.len(), 2);
        assert_eq!(first_num(&r[1][1]), Some(12.5));
        assert_eq!(first_num("update 6,100.5 ms"), Some(6100.5));
        assert_eq!(first_num("none"), None);
        assert_eq!(md_table(&r), "| a | b |\n|---|---|\n| 1 | 12.5 M |\n");
    }
}
