//! `nfsdtop doctor` and the live source's command-line behaviour on this
//! host (real binary, real kernel for the BPF verifier).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn nfsdtop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
        .args(args)
        .output()
        .expect("run nfsdtop")
}

fn fixture(gen: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../agent/tests/fixtures/formats")
        .join(gen)
}

/// doctor's JSON, whatever its verdict on this host (0 ready, 3 not).
fn json(out: &Output) -> serde_json::Value {
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "doctor failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor JSON does not parse ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[test]
fn doctor_json_on_this_host_loads_the_bpf_programs() {
    if !Path::new("/sys/kernel/tracing").exists() {
        nfsdtop_agent::testing::skip("/sys/kernel/tracing does not exist on this host");
        return;
    }
    let d = json(&nfsdtop(&["doctor", "--format", "json"]));
    for key in [
        "tracefs",
        "sunrpc_loaded",
        "generation",
        "events",
        "bpf_programs_verified",
        "privileges_ok",
    ] {
        assert!(d.get(key).is_some(), "missing key {key}: {d}");
    }
    assert!(d["tracefs"].is_boolean() && d["events"].is_object());
    // The module is there exactly when /sys/module/sunrpc is (false on a
    // build machine without nfsd).
    let sunrpc = Path::new("/sys/module/sunrpc").exists();
    assert_eq!(d["sunrpc_loaded"], sunrpc, "{d}");
    assert_eq!(
        d["nfsd_loaded"],
        Path::new("/sys/module/nfsd").exists(),
        "{d}"
    );
    if !sunrpc {
        assert!(d["generation"].is_null(), "{d}");
        let problems = d["problems"].to_string();
        assert!(problems.contains("modprobe nfsd"), "{problems}");
    }
    if d["privileges_ok"] == true {
        assert_eq!(
            d["bpf_programs_verified"], true,
            "the kernel's verifier rejected the programs: {}",
            d["bpf_error"]
        );
        // Five classic, five raw, two for NFSv4 operations.
        assert_eq!(d["bpf_programs"].as_array().map(Vec::len), Some(12), "{d}");
    } else {
        assert_eq!(d["bpf_programs_verified"], false, "{d}");
        assert!(d["problems"].to_string().contains("CAP_BPF"), "{d}");
    }
}

#[test]
fn doctor_reads_a_tracefs_tree() {
    let dir = fixture("class");
    let d = json(&nfsdtop(&[
        "doctor",
        "--format",
        "json",
        "--tracefs",
        dir.to_str().unwrap(),
    ]));
    assert_eq!(d["tracefs"], true);
    assert_eq!(d["sunrpc_loaded"], true);
    assert_eq!(d["generation"], "6.16+ +class");
    assert_eq!(d["wait_source"], "qtime");
    let deq = &d["events"]["svc_xprt_dequeue"];
    assert_eq!(deq["present"], true);
    let fields: Vec<&str> = deq["fields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert!(
        fields.contains(&"qtime") && fields.contains(&"class"),
        "{fields:?}"
    );

    let text = nfsdtop(&["doctor", "--tracefs", dir.to_str().unwrap()]);
    assert!(text.status.success());
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("6.16+ +class") && text.contains("svc_xprt_dequeue"),
        "{text}"
    );
}

#[test]
fn doctor_names_the_field_of_a_format_it_cannot_use() {
    let d = json(&nfsdtop(&[
        "doctor",
        "--format",
        "json",
        "--tracefs",
        fixture("5.17-text").to_str().unwrap(),
    ]));
    assert!(d["generation"].is_null());
    let problems = d["problems"].to_string();
    assert!(problems.contains("`client`"), "{problems}");
}

