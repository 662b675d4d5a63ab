//! `cargo xtask vm-test`: real-kernel tests in QEMU (see
//! scripts/vm/README.md). This module owns the command line, the runs to
//! make (scenario, faults, timeouts) and the final report; the guest
//! harness is `crate::guest`, the guest side scripts/vm/guest-init.sh, and
//! each scenario's checks live in a file of their own below.
//!
//! A run boots the cached image under QEMU (TCG), runs NFS load from client
//! network namespaces while the kernel's own ftrace and nfsdtop watch the
//! same sunrpc events, and checks nfsdtop against ftrace.

pub(crate) mod batch;
pub(crate) mod clients;
mod depth;
mod fairshare;
mod flood;
mod ftrace;
mod keepraw;
mod kill;
mod lagging;
mod lagging_live;
pub mod load;
mod main_scenario;
mod measure;
mod names;
mod operations;
mod package;
mod pools;
mod procedures;
pub(crate) mod report;
mod restart;
mod services;
mod smallring;
#[cfg(test)]
mod tests;
mod threads;
mod tolerance;
mod wait;
mod whatif;
mod workload;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail};
use clap::{Args, ValueEnum};

use crate::guest::console::Deadlines;
use crate::guest::image::{ensure_image, Suite};
use crate::guest::qemu::Boot;
use crate::guest::{read_kv, run as guest_run};
use report::Report;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KernelSel {
    Trixie,
    Bookworm,
    Sid,
    /// trixie, bookworm and sid, one after the other
    All,
}

#[derive(Args, Debug)]
pub struct TestArgs {
    /// Which kernel(s) to test.
    #[arg(long, value_enum, default_value_t = KernelSel::Trixie)]
    pub kernel: KernelSel,
    /// Short load and no fault scenarios (what `cargo xtask test` runs).
    #[arg(long)]
    pub quick: bool,
    /// Use this nfsdtop binary instead of building it (`cargo build --release -p nfsdtop`).
    #[arg(long, value_name = "FILE")]
    pub nfsdtop: Option<PathBuf>,
    /// Seconds of fio per client (default: 4 with --quick, else 8).
    #[arg(long, value_name = "SECS")]
    pub fio_secs: Option<u32>,
    /// Check the results directory of an earlier run again, without booting.
    #[arg(long, value_name = "DIR")]
    pub recheck: Option<PathBuf>,
    /// Only these scenarios after the main measurement (default: all of
    /// them; repeat the flag for more than one).
    #[arg(long = "scenario", value_name = "NAME", value_parser = clap::builder::PossibleValuesParser::new(AFTER_MAIN))]
    pub scenarios: Vec<String>,
    /// How many NFS clients load the server: the default three (nconnect
    /// 1, 4 and 8 over IPv6), then a mix of NFSv3 and NFSv4.2 with
    /// nconnect 1 to 16 (up to 32; see xtask/src/vm/clients.rs).
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u16).range(1..=clients::MAX_CLIENTS as i64))]
    pub clients: u16,
    /// The load from a TOML file instead (clients, nfsd's threads and pool
    /// mode, fio's seconds, a class map: see scripts/vm/loads/).
    #[arg(long, value_name = "FILE", conflicts_with = "clients")]
    pub load: Option<PathBuf>,
    /// Boot this kernel instead of the suite's: a Debian kernel package
    /// (`linux-image-*.deb`, as `make bindeb-pkg` builds one; repeat the
    /// flag for a kernel split into several, as Debian's 7.x are),
    /// installed into a copy of the `--kernel` suite's image (cached;
    /// scripts/vm/fetch-kernel.sh SUITE DIR fetches Debian's).
    #[arg(long, value_name = "FILE")]
    pub kernel_deb: Vec<PathBuf>,
    /// Only the boot of scenario `package` (trixie): the .deb installed,
    /// upgraded, removed and purged under systemd.
    #[arg(long)]
    pub only_package: bool,
}

