//! `--redact`: no raw client address in the batch JSON, the text output or
//! a recording (and so in anything replayed from it).

mod common;

use common::nfsdtop;

const CLIENTS_V4: [[u8; 4]; 3] = [[10, 1, 0, 1], [10, 1, 0, 6], [10, 2, 0, 4]];

fn assert_no_client(text: &str) {
    for ip in CLIENTS_V4 {
        let s = format!("{}.{}.{}.{}", ip[0], ip[1], ip[2], ip[3]);
        assert!(!text.contains(&s), "{s} leaked:\n{text}");
    }
    assert!(!text.contains("fd00::9"), "fd00::9 leaked:\n{text}");
}

#[test]
fn batch_outputs_hide_clients_but_keep_classes() {
    let base = [
        "--demo", "movers", "--policy", "rr-class", "-b", "-n", "2", "--speed", "0",
    ];
    // Unredacted, the addresses are there (so the check below can fail).
    let plain = nfsdtop(&[&base[..], &["--format", "json"]].concat());
    assert!(plain.contains("10.1.0.1"));
    for fmt in ["json", "text", "csv"] {
        for group in ["peer", "class"] {
            let out =
                nfsdtop(&[&base[..], &["--redact", "--format", fmt, "--group", group]].concat());
            assert_no_client(&out);
            assert!(out.contains("anon-"), "{fmt}/{group}: {out}");
        }
    }
    // The class map still applied to the real addresses.
    let classes = nfsdtop(
        &[
            &base[..],
            &["--redact", "--format", "json", "--group", "class"],
        ]
        .concat(),
    );
    assert!(classes.contains("\"name\":\"movers\""), "{classes}");
    let burst = nfsdtop(&[
        "--demo", "burst", "-b", "-n", "2", "--speed", "0", "--redact", "--format", "json",
    ]);
    assert_no_client(&burst);
}

#[test]
fn redacted_recording_holds_no_client_address() {
    let dir = std::env::temp_dir().join(format!("nfsdtop-redact-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("r.nfsdrec");
    let f = file.to_str().unwrap();
    for scenario in ["movers", "burst"] {
        nfsdtop(&[
            "record",
            "--force",
            "-o",
            f,
            "--demo",
            scenario,
            "--speed",
            "0",
            "--duration",
            "3",
            "--redact",
        ]);
        let bytes = std::fs::read(&file).unwrap();
        for ip in CLIENTS_V4 {
            assert!(
                !bytes.windows(4).any(|w| w == ip),
                "{ip:?} appears in the redacted recording"
            );
        }
        let v6: [u8; 16] = "fd00::9".parse::<std::net::Ipv6Addr>().unwrap().octets();
        assert!(!bytes.windows(16).any(|w| w == v6));
        let replay = nfsdtop(&["--replay", f, "-b", "--speed", "0", "--format", "json"]);
        assert_no_client(&replay);
        assert!(
            replay.contains("fd72:6564:6163:7421:"),
            "stand-in addresses: {replay}"
        );
    }
    // Without --redact the same check finds the address: the test can fail.
    nfsdtop(&[
        "record",
        "--force",
        "-o",
        f,
        "--demo",
        "movers",
        "--speed",
        "0",
        "--duration",
        "1",
    ]);
    let bytes = std::fs::read(&file).unwrap();
    assert!(bytes.windows(4).any(|w| w == CLIENTS_V4[0]));
    let _ = std::fs::remove_dir_all(&dir);
}
