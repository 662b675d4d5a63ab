//! Real-kernel tests in QEMU (see scripts/vm/README.md).
//!
//! `cargo xtask vm-image --suite trixie` builds (once) a cached Debian image
//! with a real nfsd; `cargo xtask vm-test [--kernel trixie|bookworm|sid|all]
//! [--quick]` boots it under QEMU (TCG), runs NFS load from client network
//! namespaces while the kernel's own ftrace and nfsdtop watch the same
//! sunrpc events, and checks nfsdtop against ftrace.
//!
//! Host ↔ guest: the root image is used through a QEMU snapshot (never
//! modified); the run's input (guest script, config, nfsdtop binary) is a
//! plain tar archive on a second virtio disk; the guest writes its results
//! as a tar archive to a third disk. Progress comes over the serial console
//! as `NFSDTOP-VM: ...` markers, each phase bounded by a timeout.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use clap::{Args, ValueEnum};
use serde_json::Value;

mod workload;

use crate::root;

/// Packages of every image. No initramfs-tools: sid's kernel
/// pulls in dracut and the two conflict; the others get it by dependency.
/// bpftool: the fault test checks that a killed agent leaves no program.
const PACKAGES: &str = "linux-image-amd64,nfs-kernel-server,nfs-common,rpcbind,fio,iproute2,\
                        kmod,procps,util-linux,bpftool";
const DEFAULT_MIRROR: &str = "http://deb.debian.org/debian";

/// The NFS clients of every run: (netns name, IP family, nconnect). Client
/// i (1-based) gets 10.99.i.2 or fd99:i::2 and mounts the server at .1.
const CLIENTS: [(&str, u8, u32); 3] = [("c1", 4, 1), ("c2", 4, 4), ("c3", 6, 8)];

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Suite {
    /// Debian 12, kernel 6.1 (tracepoint generation 5.18–6.5)
    Bookworm,
    /// Debian 13, kernel 6.12 (generation 6.6–6.15)
    Trixie,
    /// Debian unstable, kernel ≥ 6.16 (qtime)
    Sid,
}

impl Suite {
    fn name(self) -> &'static str {
        match self {
            Suite::Bookworm => "bookworm",
            Suite::Trixie => "trixie",
            Suite::Sid => "sid",
        }
    }
}

#[derive(Args, Debug)]
pub struct ImageArgs {
    /// Debian suite of the image.
    #[arg(long, value_enum, default_value_t = Suite::Trixie)]
    pub suite: Suite,
    /// Build again even if a valid cached image exists.
    #[arg(long)]
    pub rebuild: bool,
}

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
}

impl TestArgs {
    /// What `cargo xtask test` runs: trixie, short load, no faults.
    pub fn readme() -> TestArgs {
        TestArgs {
            kernel: KernelSel::Trixie,
            quick: true,
            nfsdtop: None,
            fio_secs: None,
            recheck: None,
        }
    }
}

// ---------------------------------------------------------------------------
// Images

