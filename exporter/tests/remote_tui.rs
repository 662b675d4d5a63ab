//! `nfsdtop --connect` against a real nfsdtopd shows the same entities (and
//! the same numbers, where they are cumulative and deterministic) as a
//! local run of the same demo; over TLS with basic auth (certificates made
//! here) it trusts only the right CA, takes credentials from the URL, the
//! environment or a netrc file, never prints the password, ends at once on
//! a refusal, gives up on a dead agent, and redacts with --redact.

mod common;

use common::nfsdtop_bin;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn names(line: &serde_json::Value) -> Vec<String> {
    let mut v: Vec<String> = line["entities"]
        .as_array()
        .expect("entities")
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn connect_shows_the_same_entities_as_a_local_run() {
    let nfsdtop = nfsdtop_bin();
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_nfsdtopd"))
        .args([
            "--demo",
            "movers",
            "--policy",
            "rr-class",
            "--listen",
            "127.0.0.1:0",
        ])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start nfsdtopd");
    // Read stderr on a thread so a silent daemon cannot hang the test.
    let err = BufReader::new(daemon.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut url = None;
    while url.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                url = line
                    .split_once("listening on ")
                    .map(|(_, u)| u.trim().to_string())
            }
            Err(_) => break,
        }
    }
    let url = url.expect("nfsdtopd said where it listens");

    for group in ["peer", "class"] {
        let remote = Command::new(&nfsdtop)
            .args([
                "--connect",
                &url,
                "-b",
                "-n",
                "2",
                "--format",
                "json",
                "--group",
                group,
            ])
            .output()
            .expect("nfsdtop --connect");
        assert!(
            remote.status.success(),
            "{}",
            String::from_utf8_lossy(&remote.stderr)
        );
        let local = Command::new(&nfsdtop)
            .args([
                "--demo", "movers", "--policy", "rr-class", "-b", "-n", "1", "--speed", "0",
            ])
            .args(["--format", "json", "--group", group])
            .output()
            .expect("nfsdtop local");
        assert!(local.status.success());
        let last = |o: &[u8]| -> serde_json::Value {
            let text = String::from_utf8_lossy(o).into_owned();
            serde_json::from_str(text.lines().last().expect("a line")).expect("JSON")
        };
        let (r, l) = (last(&remote.stdout), last(&local.stdout));
        assert_eq!(r["source"]["kind"], "remote", "a remote source says so");
        assert_eq!(
            names(&r),
            names(&l),
            "{group}: same entities remotely and locally"
        );
        assert_eq!(names(&r).len(), if group == "peer" { 10 } else { 5 });
        // rr-class: four customer classes and the movers class, each 1/5.
        for e in r["entities"].as_array().unwrap() {
            if group == "class" && e["dispatches"].as_u64().unwrap_or(0) > 0 {
                let share = e["share"].as_f64().unwrap();
                assert!((share - 0.2).abs() < 0.05, "{e}");
            }
        }
    }
    let _ = daemon.kill();
    let _ = daemon.wait();
}

/// A CA and a certificate it signed for 127.0.0.1 and localhost, as PEM:
/// (ca, server cert, server key).
fn make_certs() -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    (ca.pem(), cert.pem(), key.serialize_pem())
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// `nfsdtop ARGS` with only the environment given (HOME in `home`, so no
/// ~/.netrc of the machine's is read).
fn nfsdtop(home: &std::path::Path, env: &[(&str, &str)], args: &[&str]) -> Run {
    let start = Instant::now();
    let out = Command::new(nfsdtop_bin())
        .args(args)
        .env_remove("NFSDTOP_AUTH")
        .env_remove("NETRC")
        .env("HOME", home)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run nfsdtop");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        took: start.elapsed(),
    }
}