/// The scenarios after the main measurement, in its boot, in this order
/// (scripts/vm/scenario-NAME.sh, checked by vm/NAME.rs).
const AFTER_MAIN: [&str; 6] = ["whatif", "pools", "names", "keepraw", "lagging", "threads"];
/// Of them, those that poll nfsdtopd's HTTP API in the guest.
const DAEMON_SCENARIOS: [&str; 1] = ["lagging"];

impl TestArgs {
    /// What `cargo xtask test` runs: trixie, short load, no faults.
    pub fn readme() -> TestArgs {
        TestArgs {
            kernel: KernelSel::Trixie,
            quick: true,
            nfsdtop: None,
            fio_secs: None,
            recheck: None,
            scenarios: Vec::new(),
            clients: 3,
            load: None,
            kernel_deb: Vec::new(),
            only_package: false,
        }
    }
}
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scenario {
    /// The measurement, then the fault scenarios that share its boot.
    Main,
    /// nfsdtop --wait started before nfsd (a boot of its own).
    Wait,
    /// The .deb installed, upgraded, removed and purged under systemd (a
    /// boot of its own).
    Package,
}

impl Scenario {
    fn label(self) -> &'static str {
        match self {
            Scenario::Main => "main",
            Scenario::Wait => "wait",
            Scenario::Package => "package",
        }
    }
}

struct RunConfig {
    scenario: Scenario,
    fio_secs: u32,
    faults: Vec<&'static str>,
    /// Scenarios after the main measurement, in the same boot
    /// (scripts/vm/scenario-NAME.sh).
    after_main: Vec<&'static str>,
    guest_timeout_s: u64,
    load: load::Load,
}

/// The guest run of `cfg`: guest-init.sh with its config and every
/// fault and scenario script.
fn guest_spec<'a>(
    cfg: &RunConfig,
    nfsdtop: &'a Path,
    daemon: Option<&'a Path>,
    debs: &'a [PathBuf],
) -> anyhow::Result<guest_run::Spec<'a>> {
    let limits = Deadlines {
        boot: Some(Duration::from_secs(300)),
        run: Duration::from_secs(cfg.guest_timeout_s + 120),
    };
    if cfg.scenario == Scenario::Package {
        return Ok(guest_run::Spec {
            label: "vm",
            script: "package-guest.sh",
            extra: vec![],
            host_files: debs.to_vec(),
            boot: Boot::Systemd,
            config: format!(
                "GUEST_TIMEOUT={}\n{}",
                cfg.guest_timeout_s,
                package::guest_config(debs)
            ),
            nfsdtop: Some(nfsdtop),
            more_bins: vec![],
            writable_root: false,
            output_bytes: 256 << 20,
            icount: None,
            limits,
        });
    }
    let mut extra = vec![];
    for e in fs::read_dir(crate::root().join("scripts/vm"))? {
        let name = e?.file_name().to_string_lossy().to_string();
        if (name.starts_with("fault-") || name.starts_with("scenario-")) && name.ends_with(".sh") {
            extra.push(name);
        }
    }
    extra.sort();
    let config = format!(
        "SCENARIO={}\nFIO_RUNTIME={}\nGUEST_TIMEOUT={}\nFAULTS=\"{}\"\nAFTER_MAIN=\"{}\"\nCLIENTS=\"{}\"\n",
        cfg.scenario.label(),
        cfg.fio_secs,
        guest_timeout(cfg),
        cfg.faults.join(" "),
        cfg.after_main.join(" "),
        clients::guest_config(&cfg.load.clients),
    ) + &load_config(&cfg.load);
    Ok(guest_run::Spec {
        label: "vm",
        script: "guest-init.sh",
        extra,
        host_files: vec![],
        boot: Boot::Plain,
        config,
        nfsdtop: Some(nfsdtop),
        writable_root: false,
        more_bins: daemon.map(|d| ("nfsdtopd", d)).into_iter().collect(),
        output_bytes: 2 << 30,
        icount: None,
        limits: Deadlines {
            boot: Some(Duration::from_secs(300)),
            run: Duration::from_secs(guest_timeout(cfg) + 120),
        },
    })
}

/// The guest's own bound: the config's, and half a minute more for each
/// client past three (namespaces, mounts and fio jobs each take their
/// time under TCG, every load and scenario again).
fn guest_timeout(cfg: &RunConfig) -> u64 {
    cfg.guest_timeout_s + 30 * cfg.load.clients.len().saturating_sub(3) as u64
}