fn cache_root() -> PathBuf {
    if let Some(d) = std::env::var_os("NFSDTOP_VM_CACHE") {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/var/tmp"));
    base.join("nfsdtop-vm")
}

fn fnv1a(data: &[u8], mut h: u64) -> u64 {
    for b in data {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// The cache key: suite, package list and the scripts that shape the image.
fn image_key(suite: Suite) -> anyhow::Result<String> {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    h = fnv1a(suite.name().as_bytes(), h);
    h = fnv1a(PACKAGES.as_bytes(), h);
    for s in ["scripts/vm/build-image.sh", "scripts/vm/guest-boot.sh"] {
        let text = fs::read(root().join(s)).with_context(|| format!("reading {s}"))?;
        h = fnv1a(&text, h);
    }
    Ok(format!("{:016x}", h))
}

pub struct Image {
    pub dir: PathBuf,
    pub kernel: String,
}

fn read_kv(path: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(parse_kv(&text))
}

fn parse_kv(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// A cached image is valid when its manifest (written last, after an atomic
/// rename) and all its files are there.
fn valid_image(dir: &Path, suite: Suite) -> Option<Image> {
    let m = read_kv(&dir.join("manifest")).ok()?;
    if m.get("suite").map(String::as_str) != Some(suite.name()) {
        return None;
    }
    for f in ["vmlinuz", "initrd.img", "root.img"] {
        if !dir.join(f).is_file() {
            return None;
        }
    }
    Some(Image {
        dir: dir.to_path_buf(),
        kernel: m.get("kernel")?.clone(),
    })
}

pub fn ensure_image(suite: Suite, rebuild: bool) -> anyhow::Result<Image> {
    let dir = cache_root().join(format!("{}-{}", suite.name(), image_key(suite)?));
    if !rebuild {
        if let Some(img) = valid_image(&dir, suite) {
            eprintln!(
                "vm: cached {} image {} (kernel {})",
                suite.name(),
                dir.display(),
                img.kernel
            );
            return Ok(img);
        }
    }
    fs::create_dir_all(cache_root())?;
    let mirror = std::env::var("NFSDTOP_DEBIAN_MIRROR").unwrap_or_else(|_| DEFAULT_MIRROR.into());
    let started = Instant::now();
    eprintln!(
        "vm: building the {} image in {} (debootstrap, about 4-5 minutes)",
        suite.name(),
        dir.display()
    );
    let status = Command::new("bash")
        .arg(root().join("scripts/vm/build-image.sh"))
        .args([suite.name(), &dir.display().to_string(), &mirror, PACKAGES])
        .status()
        .context("cannot run scripts/vm/build-image.sh")?;
    if !status.success() {
        bail!("building the {} image failed ({status})", suite.name());
    }
    let img = valid_image(&dir, suite)
        .ok_or_else(|| anyhow!("image build finished but {} is not valid", dir.display()))?;
    prune(suite, &dir);
    eprintln!(
        "vm: {} image built in {:.0?} (kernel {})",
        suite.name(),
        started.elapsed(),
        img.kernel
    );
    Ok(img)
}

/// Removes this suite's images under other keys (older package lists or
/// scripts) and builds left behind by a process that no longer exists.
fn prune(suite: Suite, keep: &Path) {
    let Ok(entries) = fs::read_dir(cache_root()) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        let Some(rest) = name.strip_prefix(&format!("{}-", suite.name())) else {
            continue;
        };
        let stale = match rest.split_once(".tmp-") {
            // An interrupted build: stale once its builder is gone.
            Some((_, pid)) => !Path::new("/proc").join(pid).exists(),
            None => rest.len() == 16 && path != keep,
        };
        if stale {
            eprintln!("vm: removing stale {}", path.display());
            let _ = fs::remove_dir_all(&path);
        }
    }
}

pub fn image(args: ImageArgs) -> anyhow::Result<()> {
    ensure_image(args.suite, args.rebuild).map(|_| ())
}

// ---------------------------------------------------------------------------
// nfsdtop binary

fn build_nfsdtop() -> anyhow::Result<PathBuf> {
    let started = Instant::now();
    eprintln!("vm: cargo build --release -p nfsdtop");
    let out = crate::cargo()
        .args([
            "build",
            "--release",
            "-p",
            "nfsdtop",
            "--bin",
            "nfsdtop",
            "--message-format=json-render-diagnostics",
        ])
        .current_dir(root())
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run cargo build")?;
    if !out.status.success() {
        bail!("cargo build --release -p nfsdtop failed ({})", out.status);
    }
    let mut exe = None;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if v["reason"] == "compiler-artifact" && v["target"]["name"] == "nfsdtop" {
            if let Some(p) = v["executable"].as_str() {
                exe = Some(PathBuf::from(p));
            }
        }
    }
    let exe = exe.ok_or_else(|| anyhow!("cargo build did not report the nfsdtop executable"))?;
    eprintln!(
        "vm: nfsdtop built in {:.0?}: {}",
        started.elapsed(),
        exe.display()
    );
    Ok(exe)
}

// ---------------------------------------------------------------------------
// One guest run

/// Kills QEMU if the host side gives up (timeout, error, panic).
struct Qemu(Child);

impl Drop for Qemu {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn tail(path: &Path, n: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn set_exec(p: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(p, fs::Permissions::from_mode(0o755))
        .with_context(|| format!("chmod {}", p.display()))
}

/// A raw disk holding `tar` of `dir`, padded to whole MiB.
fn make_input_disk(dir: &Path, disk: &Path) -> anyhow::Result<()> {
    let status = Command::new("tar")
        .arg("-cf")
        .arg(disk)
        .arg("-C")
        .arg(dir)
        .arg(".")
        .status()
        .context("cannot run tar")?;
    if !status.success() {
        bail!("tar of the input disk failed");
    }
    let f = fs::OpenOptions::new().write(true).open(disk)?;
    let len = f.metadata()?.len();
    f.set_len(len.div_ceil(1 << 20) * (1 << 20))?;
    Ok(())
}

/// One host thread for all vCPUs by default: with thread=multi (QEMU 7.2)
/// guests twice died executing half-patched kernel text (static keys and
/// alternatives being rewritten while the other vCPU ran them). Single is
/// about 1.3x slower here and still shows the contention plainly.
fn tcg_accel() -> String {
    let mode = std::env::var("NFSDTOP_VM_TCG").unwrap_or_else(|_| "single".into());
    format!("tcg,thread={mode}")
}

/// The QEMU command line of a guest run (vm-test and bench): the image's
/// kernel and root disk (copy-on-write), the input disk read-only, the
/// output disk, two vCPUs on single-threaded TCG, console on stdout.
/// `icount`: `-icount` options, for a clock that counts instructions.
pub(crate) fn qemu_command(
    img: &Image,
    in_disk: &Path,
    out_disk: &Path,
    run_dir: &Path,
    icount: Option<&str>,
) -> anyhow::Result<Command> {
    let drive = |p: &Path, extra: &str| format!("file={},if=virtio,format=raw{extra}", p.display());
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args([
        "-accel",
        &tcg_accel(),
        "-cpu",
        // With -icount, TCG's cmpxchg16b (SLUB's fast path) was seen to
        // double-fault the guest (QEMU 10.0): without cx16 SLUB takes its
        // locked path, the same in every mode of a benchmark.
        if icount.is_some() { "max,-cx16" } else { "max" },
        "-smp",
        "2",
        "-m",
        "3072",
    ]);
    if let Some(i) = icount {
        cmd.args(["-icount", i]);
    }
    cmd.args(["-nographic", "-no-reboot", "-nic", "none"])
        .arg("-kernel")
        .arg(img.dir.join("vmlinuz"))
        .arg("-initrd")
        .arg(img.dir.join("initrd.img"))
        .arg("-drive")
        .arg(drive(&img.dir.join("root.img"), ",snapshot=on"))
        .arg("-drive")
        .arg(drive(in_disk, ",readonly=on"))
        .arg("-drive")
        .arg(drive(out_disk, ""))
        .args([
            "-append",
            "root=/dev/vda rw console=ttyS0 init=/sbin/nfsdtop-vm-init quiet panic=-1",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(File::create(run_dir.join("qemu.err"))?);
    Ok(cmd)
}

struct GuestTimes {
    boot_s: f64,
    total_s: f64,
}

fn run_guest(
    img: &Image,
    nfsdtop: &Path,
    cfg: &RunConfig,
    run_dir: &Path,
) -> anyhow::Result<GuestTimes> {
    let input = run_dir.join("input");
    fs::create_dir_all(&input)?;
    let vm_scripts = root().join("scripts/vm");
    fs::copy(vm_scripts.join("guest-init.sh"), input.join("init.sh"))?;
    set_exec(&input.join("init.sh"))?;
    for e in fs::read_dir(&vm_scripts)? {
        let p = e?.path();
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        if name.starts_with("fault-") && name.ends_with(".sh") {
            fs::copy(&p, input.join(&name))?;
            set_exec(&input.join(&name))?;
        }
    }
    // A stripped copy boots faster (smaller input disk to unpack).
    let guest_bin = input.join("nfsdtop");
    let stripped = Command::new("strip")
        .arg("-o")
        .arg(&guest_bin)
        .arg(nfsdtop)
        .status()
        .is_ok_and(|s| s.success());
    if !stripped {
        fs::copy(nfsdtop, &guest_bin)?;
    }
    let clients: Vec<String> = CLIENTS
        .iter()
        .map(|(n, fam, nc)| format!("{n}:{fam}:{nc}"))
        .collect();
    let config =
        format!(
        "RUN_ID={}\nSCENARIO={}\nFIO_RUNTIME={}\nGUEST_TIMEOUT={}\nFAULTS=\"{}\"\nCLIENTS=\"{}\"\n",
        run_dir.file_name().unwrap_or_default().to_string_lossy(),
        if cfg.scenario == Scenario::Wait { "wait" } else { "main" },
        cfg.fio_secs,
        cfg.guest_timeout_s,
        cfg.faults.join(" "),
        clients.join(" "),
    );
    fs::write(input.join("config"), config)?;
    let in_disk = run_dir.join("input.img");
    make_input_disk(&input, &in_disk)?;
    let _ = fs::remove_file(&guest_bin); // on the input disk now

    let out_disk = run_dir.join("output.img");
    File::create(&out_disk)?.set_len(2 << 30)?;

    let mut cmd = qemu_command(img, &in_disk, &out_disk, run_dir, None)?;
    let started = Instant::now();
    let mut child = Qemu(cmd.spawn().context("cannot start qemu-system-x86_64")?);
    let stdout = child.0.stdout.take().expect("piped stdout");
    let console = run_dir.join("console.log");
    let (tx, rx) = mpsc::channel::<String>();
    let mut log = File::create(&console)?;
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).split(b'\n') {
            let Ok(line) = line else { break };
            let line = String::from_utf8_lossy(&line)
                .trim_end_matches('\r')
                .to_string();
            let _ = writeln!(log, "{line}");
            if line.contains("NFSDTOP-VM:") || line.contains("Kernel panic") {
                let _ = tx.send(line);
            }
        }
    });
    let boot_deadline = started + Duration::from_secs(300);
    let run_deadline = started + Duration::from_secs(cfg.guest_timeout_s + 120);
    let mut boot_s = None;
    loop {
        let deadline = if boot_s.is_none() {
            boot_deadline
        } else {
            run_deadline
        };
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let t = started.elapsed().as_secs_f64();
                eprintln!("vm: [{t:6.1}s] {}", line.trim());
                if line.contains("Kernel panic") {
                    bail!(
                        "the guest kernel panicked; console ({}):\n{}",
                        console.display(),
                        tail(&console, 30)
                    );
                }
                if boot_s.is_none() && line.contains("NFSDTOP-VM: boot-init") {
                    boot_s = Some(t);
                }
                if line.contains("NFSDTOP-VM: done") {
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let what = if boot_s.is_none() {
                    "to boot (no boot-init marker)"
                } else {
                    "to finish"
                };
                drop(child);
                bail!(
                    "the guest took too long {what} ({:.0?}); QEMU killed; console ({}):\n{}",
                    started.elapsed(),
                    console.display(),
                    tail(&console, 30)
                );
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                bail!(
                    "QEMU exited before the guest said done; console ({}):\n{}\nqemu stderr:\n{}",
                    console.display(),
                    tail(&console, 30),
                    tail(&run_dir.join("qemu.err"), 10)
                );
            }
        }
    }
    // The guest powers off right after "done": give QEMU a bounded time to exit.
    let exit_deadline = Instant::now() + Duration::from_secs(60);
    while child.0.try_wait()?.is_none() {
        if Instant::now() >= exit_deadline {
            eprintln!("vm: QEMU did not exit after the guest powered off: killing it");
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(child);
    let _ = reader.join();
    let total_s = started.elapsed().as_secs_f64();

    let results = run_dir.join("results");
    fs::create_dir_all(&results)?;
    let status = Command::new("tar")
        .arg("-xf")
        .arg(&out_disk)
        .arg("-C")
        .arg(&results)
        .status()?;
    if !status.success() {
        bail!(
            "cannot unpack the guest's output disk {}",
            out_disk.display()
        );
    }
    // The disks are large and can be rebuilt; keep the results.
    let _ = fs::remove_file(&out_disk);
    let _ = fs::remove_file(&in_disk);
    Ok(GuestTimes {
        boot_s: boot_s.unwrap_or(f64::NAN),
        total_s,
    })
}

// ---------------------------------------------------------------------------
// Ground truth from ftrace

/// Per-client dequeue counts from ftrace's `trace` text.
#[derive(Debug, Default, PartialEq)]
pub struct Ftrace {
    /// svc_xprt_dequeue records of nfsd (server port 2049) per client IP,
    /// listener records left out (their printed client is bogus).
    pub per_client: BTreeMap<IpAddr, u64>,
    /// Listener records (flags include LISTENER or XPT_LISTENER) and
    /// records with an empty client address (UDP).
    pub listener: u64,
    /// Dequeues of other services (lockd, NFS callback), by server port.
    pub other_services: BTreeMap<u16, u64>,
    /// Every svc_xprt_dequeue record.
    pub total: u64,
    /// Records whose addresses could not be parsed.
    pub unparsed: u64,
    pub enqueue: u64,
    /// svc_stats_latency of nfsd per client IP: (requests, sum of
    /// `execute-us`).
    pub exec_per_client: BTreeMap<IpAddr, (u64, u64)>,
}

fn field<'a>(rest: &'a str, key: &str) -> Option<&'a str> {
    rest.split_whitespace()
        .find_map(|tok| tok.strip_prefix(key)?.strip_prefix('='))
}

pub fn parse_trace(text: &str) -> Ftrace {
    let mut f = Ftrace::default();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        if line.contains(" svc_xprt_enqueue: ") {
            f.enqueue += 1;
            continue;
        }
        if let Some((_, rest)) = line.split_once(" svc_stats_latency: ") {
            let server = field(rest, "server").and_then(|s| s.parse::<SocketAddr>().ok());
            let client = field(rest, "client").and_then(|s| s.parse::<SocketAddr>().ok());
            let us = field(rest, "execute-us").and_then(|v| v.parse::<u64>().ok());
            if let (Some(s), Some(c), Some(us)) = (server, client, us) {
                if s.port() == 2049 && !s.ip().is_unspecified() {
                    let e = f.exec_per_client.entry(c.ip()).or_default();
                    e.0 += 1;
                    e.1 += us;
                }
            }
            continue;
        }
        let Some((_, rest)) = line.split_once(" svc_xprt_dequeue: ") else {
            continue;
        };
        f.total += 1;
        let flags = field(rest, "flags").unwrap_or("");
        // 6.6+ prints "LISTENER", 5.18-6.5 "XPT_LISTENER".
        // An empty client address (listeners, UDP transports such as
        // lockd's) prints as "(einval)" or as a stale address read past the
        // record; such transports are bound to the wildcard address, while
        // a connected TCP transport has a specific local one. All of these
        // are nfsdtop's (listener) pseudo-peer.
        let server = field(rest, "server").and_then(|s| s.parse::<SocketAddr>().ok());
        let empty_client = field(rest, "client") == Some("(einval)")
            || server.is_some_and(|s| s.ip().is_unspecified());
        if empty_client
            || flags
                .split('|')
                .any(|fl| fl.trim_start_matches("XPT_") == "LISTENER")
        {
            f.listener += 1;
            continue;
        }
        let client = field(rest, "client").and_then(|s| s.parse::<SocketAddr>().ok());
        match (server, client) {
            (Some(s), Some(c)) if s.port() == 2049 => {
                *f.per_client.entry(c.ip()).or_default() += 1;
            }
            (Some(s), Some(_)) => *f.other_services.entry(s.port()).or_default() += 1,
            _ => f.unparsed += 1,
        }
    }
    f
}

/// Sums of `overrun`, `commit overrun` and `dropped events` over every CPU
/// in the saved `per_cpu/cpu*/stats`; None if the file has no CPU stats.
pub fn ftrace_losses(stats: &str) -> Option<u64> {
    let mut seen = false;
    let mut lost = 0;
    for line in stats.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        if matches!(k.trim(), "overrun" | "commit overrun" | "dropped events") {
            seen = true;
            lost += v.trim().parse::<u64>().unwrap_or(u64::MAX / 4);
        }
    }
    seen.then_some(lost)
}

