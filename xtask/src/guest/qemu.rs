//! The QEMU command line of a guest run and the process guard that kills
//! QEMU when the host side gives up (timeout, error, panic).

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::image::Image;

/// Kills QEMU if the host side gives up (timeout, error, panic).
pub struct Qemu(pub Child);

impl Drop for Qemu {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// One host thread for all vCPUs by default: with thread=multi (QEMU 7.2)
/// guests twice died executing half-patched kernel text (static keys and
/// alternatives being rewritten while the other vCPU ran them). Single is
/// about 1.3x slower here and still shows the contention plainly.
pub fn tcg_mode() -> String {
    std::env::var("NFSDTOP_VM_TCG").unwrap_or_else(|_| "single".into())
}

fn tcg_accel() -> String {
    format!("tcg,thread={}", tcg_mode())
}

/// How the guest starts the run's script (`/vm/init.sh` from the input disk).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Boot {
    /// The image's own first init (scripts/vm/guest-boot.sh): no
    /// services, the quickest boot.
    Plain,
    /// systemd as PID 1, as an operator's server boots, and the script as
    /// a `systemd.run=` service, its output on the serial console. The
    /// console's getty is masked: its hangup would cut the script's output.
    Systemd,
}

impl Boot {
    fn kernel_args(self) -> &'static str {
        match self {
            Boot::Plain => "init=/sbin/nfsdtop-vm-init",
            Boot::Systemd => {
                "init=/lib/systemd/systemd systemd.show_status=0 \
                 systemd.mask=serial-getty@ttyS0.service systemd.mask=getty@tty1.service \
                 systemd.run_failure_action=poweroff-force \
                 systemd.run=\"/bin/sh -c 'mkdir -p /vm && mount -t tmpfs -o size=256m tmpfs /vm \
                 && tar -xf /dev/vdb -C /vm && exec /vm/init.sh </dev/null >/dev/ttyS0 2>&1'\""
            }
        }
    }
}

/// The QEMU command line of a guest run (vm-test and bench): the image's
/// kernel and root disk (copy-on-write), the input disk read-only, the
/// output disk, two vCPUs on single-threaded TCG, console on stdout.
/// `icount`: `-icount` options, for a clock that counts instructions.
pub fn qemu_command(
    img: &Image,
    in_disk: &Path,
    out_disk: &Path,
    run_dir: &Path,
    icount: Option<&str>,
    writable_root: bool,
    boot: Boot,
) -> anyhow::Result<Command> {
    let drive = |p: &Path, extra: &str| format!("file={},if=virtio,format=raw{extra}", p.display());
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args([
        "-accel",
        &tcg_accel(),
        "-cpu",
        // TCG's cmpxchg16b (SLUB's fast path) was seen to double-fault
        // the guest with -icount (QEMU 10.0), and to corrupt SLUB's lists
        // with sixteen busy NFS clients: without cx16 SLUB takes its
        // locked path, in every run alike.
        "max,-cx16",
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
        .arg(drive(
            &img.dir.join("root.img"),
            if writable_root { "" } else { ",snapshot=on" },
        ))
        .arg("-drive")
        .arg(drive(in_disk, ",readonly=on"))
        .arg("-drive")
        .arg(drive(out_disk, ""))
        .arg("-append")
        .arg(format!(
            "root=/dev/vda rw console=ttyS0 quiet panic=-1 {}",
            boot.kernel_args()
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(File::create(run_dir.join("qemu.err"))?);
    Ok(cmd)
}
