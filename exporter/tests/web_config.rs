//! nfsdtopd configured only through `--web.config.file` (exporter-toolkit's
//! YAML), end to end: a real Prometheus scrapes it over TLS with basic
//! auth and over mutual TLS; a client without a certificate is refused at
//! the handshake; `nfsdtop --connect` presents a client certificate, and
//! pins a self-signed one `openssl req -x509` made; a bad file stops the
//! start with FILE:LINE, and one turned bad at run time is logged while
//! the last good one goes on serving.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::prometheus::Prometheus;
use common::{nfsdtop_bin, run_to_exit, Daemon};
use tokio_rustls::rustls::{self, pki_types::pem::PemObject as _};

/// Certificates made here: a server CA and the server's (127.0.0.1), a
/// client CA and a client's, and a client certificate no CA signed.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: String| std::fs::write(dir.path().join(name), text).unwrap();
        let ca = |name: &str| {
            let key = KeyPair::generate().unwrap();
            let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
            p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            let cert = p.self_signed(&key).unwrap();
            write(&format!("{name}.crt"), cert.pem());
            (cert, key)
        };
        let (server_ca, server_ca_key) = ca("server-ca");
        let (client_ca, client_ca_key) = ca("client-ca");
        let leaf = |name: &str, sans: &[&str], by: Option<(&rcgen::Certificate, &KeyPair)>| {
            let key = KeyPair::generate().unwrap();
            let p = CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
            let cert = match by {
                Some((ca, ca_key)) => p.signed_by(&key, ca, ca_key).unwrap(),
                None => p.self_signed(&key).unwrap(),
            };
            write(&format!("{name}.crt"), cert.pem());
            write(&format!("{name}.key"), key.serialize_pem());
        };
        leaf(
            "server",
            &["127.0.0.1", "localhost"],
            Some((&server_ca, &server_ca_key)),
        );
        leaf(
            "client",
            &["prometheus"],
            Some((&client_ca, &client_ca_key)),
        );
        leaf("stranger", &["stranger"], None);
        Pki { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// Write a web config file; (its path).
    fn web_config(&self, name: &str, text: &str) -> String {
        common::write(self.dir.path(), name, text)
    }
}

const TLS: &str = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";
const MTLS: &str =
    "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: client-ca.crt\n";

fn daemon(web_config: &str) -> Daemon {
    Daemon::start(&[
        "--demo",
        "seed-k4",
        "--web.listen-address",
        "127.0.0.1:0",
        "--web.config.file",
        web_config,
    ])
}