// ---------------------------------------------------------------------------
// Checks

/// "6.12.57+deb13-amd64" → (6, 12).
fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// `source.detail` of the last line of `nfsdtop-RUN.jsonl` ("" if none).
fn run_detail(results: &Path, run: &str) -> String {
    fs::read_to_string(results.join(format!("nfsdtop-{run}.jsonl")))
        .ok()
        .and_then(|t| t.lines().last().map(str::to_string))
        .and_then(|l| serde_json::from_str::<Value>(&l).ok())
        .and_then(|v| v["source"]["detail"].as_str().map(str::to_string))
        .unwrap_or_default()
}

fn expected_wait_source(release: &str) -> &'static str {
    match kernel_version(release) {
        Some(v) if v >= (6, 16) => "qtime",
        _ => "enqueue-dequeue",
    }
}

fn client_addr(i: usize, fam: u8) -> IpAddr {
    let n = i + 1;
    if fam == 6 {
        format!("fd99:{n}::2").parse().expect("valid address")
    } else {
        format!("10.99.{n}.2").parse().expect("valid address")
    }
}

struct Report {
    lines: Vec<String>,
    failures: Vec<String>,
}

impl Report {
    fn check(&mut self, ok: bool, what: impl Into<String>) {
        let what = what.into();
        if ok {
            self.lines.push(format!("  ok   {what}"));
        } else {
            self.lines.push(format!("  FAIL {what}"));
            self.failures.push(what);
        }
    }
    fn note(&mut self, what: impl Into<String>) {
        self.lines.push(format!("       {}", what.into()));
    }
}

fn fio_iops(path: &Path) -> Option<f64> {
    let v: Value = serde_json::from_str(&fs::read_to_string(path).ok()?).ok()?;
    v["jobs"][0]["read"]["iops"].as_f64()
}

/// What one measurement (nfsdtop and ftrace over the same load) gave.
struct Measured {
    lines: Vec<Value>,
    /// Per peer in the last line: (dispatches, entitled, connections).
    peers: BTreeMap<IpAddr, (u64, f64, u64)>,
}

impl Measured {
    fn last(&self) -> &Value {
        self.lines.last().expect("at least one line")
    }
}

/// Checks common to every measurement TAG: ftrace complete, nfsdtop live,
/// and (when `exact`) no loss and per-peer dispatches equal to ftrace's.
fn check_measurement(
    results: &Path,
    tag: &str,
    summary: &BTreeMap<String, String>,
    rep: &mut Report,
    exact: bool,
) -> Option<Measured> {
    check_nfsdtop_run(results, tag, tag, summary, rep, exact)
}

