//! Part A's rounds: the table of fio IOPS per mode, each run against the
//! baseline at its time (between its round's baseline run and the next),
//! and the spread that says how much of a difference the run can tell.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::ensure;

use super::util::mean;
use crate::guest::fio_iops;

/// The rounds' table (fio IOPS per mode, and each as a ratio of the
/// baseline at its time), written to `s`; per mode, its drift-corrected
/// ratios, and the baselines' IOPS.
pub(super) struct Rounds {
    pub corr: Vec<Vec<f64>>,
    pub none: Vec<f64>,
}

pub(super) fn rounds(
    s: &mut String,
    results: &Path,
    modes: &[&str],
    reps: u32,
) -> anyhow::Result<Rounds> {
    let head: Vec<String> = modes.iter().map(|m| format!("{m} IOPS")).collect();
    let head_r: Vec<String> = modes.iter().map(|m| format!("{m} / baseline")).collect();
    writeln!(
        s,
        "| round | none IOPS | {} | next none IOPS | {} |\n|{}",
        head.join(" | "),
        head_r.join(" | "),
        "---|".repeat(2 * modes.len() + 3)
    )?;
    let iops = |tag: String| fio_iops(&results.join(format!("fio-{tag}.json")));
    let mut none = vec![];
    let mut all = vec![Vec::new(); modes.len()];
    let mut corr = vec![Vec::new(); modes.len()];
    let cell = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.0}"));
    let ratio = |v: Option<f64>| v.map_or("–".into(), |x| format!("{x:.3}"));
    for r in 1..=reps {
        let b0 = iops(format!("none-{r}"));
        let b1 = iops(format!("none-{}", r + 1));
        none.extend(b0);
        // The baseline at the time of the run: between the round's own
        // baseline and the next one (runs are evenly spaced, mode i at
        // (i+1)/(modes+1) of the round); without a next baseline, the
        // round's own.
        let at = |k: f64| b0.map(|b| b + (b1.unwrap_or(b) - b) * k);
        let mut cells = vec![];
        let mut ratios = vec![];
        for (i, m) in modes.iter().enumerate() {
            let v = iops(format!("{m}-{r}"));
            let rv = v
                .zip(at((i + 1) as f64 / (modes.len() + 1) as f64))
                .map(|(x, b)| x / b);
            all[i].extend(v);
            corr[i].extend(rv);
            cells.push(cell(v));
            ratios.push(ratio(rv));
        }
        writeln!(
            s,
            "| {r} | {} | {} | {} | {} |",
            cell(b0),
            cells.join(" | "),
            cell(b1),
            ratios.join(" | ")
        )?;
    }
    if let Some(last) = iops(format!("none-{}", reps + 1)) {
        none.push(last);
    }
    let mn = mean(&none);
    ensure!(
        mn > 0.0 && corr.iter().all(|c| !c.is_empty()),
        "fio results missing in {}",
        results.display()
    );
    writeln!(
        s,
        "| mean | {mn:.0} | {} | | {} |\n",
        all.iter()
            .map(|v| format!("{:.0}", mean(v)))
            .collect::<Vec<_>>()
            .join(" | "),
        corr.iter()
            .map(|v| format!("**{:.3}**", mean(v)))
            .collect::<Vec<_>>()
            .join(" | ")
    )?;
    Ok(Rounds { corr, none })
}

/// The spread of `xs`: (highest − lowest) / mean.
pub(super) fn spread(xs: &[f64]) -> f64 {
    let lo = xs.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().cloned().fold(0.0, f64::max);
    (hi - lo) / mean(xs)
}
