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
    let cli = Cli::parse_from(["nfsdtopd", "--unfair-ratio", "0"]);
    assert!(Config::resolve(&cli).is_err());
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
