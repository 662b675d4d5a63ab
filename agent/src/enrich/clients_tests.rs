//! Tests of the NFSv4 client list: `info` files in the kernel's format
//! and hostile ones, directories, the refresher, and names reaching (or,
//! redacted, not reaching) a session's snapshots.

use std::path::PathBuf;

use super::*;

/// As `client_info_show` writes it (6.x): quoted address and strings.
const V4: &str = "clientid: 0x6a1b2c3d64f0e1a2
address: \"10.0.0.2:876\"
status: confirmed
seconds from last renew: 3
name: \"Linux NFSv4.2 client1\"
minor version: 2
Implementation domain: \"kernel.org\"
Implementation name: \"Linux 6.12.0-1-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.12.6-1 (2024-12-21) x86_64\"
Implementation time: [0, 0]
callback state: UP
callback address: 10.0.0.2:0
admin-revoked states: 0
";

const V6: &str = "clientid: 0x1
address: \"[fd00::2]:876\"
status: confirmed
name: \"Linux NFSv4.1 client6\"
minor version: 1
callback state: UNKNOWN
callback address: [fd00::2]:0
";

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nfsdtop-clients-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn client(root: &Path, id: u32, info: &[u8]) {
    let d = root.join(id.to_string());
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("info"), info).unwrap();
}

fn info(addr: &str, name: &str) -> String {
    format!("clientid: 0x1\naddress: \"{addr}\"\nname: \"{name}\"\nminor version: 2\n")
}

#[test]
fn the_kernels_format_ipv4_and_ipv6() {
    let (ip, c) = parse_info(V4.as_bytes()).unwrap();
    assert_eq!(ip, "10.0.0.2".parse::<IpAddr>().unwrap());
    assert_eq!(c.name, "Linux NFSv4.2 client1");
    assert_eq!(c.minor_version, Some(2));
    assert_eq!(
        c.implementation.as_deref(),
        Some("Linux 6.12.0-1-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.12.6-1 (2024-12-21) x86_64")
    );
    let (ip, c) = parse_info(V6.as_bytes()).unwrap();
    assert_eq!(ip, "fd00::2".parse::<IpAddr>().unwrap());
    assert_eq!(c.name, "Linux NFSv4.1 client6");
    assert_eq!(c.minor_version, Some(1));
    assert_eq!(c.implementation, None, "no EXCHANGE_ID implementation id");
    // A v4-mapped address is the IPv4 peer's.
    let (ip, _) = parse_info(info("[::ffff:10.0.0.9]:700", "n").as_bytes()).unwrap();
    assert_eq!(ip, "10.0.0.9".parse::<IpAddr>().unwrap());
}

#[test]
fn older_kernels_unquoted_address_and_missing_fields() {
    // 5.3: address without quotes, no status, no implementation.
    let old =
        "clientid: 1f\naddress: 10.0.0.4:801\nname: \"Linux NFSv4.0 old\"\nminor version: 0\n";
    let (ip, c) = parse_info(old.as_bytes()).unwrap();
    assert_eq!(ip, "10.0.0.4".parse::<IpAddr>().unwrap());
    assert_eq!(c.minor_version, Some(0));
    // No minor version: unknown, the name still counts.
    let (_, c) = parse_info(b"address: \"10.0.0.5:1\"\nname: \"x\"\n").unwrap();
    assert_eq!(c.minor_version, None);
    // No name, or no address: nothing to show.
    assert_eq!(
        parse_info(b"address: \"10.0.0.5:1\"\nminor version: 2\n"),
        None
    );
    assert_eq!(parse_info(b"address: \"10.0.0.5:1\"\nname: \"\"\n"), None);
    assert_eq!(parse_info(b"name: \"x\"\nminor version: 2\n"), None);
    assert_eq!(parse_info(b"address: \"nowhere:1\"\nname: \"x\"\n"), None);
    assert_eq!(
        parse_info(b"address: \"10.0.0.5:1\"\nname: \"x\"\nminor version: two\n")
            .unwrap()
            .1
            .minor_version,
        None
    );
}

#[test]
fn garbage_truncation_and_bytes_that_are_not_text() {
    assert_eq!(parse_info(b""), None);
    assert_eq!(parse_info(b"\xff\xfe\x00\x01 garbage: : :\n\n::::"), None);
    // Cut inside the name: no closing quote, no name.
    let cut = &V4[..V4.find("client1").unwrap()];
    assert_eq!(parse_info(cut.as_bytes()), None);
    // Cut inside the implementation: the name stands, that is unknown.
    let cut = &V4[..V4.find("PREEMPT").unwrap()];
    let (_, c) = parse_info(cut.as_bytes()).unwrap();
    assert_eq!(c.name, "Linux NFSv4.2 client1");
    assert_eq!(c.implementation, None);
    // The kernel's escapes: \xNN bytes (UTF-8 here), \" and \\; raw
    // invalid UTF-8 and control characters never come out as such.
    let (_, c) = parse_info(
        b"address: \"10.0.0.6:1\"\nname: \"caf\\xc3\\xa9 \\\"q\\\" a\\\\b \\x1b[31m \xff\"\n",
    )
    .unwrap();
    assert_eq!(c.name, "caf\u{e9} \"q\" a\\b ?[31m \u{fffd}");
    // Bounded, however long.
    let long = format!("address: \"10.0.0.7:1\"\nname: \"{}\"\n", "n".repeat(5000));
    let (_, c) = parse_info(long.as_bytes()).unwrap();
    assert_eq!(c.name.chars().count(), crate::text::MAX_TEXT_CHARS);
}