/// One nfsdtop run (`nfsdtop-RUN.jsonl`) against the ftrace of measurement
/// `tag` (`trace-TAG.txt`): a measurement can have two nfsdtop runs beside
/// each other (raw and classic tracepoints).
fn check_nfsdtop_run(
    results: &Path,
    run: &str,
    trace_tag: &str,
    summary: &BTreeMap<String, String>,
    rep: &mut Report,
    exact: bool,
) -> Option<Measured> {
    let tag = run;
    rep.note(format!("-- measurement {tag:?}"));
    let trace =
        fs::read_to_string(results.join(format!("trace-{trace_tag}.txt"))).unwrap_or_default();
    let ft = parse_trace(&trace);
    let stats = fs::read_to_string(results.join(format!("ftrace-stats-{trace_tag}.txt")))
        .unwrap_or_default();
    let lost = ftrace_losses(&stats);
    rep.check(
        lost == Some(0),
        format!("{tag}: ftrace lost no records (overrun + commit overrun + dropped = {lost:?})"),
    );
    rep.check(
        ft.total > 0 && ft.unparsed == 0,
        format!(
            "{tag}: ftrace {} svc_xprt_dequeue records ({} listener, {} unparsed, other services {:?}), {} enqueue records",
            ft.total, ft.listener, ft.unparsed, ft.other_services, ft.enqueue
        ),
    );
    for (i, (name, fam, _)) in CLIENTS.iter().enumerate() {
        let ip = client_addr(i, *fam);
        let n = ft.per_client.get(&ip).copied().unwrap_or(0);
        rep.check(
            n > 0,
            format!("{tag}: ftrace saw dispatches from {name} ({ip}): {n}"),
        );
    }
    if summary.get("nfsdtop").map(String::as_str) == Some("missing") {
        rep.check(false, format!("{tag}: no nfsdtop binary in the guest"));
        return None;
    }
    let jsonl =
        fs::read_to_string(results.join(format!("nfsdtop-{tag}.jsonl"))).unwrap_or_default();
    let err = fs::read_to_string(results.join(format!("nfsdtop-{tag}.err"))).unwrap_or_default();
    let lines: Vec<Value> = jsonl
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let Some(last) = lines.last() else {
        rep.check(
            false,
            format!(
                "{tag}: nfsdtop -b --format json printed no line (exit {}): {}",
                summary
                    .get(&format!("nfsdtop_exit.nfsdtop-{tag}"))
                    .map(String::as_str)
                    .unwrap_or("?"),
                err.trim()
            ),
        );
        return None;
    };
    rep.note(format!(
        "{tag}: nfsdtop printed {} JSON lines, exit {}",
        lines.len(),
        summary
            .get(&format!("nfsdtop_exit.nfsdtop-{tag}"))
            .map(String::as_str)
            .unwrap_or("?")
    ));
    let kind = last["source"]["kind"].as_str().unwrap_or("?");
    if kind != "live" {
        rep.check(
            false,
            format!(
                "{tag}: nfsdtop used the {kind:?} source, not the live one: the live source is \
                 missing or could not attach in the guest; nfsdtop said: {}",
                err.trim()
            ),
        );
        return None;
    }
    rep.check(true, format!("{tag}: nfsdtop source is live"));
    if summary
        .get(&format!("quiescent.{trace_tag}"))
        .map(String::as_str)
        == Some("no")
    {
        rep.note(format!(
            "{tag}: warning: the server still had connections when the load ended"
        ));
    }
    if let Some(w) = summary.get(&format!("ftrace_entries_while_stopping.{trace_tag}")) {
        if w != "0" {
            rep.note(format!(
                "{tag}: warning: ftrace recorded {w} records while nfsdtop was being stopped"
            ));
        }
    }
    let mut peers = BTreeMap::new();
    let mut executions = BTreeMap::new();
    let mut listener = 0;
    for e in last["entities"].as_array().into_iter().flatten() {
        let name = e["name"].as_str().unwrap_or("");
        let d = e["dispatches"].as_u64().unwrap_or(0);
        let ent = e["entitled"].as_f64().unwrap_or(0.0);
        let conns = e["connections"].as_u64().unwrap_or(0);
        match name.parse::<IpAddr>() {
            Ok(ip) => {
                peers.insert(ip, (d, ent, conns));
                executions.insert(
                    ip,
                    (
                        e["executions"].as_u64().unwrap_or(0),
                        e["exec_seconds"].as_f64().unwrap_or(0.0),
                    ),
                );
            }
            Err(_) if name == "(listener)" => listener += d,
            Err(_) => rep.check(
                false,
                format!("{tag}: nfsdtop entity with a non-address name {name:?}"),
            ),
        }
    }
    let lost = last["totals"]["events_lost"].as_u64();
    let all: BTreeSet<IpAddr> = peers.keys().chain(ft.per_client.keys()).copied().collect();
    let total = last["totals"]["dispatches"].as_u64().unwrap_or(0);
    // A kernel that preempts tracepoint programs (Debian's 7.x) makes any
    // BPF program skip a run now and then (recursion misses, counted as
    // lost, classic programs too): there counted loss is checked as
    // delivered + lost == ftrace.
    let preempts = summary
        .get("kernel")
        .is_some_and(|k| kernel_version(k).is_some_and(|v| v >= (7, 0)));
    let exact = if exact && preempts && lost.is_some_and(|l| l > 0) {
        rep.note(format!(
            "{tag}: {} events counted lost on a kernel that preempts tracepoint programs: \
             checked as delivered + lost",
            lost.unwrap_or(0)
        ));
        false
    } else {
        exact
    };
    if exact {
        rep.check(
            lost == Some(0),
            format!("{tag}: nfsdtop events_lost {lost:?} == 0"),
        );
        for ip in &all {
            let n = peers.get(ip).map(|p| p.0).unwrap_or(0);
            let f = ft.per_client.get(ip).copied().unwrap_or(0);
            rep.check(
                n == f,
                format!("{tag}: {ip}: nfsdtop {n} dispatches == ftrace {f}"),
            );
        }
        // Records with a client address: exact everywhere. Listener and
        // UDP records: exact too, except in the "wait" scenario, where
        // nfsdtop attaches while nfsd starts its listeners and ftrace can
        // only be switched on once sunrpc is loaded.
        let ft_real = ft.total - ft.listener;
        let real = total.saturating_sub(listener);
        rep.check(
            real == ft_real,
            format!("{tag}: dispatches from clients: nfsdtop {real} == ftrace {ft_real}"),
        );
        // Execution: svc_stats_latency per client, the requests exactly
        // (the default adds most of them up in the kernel), their
        // `execute` summed. Each handler of the tracepoint reads the clock
        // itself (ftrace's, and the kernel's record for nfsdtop's classic
        // program, or nfsdtop's raw program), one after the other: some
        // µs a request apart under emulation, less than a request: 2-14 µs
        // on bookworm, 40-70 µs a request on trixie under TCG on a 2-core
        // host (the most on the classic instance). The check is for wrong
        // fields, units or lost requests (the counts above are exact), so
        // it allows 30 µs a request plus a tenth of ftrace's sum.
        for ip in ft.per_client.keys() {
            let (requests, us) = ft.exec_per_client.get(ip).copied().unwrap_or((0, 0));
            let f = us as f64 / 1e6;
            let (n_requests, n) = executions.get(ip).copied().unwrap_or((0, 0.0));
            rep.check(
                requests > 0 && n_requests == requests,
                format!("{tag}: {ip}: nfsdtop {n_requests} executions == ftrace {requests} svc_stats_latency"),
            );
            let slack = requests as f64 * 30e-6 + f / 10.0;
            rep.check(
                (n - f).abs() <= slack,
                format!(
                    "{tag}: {ip}: nfsdtop {n:.6} s execution == ftrace {f:.6} s within {slack:.6} s ({:+.1} µs a request)",
                    (n - f) * 1e6 / requests.max(1) as f64
                ),
            );
        }
        let clients: Vec<workload::ClientLoad> = CLIENTS
            .iter()
            .enumerate()
            .map(|(i, (name, fam, _))| {
                let ip = client_addr(i, *fam);
                workload::ClientLoad {
                    name,
                    ip,
                    fio: workload::fio_bytes(&results.join(format!("fio-{trace_tag}-{name}.json"))),
                    ftrace_requests: ft.exec_per_client.get(&ip).map_or(0, |e| e.0),
                }
            })
            .collect();
        let measured = last["source"]["detail"]
            .as_str()
            .is_some_and(|d| d.contains(workload::BYTES_MEASURED));
        let entities = last["entities"].as_array().map_or(&[][..], Vec::as_slice);
        for (ok, what) in workload::check(entities, measured, &clients) {
            rep.check(ok, format!("{tag}: {what}"));
        }
        if tag == "wait" {
            rep.note(format!(
                "{tag}: listener/UDP dispatches: nfsdtop {listener}, ftrace {} (not compared)",
                ft.listener
            ));
        } else {
            rep.check(
                listener == ft.listener,
                format!(
                    "{tag}: listener/UDP dispatches: nfsdtop {listener} == ftrace {}",
                    ft.listener
                ),
            );
        }
        // Every client has unmounted and the server has closed every
        // connection: nothing is on the ready queue, so no entity may be
        // backlogged (a stale queued transport would inflate every fair
        // share computed after it).
        let backlogged = last["totals"]["backlogged"].as_u64();
        // Who: the entities whose backlogged time still grew over the last
        // interval.
        let before: BTreeMap<&str, f64> = lines
            .len()
            .checked_sub(2)
            .map(|i| &lines[i]["entities"])
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| Some((e["name"].as_str()?, e["backlogged_seconds"].as_f64()?)))
            .collect();
        let stuck: Vec<String> = last["entities"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| {
                let name = e["name"].as_str()?;
                let b = e["backlogged_seconds"].as_f64()?;
                (b > before.get(name).copied().unwrap_or(0.0) + 1e-6).then(|| {
                    format!(
                        "{name}: backlogged {b:.1} s in all, entitled {:.1} for {} dispatches",
                        e["entitled"].as_f64().unwrap_or(0.0),
                        e["dispatches"]
                    )
                })
            })
            .collect();
        rep.check(
            backlogged == Some(0),
            format!(
                "{tag}: nothing backlogged once the server is idle (backlogged {backlogged:?}; still backlogged: [{}])",
                stuck.join(", ")
            ),
        );
    } else {
        // Loss expected: counted, and nothing counted that did not happen.
        rep.check(
            lost.is_some_and(|l| l > 0),
            format!("{tag}: nfsdtop counted the loss: events_lost {lost:?} > 0"),
        );
        for ip in &all {
            let n = peers.get(ip).map(|p| p.0).unwrap_or(0);
            let f = ft.per_client.get(ip).copied().unwrap_or(0);
            rep.check(
                n <= f,
                format!("{tag}: {ip}: nfsdtop {n} dispatches <= ftrace {f}"),
            );
            // Nothing counted twice, folded or not.
            let (requests, _) = ft.exec_per_client.get(ip).copied().unwrap_or((0, 0));
            let (n_requests, _) = executions.get(ip).copied().unwrap_or((0, 0.0));
            rep.check(
                n_requests <= requests,
                format!("{tag}: {ip}: nfsdtop {n_requests} executions <= ftrace {requests} svc_stats_latency"),
            );
        }
        // The per-CPU loss counters make the total whole again: every
        // dequeue record was either delivered or counted as lost.
        let t = &last["totals"];
        if let (Some(d), Some(l)) = (t["dispatches"].as_u64(), t["lost_dispatches"].as_u64()) {
            if tag == "wait" {
                // Listener records are not comparable here (see above).
                let (real, ft_real) = (d.saturating_sub(listener), ft.total - ft.listener);
                rep.check(
                    real <= ft_real && real + l >= ft_real,
                    format!(
                        "{tag}: client dispatches delivered {real} <= ftrace {ft_real} <= delivered + lost {l}"
                    ),
                );
            } else {
                let ftrace_total = ft.total;
                rep.check(
                    d + l == ftrace_total,
                    format!("{tag}: delivered {d} + lost {l} dispatches == ftrace {ftrace_total}"),
                );
            }
        }
    }
    Some(Measured { lines, peers })
}