/// GET /healthz over TLS with rustls, presenting `identity` (a cert and
/// key file) if given: the status line, or why there is none.
fn tls_get(
    addr: std::net::SocketAddr,
    ca: &Path,
    identity: Option<(&Path, &Path)>,
) -> Result<String, String> {
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let b = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let cfg = match identity {
        None => b.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = rustls::pki_types::CertificateDer::pem_file_iter(cert)
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let key = rustls::pki_types::PrivateKeyDer::from_pem_file(key).unwrap();
            b.with_client_auth_cert(chain, key).unwrap()
        }
    };
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(cfg), name).unwrap();
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let req = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    tls.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    match tls.read_to_end(&mut got) {
        Ok(_) if !got.is_empty() => Ok(String::from_utf8_lossy(&got)
            .lines()
            .next()
            .unwrap_or("")
            .to_string()),
        Ok(_) => Err("closed without an answer".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// The daemon's stderr lines so far and until one has `needle` (or 20 s).
fn log_until(d: &Daemon, needle: &str) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match d.stderr.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return Some(line),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

#[test]
fn prometheus_scrapes_over_tls_with_basic_auth_and_over_mutual_tls() {
    let pki = Pki::new();
    let hash = bcrypt::hash("scrape-pw", 5).unwrap();
    let basic = daemon(&pki.web_config(
        "basic.yml",
        &format!("{TLS}basic_auth_users:\n  prometheus: '{hash}'\n"),
    ));
    let mutual = daemon(&pki.web_config("mutual.yml", &format!("{TLS}{MTLS}")));

    // A client without a certificate: refused at the handshake, and the
    // daemon says so; with one the CA signed, served.
    let ca = PathBuf::from(pki.path("server-ca.crt"));
    let e = tls_get(mutual.addr, &ca, None).unwrap_err();
    assert!(e.to_lowercase().contains("certificate"), "{e}");
    let line = log_until(&mutual, "TLS handshake with").expect("the refusal logged");
    assert!(line.contains("failed"), "{line}");
    let stranger = (
        Path::new(&pki.path("stranger.crt")).to_owned(),
        PathBuf::from(pki.path("stranger.key")),
    );
    assert!(
        tls_get(mutual.addr, &ca, Some((&stranger.0, &stranger.1))).is_err(),
        "a certificate no client CA signed"
    );
    let client = (
        PathBuf::from(pki.path("client.crt")),
        PathBuf::from(pki.path("client.key")),
    );
    let ok = tls_get(mutual.addr, &ca, Some((&client.0, &client.1))).unwrap();
    assert!(ok.starts_with("HTTP/1.1 "), "{ok}");

    let data = tempfile::tempdir().unwrap();
    let config = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n\
         - job_name: basic\n  scheme: https\n  tls_config: {{ca_file: '{ca}'}}\n  \
           basic_auth: {{username: prometheus, password: scrape-pw}}\n  \
           static_configs: [{{targets: ['{basic}']}}]\n\
         - job_name: mutual\n  scheme: https\n  \
           tls_config: {{ca_file: '{ca}', cert_file: '{cc}', key_file: '{ck}'}}\n  \
           static_configs: [{{targets: ['{mutual}']}}]\n\
         - job_name: no-client-cert\n  scheme: https\n  tls_config: {{ca_file: '{ca}'}}\n  \
           static_configs: [{{targets: ['{mutual}']}}]\n\
         - job_name: no-password\n  scheme: https\n  tls_config: {{ca_file: '{ca}'}}\n  \
           static_configs: [{{targets: ['{basic}']}}]\n",
        ca = ca.display(),
        cc = client.0.display(),
        ck = client.1.display(),
        basic = basic.addr,
        mutual = mutual.addr,
    );
    let mut prom = Prometheus::start(data.path(), &config, &[]);
    let deadline = Instant::now() + Duration::from_secs(40);
    let up = prom.wait_until("all four jobs scraped", deadline, |p| {
        let up = p.query("up");
        (up.len() == 4).then_some(up)
    });
    let up_of = |job: &str| {
        up.iter()
            .find(|(m, _)| m["job"] == job)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("no up for {job}: {up:?}"))
    };
    assert_eq!(up_of("no-client-cert"), 0.0, "{up:?}");
    assert_eq!(up_of("no-password"), 0.0, "{up:?}");
    // The two configured ones come up and bring nfsdtop's families.
    prom.wait_until("TLS + basic auth and mutual TLS scraped", deadline, |p| {
        let ok = p.query("up{job=~\"basic|mutual\"} == 1").len() == 2;
        (ok && p.query("nfsdtop_build_info").len() == 2).then_some(())
    });
}