/// The load's nfsd and nfsdtop settings, as guest config lines.
fn load_config(load: &load::Load) -> String {
    use base64::Engine as _;
    let encode = |m: &str| base64::engine::general_purpose::STANDARD.encode(m);
    format!(
        "NFSD_THREADS={}\nNFSD_POOL_MODE={}\nCLASS_MAP_B64={}\n",
        load.nfsd_threads,
        load.pool_mode.as_deref().unwrap_or(""),
        load.class_map.as_deref().map(encode).unwrap_or_default()
    )
}

/// What a run boots: a suite's image, or a kernel package installed into
/// one (`--kernel-deb`).
#[derive(Clone, Debug)]
pub struct Target {
    pub suite: Suite,
    /// The kernel's package files (none: the suite's own kernel).
    pub packages: Vec<PathBuf>,
}

impl Target {
    pub fn image(&self) -> anyhow::Result<crate::guest::image::Image> {
        if self.packages.is_empty() {
            ensure_image(self.suite, false)
        } else {
            crate::guest::kernel::ensure_kernel_image(self.suite, &self.packages)
        }
    }
    pub fn name(&self) -> String {
        let image = self.packages.iter().find_map(|p| {
            let n = p.file_name()?.to_string_lossy().into_owned();
            n.starts_with("linux-image-")
                .then(|| n.split('_').next().unwrap_or(&n).to_string())
        });
        match (image, self.packages.first()) {
            (_, None) => self.suite.name().to_string(),
            (Some(n), _) => n,
            (None, Some(p)) => p.display().to_string(),
        }
    }
}

/// One boot of `target` with the main measurement of `load` (and, with
/// `whatif`, the what-if scenario after it), checked as vm-test checks
/// it: `cargo xtask compare`'s run of each kernel. The report and the
/// results directory.
pub(crate) fn run_load(
    target: &Target,
    nfsdtop: &Path,
    load: load::Load,
    whatif: bool,
) -> anyhow::Result<(Report, PathBuf)> {
    let cfg = RunConfig {
        scenario: Scenario::Main,
        fio_secs: load.seconds.unwrap_or(8),
        faults: vec![],
        after_main: if whatif { vec!["whatif"] } else { vec![] },
        guest_timeout_s: 900,
        load,
    };
    run_one(target, nfsdtop, None, &[], &cfg)
}

fn run_one(
    target: &Target,
    nfsdtop: &Path,
    daemon: Option<&Path>,
    debs: &[PathBuf],
    cfg: &RunConfig,
) -> anyhow::Result<(Report, PathBuf)> {
    let img = target.image()?;
    let label = cfg.scenario.label();
    let run_dir = guest_run::new_run_dir(&format!("{}-{label}", target.suite.name()))?;
    eprintln!(
        "vm: booting {} (kernel {}) for {label}, results in {}",
        target.name(),
        img.kernel,
        run_dir.display()
    );
    // A guest kernel panic is retried once, loudly: under QEMU TCG with
    // one host thread per vCPU (thread=multi) we saw two (an oops at a
    // code-patching site in sched_clock_cpu at boot, and in
    // ktime_get_mono_fast_ns); one caused by nfsdtop would happen again.
    let mut retried = None;
    let spec = guest_spec(cfg, nfsdtop, daemon, debs)?;
    let times = match guest_run::run(&img, &spec, &run_dir) {
        Err(e) if format!("{e:#}").contains("guest kernel panicked") => {
            let first = run_dir.with_file_name(format!(
                "{}-panic",
                run_dir.file_name().unwrap_or_default().to_string_lossy()
            ));
            fs::rename(&run_dir, &first)?;
            fs::create_dir_all(&run_dir)?;
            eprintln!(
                "vm: the guest kernel panicked ({}); retrying once",
                first.join("console.log").display()
            );
            retried = Some(first);
            guest_run::run(&img, &spec, &run_dir)?
        }
        r => r?,
    };
    let mut rep = Report {
        lines: vec![format!(
            "{} {label} (kernel {}): boot {:.1} s, whole run {:.1} s, results {}",
            target.name(),
            img.kernel,
            times.boot_s,
            times.total_s,
            run_dir.join("results").display()
        )],
        failures: vec![],
    };
    if let Some(first) = retried {
        rep.note(format!(
            "warning: the first boot's guest kernel panicked (console: {}); this is the retry",
            first.join("console.log").display()
        ));
    }
    check_results(&run_dir.join("results"), cfg, nfsdtop, &mut rep)?;
    Ok((rep, run_dir.join("results")))
}