fn check_main(results: &Path, summary: &BTreeMap<String, String>, rep: &mut Report) {
    let kernel = summary.get("kernel").cloned().unwrap_or_default();
    // nfsdtop doctor.
    if summary.get("nfsdtop").map(String::as_str) != Some("missing") {
        let doctor_text = fs::read_to_string(results.join("doctor.json")).unwrap_or_default();
        let doctor_err = fs::read_to_string(results.join("doctor.err")).unwrap_or_default();
        match serde_json::from_str::<Value>(doctor_text.trim()) {
            Ok(d) => {
                rep.check(
                    d["tracefs"] == true && d["sunrpc_loaded"] == true,
                    format!(
                        "doctor: tracefs {} sunrpc_loaded {}",
                        d["tracefs"], d["sunrpc_loaded"]
                    ),
                );
                rep.check(
                    d["generation"].is_string(),
                    format!("doctor: generation {}", d["generation"]),
                );
                rep.check(
                    d["bpf_programs_verified"] == true,
                    format!(
                        "doctor: bpf_programs_verified {}",
                        d["bpf_programs_verified"]
                    ),
                );
            }
            Err(e) => rep.check(
                false,
                format!(
                    "doctor --format json gave no JSON ({e}; exit {}): {}",
                    summary
                        .get("doctor_exit")
                        .map(String::as_str)
                        .unwrap_or("?"),
                    doctor_err.trim()
                ),
            ),
        }
    }
    // Where the kernel preempts tracepoint programs (7.x), a raw program
    // can miss hits; nfsdtop then counts them as lost and hands the event
    // to its classic tracepoint, and that run's counts are checked as
    // delivered + lost == ftrace instead of exactly.
    fn handed_over(rep: &mut Report, run: &str, detail: &str) -> bool {
        let h = detail.contains("moved to classic tracepoints");
        if h {
            rep.note(format!(
                "{run}: a raw tracepoint missed hits and was handed over to its classic one"
            ));
        }
        h
    }
    // The default: raw tracepoints for every event (every Debian kernel
    // here has BTF for vmlinux and its modules).
    let detail = run_detail(results, "main");
    let exact = !handed_over(rep, "main", &detail);
    let Some(m) = check_measurement(results, "main", summary, rep, exact) else {
        return;
    };
    let want = "raw tracepoints (BTF offsets) for svc_xprt_free, svc_xprt_accept, \
                svc_xprt_enqueue, svc_xprt_dequeue, svc_stats_latency (the default)";
    rep.check(detail.contains(want), format!("main: {want} ({detail})"));
    // Beside it, every event classic (--classic-tracepoints).
    let classic_detail = run_detail(results, "main-classic");
    check_nfsdtop_run(results, "main-classic", "main", summary, rep, true);
    rep.check(
        classic_detail.contains("classic tracepoints") && !classic_detail.contains("raw"),
        format!("main-classic: classic tracepoints only ({classic_detail})"),
    );
    let last = m.last();
    let ws = last["source"]["wait_source"].as_str().unwrap_or("?");
    let want_ws = expected_wait_source(&kernel);
    rep.check(
        ws == want_ws,
        format!("wait_source {ws:?} (expected {want_ws:?} on {kernel})"),
    );
    if let Some(g) = last["source"]["generation"].as_str() {
        rep.note(format!("generation {g}"));
    }
    // With qtime (6.16+), the agent's own enqueue→dequeue waits must tell
    // the same story: whole-run p50s within one histogram bucket.
    if ws == "qtime" {
        let t = &last["totals"];
        let (kq, own) = (
            t["run_wait_p50_bucket"].as_u64(),
            t["own_wait_p50_bucket"].as_u64(),
        );
        rep.check(
            matches!((kq, own), (Some(a), Some(b)) if a.abs_diff(b) <= 1),
            format!(
                "qtime p50 {} us (bucket {kq:?}) and own enqueue-dequeue p50 {} us (bucket {own:?}) within one bucket",
                t["run_wait_p50_us"], t["own_wait_p50_us"]
            ),
        );
    }
    // Fairness: cumulative dispatches / cumulative entitled over the whole
    // run (the last line). Per-interval ratios swing with the 1 s windows
    // (a few hundred dispatches each under TCG) and are undefined in idle
    // ones; the cumulative ratio is what the run as a whole says about each
    // client, and the load keeps every client backlogged throughout.
    let ratio = |i: usize| {
        let ip = client_addr(i, CLIENTS[i].1);
        let (d, ent, _) = m.peers.get(&ip).copied().unwrap_or_default();
        (
            ip,
            d,
            ent,
            if ent > 0.0 { d as f64 / ent } else { f64::NAN },
        )
    };
    for (i, (name, _, nc)) in CLIENTS.iter().enumerate() {
        let (ip, d, ent, r) = ratio(i);
        let iops = fio_iops(&results.join(format!("fio-main-{name}.json")));
        rep.note(format!(
            "{name} {ip:<10} nconnect={nc}: dispatches {d}, entitled {ent:.1}, ratio {r:.3}, fio {} IOPS",
            iops.map(|x| format!("{x:.0}")).unwrap_or("?".into())
        ));
    }
    let fewest = (0..CLIENTS.len())
        .min_by_key(|&i| CLIENTS[i].2)
        .unwrap_or(0);
    let most = (0..CLIENTS.len())
        .max_by_key(|&i| CLIENTS[i].2)
        .unwrap_or(0);
    let (ip, _, _, r) = ratio(fewest);
    rep.check(
        r < 1.0,
        format!(
            "fewest connections ({ip}, nconnect={}): fairness {r:.3} < 1",
            CLIENTS[fewest].2
        ),
    );
    let (ip, _, _, r) = ratio(most);
    rep.check(
        r > 1.0,
        format!(
            "most connections ({ip}, nconnect={}): fairness {r:.3} > 1",
            CLIENTS[most].2
        ),
    );
}