#[test]
fn nfsdtop_connects_with_a_client_certificate() {
    let pki = Pki::new();
    let d = daemon(&pki.web_config("mutual.yml", &format!("{TLS}{MTLS}")));
    let url = format!("https://127.0.0.1:{}", d.addr.port());
    let ca = pki.path("server-ca.crt");
    let run = |extra: &[&str]| {
        let args = [
            &[
                "--connect",
                &url,
                "-b",
                "-n",
                "1",
                "--format",
                "json",
                "--ca-cert",
            ][..],
            &[&ca],
            extra,
        ]
        .concat();
        Command::new(nfsdtop_bin())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run nfsdtop")
    };
    let out = run(&[
        "--client-cert",
        &pki.path("client.crt"),
        "--client-key",
        &pki.path("client.key"),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let line: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(line["source"]["kind"], "remote");
    // Without one: one line that says what to give, at once.
    let out = run(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--client-cert"), "{stderr}");
}

#[test]
fn ca_cert_pins_a_self_signed_certificate_made_by_openssl() {
    let dir = tempfile::tempdir().unwrap();
    let made = |name: &str| {
        let st = Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=nfsdtopd",
                "-addext",
                "subjectAltName=IP:127.0.0.1,DNS:localhost",
                "-keyout",
            ])
            .arg(dir.path().join(format!("{name}.key")))
            .arg("-out")
            .arg(dir.path().join(format!("{name}.crt")))
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("openssl is installed (scripts/setup.sh)");
        assert!(st.success(), "openssl req -x509");
        dir.path().join(format!("{name}.crt")).display().to_string()
    };
    let cert = made("server");
    let other = made("other");
    let pem = std::fs::read_to_string(&cert).unwrap();
    let text = Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in", &cert])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("CA:TRUE"),
        "openssl's default: a CA certificate\n{pem}"
    );
    let web = common::write(dir.path(), "web.yml", TLS);
    let d = daemon(&web);
    let url = format!("https://127.0.0.1:{}", d.addr.port());
    let run = |ca: &str| {
        Command::new(nfsdtop_bin())
            .args([
                "--connect",
                &url,
                "-b",
                "-n",
                "1",
                "--format",
                "json",
                "--ca-cert",
                ca,
            ])
            .stdin(Stdio::null())
            .output()
            .expect("run nfsdtop")
    };
    let out = run(&cert);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&other);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("is not trusted"), "{stderr}");
}

#[test]
fn a_bad_web_config_stops_the_start_with_its_line() {
    let pki = Pki::new();
    let bad = pki.web_config(
        "bad.yml",
        &format!("{TLS}  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n"),
    );
    let (code, stderr) = run_to_exit(&["--demo", "seed-k4", "--web.config.file", &bad]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains(&format!("{bad}:4:")) && stderr.contains("cipher suite"),
        "{stderr}"
    );
    // With TLS in the TOML config too: refused, one place for it.
    let toml = common::write(
        pki.dir.path(),
        "agent.toml",
        &format!(
            "[tls_server_config]\ncert_file = \"{}\"\nkey_file = \"{}\"\n",
            pki.path("server.crt"),
            pki.path("server.key")
        ),
    );
    let good = pki.web_config("good.yml", TLS);
    let (code, stderr) = run_to_exit(&[
        "--demo",
        "seed-k4",
        "--config",
        &toml,
        "--web.config.file",
        &good,
    ]);
    assert_ne!(code, 0);
    assert!(stderr.contains("one place"), "{stderr}");
}

#[test]
fn a_web_config_turned_bad_keeps_the_last_good_one() {
    let pki = Pki::new();
    let users = |pw: &str| {
        format!(
            "basic_auth_users:\n  alice: '{}'\n",
            bcrypt::hash(pw, 4).unwrap()
        )
    };
    let path = pki.web_config(
        "web.yml",
        &format!(
            "http_server_config:\n  headers:\n    X-Frame-Options: deny\n{}",
            users("first")
        ),
    );
    let d = daemon(&path);
    let get = |pw: &str| {
        use base64::Engine as _;
        let auth = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("alice:{pw}"))
        );
        common::http(d.addr, "GET", "/metrics", &[("Authorization", &auth)])
    };
    let r = get("first");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-frame-options"), Some("deny"));
    // Turned bad: said with its line, and the last good one serves on.
    std::fs::write(&path, format!("{}  bob: not-a-hash\n", users("second"))).unwrap();
    assert_eq!(get("first").status, 200);
    let line = log_until(&d, "not applied").expect("the bad file logged");
    assert!(line.contains(&format!("{path}:3:")), "{line}");
    assert_eq!(get("second").status, 401);
    // Good again: the new password in, the old out.
    std::fs::write(&path, users("second")).unwrap();
    d.wait_for("the new password", 20, |_| {
        (get("second").status == 200).then_some(())
    });
    assert_eq!(get("first").status, 401);
    assert_eq!(get("second").header("x-frame-options"), None);
}