#[test]
fn live_faults_are_errors_not_a_silent_demo() {
    // No tracefs where asked: an error with the mount hint, exit non-zero.
    let out = nfsdtop(&["-b", "-n", "1", "--tracefs", "/nonexistent/tracing"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("mount -t tracefs"), "{err}");
    assert!(out.stdout.is_empty());

    // A format this version cannot use: names the event and the field.
    let out = nfsdtop(&[
        "-b",
        "-n",
        "1",
        "--tracefs",
        fixture("5.17-text").to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("svc_xprt_") && err.contains("`client`"),
        "{err}"
    );
}

#[test]
fn wait_gives_up_with_a_clear_message() {
    let dir = std::env::temp_dir().join(format!("nfsdtop-doctor-test-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("events/sched")).unwrap();
    let out = nfsdtop(&[
        "-b",
        "-n",
        "1",
        "--wait",
        "0.3",
        "--tracefs",
        dir.to_str().unwrap(),
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        !out.status.success(),
        "--wait must not fall back to the demo"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("waited") && err.contains("modprobe nfsd"),
        "{err}"
    );
}

// Batch output without nfsd: an error, never the demo
// (tests/cli.rs: without_nfsd_batch_and_record_fail_instead_of_showing_the_demo;
// the interactive UI's banner: tests/tmux_e2e.rs).

#[test]
fn unprivileged_users_are_told_which_capabilities() {
    let root = std::fs::read_to_string("/proc/self/status")
        .map(|s| s.lines().any(|l| l.starts_with("Uid:\t0\t")))
        .unwrap_or(false);
    if !root || !Path::new(nfsdtop_testkit::SETPRIV).exists() {
        nfsdtop_agent::testing::skip("needs root and setpriv to drop to an unprivileged user");
        return;
    }
    // A copy of the binary in a world-readable place: the build tree may sit
    // under a directory the unprivileged user cannot enter (e.g. /root).
    let dir = std::env::temp_dir().join(format!("nfsdtop-doctor-nobody-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bin = dir.join("nfsdtop");
    std::fs::copy(env!("CARGO_BIN_EXE_nfsdtop"), &bin).expect("copy the binary");
    use std::os::unix::fs::PermissionsExt;
    for (path, mode) in [(&dir, 0o755), (&bin, 0o755)] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }
    let drop_to_nobody = |args: &[&str]| {
        nfsdtop_testkit::as_nobody(&bin)
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("run setpriv")
    };
    let out = drop_to_nobody(&["doctor", "--format", "json"]);
    let d = json(&out);
    assert_eq!(d["privileges_ok"], false, "{d}");
    assert_eq!(d["bpf_programs_verified"], false, "{d}");
    let problems = d["problems"].to_string();
    assert!(
        problems.contains("CAP_BPF") && problems.contains("CAP_PERFMON"),
        "{problems}"
    );

    let fixture = fixture("6.6+");
    let out = drop_to_nobody(&["-b", "-n", "1", "--tracefs", fixture.to_str().unwrap()]);
    assert!(
        !out.status.success(),
        "a privilege error must not fall back to the demo"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("missing privileges") && err.contains("CAP_SYS_ADMIN"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ring_size_flag_is_checked() {
    let help = nfsdtop(&["--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("--ring-size"));
    for bad in ["1000", "3000000", "2G", "x"] {
        let out = nfsdtop(&["-b", "-n", "1", "--ring-size", bad]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "--ring-size {bad} must be refused"
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("ring size") || bad == "x");
    }
    // A good size reaches the live source (here: its tracefs error).
    let out = nfsdtop(&[
        "-b",
        "-n",
        "1",
        "--ring-size",
        "256K",
        "--tracefs",
        "/nonexistent",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("mount -t tracefs"));
}

#[test]
fn doctor_notes_nfsdtopd_passwords_sent_in_clear() {
    let dir = std::env::temp_dir().join(format!("nfsdtop-doctor-clear-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let users = "[basic_auth_users]\nprom = \"sha256:f52fbd32b2b3b86ff88ef6c490628285f482af15ddcb29541f94bcf526a3f6c7\"\n";
    let tls = "[tls_server_config]\ncert_file = \"a.crt\"\nkey_file = \"a.key\"\n";
    let tracefs = fixture("class");
    for (name, text, warned) in [
        (
            "clear.toml",
            format!("listen = \"0.0.0.0:9847\"\nexpose = true\n{users}"),
            true,
        ),
        (
            "tls.toml",
            format!("listen = \"0.0.0.0:9847\"\nexpose = true\n{users}{tls}"),
            false,
        ),
        ("local.toml", users.to_string(), false),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let out = nfsdtop(&[
            "doctor",
            "--format",
            "json",
            "--tracefs",
            tracefs.to_str().unwrap(),
            "--nfsdtopd-config",
            path.to_str().unwrap(),
        ]);
        let d = json(&out);
        let noted = d["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("cross the network in clear"));
        assert_eq!(noted, warned, "{name}: {d}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Without nfsd's events the live source cannot start: doctor says why and
/// exits 3 (0 is kept for a host where it can); and what it says of raw
/// tracepoints never contradicts the line below it.
#[test]
fn doctor_exits_3_when_the_live_source_cannot_start_and_says_so() {
    let dir = std::env::temp_dir().join(format!("nfsdtop-doctor-none-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("events/sched")).unwrap();
    let out = nfsdtop(&["doctor", "--tracefs", dir.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(
        text.contains("verdict: the live source cannot start here"),
        "{text}"
    );
    let raw = text
        .lines()
        .find(|l| l.contains("raw tracepoints "))
        .unwrap();
    assert!(raw.contains("not known until"), "{raw}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn doctor_never_says_no_raw_tracepoints_above_a_line_starting_on_them() {
    for gen in ["class", "6.6+", "5.18-6.5"] {
        let out = nfsdtop(&["doctor", "--tracefs", fixture(gen).to_str().unwrap()]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let field = |k: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(k))
                .unwrap_or_else(|| panic!("no {k} in {text}"))
                .to_string()
        };
        let (raw, preemption) = (field("raw tracepoints"), field("tracepoint preemption"));
        if raw.contains("none possible") {
            assert!(
                !preemption.contains(": raw tracepoints"),
                "{gen}:\n{raw}\n{preemption}"
            );
        }
        assert!(matches!(out.status.code(), Some(0 | 3)), "{gen}: {text}");
    }
}