fn num(summary: &BTreeMap<String, String>, key: &str) -> Option<u64> {
    summary.get(key)?.parse().ok()
}

/// nfsd stopped and restarted under load: counts exact over the whole run,
/// dispatches continued after the restart, nothing stale left over.
fn check_restart(results: &Path, summary: &BTreeMap<String, String>, rep: &mut Report) {
    let Some(m) = check_measurement(results, "restart", summary, rep, true) else {
        return;
    };
    rep.check(
        summary.get("restart.threads_stopped").map(String::as_str) == Some("0"),
        format!(
            "restart: nfsd had 0 threads while stopped ({:?})",
            summary.get("restart.threads_stopped")
        ),
    );
    let at_restart = num(summary, "restart.lines_at_restart").unwrap_or(0) as usize;
    let before = at_restart
        .checked_sub(1)
        .and_then(|i| m.lines.get(i))
        .and_then(|l| l["totals"]["dispatches"].as_u64());
    let end = m.last()["totals"]["dispatches"].as_u64().unwrap_or(0);
    rep.check(
        before.is_some_and(|b| end > b),
        format!("restart: dispatches continued after the restart ({before:?} at the restart, {end} at the end)"),
    );
    let stale: Vec<String> = m
        .peers
        .iter()
        .filter(|(_, p)| p.2 != 0)
        .map(|(ip, p)| format!("{ip}={}", p.2))
        .collect();
    rep.check(
        stale.is_empty(),
        format!("restart: no connections left after unmounting ({stale:?})"),
    );
}

/// nfsdtop SIGKILLed: its BPF programs are freed, nothing stays attached.
fn check_kill(summary: &BTreeMap<String, String>, rep: &mut Report) {
    rep.note("-- fault \"kill\"");
    if let Some(e) = summary.get("kill.error") {
        rep.check(false, format!("kill: {e}"));
        return;
    }
    let base = num(summary, "kill.progs_baseline");
    let running = num(summary, "kill.progs_running");
    let after = num(summary, "kill.progs_after");
    rep.check(
        matches!((base, running), (Some(b), Some(r)) if r > b),
        format!("kill: nfsdtop had BPF programs loaded (baseline {base:?}, running {running:?})"),
    );
    rep.check(
        base.is_some() && after == base,
        format!("kill: after SIGKILL the programs are gone (after {after:?}, baseline {base:?})"),
    );
    let perf = num(summary, "kill.perf_after");
    rep.check(
        perf == Some(0),
        format!("kill: no perf-event attachment left ({perf:?})"),
    );
    let pinned = num(summary, "kill.bpffs_after");
    rep.check(
        pinned == Some(0),
        format!("kill: nothing pinned in bpffs ({pinned:?})"),
    );
}

fn check_smallring(results: &Path, summary: &BTreeMap<String, String>, rep: &mut Report) {
    if let Some(e) = summary.get("smallring.error") {
        rep.note("-- fault \"smallring\"");
        rep.check(
            false,
            format!("smallring: {e} (needed to make the ring too small)"),
        );
        return;
    }
    check_measurement(results, "smallring", summary, rep, false);
}

/// The agent's anonymous RSS (its heap: the tables) may grow by at most
/// this much over the flood. With `--max-peers 64 --max-transports 256`
/// its tables hold at most ~72 entities and ~288 transports (well under
/// 1 MiB); the rest is allocator slack. VmRSS itself also grows as the
/// 16 MiB ring's pages are touched (RssFile), so it is bounded by
/// FLOOD_HWM_KB instead.
const FLOOD_RSS_GROWTH_KB: u64 = 4 << 10;
/// Peak RSS bound of the agent in the flood (its whole life): the 16 MiB
/// ring, the binary, BPF object and maps' user-side copies, and the bounded
/// tables; measured ~42 MiB on trixie (see scripts/vm/README.md).
const FLOOD_HWM_KB: u64 = 64 << 10;