#[test]
fn a_directory_of_clients_several_at_one_address() {
    let root = dir("many");
    client(&root, 1, info("10.0.0.2:800", "Linux NFSv4.2 b").as_bytes());
    client(&root, 2, info("10.0.0.2:801", "Linux NFSv4.2 a").as_bytes());
    client(&root, 3, info("10.0.0.2:802", "Linux NFSv4.2 a").as_bytes());
    client(&root, 4, V6.as_bytes());
    client(&root, 5, b"\xff garbage");
    std::fs::create_dir_all(root.join("6")).unwrap(); // no info file
    std::fs::write(root.join("stray"), "a file, not a client").unwrap();
    let m = read_dir(&root, Some(7));
    assert_eq!(m.len(), 2);
    let ip: IpAddr = "10.0.0.2".parse().unwrap();
    let names: Vec<&str> = m.get(7, ip).iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["Linux NFSv4.2 a", "Linux NFSv4.2 b"],
        "sorted, once each"
    );
    assert!(m.get(8, ip).is_empty(), "another namespace's peer");
    assert_eq!(m.get(7, "fd00::2".parse().unwrap()).len(), 1);
    // Bounded per address.
    for i in 0..20 {
        client(
            &root,
            100 + i,
            info("10.0.0.3:1", &format!("c{i:02}")).as_bytes(),
        );
    }
    let m = read_dir(&root, None);
    assert_eq!(
        m.get(1, "10.0.0.3".parse().unwrap()).len(),
        MAX_NAMES_PER_ADDRESS
    );
    assert!(read_dir(&root.join("missing"), None).is_empty());
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_huge_info_file_is_read_only_in_part_and_a_fifo_not_at_all() {
    let root = dir("huge");
    // 10 MB: the client's lines first, then more than anyone should read.
    let mut big = info("10.0.0.2:800", "first").into_bytes();
    big.resize(10 << 20, b'x');
    client(&root, 1, &big);
    // The same size with the lines at its end: beyond what is read.
    let mut late = vec![b'#'; 10 << 20];
    late.extend_from_slice(info("10.0.0.3:800", "late").as_bytes());
    client(&root, 2, &late);
    // A FIFO would block a reader that opened it.
    std::fs::create_dir_all(root.join("3")).unwrap();
    let fifo = root.join("3/info");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    let m = read_dir(&root, None);
    assert_eq!(m.get(0, "10.0.0.2".parse().unwrap())[0].name, "first");
    assert!(m.get(0, "10.0.0.3".parse().unwrap()).is_empty());
    assert_eq!(m.len(), 1);
    if made.is_ok_and(|s| s.success()) {
        assert!(read_info(&fifo).is_none());
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn the_refresher_hands_over_the_first_read_and_fixed_names() {
    let root = dir("refresh");
    client(&root, 1, V4.as_bytes());
    let mut r = Refresher::start(root.clone(), None, Duration::from_secs(3600));
    let m = r.latest(Duration::from_secs(30)).expect("the first read");
    assert_eq!(
        m.get(0, "10.0.0.2".parse().unwrap())[0].name,
        "Linux NFSv4.2 client1"
    );
    // Later calls do not wait, and keep the newest map.
    assert!(r.latest(Duration::from_secs(30)).is_some());
    let mut f = Refresher::fixed(ClientMap::new(None));
    assert!(f.latest(Duration::ZERO).is_some());
    assert!(f.latest(Duration::ZERO).is_some(), "kept once taken");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_sessions_peers_carry_their_names_and_a_redacted_one_hides_them() {
    use crate::pipeline::Flow;
    use crate::session::{NoNfsd, Session, SessionConfig, SourceChoice};
    let root = dir("session");
    // seed-k4's clients are 10.0.0.2 and 10.0.0.3.
    client(&root, 1, V4.as_bytes());
    let cfg = SessionConfig {
        source: SourceChoice::Demo {
            scenario: "seed-k4".into(),
            policy: None,
        },
        speed: 0.0,
        nfsd_clients: Some(root.clone()),
        ..SessionConfig::default()
    };
    let first = |redactor: Option<crate::enrich::redact::Redactor>| {
        let session = Session::open(&cfg, NoNfsd::Fail)
            .unwrap()
            .with_redactor(redactor);
        let mut got = None;
        session
            .pipeline()
            .unwrap()
            .run(None, |s| {
                got = Some(s);
                Flow::Stop
            })
            .unwrap();
        got.unwrap()
    };
    let s = first(None);
    let peer = |s: &crate::model::Snapshot, n: &str| {
        s.peers.iter().find(|p| p.name == n).cloned().unwrap()
    };
    let named = peer(&s, "10.0.0.2");
    assert_eq!(named.client_names.len(), 1);
    assert_eq!(named.client_names[0].name, "Linux NFSv4.2 client1");
    assert_eq!(named.client_names[0].minor_version, Some(2));
    assert!(peer(&s, "10.0.0.3").client_names.is_empty());
    let json = serde_json::to_string(&s).unwrap();
    assert!(
        json.contains("\"client_names\":[{\"name\":\"Linux NFSv4.2 client1\""),
        "{json}"
    );

    let r = crate::enrich::redact::Redactor::with_key("a key for the test");
    let s = first(Some(r.clone()));
    let p = peer(&s, &r.pseudonym("10.0.0.2".parse().unwrap()));
    assert_eq!(p.client_names.len(), 1);
    assert!(p.client_names[0].name.starts_with("anon-"));
    let json = serde_json::to_string(&s).unwrap();
    for secret in ["client1", "Linux 6.12", "10.0.0.2"] {
        assert!(!json.contains(secret), "{secret} in {json}");
    }
    let _ = std::fs::remove_dir_all(&root);
}
