//! Parts A/B: the cost of watching nfsd on a real kernel: fio IOPS in a
//! QEMU guest (scripts/vm/bench-guest.sh) with nothing attached, nfsdtop,
//! ftrace and nfsdtop's partial stages, alternated in rounds, and the BPF
//! programs' run time from the kernel's statistics; on each kernel of
//! [`GUESTS`] in the same run (one with the enqueue hooks, one whose
//! dequeues carry the enqueue time and so needs none). Its parts: the
//! kept-raw mode ([`keepraw`]), the NFSv4 operations ([`nfs4ops`]), the
//! workload view's cost ([`workload`]), and reading a run back ([`jsonl`]).

mod jsonl;
pub(super) mod keepraw;
pub(super) mod nfs4ops;
pub(super) mod workload;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, ensure, Context};

use super::rounds::{rounds, spread, Rounds};
use super::text::{self, fill};
use super::util::{fmt_rate, mean};
use super::{BenchArgs, Results};
use crate::guest::console::Deadlines;
use crate::guest::image::{ensure_image, Suite};
use crate::guest::qemu::{tcg_mode, Boot};
use crate::guest::read_kv;
use crate::guest::run::{self as guest_run, build_nfsdtop};
pub(in crate::bench) use jsonl::{last_json_line, procedures_named};
use nfsdtop_common::Slot;

/// A ratio as signed percent with one decimal ("+5.2").
fn signed1(x: f64) -> String {
    format!("{:+.1}", x * 100.0)
}

/// A ratio as percent with one decimal ("0.4").
fn pct1(x: f64) -> String {
    format!("{:.1}", x * 100.0)
}

/// One benchmark guest: its Debian suite, the template of its own
/// paragraph, and whether nfsdtop hooks the enqueue there by default.
struct Guest {
    suite: Suite,
    about: &'static str,
    hooks_enqueue: bool,
    /// Most of fio's IOPS nfsdtop may cost here, and most of ftrace's cost
    /// (a fraction of it), as the project's targets put them.
    target_cost: f64,
    target_of_ftrace: f64,
    /// Modes run here besides [`MODES`] (after them in each round).
    extra_modes: &'static [&'static str],
}

/// The kernels part A measures, each in its own boot: 6.12 (trixie), where
/// the enqueue is hooked, and 6.16+ (sid), whose dequeues carry the
/// transport's enqueue time, so the default hooks no enqueue.
const GUESTS: [Guest; 2] = [
    Guest {
        suite: Suite::Trixie,
        about: "about-trixie",
        hooks_enqueue: true,
        target_cost: 0.035,
        target_of_ftrace: 1.0,
        extra_modes: &[],
    },
    Guest {
        suite: Suite::Sid,
        about: "about-sid",
        hooks_enqueue: false,
        target_cost: 0.025,
        target_of_ftrace: 0.5,
        // Its kernel preempts raw programs: the default runs twin programs
        // there, keepraw does without.
        extra_modes: &[keepraw::MODE],
    },
];

impl Guest {
    /// The sunrpc events nfsdtop attaches to there by default, from the
    /// tracepoint table: what the ftrace mode enables (the same hits).
    fn events(&self) -> Vec<&'static str> {
        Slot::ALL
            .iter()
            .filter(|&&s| self.hooks_enqueue || s != Slot::Enqueue)
            .map(|s| s.info().event)
            .collect()
    }

    /// Every mode of a round here after its baseline.
    fn modes(&self) -> Vec<&'static str> {
        MODES.iter().chain(self.extra_modes).copied().collect()
    }
}

/// The modes of a round after its baseline ("none"), in the order the
/// guest runs them (scripts/vm/bench-guest.sh says what each is).
const MODES: [&str; 6] = [
    "nfsdtop",
    "classic",
    "ftrace",
    "hooked",
    "discard",
    "noworkload",
];