fn check_results(
    results: &Path,
    cfg: &RunConfig,
    nfsdtop: &Path,
    rep: &mut Report,
) -> anyhow::Result<()> {
    let summary = read_kv(&results.join("summary.txt"))?;
    rep.note(format!(
        "guest kernel {}",
        summary.get("kernel").map(String::as_str).unwrap_or("?")
    ));
    if let Some(e) = summary.get("error") {
        rep.check(false, format!("guest run: {e}"));
    }
    match cfg.scenario {
        Scenario::Wait => wait::check(results, &summary, rep),
        Scenario::Package => package::check(&summary, rep),
        Scenario::Main => {
            main_scenario::check(results, &summary, rep);
            depth::check(results, &summary, rep);
            for s in &cfg.after_main {
                match *s {
                    "whatif" => whatif::check(results, &summary, rep, nfsdtop),
                    "names" => names::check(results, &summary, rep),
                    "pools" => pools::check(results, &summary, rep),
                    "keepraw" => keepraw::check(results, &summary, rep),
                    "lagging" => lagging::check(results, &summary, rep),
                    "threads" => threads::check(results, &summary, rep),
                    other => rep.check(false, format!("unknown scenario {other}")),
                }
            }
            for f in &cfg.faults {
                match *f {
                    "restart" => restart::check(results, &summary, rep),
                    "kill" => kill::check(&summary, rep),
                    "smallring" => smallring::check(results, &summary, rep),
                    "flood" => flood::check(results, &summary, rep),
                    other => rep.check(false, format!("unknown fault {other}")),
                }
            }
        }
    }
    Ok(())
}