#[test]
fn connect_https_with_basic_auth_to_a_tls_nfsdtopd() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (ca, cert, key) = make_certs();
    let (other_ca, _, _) = make_certs();
    std::fs::write(p("ca.pem"), ca).unwrap();
    std::fs::write(p("other-ca.pem"), other_ca).unwrap();
    std::fs::write(p("server.crt"), cert).unwrap();
    std::fs::write(p("server.key"), key).unwrap();
    // sha256("hunter2")
    let sha = "f52fbd32b2b3b86ff88ef6c490628285f482af15ddcb29541f94bcf526a3f6c7";
    std::fs::write(
        p("agent.toml"),
        format!(
            "listen = \"127.0.0.1:0\"\n[source]\nkind = \"demo\"\nscenario = \"movers\"\n\
             [tls_server_config]\ncert_file = \"{}\"\nkey_file = \"{}\"\n\
             [basic_auth_users]\nbob = \"sha256:{sha}\"\n",
            p("server.crt"),
            p("server.key")
        ),
    )
    .unwrap();
    let d = common::Daemon::start(&["--config", &p("agent.toml")]);
    let port = d.addr.port();
    let home = dir.path();
    let ca_arg = p("ca.pem");
    let json = ["-b", "-n", "1", "--format", "json", "--ca-cert", &ca_arg];
    let with = |url: &str, env: &[(&str, &str)], extra: &[&str]| {
        nfsdtop(
            home,
            env,
            &[&["--connect", url][..], &json[..], extra].concat(),
        )
    };
    let secret_free = |r: &Run| {
        for text in [&r.stdout, &r.stderr] {
            assert!(
                !text.contains("hunter2") && !text.contains("wrongpw"),
                "a password printed: {text}"
            );
        }
    };
    let snapshot = |r: &Run| -> serde_json::Value {
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        serde_json::from_str(r.stdout.lines().last().expect("a line")).expect("JSON")
    };

    // Credentials in the URL.
    let r = with(&format!("https://bob:hunter2@127.0.0.1:{port}"), &[], &[]);
    secret_free(&r);
    let s = snapshot(&r);
    assert_eq!(s["source"]["kind"], "remote");
    let detail = s["source"]["detail"].as_str().unwrap();
    assert!(
        detail.starts_with(&format!("https://127.0.0.1:{port} (demo movers")),
        "{detail}"
    );
    assert!(!detail.contains("bob"), "{detail}");
    let plain_names = names(&s);
    assert!(
        plain_names.iter().any(|n| n.starts_with("10.")),
        "{plain_names:?}"
    );

    // From $NFSDTOP_AUTH, and from a netrc file.
    let url = format!("https://127.0.0.1:{port}");
    let r = with(&url, &[("NFSDTOP_AUTH", "bob:hunter2")], &[]);
    secret_free(&r);
    assert_eq!(names(&snapshot(&r)), plain_names);
    std::fs::write(
        p("netrc"),
        "machine 127.0.0.1\n  login bob\n  password hunter2\n",
    )
    .unwrap();
    let r = with(&url, &[], &["--netrc-file", &p("netrc")]);
    assert_eq!(names(&snapshot(&r)), plain_names);
    // ~/.netrc is read by default.
    std::fs::write(
        home.join(".netrc"),
        "machine 127.0.0.1 login bob password hunter2\n",
    )
    .unwrap();
    let r = with(&url, &[], &[]);
    assert_eq!(names(&snapshot(&r)), plain_names);
    std::fs::remove_file(home.join(".netrc")).unwrap();

    // --redact: pseudonyms only, the same number of peers.
    let r = with(&url, &[("NFSDTOP_AUTH", "bob:hunter2")], &["--redact"]);
    let redacted = names(&snapshot(&r));
    assert_eq!(redacted.len(), plain_names.len());
    assert!(
        redacted.iter().all(|n| n.starts_with("anon-")),
        "{redacted:?}"
    );
    let text = r.stdout;
    assert!(
        !text.contains("\"10.1.") && !text.contains("\"10.2."),
        "an address in {text}"
    );

    // A wrong password or none: one line, non-zero, at once (no retrying).
    let r = with(&format!("https://bob:wrongpw@127.0.0.1:{port}"), &[], &[]);
    secret_free(&r);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains("refused the user and password (HTTP 401"),
        "{}",
        r.stderr
    );
    let last = r.stderr.lines().last().unwrap();
    assert!(last.starts_with("nfsdtop: https://127.0.0.1:"), "{last}");
    assert!(r.took < Duration::from_secs(10), "took {:?}", r.took);
    assert!(r.stdout.is_empty());
    let r = with(&url, &[], &[]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains("wants a user and password (HTTP 401)"),
        "{}",
        r.stderr
    );

    // The wrong CA, or none (the system's roots do not know this one).
    let other = p("other-ca.pem");
    let r = nfsdtop(
        home,
        &[("NFSDTOP_AUTH", "bob:hunter2")],
        &["--connect", &url, "-b", "-n", "1", "--ca-cert", &other],
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains("is not trusted") && r.stderr.contains("--ca-cert"),
        "{}",
        r.stderr
    );
    let r = nfsdtop(
        home,
        &[("NFSDTOP_AUTH", "bob:hunter2")],
        &["--connect", &url, "-b", "-n", "1"],
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("is not trusted"), "{}", r.stderr);

    // Plain HTTP to the TLS agent: its 400 says to use https, and ends the
    // run at once (retrying cannot help).
    let r = nfsdtop(
        home,
        &[("NFSDTOP_AUTH", "bob:hunter2")],
        &[
            "--connect",
            &format!("http://127.0.0.1:{port}"),
            "-b",
            "-n",
            "1",
            "--give-up-after",
            "2",
        ],
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let last = r.stderr.lines().last().unwrap();
    assert!(
        last.contains("cannot take nfsdtop's request (HTTP 400 Bad Request)")
            && last.contains("use https://"),
        "{last}"
    );
    assert!(r.took < Duration::from_secs(15), "took {:?}", r.took);
    secret_free(&r);
}

#[test]
fn a_dead_agent_is_given_up_on_in_batch_mode() {
    let dir = tempfile::tempdir().unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let r = nfsdtop(
        dir.path(),
        &[],
        &[
            "--connect",
            &format!("127.0.0.1:{port}"),
            "-b",
            "-n",
            "1",
            "--give-up-after",
            "1.5",
        ],
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains("reconnecting to http://127.0.0.1:"),
        "{}",
        r.stderr
    );
    let last = r.stderr.lines().last().unwrap();
    assert!(
        last.contains("giving up") && last.contains("no link for 1.5s"),
        "{last}"
    );
    assert!(
        last.contains("Connection refused"),
        "the last error is said: {last}"
    );
    assert!(
        r.took >= Duration::from_millis(1500) && r.took < Duration::from_secs(10),
        "took {:?}",
        r.took
    );
}