/// A flood of short-lived connections from many addresses
/// (fault-flood.sh), nfsdtop with small limits: it keeps running, the
/// peers it holds stay within the bound plus one eviction batch in every
/// line, evictions are counted, the real clients' counts stay exact, and
/// its memory stays bounded.
fn check_flood(results: &Path, summary: &BTreeMap<String, String>, rep: &mut Report) {
    rep.note("-- fault \"flood\"");
    if let Some(e) = summary.get("flood.error") {
        rep.check(false, format!("flood: {e}"));
        return;
    }
    let max_peers = num(summary, "flood.max_peers").unwrap_or(0);
    let conns = num(summary, "flood.connections").unwrap_or(0);
    let sources = num(summary, "flood.sources").unwrap_or(0);
    rep.note(format!(
        "flood: {conns} connections ({} failed) from {sources} addresses in {} s (guest t {}..{}), limits: peers {max_peers}, transports {}",
        summary.get("flood.failed").map(String::as_str).unwrap_or("?"),
        summary.get("flood.seconds").map(String::as_str).unwrap_or("?"),
        summary.get("flood.t_start").map(String::as_str).unwrap_or("?"),
        summary.get("flood.t_end").map(String::as_str).unwrap_or("?"),
        summary.get("flood.max_transports").map(String::as_str).unwrap_or("?"),
    ));
    rep.check(
        max_peers > 0 && sources > 2 * max_peers && conns >= 1000,
        format!("flood: thousands of connections ({conns} >= 1000) from more distinct client addresses ({sources}) than twice the peer bound ({max_peers})"),
    );
    let trace = fs::read_to_string(results.join("trace-flood.txt")).unwrap_or_default();
    let ft = parse_trace(&trace);
    let stats = fs::read_to_string(results.join("ftrace-stats-flood.txt")).unwrap_or_default();
    let lost = ftrace_losses(&stats);
    rep.check(
        lost == Some(0),
        format!("flood: ftrace lost no records ({lost:?})"),
    );
    let flood_net: std::net::Ipv6Addr = "fd99:99::".parse().expect("valid address");
    let in_flood = |ip: &IpAddr| match ip {
        IpAddr::V6(a) => a.segments()[..4] == flood_net.segments()[..4],
        IpAddr::V4(_) => false,
    };
    let flood_peers = ft.per_client.keys().filter(|ip| in_flood(ip)).count() as u64;
    let flood_dispatches: u64 = ft
        .per_client
        .iter()
        .filter(|(ip, _)| in_flood(ip))
        .map(|(_, n)| n)
        .sum();
    rep.check(
        flood_peers > 2 * max_peers,
        format!("flood: ftrace saw dispatches from {flood_peers} flood addresses ({flood_dispatches} dispatches, {} listener)", ft.listener),
    );
    // The flood ran while fio did: every real client was dispatched
    // between the flood's first and last dispatch (ftrace timestamps).
    let (window, during) = flood_overlap(&trace, &in_flood);
    for (i, (name, fam, _)) in CLIENTS.iter().enumerate() {
        let ip = client_addr(i, *fam);
        let n = during.get(&ip).copied().unwrap_or(0);
        rep.check(
            n > 0,
            format!("flood: {name} ({ip}) was dispatched {n} times during the flood (ftrace {window:?} s)"),
        );
    }
    let jsonl = fs::read_to_string(results.join("nfsdtop-flood.jsonl")).unwrap_or_default();
    let err = fs::read_to_string(results.join("nfsdtop-flood.err")).unwrap_or_default();
    let lines: Vec<Value> = jsonl
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let exit = summary
        .get("nfsdtop_exit.nfsdtop-flood")
        .map(String::as_str);
    rep.check(
        summary.get("flood.alive_after").map(String::as_str) == Some("yes") && exit == Some("0"),
        format!(
            "flood: nfsdtop kept running through the flood ({:?}) and exited 0 when stopped ({exit:?})",
            summary.get("flood.alive_after")
        ),
    );
    let Some(last) = lines.last() else {
        rep.check(
            false,
            format!("flood: nfsdtop printed no line: {}", err.trim()),
        );
        return;
    };
    let kind = last["source"]["kind"].as_str().unwrap_or("?");
    if kind != "live" {
        rep.check(
            false,
            format!("flood: nfsdtop used the {kind:?} source: {}", err.trim()),
        );
        return;
    }
    let bound = max_peers + max_peers / 8;
    let most = lines
        .iter()
        .filter_map(|l| l["totals"]["peers"].as_u64())
        .max()
        .unwrap_or(u64::MAX);
    let counted = lines
        .iter()
        .filter(|l| l["totals"]["peers"].as_u64().is_some())
        .count();
    rep.check(
        counted == lines.len() && most <= bound,
        format!(
            "flood: peers held never above {max_peers} + one eviction batch = {bound} (at most {most} in {} lines)",
            lines.len()
        ),
    );
    let t = &last["totals"];
    let evicted = t["peers_evicted"].as_u64().unwrap_or(0);
    rep.check(
        evicted > 0,
        format!(
            "flood: evictions counted: peers_evicted {evicted} (transports {}, transports_evicted {})",
            t["transports"], t["transports_evicted"]
        ),
    );
    let events_lost = t["events_lost"].as_u64();
    if events_lost.is_some_and(|l| l > 0) {
        // Kernels that preempt tracepoint programs (7.x) can skip a run
        // under this load; nfsdtop counts those as lost. Then every
        // dispatch must be delivered or counted, and none invented.
        let total = t["dispatches"].as_u64().unwrap_or(0);
        let lost = t["lost_dispatches"].as_u64().unwrap_or(0);
        rep.note(format!(
            "flood: nfsdtop counted {events_lost:?} events the kernel skipped"
        ));
        rep.check(
            total + lost == ft.total,
            format!(
                "flood: delivered {total} + lost {lost} dispatches == ftrace {}",
                ft.total
            ),
        );
    } else {
        rep.check(
            events_lost == Some(0),
            format!("flood: nfsdtop events_lost {events_lost:?} == 0"),
        );
    }
    if events_lost == Some(0) {
        let mut listener = 0;
        let mut peers = BTreeMap::new();
        for e in last["entities"].as_array().into_iter().flatten() {
            let d = e["dispatches"].as_u64().unwrap_or(0);
            match e["name"].as_str().unwrap_or("").parse::<IpAddr>() {
                Ok(ip) => {
                    peers.insert(ip, d);
                }
                Err(_) if e["name"] == "(listener)" => listener += d,
                Err(_) => {}
            }
        }
        for (i, (name, fam, _)) in CLIENTS.iter().enumerate() {
            let ip = client_addr(i, *fam);
            let n = peers.get(&ip).copied().unwrap_or(0);
            let f = ft.per_client.get(&ip).copied().unwrap_or(0);
            rep.check(
                n == f && f > 0,
                format!("flood: {name} {ip}: nfsdtop {n} dispatches == ftrace {f}"),
            );
        }
        let total = t["dispatches"].as_u64().unwrap_or(0);
        rep.check(
            total == ft.total,
            format!(
                "flood: all dispatches, evicted peers' included: nfsdtop {total} == ftrace {}",
                ft.total
            ),
        );
        rep.check(
            listener == ft.listener,
            format!(
                "flood: listener/UDP dispatches: nfsdtop {listener} == ftrace {}",
                ft.listener
            ),
        );
    }
    let backlogged = t["backlogged"].as_u64();
    rep.check(
        backlogged == Some(0),
        format!("flood: nothing backlogged once the server is idle ({backlogged:?})"),
    );
    // Sampled by the flood client itself (guest /proc/PID/status) when
    // it starts and ends flooding.
    let rss0 = num(summary, "flood.vmrss_start_kb");
    let rss1 = num(summary, "flood.vmrss_end_kb");
    let anon0 = num(summary, "flood.rssanon_start_kb");
    let anon1 = num(summary, "flood.rssanon_end_kb");
    let hwm = num(summary, "flood.vmhwm_end_kb");
    rep.check(
        matches!((anon0, anon1), (Some(a), Some(b)) if b <= a + FLOOD_RSS_GROWTH_KB),
        format!(
            "flood: agent RssAnon {anon0:?} kB at the start, {anon1:?} kB at the end of the flood (growth <= {FLOOD_RSS_GROWTH_KB} kB); VmRSS {rss0:?} -> {rss1:?} kB"
        ),
    );
    rep.check(
        hwm.is_some_and(|h| h <= FLOOD_HWM_KB),
        format!("flood: agent peak RSS (VmHWM) {hwm:?} kB <= {FLOOD_HWM_KB} kB"),
    );
}

/// The ftrace time window of the flood's dispatches (first, last) and
/// every other client's dispatches inside it.
fn flood_overlap(
    trace: &str,
    in_flood: &dyn Fn(&IpAddr) -> bool,
) -> (Option<(f64, f64)>, BTreeMap<IpAddr, u64>) {
    let dequeues: Vec<(f64, IpAddr)> = trace
        .lines()
        .filter_map(|line| {
            let (head, rest) = line.split_once(" svc_xprt_dequeue: ")?;
            let ts = head.split_whitespace().last()?.trim_end_matches(':');
            let client = field(rest, "client")?.parse::<SocketAddr>().ok()?;
            Some((ts.parse().ok()?, client.ip()))
        })
        .collect();
    let flood_ts = dequeues.iter().filter(|(_, ip)| in_flood(ip)).map(|d| d.0);
    let window = flood_ts
        .clone()
        .reduce(f64::min)
        .zip(flood_ts.reduce(f64::max));
    let mut during = BTreeMap::new();
    if let Some((a, b)) = window {
        for (ts, ip) in &dequeues {
            if (a..=b).contains(ts) && !in_flood(ip) {
                *during.entry(*ip).or_default() += 1;
            }
        }
    }
    (window, during)
}

