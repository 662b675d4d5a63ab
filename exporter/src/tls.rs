//! Optional TLS (rustls with the ring provider): the server configuration
//! from PEM files, and the answer to plain HTTP on the TLS port. Handshakes
//! run in each connection's own task, under its header timeout (see
//! [`crate::listener`]).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context as _};
use nfsdtop_agent::input::read_bytes;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};

/// The most a certificate chain or key file may hold.
pub const MAX_PEM_FILE: u64 = 1 << 20;

pub fn server_config(cert: &Path, key: &Path) -> anyhow::Result<Arc<ServerConfig>> {
    let cert_pem = read_bytes(cert, "TLS certificate", "--tls-cert", MAX_PEM_FILE)?;
    let key_pem = read_bytes(key, "TLS private key", "--tls-key", MAX_PEM_FILE)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow!("bad PEM in TLS certificate {}: {e}", cert.display()))?;
    if certs.is_empty() {
        anyhow::bail!("no certificate found in {}", cert.display());
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| anyhow!("no usable PEM private key in {}: {e}", key.display()))?;
    let mut cfg =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .context("TLS certificate and key do not form a usable pair")?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// The whole answer to plain HTTP on the TLS port: one short 400 saying
/// to use https, then the connection is closed.
pub async fn answer_plain_http(mut tcp: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt as _;
    const BODY: &str = "this nfsdtopd serves HTTPS only: use https:// in the URL\n";
    let answer = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{BODY}",
        BODY.len()
    );
    // A client that does not read is not waited for.
    let write = async {
        let _ = tcp.write_all(answer.as_bytes()).await;
        let _ = tcp.shutdown().await;
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), write).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An endless file as certificate or key is refused at the limit, with
    /// the option to fix, not read until memory runs out.
    #[test]
    fn an_endless_certificate_or_key_is_refused() {
        let dir = std::env::temp_dir().join(format!("nfsdtop-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let zero = Path::new("/dev/zero");
        let e = format!("{:#}", server_config(zero, &empty).unwrap_err());
        assert!(
            e.contains("TLS certificate /dev/zero is larger than 1 MiB"),
            "{e}"
        );
        assert!(e.contains("--tls-cert"), "{e}");
        let e = format!("{:#}", server_config(&empty, zero).unwrap_err());
        assert!(e.contains("TLS private key /dev/zero is larger"), "{e}");
        assert!(e.contains("--tls-key"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
