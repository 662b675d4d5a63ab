//! Part E: the TUI's frame time with 10,000 peers (tui/benches/render.rs)
//! and the exporter's /metrics encode time (exporter/tests/scale.rs).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::ensure;

use super::text::{self, fill};
use super::util::{capture, cargo_bench, first_num, scale_test, table_rows};
use crate::cargo;

pub fn part(quick: bool) -> anyhow::Result<String> {
    let output = if quick {
        // Without --bench the render bench runs its short smoke version.
        capture(
            "TUI render bench (smoke)",
            cargo().args([
                "test",
                "-q",
                "--release",
                "-p",
                "nfsdtop",
                "--bench",
                "render",
            ]),
        )?
    } else {
        cargo_bench("nfsdtop", "render", "TUI render bench", false)?
    };
    let frames = if quick { 20 } else { 3000 };
    let mut s = fill(text::FRAMES, "frames", &[("frames", &frames)])?;
    let mut cpu: BTreeMap<String, String> = BTreeMap::new();
    let mut worst_cpu = 0.0f64;
    let mut parsed = 0;
    for l in output.lines() {
        if let Some((name, rest)) = l.split_once("cpu time per op") {
            let v = rest.rsplit(':').next().unwrap_or("").trim().to_string();
            worst_cpu = worst_cpu.max(first_num(&v).unwrap_or(0.0));
            cpu.insert(name.trim().to_string(), v);
        }
    }
    for l in output.lines() {
        let Some(i) = l.find(" n=") else { continue };
        let name = l[..i].trim();
        let rest = &l[i..];
        let field = |k: &str| -> String {
            rest.split(k)
                .nth(1)
                .map(|x| {
                    let x = x.trim_start();
                    let v: Vec<&str> = x.split_whitespace().take(2).collect();
                    v.join(" ")
                })
                .unwrap_or_default()
        };
        let n = rest[3..].split_whitespace().next().unwrap_or("");
        writeln!(
            s,
            "| {name} | {} | {n} | {} | {} | {} | {} |",
            cpu.get(name).map(String::as_str).unwrap_or(""),
            field("mean"),
            field("p50"),
            field("p99"),
            field("max")
        )?;
        parsed += 1;
    }
    ensure!(parsed >= 4, "render bench output not parsed:\n{output}");
    let met = if worst_cpu < 10.0 {
        "the 10 ms target is met"
    } else {
        "over the 10 ms target"
    };
    s.push_str(&fill(
        text::FRAMES,
        "verdict",
        &[("worst", &format!("{worst_cpu:.2}")), ("met", &met)],
    )?);

    let out = scale_test(
        "/metrics encode with 10,000 peers (exporter/tests/scale.rs)",
        "encode_time_with_10k_peers",
        &[],
    )?;
    let rows = table_rows(&out);
    ensure!(rows.len() >= 2, "encode test printed no table:\n{out}");
    s.push_str(&fill(text::FRAMES, "encode", &[])?);
    for r in &rows {
        let strip = |c: &str, p: &str| c.trim_start_matches(p).trim().to_string();
        writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.first().map(String::as_str).unwrap_or(""),
            r.get(1).map(|c| strip(c, "update")).unwrap_or_default(),
            r.get(2)
                .map(|c| strip(c, "encode (OpenMetrics)"))
                .unwrap_or_default(),
            r.get(3)
                .map(|c| strip(c, "+ text 0.0.4"))
                .unwrap_or_default(),
            r.get(4).map(String::as_str).unwrap_or(""),
            r.get(5).map(|c| strip(c, "protobuf")).unwrap_or_default(),
            r.get(6).map(String::as_str).unwrap_or("")
        )?;
    }
    s.push_str(&fill(text::FRAMES, "encode-after", &[])?);
    Ok(s)
}