/// Boots `suite`'s image with scripts/vm/bench-guest.sh running `modes`
/// after each round's baseline (`events` for the ftrace mode, `config`
/// lines added to the guest's); returns the results directory and the
/// guest's kernel.
pub(super) fn run_guest(
    args: &BenchArgs,
    suite: Suite,
    nfsdtop: &Path,
    modes: &[&str],
    events: &[&str],
    config: &str,
    more_bins: &[(&'static str, &Path)],
) -> anyhow::Result<(PathBuf, String)> {
    let name = suite.name();
    let img = ensure_image(suite, false)?;
    let run_dir = guest_run::new_run_dir(&format!("{name}-bench"))?;
    let runs_per_round = modes.len() as u64 + 1;
    let guest_timeout =
        300 + u64::from(args.reps) * runs_per_round * (u64::from(args.fio_secs) + 60);
    let spec = guest_run::Spec {
        label: "bench",
        script: "bench-guest.sh",
        extra: vec![],
        host_files: vec![],
        boot: Boot::Plain,
        config: format!(
            "FIO_RUNTIME={}\nREPS={}\nGUEST_TIMEOUT={guest_timeout}\nEVENTS=\"{}\"\nMODES=\"none {}\"\n{config}",
            args.fio_secs,
            args.reps,
            events.join(" "),
            modes.join(" ")
        ),
        nfsdtop: Some(nfsdtop),
        more_bins: more_bins.to_vec(),
        writable_root: false,
        output_bytes: 1 << 30,
        icount: icount_arg(),
        limits: Deadlines {
            boot: None,
            // On the host's clock, which runs several times faster than the
            // guest's under -icount and slower still when the host is busy
            // (a run of 10 s of fio took 70 to 120 s here): three times
            // the guest's own limit, so only a hang reaches it.
            run: Duration::from_secs(3 * guest_timeout + 400),
        },
    };
    if let Some(done) = finished_run(name, &spec.config) {
        eprintln!("bench: reading {} ({REUSE})", done.display());
        return Ok((done.join("results"), img.kernel));
    }
    eprintln!(
        "bench: booting {name} (kernel {}) under TCG, results in {}",
        img.kernel,
        run_dir.display()
    );
    guest_run::run(&img, &spec, &run_dir)?;
    Ok((run_dir.join("results"), img.kernel))
}

/// Run directories (`:`-separated) of finished guest runs to read instead
/// of booting: each stands in for a run of the same suite and the same
/// config (modes, events, fio time, rounds), for working on a part's text
/// and checks without running its guests again.
const REUSE: &str = "NFSDTOP_BENCH_REUSE";

fn finished_run(suite: &str, config: &str) -> Option<PathBuf> {
    let list = std::env::var(REUSE).ok()?;
    list.split(':').map(PathBuf::from).find(|dir| {
        let same_suite = dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(&format!("{suite}-bench-")));
        let written = fs::read_to_string(dir.join("input/config")).unwrap_or_default();
        // Its first line is the run's id.
        let same_config = written
            .split_once('\n')
            .is_some_and(|(_, rest)| rest == config);
        same_suite && same_config && dir.join("results/summary.txt").is_file()
    })
}

/// Whether `name`, as bpftool lists a program (in full where its object
/// carries BTF, else the kernel's first 15 characters), is one of the
/// dequeue slot's programs, which run once per dispatch.
fn is_dequeue_program(name: &str) -> bool {
    const KERNEL_NAME_CHARS: usize = 15;
    let info = Slot::Dequeue.info();
    let raw = info.raw.map(|r| r.name);
    let typed = info.raw.and_then(|r| r.typed);
    [Some(info.program), raw, typed]
        .into_iter()
        .flatten()
        .any(|n| n == name || n.get(..KERNEL_NAME_CHARS) == Some(name))
}

/// name → (run_time_ns, run_cnt)
fn bpf_file(path: &Path) -> BTreeMap<String, (u64, u64)> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((
                f.first()?.to_string(),
                (f.get(1)?.parse().ok()?, f.get(2)?.parse().ok()?),
            ))
        })
        .collect()
}

