//! The guest's serial console: every line goes to `console.log`; the
//! `NFSDTOP-VM: ...` markers (and a kernel panic) are echoed with the time
//! since boot, and the wait for them is bounded: a boot deadline until the
//! first init's `boot-init` marker, a run deadline until `done`.

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::bail;

use super::qemu::Qemu;

/// The bounds of one guest run, from QEMU's start.
#[derive(Clone, Copy)]
pub struct Deadlines {
    /// Until the `boot-init` marker; None: only the run bound.
    pub boot: Option<Duration>,
    /// Until the `done` marker.
    pub run: Duration,
}

pub struct Times {
    /// Seconds until the `boot-init` marker (NaN if never seen).
    pub boot_s: f64,
    pub total_s: f64,
}

fn tail(path: &Path, n: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Follows the console of `child` (stdout piped) until the guest says
/// `done`, then gives QEMU a bounded time to exit. `label` prefixes the
/// echoed markers ("vm", "bench"). A kernel panic fails with "the guest
/// kernel panicked" (callers may retry on it).
pub fn watch(
    mut child: Qemu,
    run_dir: &Path,
    label: &str,
    limits: Deadlines,
) -> anyhow::Result<Times> {
    let started = Instant::now();
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
    let run_deadline = started + limits.run;
    let boot_deadline = limits.boot.map_or(run_deadline, |b| started + b);
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
                eprintln!("{label}: [{t:6.1}s] {}", line.trim());
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
            eprintln!("{label}: QEMU did not exit after the guest powered off: killing it");
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(child);
    let _ = reader.join();
    Ok(Times {
        boot_s: boot_s.unwrap_or(f64::NAN),
        total_s: started.elapsed().as_secs_f64(),
    })
}
