//! Scenario "package" (a boot of its own, with systemd as PID 1;
//! scripts/vm/package-guest.sh): the .deb installed with apt is enabled,
//! started and serves its client's dispatches; a rebuilt newer version
//! installed over it restarts it with the changed config kept; remove
//! stops it; purge leaves nothing of it enabled. This file builds the two
//! packages and checks what the guest recorded.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::report::Report;
use crate::deb::{deb, version, DebArgs};

/// The upgrade's version: the same tree, a higher version.
const UPGRADE_SUFFIX: &str = "+vmtest1";

/// The package and its upgrade, built as `cargo xtask deb` builds it
/// (release binaries) into target/vm-deb.
pub fn build_packages() -> anyhow::Result<Vec<PathBuf>> {
    let args = |suffix: Option<&str>| DebArgs {
        out: PathBuf::from("target/vm-deb"),
        debug: false,
        runbook_base: None,
        version_suffix: suffix.map(String::from),
        // Test packages: the documentation domain, nobody's mailbox.
        maintainer: Some("nfsdtop VM test <vm-test@example.org>".into()),
    };
    Ok(vec![deb(&args(None))?, deb(&args(Some(UPGRADE_SUFFIX)))?])
}

/// The guest's config lines naming the two packages (files on its input
/// disk).
pub fn guest_config(debs: &[PathBuf]) -> String {
    let name = |i: usize| {
        debs.get(i)
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default()
    };
    format!("DEB_FIRST={}\nDEB_UPGRADE={}\n", name(0), name(1))
}

pub fn check(summary: &BTreeMap<String, String>, rep: &mut Report) {
    let get = |k: &str| summary.get(k).map(String::as_str).unwrap_or("(missing)");
    let is = |k: &str, want: &str| (get(k) == want, format!("{k} = {:?}", get(k)));
    let mut expect =
        |(ok, what): (bool, String), why: &str| rep.check(ok, format!("package: {why} ({what})"));
    let (Ok(first), Ok(upgrade)) = (version(None), version(Some(UPGRADE_SUFFIX))) else {
        rep.check(false, "package: the versions to expect");
        return;
    };

    expect(is("pid1", "systemd"), "the guest booted systemd as PID 1");
    for step in ["install", "upgrade", "remove", "purge"] {
        expect(is(&format!("pkg.{step}.apt_exit"), "0"), "apt succeeded");
    }
    // install: no manual enable or start.
    expect(is("pkg.install.dpkg", &format!("ii {first}")), "installed");
    expect(
        is("pkg.install.is_enabled", "enabled"),
        "enabled by the package",
    );
    expect(
        is("pkg.install.is_active", "active"),
        "started by the package",
    );
    expect(
        is("pkg.install.metrics_client", "yes"),
        "/metrics has the NFS client's dispatches",
    );
    // upgrade: restarted, the administrator's config kept and used.
    expect(
        is("pkg.upgrade.conf_changed", "1"),
        "the config was changed before the upgrade",
    );
    expect(is("pkg.upgrade.dpkg", &format!("ii {upgrade}")), "upgraded");
    expect(
        is("pkg.upgrade.is_active", "active"),
        "active after the upgrade",
    );
    expect(
        is("pkg.upgrade.is_enabled", "enabled"),
        "still enabled after the upgrade",
    );
    let pids = (get("pkg.install.main_pid"), get("pkg.upgrade.main_pid"));
    expect(
        (
            pids.0 != pids.1 && pids.0 != "0" && pids.1 != "0",
            format!("MainPID {} then {}", pids.0, pids.1),
        ),
        "restarted by the upgrade",
    );
    let since = |k: &str| get(k).parse::<u64>().unwrap_or(0);
    expect(
        (
            since("pkg.upgrade.active_since") > since("pkg.install.active_since"),
            format!(
                "ActiveEnterTimestampMonotonic {} then {}",
                get("pkg.install.active_since"),
                get("pkg.upgrade.active_since")
            ),
        ),
        "active again since the upgrade",
    );
    expect(
        is("pkg.upgrade.conf_kept", "1"),
        "the changed conffile kept",
    );
    expect(
        is("pkg.upgrade.conf_leftovers", "0"),
        "no .dpkg-new/.dpkg-dist beside it",
    );
    expect(
        is("pkg.upgrade.metrics_client", "yes"),
        "serving on the changed config's port, with the client",
    );
    // remove: stopped; the config stays until purge.
    expect(
        is("pkg.remove.dpkg", &format!("rc {upgrade}")),
        "removed, config left",
    );
    expect(
        (
            get("pkg.remove.is_active") != "active",
            format!("pkg.remove.is_active = {:?}", get("pkg.remove.is_active")),
        ),
        "stopped by remove",
    );
    expect(
        is("pkg.remove.processes", "0"),
        "no nfsdtopd process after remove",
    );
    expect(
        is("pkg.remove.conf_present", "yes"),
        "config kept by remove",
    );
    // purge: nothing enabled, no state, no config.
    expect(
        (
            !get("pkg.purge.dpkg").starts_with("ii") && !get("pkg.purge.dpkg").starts_with("rc"),
            format!("pkg.purge.dpkg = {:?}", get("pkg.purge.dpkg")),
        ),
        "purged",
    );
    expect(
        (
            get("pkg.purge.is_enabled") != "enabled"
                && summary.contains_key("pkg.purge.is_enabled"),
            format!("pkg.purge.is_enabled = {:?}", get("pkg.purge.is_enabled")),
        ),
        "not enabled after purge",
    );
    expect(
        is("pkg.purge.wants_links", "0"),
        "no unit links left in /etc/systemd/system",
    );
    expect(
        is("pkg.purge.helper_state", "0"),
        "deb-systemd-helper's state removed",
    );
    expect(is("pkg.purge.conf_present", "no"), "/etc/nfsdtop removed");
}