pub fn part(args: &BenchArgs, res: &mut Results) -> anyhow::Result<String> {
    let nfsdtop = build_nfsdtop()?;
    let clock = match icount_arg() {
        Some(i) => format!("`-icount {i}`"),
        None => "on the host's wall clock (NFSDTOP_BENCH_ICOUNT=off)".into(),
    };
    let mut s = fill(
        text::GUEST,
        "intro",
        &[
            ("tcg", &tcg_mode()),
            ("clock", &clock),
            ("fio_secs", &args.fio_secs),
            ("reps", &args.reps),
        ],
    )?;
    for (i, guest) in GUESTS.iter().enumerate() {
        let (text, ring_rate) = section(args, guest, &nfsdtop)?;
        s.push_str(&text);
        // Part C compares the ring with the first guest's heaviest load.
        if i == 0 {
            res.ring_rate = Some(ring_rate);
        }
    }
    s.push_str(&nfs4ops::section(args, &nfsdtop)?);
    Ok(s)
}

/// One guest's rounds, verdict, BPF run time and agent cost; and its BPF
/// records (program runs) per second during fio.
fn section(args: &BenchArgs, guest: &Guest, nfsdtop: &Path) -> anyhow::Result<(String, f64)> {
    let modes = guest.modes();
    let (results, kernel) =
        run_guest(args, guest.suite, nfsdtop, &modes, &guest.events(), "", &[])?;
    let summary = read_kv(&results.join("summary.txt")).context("the guest wrote no summary")?;
    if let Some(e) = summary.get("error") {
        bail!("the guest failed: {e} (results in {})", results.display());
    }
    let threads = summary.get("nfsd_threads").map_or("?", String::as_str);
    let mut s = fill(
        text::GUEST,
        guest.about,
        &[
            ("kernel", &kernel),
            ("threads", &threads),
            ("events", &guest.events().join(", ")),
        ],
    )?;
    let Rounds { corr, none } = rounds(&mut s, &results, &modes, args.reps)?;
    let mn = mean(&none);
    let base_spread = spread(&none);
    let steps: Vec<f64> = none.windows(2).map(|w| (w[1] - w[0]).abs() / mn).collect();
    s.push_str(&fill(text::GUEST, "baseline", &[])?);
    let cost_n = 1.0 - mean(&corr[0]);
    let cost_c = 1.0 - mean(&corr[1]);
    let cost_f = 1.0 - mean(&corr[2]);
    let cost_hooked = 1.0 - mean(&corr[3]);
    // The hooks' cost in the round where it was least and most.
    let hooked_lo = 1.0 - corr[3].iter().cloned().fold(0.0, f64::max);
    let hooked_hi = 1.0 - corr[3].iter().cloned().fold(f64::INFINITY, f64::min);
    let cost_discard = 1.0 - mean(&corr[4]);
    let ratio_spread = corr.iter().map(|c| spread(c)).fold(0.0, f64::max);
    let mut entries = vec![];
    for r in 1..=args.reps {
        if let Some(e) = summary.get(&format!("ftrace_entries.ftrace-{r}")) {
            entries.push(e.clone());
        }
    }
    let overruns: Vec<String> = (1..=args.reps)
        .filter_map(|r| summary.get(&format!("ftrace_overrun.ftrace-{r}")))
        .cloned()
        .collect();
    s.push_str(&fill(
        text::GUEST,
        "noise",
        &[
            ("base_spread", &pct1(base_spread)),
            ("steps", &pct1(mean(&steps))),
            ("ratio_spread", &pct1(ratio_spread)),
            ("entries", &entries.join(", ")),
            ("overruns", &overruns.join(", ")),
        ],
    )?);
    let below_noise = (cost_n - cost_f).abs() < ratio_spread || cost_n.abs() < ratio_spread;
    let spread = [("spread", &pct1(ratio_spread) as &dyn std::fmt::Display)];
    let under = fill(
        text::GUEST,
        if cost_n < 0.01 {
            "under-1"
        } else {
            "not-under-1"
        },
        &[],
    )?;
    let cheaper = fill(
        text::GUEST,
        if cost_n < cost_f {
            "cheaper"
        } else {
            "not-cheaper"
        },
        &[],
    )?;
    let noise = fill(
        text::GUEST,
        if below_noise {
            "below-noise"
        } else {
            "above-noise"
        },
        &spread,
    )?;
    s.push_str(&fill(
        text::GUEST,
        "verdict",
        &[
            ("n", &signed1(cost_n)),
            ("c", &signed1(cost_c)),
            ("f", &signed1(cost_f)),
            ("under", &under.trim_end()),
            ("cheaper", &cheaper.trim_end()),
            ("noise", &noise.trim_end()),
        ],
    )?);
    let met = cost_n <= guest.target_cost && cost_n <= guest.target_of_ftrace * cost_f;
    s.push_str(&fill(
        text::GUEST,
        if met { "target-met" } else { "target-missed" },
        &[
            ("target", &pct1(guest.target_cost)),
            (
                "of_ftrace",
                &format!("{:.0}", guest.target_of_ftrace * 100.0),
            ),
            ("bound", &pct1(guest.target_of_ftrace * cost_f)),
            ("n", &signed1(cost_n)),
        ],
    )?);
    let floor = if hooked_lo >= 0.01 {
        "floor-every-round"
    } else if cost_hooked - ratio_spread >= 0.01 {
        "floor-beyond-noise"
    } else if cost_hooked + ratio_spread >= 0.01 {
        "floor-within-noise"
    } else {
        "floor-under"
    };
    let floor = fill(text::GUEST, floor, &[])?;
    s.push_str(&fill(
        text::GUEST,
        "hooked",
        &[
            ("hooked", &signed1(cost_hooked)),
            ("lo", &signed1(hooked_lo)),
            ("hi", &signed1(hooked_hi)),
            ("discard", &signed1(cost_discard)),
            ("n", &signed1(cost_n)),
            ("hooks_pts", &format!("{:.1}", cost_hooked * 100.0)),
            (
                "work_pts",
                &format!("{:.1}", (cost_discard - cost_hooked) * 100.0),
            ),
            (
                "agent_pts",
                &format!("{:.1}", (cost_n - cost_discard) * 100.0),
            ),
            ("spread", &pct1(ratio_spread)),
            ("floor", &floor.trim_end()),
        ],
    )?);

    workload::check_stages(&results, &modes)?;
    s.push_str(&workload::paragraph(&corr[0], &corr[5])?);
    if let Some(i) = modes.iter().position(|m| *m == keepraw::MODE) {
        let against = keepraw::Against {
            target_cost: guest.target_cost,
            target_of_ftrace: guest.target_of_ftrace,
            nfsdtop: cost_n,
            ftrace: cost_f,
        };
        s.push_str(&keepraw::paragraph(
            &results, &corr[i], args.reps, &against,
        )?);
    }

    // B: BPF run time per event, agent CPU.
    s.push_str(&fill(text::GUEST, "bpf", &[])?);
    // A number the guest wrote into summary.txt (0 where it wrote none).
    let value = |key: String| -> f64 {
        summary
            .get(&key)
            .and_then(|x| x.parse().ok())
            .unwrap_or(0.0)
    };
    // Per timed run: (run time, runs, dequeue runs, fio wall).
    let mut timed: BTreeMap<&str, (u64, u64, u64, f64)> = BTreeMap::new();
    for run in ["nfsdtop", "classic", keepraw::MODE] {
        let tag = format!("{run}-timed");
        // keepraw is timed only where its rounds ran.
        if run == keepraw::MODE && !results.join(format!("bpf-after-{tag}.txt")).exists() {
            continue;
        }
        let b = bpf_file(&results.join(format!("bpf-before-{tag}.txt")));
        let a = bpf_file(&results.join(format!("bpf-after-{tag}.txt")));
        let wall = value(format!("fio_wall.{tag}"));
        let (mut rt_all, mut runs_all, mut deq) = (0u64, 0u64, 0u64);
        for (name, (rt, rc)) in &a {
            let (rt0, rc0) = b.get(name).copied().unwrap_or((0, 0));
            let (rt, rc) = (rt.saturating_sub(rt0), rc.saturating_sub(rc0));
            if rc == 0 {
                continue;
            }
            rt_all += rt;
            runs_all += rc;
            if is_dequeue_program(name) {
                deq += rc;
            }
            writeln!(
                s,
                "| {run} | {name} | {rc} | {} | {:.1} ms | {:.0} |",
                fmt_rate(rc as f64 / wall.max(1e-9)),
                rt as f64 / 1e6,
                rt as f64 / rc as f64
            )?;
        }
        timed.insert(run, (rt_all, runs_all, deq, wall));
    }
    for (run, (rt, runs, deq, wall)) in &timed {
        writeln!(
            s,
            "| {run} | all | {runs} | {} | {:.1} ms | {:.0} ({:.0} per dispatch) |",
            fmt_rate(*runs as f64 / wall.max(1e-9)),
            *rt as f64 / 1e6,
            *rt as f64 / (*runs).max(1) as f64,
            *rt as f64 / (*deq).max(1) as f64
        )?;
    }
    let (n_rt, n_runs, n_deq, n_wall) = timed.get("nfsdtop").copied().unwrap_or_default();
    ensure!(n_runs > 0, "no BPF run counts in {}", results.display());
    ensure!(
        n_deq > 0,
        "no dequeue program among the BPF run counts in {}: the costs per dispatch need one",
        results.display()
    );
    writeln!(s)?;

    // The agent's CPU: the rounds (statistics off, as users run it).
    let agent = |m: &str| {
        let (mut cpu, mut wall, mut idle, mut idle_wall, mut rss) = (0.0, 0.0, 0.0, 0.0, vec![]);
        for r in 1..=args.reps {
            let tag = format!("{m}-{r}");
            wall += value(format!("fio_wall.{tag}"));
            cpu += value(format!("agent_cpu_ns.{tag}")) / 1e9;
            idle += value(format!("agent_idle_ns.{tag}")) / 1e9;
            idle_wall += value(format!("agent_idle_wall.{tag}"));
            if let Some(k) = summary.get(&format!("agent_rss_kib.{tag}")) {
                rss.push(k.clone());
            }
        }
        (cpu, wall, idle, idle_wall, rss)
    };
    let (cpu_n, wall_n, idle_n, idle_wall_n, rss_n) = agent("nfsdtop");
    let (cpu_c, wall_c, ..) = agent("classic");
    let dispatch_rate = n_deq as f64 / n_wall.max(1e-9);
    let per_dispatch_ns =
        |cpu: f64, wall: f64| cpu / wall.max(1e-9) / dispatch_rate.max(1e-9) * 1e9;
    s.push_str(&fill(
        text::GUEST,
        "agent",
        &[
            ("cpu_n", &format!("{cpu_n:.2}")),
            ("wall_n", &format!("{wall_n:.0}")),
            ("rate_n", &format!("{:.3}", cpu_n / wall_n.max(1e-9))),
            ("rss", &rss_n.join(" / ")),
            ("rate_c", &format!("{:.3}", cpu_c / wall_c.max(1e-9))),
            ("dispatch_rate", &fmt_rate(dispatch_rate)),
            ("ns_n", &format!("{:.0}", per_dispatch_ns(cpu_n, wall_n))),
            ("ns_c", &format!("{:.0}", per_dispatch_ns(cpu_c, wall_c))),
            ("idle_wall", &format!("{idle_wall_n:.0}")),
            ("idle", &format!("{:.3}", idle_n / idle_wall_n.max(1e-9))),
        ],
    )?);
    // Where the cost goes, per dispatch, in the guest's instructions: one
    // fio I/O is one dispatch, and with nothing attached it takes
    // 10^9 / IOPS of the shared instruction budget.
    let per_io = 1e9 / mn;
    let (c_rt, _, c_deq, _) = timed.get("classic").copied().unwrap_or_default();
    let f0 = |x: f64| format!("{x:.0}");
    s.push_str(&fill(
        text::GUEST,
        "per-dispatch",
        &[
            ("per_io", &f0(per_io)),
            ("one_pct", &f0(per_io / 100.0)),
            ("cost_n", &f0(cost_n * per_io)),
            ("pct_n", &format!("{:.1}", cost_n * 100.0)),
            ("prog_n", &f0(n_rt as f64 / n_deq.max(1) as f64)),
            ("agent_n", &f0(per_dispatch_ns(cpu_n, wall_n))),
            ("cost_c", &f0(cost_c * per_io)),
            ("prog_c", &f0(c_rt as f64 / c_deq.max(1) as f64)),
            ("agent_c", &f0(per_dispatch_ns(cpu_c, wall_c))),
            ("cost_f", &f0(cost_f * per_io)),
        ],
    )?);
    Ok((s, n_runs as f64 / n_wall.max(1e-9)))
}

