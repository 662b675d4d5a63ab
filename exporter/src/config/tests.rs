//! The config file and flags: values, overrides and FILE:LINE errors.

use super::*;
use nfsdtop_agent::session::SourceChoice;
use nfsdtop_agent::source::demo::Policy;
use nfsdtop_agent::source::live::Tracepoints;
use std::time::Duration;

#[test]
fn the_example_config_parses() {
    let path = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/nfsdtopd.example.toml"
    ));
    let text = std::fs::read_to_string(path).unwrap();
    let cfg = Config::from_file_text(path, &text).unwrap();
    assert_eq!(cfg.listen.to_string(), DEFAULT_LISTEN);
    assert_eq!(cfg.session.source, SourceChoice::Live);
    assert_eq!(
        cfg.session.live.wait_for_nfsd,
        Some(Duration::from_secs(300))
    );
    assert_eq!((cfg.top_k, cfg.top_k_classes), (50, 200));
}

#[test]
fn flags_override_the_file() {
    let dir = std::env::temp_dir().join(format!("nfsdtopd-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("c.toml");
    std::fs::write(
        &path,
        "top_k = 7\nclass_map = \"m.txt\"\n[source]\nkind = \"demo\"\nscenario = \"seed-k4\"\n",
    )
    .unwrap();
    let cli = Cli::parse_from([
        "nfsdtopd",
        "--config",
        path.to_str().unwrap(),
        "--top-k",
        "9",
        "--policy",
        "rr-peer",
    ]);
    let cfg = Config::resolve(&cli).unwrap();
    assert_eq!(cfg.top_k, 9);
    assert_eq!(
        cfg.session.class_map,
        Some(dir.join("m.txt")),
        "relative to the file"
    );
    assert_eq!(
        cfg.session.source,
        SourceChoice::Demo {
            scenario: "seed-k4".into(),
            policy: Some(Policy::RrPeer)
        }
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ring_size_and_unfair_ratio_from_file_and_flags() {
    let path = Path::new("/etc/nfsdtop/nfsdtopd.toml");
    let cfg = |text: &str| Config::from_file_text(path, text);
    assert_eq!(cfg("").unwrap().session.live.ring_bytes, 16 << 20);
    assert_eq!(
        cfg("ring_size = \"64M\"").unwrap().session.live.ring_bytes,
        64 << 20
    );
    assert_eq!(
        cfg("ring_size = 65536").unwrap().session.live.ring_bytes,
        65536
    );
    let e = cfg("wait = 1\nring_size = \"3M\"").unwrap_err().to_string();
    assert!(
        e.starts_with("/etc/nfsdtop/nfsdtopd.toml:2:") && e.contains("not a power of two"),
        "{e}"
    );
    let e = cfg("ring_size = 1024").unwrap_err().to_string();
    assert!(e.contains("out of range"), "{e}");
    assert_eq!(cfg("unfair_ratio = 0.3").unwrap().unfair_ratio, 0.3);
    let e = cfg("unfair_ratio = 2.0").unwrap_err().to_string();
    assert!(
        e.contains("/etc/nfsdtop/nfsdtopd.toml:1:") && e.contains("at most 1"),
        "{e}"
    );
    let cli = Cli::parse_from(["nfsdtopd", "--ring-size", "256K", "--unfair-ratio", "0.4"]);
    let c = Config::resolve(&cli).unwrap();
    assert_eq!(
        (c.session.live.ring_bytes, c.unfair_ratio),
        (256 << 10, 0.4)
    );
    let e = Cli::try_parse_from(["nfsdtopd", "--ring-size", "5000"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a power of two"), "{e}");
    assert!(Cli::try_parse_from(["nfsdtopd", "--unfair-ratio", "0"]).is_err());
}

#[test]
fn bcrypt_costs_above_the_maximum_are_refused() {
    let path = Path::new("/etc/nfsdtopd.toml");
    // A well-formed hash whose cost says 31: never handed to bcrypt.
    let text = "[basic_auth_users]\nalice = \"$2y$31$abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0\"\n";
    let e = Config::from_file_text(path, text).unwrap_err().to_string();
    assert!(e.starts_with("/etc/nfsdtopd.toml:2:9: "), "{e}");
    assert!(e.contains("\"alice\"") && e.contains("cost 31"), "{e}");
    assert!(e.contains(&format!("maximum, {MAX_BCRYPT_COST}")), "{e}");
    assert!(check_bcrypt_cost("$2y$14$x", "a").is_ok());
    assert!(check_bcrypt_cost("$2b$15$x", "a").is_err());
    assert!(check_bcrypt_cost("sha256:00", "a").is_ok());
}

#[test]
fn max_streams_from_file_and_flags() {
    let path = Path::new("/etc/nfsdtopd.toml");
    let cfg = Config::from_file_text(path, "").unwrap();
    assert_eq!(cfg.max_streams, crate::stream::DEFAULT_MAX_STREAMS);
    let cfg = Config::from_file_text(path, "max_streams = 3").unwrap();
    assert_eq!(cfg.max_streams, 3);
    let e = Config::from_file_text(path, "max_streams = 0").unwrap_err();
    assert!(e.to_string().contains("nfsdtopd.toml:1:15"), "{e}");
    assert!(Cli::try_parse_from(["nfsdtopd", "--max-streams", "0"]).is_err());
    let cli = Cli::parse_from(["nfsdtopd", "--max-streams", "5"]);
    assert_eq!(Config::resolve(&cli).unwrap().max_streams, 5);
}

#[test]
fn tracepoint_choice_from_file_and_flags() {
    let path = Path::new("/etc/nfsdtopd.toml");
    let choice =
        |text: &str| Config::from_file_text(path, text).map(|c| c.session.live.tracepoints);
    assert_eq!(choice("").unwrap(), Tracepoints::Raw);
    assert_eq!(choice("raw_tracepoints = true").unwrap(), Tracepoints::Raw);
    assert_eq!(
        choice("raw_tracepoints = false").unwrap(),
        Tracepoints::Classic
    );
    let e = choice("raw_tracepoints = 1").unwrap_err().to_string();
    assert!(e.contains("/etc/nfsdtopd.toml"), "{e}");
    let cli = Cli::parse_from(["nfsdtopd", "--classic-tracepoints"]);
    assert_eq!(
        Config::resolve(&cli).unwrap().session.live.tracepoints,
        Tracepoints::Classic
    );
    assert!(
        Cli::try_parse_from(["nfsdtopd", "--classic-tracepoints", "--raw-tracepoints"]).is_err()
    );
}

#[test]
fn keep_raw_tracepoints_from_file_and_flag() {
    let path = Path::new("/etc/nfsdtopd.toml");
    let keep = |text: &str| Config::from_file_text(path, text).map(|c| c.session.live.keep_raw);
    assert!(!keep("").unwrap(), "off by default");
    assert!(keep("keep_raw_tracepoints = true").unwrap());
    let e = keep("keep_raw_tracepoints = 1").unwrap_err().to_string();
    assert!(e.contains("/etc/nfsdtopd.toml"), "{e}");
    let cli = Cli::parse_from(["nfsdtopd", "--keep-raw-tracepoints"]);
    assert!(Config::resolve(&cli).unwrap().session.live.keep_raw);
    // Raw kept and classic asked for: refused, whichever says which.
    let dir = std::env::temp_dir().join(format!("nfsdtopd-keepraw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("c.toml");
    let with = |text: &str, flags: &[&str]| {
        std::fs::write(&file, text).unwrap();
        let args = ["nfsdtopd", "--config", file.to_str().unwrap()];
        Config::resolve(&Cli::parse_from(args.iter().chain(flags)))
    };
    for (text, flags) in [
        (
            "raw_tracepoints = false\nkeep_raw_tracepoints = true\n",
            &[][..],
        ),
        ("raw_tracepoints = false\n", &["--keep-raw-tracepoints"][..]),
        (
            "keep_raw_tracepoints = true\n",
            &["--classic-tracepoints"][..],
        ),
    ] {
        let e = with(text, flags).unwrap_err().to_string();
        assert!(e.contains("drop one of the two"), "{text:?} {flags:?}: {e}");
    }
    assert!(
        with("keep_raw_tracepoints = true\n", &[])
            .unwrap()
            .session
            .live
            .keep_raw
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn resolve_from_file_and_flags() {
    let path = Path::new("/etc/nfsdtopd.toml");
    let resolve = |text: &str| Config::from_file_text(path, text).map(|c| c.session.resolve);
    assert!(!resolve("").unwrap(), "off by default");
    assert!(resolve("resolve = true").unwrap());
    assert!(!resolve("resolve = false").unwrap());
    let e = resolve("resolve = \"yes\"").unwrap_err().to_string();
    assert!(e.contains("/etc/nfsdtopd.toml"), "{e}");
    let cli = Cli::parse_from(["nfsdtopd", "--resolve"]);
    assert!(Config::resolve(&cli).unwrap().session.resolve);
}

#[test]
fn enqueue_hooks_from_file_and_flag() {
    let path = Path::new("/etc/nfsdtopd.toml");
    let hooks =
        |text: &str| Config::from_file_text(path, text).map(|c| c.session.live.enqueue_hooks);
    assert!(!hooks("").unwrap(), "dequeues alone by default");
    assert!(hooks("enqueue_hooks = true").unwrap());
    assert!(!hooks("enqueue_hooks = false").unwrap());
    let e = hooks("enqueue_hooks = \"yes\"").unwrap_err().to_string();
    assert!(e.contains("/etc/nfsdtopd.toml:1"), "{e}");
    let cli = Cli::parse_from(["nfsdtopd", "--enqueue-hooks"]);
    assert!(Config::resolve(&cli).unwrap().session.live.enqueue_hooks);
    assert!(Cli::try_parse_from(["nfsdtopd", "--enqueue-hooks", "--demo", "movers"]).is_err());
}

#[test]
fn typed_program_from_file_and_flag() {
    let path = Path::new("/etc/nfsdtopd.toml");
    let typed =
        |text: &str| Config::from_file_text(path, text).map(|c| c.session.live.typed_program);
    assert!(typed("").unwrap(), "the typed program by default");
    assert!(!typed("typed_program = false").unwrap());
    assert!(typed("typed_program = true").unwrap());
    let cli = Cli::parse_from(["nfsdtopd", "--no-typed-program"]);
    assert!(!Config::resolve(&cli).unwrap().session.live.typed_program);
    assert!(Cli::try_parse_from(["nfsdtopd", "--no-typed-program", "--demo", "movers"]).is_err());
}

/// Each flag alone, and its key alone: the same configuration (every flag
/// has its key, read by the flag's own parser), for a value the flag takes
/// among a few likely ones.
#[test]
fn every_flag_is_a_key_of_the_same_meaning() {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let dir = std::env::temp_dir().join(format!("nfsdtopd-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("c.toml");
    let from_file = |text: &str| {
        std::fs::write(&file, text).unwrap();
        Config::resolve(&Cli::parse_from([
            "nfsdtopd",
            "--config",
            file.to_str().unwrap(),
        ]))
    };
    let mut checked = 0;
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        let Some(key) = keys::key_of(arg) else {
            assert!(keys::NOT_KEYS.contains(&id), "--{id} has no key");
            continue;
        };
        assert!(
            !file::table_keys().contains(&key.as_str()),
            "{key}: flag and table"
        );
        let long = format!("--{}", arg.get_long().unwrap());
        let (line, text) = if !arg.get_action().takes_values() {
            (vec![long], format!("{key} = true\n"))
        } else {
            let sample = ["/x", "1", "64M", "flat", "hooked", "127.0.0.1:1"]
                .into_iter()
                .find(|v| Cli::try_parse_from(["nfsdtopd", &format!("{long}={v}")]).is_ok());
            let Some(v) = sample else {
                assert!(
                    ["tls_cert", "tls_key"].contains(&id),
                    "{long}: no sample value"
                );
                continue;
            };
            (vec![format!("{long}={v}")], format!("{key} = {v:?}\n"))
        };
        let line = std::iter::once("nfsdtopd".to_string()).chain(line);
        let flag = Config::resolve(&Cli::parse_from(line)).map_err(|e| e.to_string());
        let key_ = from_file(&text).map_err(|e| e.to_string());
        assert_eq!(format!("{flag:?}"), format!("{key_:?}"), "{text}");
        checked += 1;
    }
    assert!(checked > 25, "only {checked} flags");
    for (old, new) in keys::OLD_KEYS {
        let arg = keys::flag(&cmd, new).expect("an old key names a flag");
        assert!(
            !arg.get_action().takes_values(),
            "{old} stands for a flag without value"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What is wrong, where (FILE:LINE:COL of the value, or of an unknown
/// key) and what to do.
#[test]
fn bad_keys_and_values_say_where() {
    let path = Path::new("/etc/nfsdtop/nfsdtopd.toml");
    let err = |text: &str| Config::from_file_text(path, text).unwrap_err().to_string();
    assert_eq!(
        err("expose = true\ntop_k = 0\n"),
        "/etc/nfsdtop/nfsdtopd.toml:2:9: top_k: must be between 1 and 10000, not 0"
    );
    let e = err("interval = \"soon\"");
    assert!(
        e.starts_with("/etc/nfsdtop/nfsdtopd.toml:1:12: interval: "),
        "{e}"
    );
    let e = err("policy = \"fifo\"");
    assert!(
        e.starts_with("/etc/nfsdtop/nfsdtopd.toml:1:10: ") && e.contains("flat"),
        "{e}"
    );
    let e = err("top_k = 1\nring-size = \"64M\"");
    assert!(
        e.starts_with("/etc/nfsdtop/nfsdtopd.toml:2:1: ") && e.contains("write ring_size"),
        "{e}"
    );
    let e = err("typed-program = false");
    assert!(
        e.ends_with("unknown key \"typed-program\": write typed_program"),
        "{e}"
    );
    let e = err("top_k_clases = 3");
    assert!(
        e.ends_with("unknown key \"top_k_clases\": write top_k_classes"),
        "{e}"
    );
    let e = err("\nfrobnicate = 1");
    assert!(
        e.starts_with("/etc/nfsdtop/nfsdtopd.toml:2:1: unknown key \"frobnicate\""),
        "{e}"
    );
    assert!(
        e.contains("--ring-size") && e.contains("tls_server_config"),
        "{e}"
    );
    let e = err("config = \"other.toml\"");
    assert!(e.contains("unknown key \"config\""), "{e}");
    let e = err("wait = [1]");
    assert!(
        e.starts_with("/etc/nfsdtop/nfsdtopd.toml:1:8: wait must be a string or number"),
        "{e}"
    );
    // Together: a conflict or a missing partner, at the key or the file.
    let e = err("classic_tracepoints = true\nkeep_raw_tracepoints = true\n");
    assert!(
        e.starts_with("/etc/nfsdtop/nfsdtopd.toml:1:23: classic_tracepoints: "),
        "{e}"
    );
    assert!(
        e.contains("--keep-raw") && e.ends_with("; drop one of the two"),
        "{e}"
    );
    let e = err("demo = \"movers\"\nreplay = \"r.nfsdrec\"\n");
    assert!(e.ends_with("; drop one of the two"), "{e}");
    let e = err("demo = \"movers\"\n[source]\nkind = \"demo\"\n");
    assert!(e.contains("drop one"), "{e}");
    assert_eq!(
        err("tls_cert = \"a.pem\""),
        "/etc/nfsdtop/nfsdtopd.toml: the keys given need tls_key too: add it"
    );
}

#[test]
fn old_keys_still_work_with_a_warning() {
    let path = Path::new("/etc/nfsdtop/nfsdtopd.toml");
    let cfg = |text: &str| Config::from_file_text(path, text).unwrap();
    let c = cfg("typed_program = false");
    assert!(!c.session.live.typed_program);
    assert!(
        c.warnings[0].contains(
            "nfsdtopd.toml:1:1: typed_program = false is the old name of no_typed_program = true"
        ),
        "{:?}",
        c.warnings
    );
    assert!(c.warnings[0].starts_with("warning: "));
    let c = cfg("no_typed_program = true\nclassic_tracepoints = true");
    assert!(!c.session.live.typed_program && c.warnings.is_empty());
    assert_eq!(c.session.live.tracepoints, Tracepoints::Classic);
    assert_eq!(cfg("raw_tracepoints = true").warnings, Vec::<String>::new());
    assert_eq!(cfg("raw_tracepoints = false").warnings.len(), 1);
}

/// The live source's settings stay in a file that watches the demo (the
/// example's wait and ring_size, say): only the live source reads them.
#[test]
fn live_settings_do_not_conflict_with_the_files_source() {
    let path = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/nfsdtopd.example.toml"
    ));
    let text = std::fs::read_to_string(path).unwrap();
    let demo = text.replace("kind = \"live\"", "kind = \"demo\"");
    let cfg = Config::from_file_text(path, &demo).unwrap();
    assert!(matches!(cfg.session.source, SourceChoice::Demo { .. }));
    let keyed = format!(
        "demo = \"movers\"\n{}",
        text.replace("[source]\nkind = \"live\"", "")
    );
    let cfg = Config::from_file_text(path, &keyed).unwrap();
    assert!(matches!(cfg.session.source, SourceChoice::Demo { .. }));
}

#[test]
fn values_of_the_file_as_flags_take_them() {
    let path = Path::new("/etc/nfsdtop/nfsdtopd.toml");
    let cfg = |text: &str| Config::from_file_text(path, text).unwrap();
    assert_eq!(
        cfg("wait = true").session.live.wait_for_nfsd,
        Some(Duration::MAX)
    );
    assert_eq!(cfg("wait = false").session.live.wait_for_nfsd, None);
    assert_eq!(
        cfg("replay = \"r.nfsdrec\"").session.source,
        SourceChoice::Replay("/etc/nfsdtop/r.nfsdrec".into()),
        "relative to the file"
    );
    assert_eq!(
        cfg("demo = \"s.toml\"\npolicy = \"rr-peer\"")
            .session
            .source,
        SourceChoice::Demo {
            scenario: "/etc/nfsdtop/s.toml".into(),
            policy: Some(Policy::RrPeer)
        }
    );
    assert_eq!(cfg("listen = \"[::1]:9\"").listen.to_string(), "[::1]:9");
    let c = cfg("redact = false\nredact_key = \"0123456789abcdef\"");
    assert!(c.redact.is_none(), "redact = false wins over the key");
    let c = cfg("tls_cert = \"c.pem\"\ntls_key = \"k.pem\"");
    assert_eq!(c.tls.unwrap().key, Path::new("/etc/nfsdtop/k.pem"));
}

/// A new flag is a new key: the configuration reference must name it.
#[test]
fn the_config_reference_names_every_key() {
    use clap::CommandFactory;
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/book/src/reference/config.md"
    ))
    .unwrap();
    let cmd = Cli::command();
    let visible = cmd.get_arguments().filter(|a| !a.is_hide_set());
    for key in visible.filter_map(keys::key_of) {
        assert!(
            page.contains(&format!("| `{key}`")) || page.contains(&format!(", `{key}`")),
            "docs/book/src/reference/config.md does not name the key {key}"
        );
    }
    for key in file::table_keys() {
        assert!(
            page.contains(&format!("`{key}`")) || page.contains(&format!("`[{key}]`")),
            "{key}"
        );
    }
}