pub fn test(args: TestArgs) -> anyhow::Result<()> {
    let suites: Vec<Suite> = match args.kernel {
        KernelSel::Trixie => vec![Suite::Trixie],
        KernelSel::Bookworm => vec![Suite::Bookworm],
        KernelSel::Sid => vec![Suite::Sid],
        KernelSel::All => vec![Suite::Trixie, Suite::Bookworm, Suite::Sid],
    };
    if !args.kernel_deb.is_empty() && suites.len() > 1 {
        bail!(
            "--kernel-deb installs into one suite's image: give --kernel trixie, bookworm or sid"
        );
    }
    let targets: Vec<Target> = suites
        .iter()
        .map(|s| Target {
            suite: *s,
            packages: args.kernel_deb.clone(),
        })
        .collect();
    let load = match &args.load {
        Some(f) => load::read(f)?,
        None => load::Load {
            description: String::new(),
            clients: clients::for_count(args.clients.into()),
            nfsd_threads: load::DEFAULT_NFSD_THREADS,
            pool_mode: None,
            seconds: None,
            class_map: None,
        },
    };
    let fio_secs = args
        .fio_secs
        .or(load.seconds)
        .unwrap_or(if args.quick { 4 } else { 8 });
    let mut configs = vec![RunConfig {
        scenario: Scenario::Main,
        fio_secs,
        faults: if args.quick {
            vec![]
        } else {
            vec!["restart", "kill", "smallring", "flood"]
        },
        after_main: AFTER_MAIN
            .into_iter()
            .filter(|s| args.scenarios.is_empty() || args.scenarios.iter().any(|a| a == s))
            .collect(),
        // Bounds for a hung guest: a quick run takes 4-8 minutes under TCG,
        // more on a busy host (the whatif recorder may wait 5 minutes).
        guest_timeout_s: if args.quick { 900 } else { 1500 },
        load: load.clone(),
    }];
    // The .deb under systemd, on trixie only (Debian's current release,
    // what an operator installs it on); --quick too, so `cargo xtask
    // test` runs it.
    let package = RunConfig {
        scenario: Scenario::Package,
        fio_secs,
        faults: vec![],
        after_main: vec![],
        guest_timeout_s: 600,
        load: load.clone(),
    };
    if !args.quick {
        configs.push(RunConfig {
            scenario: Scenario::Wait,
            fio_secs,
            faults: vec![],
            after_main: vec![],
            guest_timeout_s: 600,
            load,
        });
    }
    if let Some(dir) = args.recheck {
        // Check the results of an earlier run again (no boot).
        let cfg = if dir.to_string_lossy().contains("-wait-") {
            configs.pop().filter(|c| c.scenario == Scenario::Wait)
        } else if dir.to_string_lossy().contains("-package-") {
            Some(package)
        } else {
            configs.into_iter().next()
        }
        .ok_or_else(|| anyhow!("--recheck of a wait run needs a full (non --quick) run"))?;
        let mut rep = Report {
            lines: vec![format!("recheck {}", dir.display())],
            failures: vec![],
        };
        // The whatif check runs nfsdtop on the recording.
        let nfsdtop = match args.nfsdtop {
            Some(p) => p,
            None => guest_run::build_nfsdtop()?,
        };
        check_results(&dir, &cfg, &nfsdtop, &mut rep)?;
        return report(vec![(String::from("recheck"), rep)]);
    }
    if args.only_package && !suites.contains(&Suite::Trixie) {
        bail!("--only-package runs on trixie: drop --kernel or pass --kernel trixie");
    }
    // Images first (the slow part, and independent of the nfsdtop build).
    for t in &targets {
        t.image()?;
    }
    let nfsdtop = match args.nfsdtop {
        Some(p) => p,
        None => guest_run::build_nfsdtop()?,
    };
    // nfsdtopd goes into the guest for the scenarios that poll its API:
    // the one beside --nfsdtop's binary, or a build.
    let daemon = if configs
        .iter()
        .any(|c| c.after_main.iter().any(|s| DAEMON_SCENARIOS.contains(s)))
    {
        match nfsdtop.with_file_name("nfsdtopd") {
            d if d.is_file() => Some(d),
            _ => Some(guest_run::build_nfsdtopd()?),
        }
    } else {
        None
    };
    if args.only_package {
        configs.clear();
    }
    // The .deb under systemd goes with trixie's own kernel.
    let packaged = |t: &Target| t.suite == Suite::Trixie && t.packages.is_empty();
    let debs = if targets.iter().any(packaged) {
        package::build_packages()?
    } else {
        vec![]
    };
    let mut reports = vec![];
    for t in &targets {
        let with_package = packaged(t).then_some(&package);
        for cfg in configs.iter().chain(with_package) {
            let rep = run_one(t, &nfsdtop, daemon.as_deref(), &debs, cfg)
                .map(|(rep, _)| rep)
                .unwrap_or_else(|e| Report {
                    lines: vec![format!("{}: the run failed", t.name())],
                    failures: vec![format!("{e:#}")],
                });
            reports.push((t.name(), rep));
        }
    }
    report(reports)
}

fn report(reports: Vec<(String, Report)>) -> anyhow::Result<()> {
    let mut failed = vec![];
    for (name, rep) in reports {
        eprintln!("vm-test {name}:");
        for l in &rep.lines {
            eprintln!("{l}");
        }
        for f in &rep.failures {
            failed.push(format!("{name}: {f}"));
        }
    }
    if !failed.is_empty() {
        bail!("vm-test failed:\n  {}", failed.join("\n  "));
    }
    eprintln!("vm-test: all checks passed");
    Ok(())
}

/// "6.12.57+deb13-amd64" → (6, 12).
fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

fn expected_wait_source(release: &str) -> &'static str {
    match kernel_version(release) {
        Some(v) if v >= (6, 16) => "qtime",
        _ => "enqueue-dequeue",
    }
}

fn num(summary: &BTreeMap<String, String>, key: &str) -> Option<u64> {
    summary.get(key)?.parse().ok()
}