/// `-icount shift=N,sleep=off`: the guest's clock advances by the number of
/// instructions it executes (2^N ns each), not by the host's wall clock, so
/// fio's IOPS in the guest are I/Os per instruction budget and the host's
/// load (other builds on this shared machine) no longer moves them.
/// NFSDTOP_BENCH_ICOUNT=off runs on the wall clock as before.
fn icount_arg() -> Option<String> {
    match std::env::var("NFSDTOP_BENCH_ICOUNT") {
        Ok(v) if v == "off" => None,
        Ok(v) => Some(v),
        Err(_) => Some("shift=0,sleep=off".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Part A's workload paragraph by hand: ratios 0.950/0.955,
    /// 0.948/0.951, 0.946/0.953 give differences of 0.5, 0.3 and 0.7
    /// points: mean 0.5, sd 0.2, interval 0.5 ± 4.303 × 0.2/√3 = ± 0.50.
    #[test]
    fn ftrace_enables_the_events_nfsdtop_attaches_to_by_default() {
        let [trixie, sid] = &GUESTS;
        assert_eq!(trixie.events().len(), Slot::COUNT);
        assert!(trixie.events().contains(&"svc_xprt_enqueue"));
        let sid = sid.events();
        assert_eq!(sid.len(), Slot::COUNT - 1);
        assert!(!sid.contains(&"svc_xprt_enqueue"));
        assert!(sid.contains(&"svc_xprt_dequeue") && sid.contains(&"svc_stats_latency"));
    }

    /// Each program bpftool can list for the dequeue counts the
    /// dispatches, whether named in full or cut to the kernel's 15
    /// characters (the typed ones, which nfsdtop loads without BTF); no
    /// other program does.
    #[test]
    fn dispatches_are_counted_by_every_dequeue_program() {
        for name in [
            "svc_xprt_dequeue",
            "svc_xprt_dequeu",
            "raw_svc_xprt_dequeue",
            "raw_svc_xprt_de",
            "typed_svc_xprt_",
        ] {
            assert!(is_dequeue_program(name), "{name}");
        }
        for name in [
            "typed_svc_stats",
            "raw_svc_xprt_enqueue",
            "raw_svc_xprt_en",
            "svc_stats_latency",
            "svc_xprt_",
        ] {
            assert!(!is_dequeue_program(name), "{name}");
        }
    }
}