fn check_wait(results: &Path, summary: &BTreeMap<String, String>, rep: &mut Report) {
    rep.check(
        summary.get("wait.sunrpc_loaded_before").map(String::as_str) == Some("0"),
        format!(
            "wait: sunrpc was not loaded when nfsdtop started ({:?})",
            summary.get("wait.sunrpc_loaded_before")
        ),
    );
    rep.check(
        summary.get("wait.alive_before_nfsd").map(String::as_str) == Some("yes"),
        format!(
            "wait: nfsdtop --wait was still running when nfsd started ({:?})",
            summary.get("wait.alive_before_nfsd")
        ),
    );
    check_measurement(results, "wait", summary, rep, true);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scenario {
    /// The measurement, then the fault scenarios that share its boot.
    Main,
    /// nfsdtop --wait started before nfsd (a boot of its own).
    Wait,
}

struct RunConfig {
    scenario: Scenario,
    fio_secs: u32,
    faults: Vec<&'static str>,
    guest_timeout_s: u64,
}

fn run_one(suite: Suite, nfsdtop: &Path, cfg: &RunConfig) -> anyhow::Result<Report> {
    let img = ensure_image(suite, false)?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let label = match cfg.scenario {
        Scenario::Main => "main",
        Scenario::Wait => "wait",
    };
    let runs = cache_root().join("runs");
    prune_runs(&runs, 20);
    let run_dir = runs.join(format!("{}-{label}-{stamp}", suite.name()));
    fs::create_dir_all(&run_dir)?;
    eprintln!(
        "vm: booting {} (kernel {}) for {label}, results in {}",
        suite.name(),
        img.kernel,
        run_dir.display()
    );
    // A guest kernel panic is retried once, loudly: under QEMU TCG with
    // one host thread per vCPU (thread=multi) we saw two (an oops at a
    // code-patching site in sched_clock_cpu at boot, and in
    // ktime_get_mono_fast_ns); one caused by nfsdtop would happen again.
    let mut retried = None;
    let times = match run_guest(&img, nfsdtop, cfg, &run_dir) {
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
            run_guest(&img, nfsdtop, cfg, &run_dir)?
        }
        r => r?,
    };
    let mut rep = Report {
        lines: vec![format!(
            "{} {label} (kernel {}): boot {:.1} s, whole run {:.1} s, results {}",
            suite.name(),
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
    check_results(&run_dir.join("results"), cfg, &mut rep)?;
    Ok(rep)
}

/// Keeps the newest `keep` run directories (each holds a full ftrace text).
fn prune_runs(runs: &Path, keep: usize) {
    let Ok(entries) = fs::read_dir(runs) else {
        return;
    };
    let mut dirs: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    dirs.sort();
    let n = dirs.len().saturating_sub(keep);
    for (_, d) in dirs.into_iter().take(n) {
        let _ = fs::remove_dir_all(d);
    }
}

fn check_results(results: &Path, cfg: &RunConfig, rep: &mut Report) -> anyhow::Result<()> {
    let summary = read_kv(&results.join("summary.txt"))?;
    rep.note(format!(
        "guest kernel {}",
        summary.get("kernel").map(String::as_str).unwrap_or("?")
    ));
    if let Some(e) = summary.get("error") {
        rep.check(false, format!("guest run: {e}"));
    }
    match cfg.scenario {
        Scenario::Wait => check_wait(results, &summary, rep),
        Scenario::Main => {
            check_main(results, &summary, rep);
            for f in &cfg.faults {
                match *f {
                    "restart" => check_restart(results, &summary, rep),
                    "kill" => check_kill(&summary, rep),
                    "smallring" => check_smallring(results, &summary, rep),
                    "flood" => check_flood(results, &summary, rep),
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
    let fio_secs = args.fio_secs.unwrap_or(if args.quick { 4 } else { 8 });
    let mut configs = vec![RunConfig {
        scenario: Scenario::Main,
        fio_secs,
        faults: if args.quick {
            vec![]
        } else {
            vec!["restart", "kill", "smallring", "flood"]
        },
        guest_timeout_s: if args.quick { 600 } else { 1200 },
    }];
    if !args.quick {
        configs.push(RunConfig {
            scenario: Scenario::Wait,
            fio_secs,
            faults: vec![],
            guest_timeout_s: 600,
        });
    }
    if let Some(dir) = args.recheck {
        // Check the results of an earlier run again (no boot).
        let cfg = if dir.to_string_lossy().contains("-wait-") {
            configs.pop().filter(|c| c.scenario == Scenario::Wait)
        } else {
            configs.into_iter().next()
        }
        .ok_or_else(|| anyhow!("--recheck of a wait run needs a full (non --quick) run"))?;
        let mut rep = Report {
            lines: vec![format!("recheck {}", dir.display())],
            failures: vec![],
        };
        check_results(&dir, &cfg, &mut rep)?;
        return report(vec![(String::from("recheck"), rep)]);
    }
    // Images first (the slow part, and independent of the nfsdtop build).
    for s in &suites {
        ensure_image(*s, false)?;
    }
    let nfsdtop = match args.nfsdtop {
        Some(p) => p,
        None => build_nfsdtop()?,
    };
    let mut reports = vec![];
    for s in suites {
        for cfg in &configs {
            let rep = run_one(s, &nfsdtop, cfg).unwrap_or_else(|e| Report {
                lines: vec![format!("{}: the run failed", s.name())],
                failures: vec![format!("{e:#}")],
            });
            reports.push((s.name().to_string(), rep));
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

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "\
# tracer: nop
#
            nfsd-412     [001] ..... 101.000001: svc_xprt_dequeue: server=10.99.1.1:2049 client=10.99.1.2:812 flags=BUSY|DATA|TEMP|CONG_CTRL wakeup-us=12
            nfsd-413     [000] ..... 101.000002: svc_xprt_dequeue: server=[fd99:3::1]:2049 client=[fd99:3::2]:700 flags=BUSY|DATA|TEMP wakeup-us=3
            nfsd-413     [000] ..... 101.000003: svc_xprt_dequeue: server=[fd99:3::1]:2049 client=[fd99:3::2]:701 flags=BUSY|DATA|TEMP wakeup-us=3
            nfsd-412     [001] ..... 101.000004: svc_xprt_dequeue: server=0.0.0.0:2049 client=\u{1}junk flags=BUSY|CONN|LISTENER wakeup-us=1
          <idle>-0       [001] ..s.. 101.000005: svc_xprt_enqueue: server=10.99.1.1:2049 client=10.99.1.2:812 flags=DATA|TEMP
            nfsd-221     [000] .....    32.825232: svc_xprt_dequeue: server=0.0.0.0:2049 client=(einval) flags=XPT_BUSY|XPT_CONN|XPT_CHNGBUF|XPT_LISTENER|XPT_CACHE_AUTH wakeup-us=5688
            nfsd-221     [000] .....    32.827532: svc_xprt_dequeue: server=0.0.0.0:2049 client=10.99.2.2 flags=XPT_BUSY|XPT_CONN|XPT_LISTENER wakeup-us=7952
            nfsd-412     [001] ..... 98.167204: svc_xprt_dequeue: server=0.0.0.0:43815 client=(einval) flags=BUSY|DATA|CHNGBUF|0x40000 wakeup-us=4
           lockd-486     [000] .....    61.564030: svc_xprt_dequeue: server=0.0.0.0:53601 client=10.99.2.2:686 flags=XPT_BUSY|XPT_DATA|XPT_CHNGBUF wakeup-us=61620382
            nfsd-412     [001] ..... 101.000006: svc_xprt_dequeue: server=10.99.1.1:4045 client=10.99.1.2:900 flags=BUSY|DATA wakeup-us=2
            nfsd-412     [001] ..... 101.000007: svc_stats_latency: xid=0x5d1c2a01 server=10.99.1.1:2049 client=10.99.1.2:812 proc=READ execute-us=120
            nfsd-413     [000] ..... 101.000008: svc_stats_latency: xid=0x5d1c2a02 server=10.99.1.1:2049 client=10.99.1.2:812 proc=GETATTR execute-us=31
           lockd-486     [000] ..... 101.000009: svc_stats_latency: xid=0x5d1c2a03 server=10.99.1.1:4045 client=10.99.1.2:900 proc=TEST execute-us=9
";

    #[test]
    fn trace_counts_per_client() {
        let f = parse_trace(TRACE);
        assert_eq!(f.total, 9);
        assert_eq!(f.listener, 5);
        assert_eq!(f.enqueue, 1);
        assert_eq!(f.unparsed, 0);
        assert_eq!(f.per_client[&"10.99.1.2".parse::<IpAddr>().unwrap()], 1);
        assert_eq!(f.per_client[&"fd99:3::2".parse::<IpAddr>().unwrap()], 2);
        assert_eq!(f.other_services[&4045], 1);
        let c1: IpAddr = "10.99.1.2".parse().unwrap();
        assert_eq!(f.exec_per_client[&c1], (2, 151), "nfsd's only");
    }

    #[test]
    fn ftrace_stats_losses() {
        let ok = "== cpu0\nentries: 5\noverrun: 0\ncommit overrun: 0\nbytes: 9\ndropped events: 0\n== cpu1\noverrun: 0\n";
        assert_eq!(ftrace_losses(ok), Some(0));
        let bad =
            "== cpu0\noverrun: 3\ncommit overrun: 0\n== cpu1\noverrun: 0\ndropped events: 2\n";
        assert_eq!(ftrace_losses(bad), Some(5));
        assert_eq!(ftrace_losses(""), None);
    }

    #[test]
    fn wait_source_by_kernel() {
        assert_eq!(expected_wait_source("6.1.0-50-amd64"), "enqueue-dequeue");
        assert_eq!(
            expected_wait_source("6.12.57+deb13-amd64"),
            "enqueue-dequeue"
        );
        assert_eq!(expected_wait_source("6.16.3+deb14-amd64"), "qtime");
        assert_eq!(expected_wait_source("7.2.13+deb14-amd64"), "qtime");
    }

    #[test]
    fn client_addresses() {
        assert_eq!(client_addr(0, 4).to_string(), "10.99.1.2");
        assert_eq!(client_addr(2, 6).to_string(), "fd99:3::2");
    }
}
