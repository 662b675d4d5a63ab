//! `cargo xtask bench --against FILE --suite SUITE`: a change's cost on a
//! real kernel, this tree's nfsdtop against another build of it (the one
//! before the change), in one guest: rounds of only **none**, **nfsdtop**
//! and **against**, run the same way, so each round's difference of IOPS
//! (against that round's baselines) and of the agent's CPU time per
//! dispatch says what the change costs, with a 95% interval over the
//! rounds (default output target/bench-against.md).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{ensure, Context};

use super::guest::workload::mean_ci;
use super::guest::{last_json_line, run_guest};
use super::rounds::{rounds, Rounds};
use super::BenchArgs;
use crate::guest::read_kv;

const MODES: [&str; 2] = ["nfsdtop", "against"];

pub fn section(args: &BenchArgs, nfsdtop: &Path) -> anyhow::Result<String> {
    let against = args
        .against
        .as_deref()
        .context("bench: --against names the other nfsdtop")?;
    ensure!(
        against.is_file(),
        "bench: --against {}: no such file (an nfsdtop binary built from the tree before the change)",
        against.display()
    );
    let suite = args.suite;
    let (results, kernel) = run_guest(
        args,
        suite,
        nfsdtop,
        &MODES,
        &[],
        "",
        &[("nfsdtop-against", against)],
    )?;
    let summary = read_kv(&results.join("summary.txt"))?;
    let mut s = format!(
        "### This tree's nfsdtop against {}: Debian {}, kernel {kernel}\n\n\
         Rounds of none, nfsdtop (this tree) and against (the other \
         build), each run as users run nfsdtop (`-b --format json -d 1`) \
         during the same fio load; IOPS per run and against the baselines \
         around it:\n\n",
        against.display(),
        suite.name()
    );
    let Rounds { corr, .. } = rounds(&mut s, &results, &MODES, args.reps)?;
    let iops: Vec<f64> = corr[0].iter().zip(&corr[1]).map(|(n, a)| a - n).collect();
    // The agent's CPU time per dispatch in each run (its own, from
    // /proc/PID/stat, over the fio run).
    let per_dispatch = |mode: &str| -> anyhow::Result<Vec<f64>> {
        (1..=args.reps)
            .map(|r| {
                let tag = format!("{mode}-{r}");
                let cpu: f64 = summary
                    .get(&format!("agent_cpu_ns.{tag}"))
                    .and_then(|v| v.parse().ok())
                    .with_context(|| format!("bench: no agent CPU time for {tag}"))?;
                let last = last_json_line(&results.join(format!("nfsdtop-{tag}.jsonl")))?;
                let d = last["totals"]["dispatches"].as_f64().unwrap_or(0.0);
                ensure!(d > 0.0, "bench: {tag}'s nfsdtop counted no dispatch");
                Ok(cpu / d)
            })
            .collect()
    };
    let (ours, theirs) = (per_dispatch("nfsdtop")?, per_dispatch("against")?);
    ensure!(iops.len() >= 2, "bench: fewer than two complete rounds");
    let (m, h) = mean_ci(&iops);
    let cpu_d: Vec<f64> = ours.iter().zip(&theirs).map(|(o, t)| o - t).collect();
    let (cm, ch) = mean_ci(&cpu_d);
    let pts = |x: f64| format!("{:+.2}", x * 100.0);
    let list = |v: &[f64], f: &dyn Fn(f64) -> String| {
        v.iter().map(|x| f(*x)).collect::<Vec<_>>().join(", ")
    };
    writeln!(
        s,
        "\nIOPS: this tree's nfsdtop costs {} points of IOPS more than the other \
         (per round: {}; mean, 95% interval [{}, {}] over {} rounds; negative: \
         it costs less).\n",
        pts(m),
        list(&iops, &pts),
        pts(m - h),
        pts(m + h),
        iops.len()
    )?;
    let ns = |x: f64| format!("{x:.0}");
    writeln!(
        s,
        "The agent's CPU per dispatch: this tree {} ns, the other {} ns \
         (per round, this tree: {}; the other: {}); the difference {:+.0} ns, \
         95% interval [{:+.0}, {:+.0}].",
        ns(super::util::mean(&ours)),
        ns(super::util::mean(&theirs)),
        list(&ours, &ns),
        list(&theirs, &ns),
        cm,
        cm - ch,
        cm + ch
    )?;
    Ok(s)
}
