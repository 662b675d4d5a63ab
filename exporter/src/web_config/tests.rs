//! The web config file: what it accepts, and FILE:LINE:COL with a reason
//! for everything it refuses.

use super::*;

/// A directory with a CA, a server certificate it signed and its key.
fn certs() -> tempfile::TempDir {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let dir = tempfile::tempdir().unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    std::fs::write(dir.path().join("ca.crt"), ca.pem()).unwrap();
    std::fs::write(dir.path().join("server.crt"), cert.pem()).unwrap();
    std::fs::write(dir.path().join("server.key"), key.serialize_pem()).unwrap();
    dir
}

fn parse_in(dir: &tempfile::TempDir, text: &str) -> anyhow::Result<WebConfig> {
    parse(&dir.path().join("web.yml"), text)
}

/// The error for `text`, which must start with the file's path and `at`.
fn refused(dir: &tempfile::TempDir, text: &str, at: &str) -> String {
    let e = format!("{:#}", parse_in(dir, text).unwrap_err());
    let want = format!("{}:{at}", dir.path().join("web.yml").display());
    assert!(e.starts_with(&want), "want {want}, got: {e}");
    e
}

#[test]
fn upstreams_keys_are_honoured() {
    let dir = certs();
    let hash = bcrypt::hash("hunter2", 4).unwrap();
    let web = parse_in(
        &dir,
        &format!(
            "# as for node_exporter\ntls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
             client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  \
             min_version: TLS12\n  max_version: TLS13\n  \
             cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]\n  \
             prefer_server_cipher_suites: false\n  curve_preferences: [X25519, CurveP256]\n\
             http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n    \
             Strict-Transport-Security: max-age=31536000\n    X-XSS-Protection: ''\n\
             basic_auth_users:\n  prometheus: '{hash}'\n"
        ),
    )
    .unwrap();
    let tls = web.tls.expect("TLS on");
    assert!(
        !tls.ignore_client_order,
        "prefer_server_cipher_suites: false"
    );
    assert_eq!(web.files.len(), 3, "cert, key and CA: {:?}", web.files);
    assert_eq!(web.users.len(), 1);
    let names: Vec<&str> = web.headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["strict-transport-security", "x-frame-options"],
        "blank unsets"
    );
    // Nothing said: plain HTTP, nobody to log in.
    let web = parse_in(&dir, "# nothing yet\n").unwrap();
    assert!(web.tls.is_none() && web.users.is_empty());
    // Inline PEM works as files do.
    let pem = |f: &str| {
        std::fs::read_to_string(dir.path().join(f))
            .unwrap()
            .replace('\n', "\n    ")
    };
    let inline = format!(
        "tls_server_config:\n  cert: |\n    {}\n  key: |\n    {}\n",
        pem("server.crt"),
        pem("server.key")
    );
    assert!(parse_in(&dir, &inline).unwrap().tls.is_some());
}

#[test]
fn unknown_keys_are_refused_where_they_stand() {
    let dir = certs();
    let e = refused(
        &dir,
        "basic_auth_users: {}\ntls_config:\n  cert_file: x\n",
        "2:",
    );
    assert!(e.contains("tls_config"), "{e}");
    let e = refused(
        &dir,
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  min_versoin: TLS13\n",
        "4:",
    );
    assert!(e.contains("min_versoin"), "{e}");
}

#[test]
fn bad_passwords_and_files_name_their_line() {
    let dir = certs();
    let e = refused(&dir, "basic_auth_users:\n  alice: $2y$10$short\n", "2:");
    assert!(e.contains("\"alice\"") && e.contains("htpasswd"), "{e}");
    let sha = format!("basic_auth_users:\n  bob: sha256:{}\n", "ab".repeat(32));
    let e = refused(&dir, &sha, "2:");
    assert!(e.contains("bcrypt"), "{e}");
    let e = refused(
        &dir,
        "tls_server_config:\n  cert_file: missing.crt\n  key_file: server.key\n",
        "2:",
    );
    assert!(e.contains("missing.crt"), "{e}");
    let e = refused(
        &dir,
        "tls_server_config:\n  cert_file: server.crt\n  key_file: ca.crt\n",
        "3:",
    );
    assert!(e.contains("private key"), "{e}");
}

#[test]
fn what_rustls_cannot_honour_is_refused_with_why() {
    let dir = certs();
    let tls = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";
    for (extra, at, why) in [
        (
            "  cipher_suites:\n    - TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA\n",
            "5:",
            "no CBC suites",
        ),
        (
            "  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n",
            "4:",
            "unknown or unsupported cipher",
        ),
        (
            "  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
            "4:",
            "TLS 1.3 suite",
        ),
        ("  min_version: TLS10\n", "4:", "TLS 1.2 and 1.3 only"),
        ("  max_version: TLS14\n", "4:", "unknown TLS version"),
        (
            "  min_version: TLS13\n  max_version: TLS12\n",
            "5:",
            "below min_version",
        ),
        ("  curve_preferences: [CurveP521]\n", "4:", "no P-521"),
        (
            "  client_auth_type: Sometimes\n",
            "4:",
            "unknown client_auth_type",
        ),
        (
            "  client_auth_type: RequireAndVerifyClientCert\n",
            "4:",
            "needs client_ca_file",
        ),
        ("  client_ca_file: ca.crt\n", "4:", "never used"),
        (
            "  client_allowed_sans: [a]\n",
            "4:",
            "client_allowed_sans is not supported",
        ),
    ] {
        let e = refused(&dir, &format!("{tls}{extra}"), at);
        assert!(e.contains(why), "{extra:?}: {e}");
    }
    for (text, at, why) in [
        (
            "http_server_config:\n  http2: true\n",
            "2:",
            "HTTP/1.1 only",
        ),
        (
            "http_server_config:\n  headers:\n    Server: x\n",
            "3:",
            "can not be configured",
        ),
        (
            "http_server_config:\n  headers:\n    X-Frame-Options: allow\n",
            "3:",
            "deny",
        ),
        (
            "rate_limit:\n  interval: 1s\n  burst: 5\n",
            "2:",
            "rate_limit is not supported",
        ),
        (
            "tls_server_config:\n  key_file: server.key\n",
            "2:",
            "needs a certificate",
        ),
    ] {
        let e = refused(&dir, text, at);
        assert!(e.contains(why), "{text:?}: {e}");
    }
}
