//! Optional TLS (rustls with the ring provider): the server configuration
//! from PEM files. Handshakes run in each connection's own task, under its
//! header timeout (see [`crate::listener`]).

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, Context as _};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};

pub fn server_config(cert: &Path, key: &Path) -> anyhow::Result<Arc<ServerConfig>> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| anyhow!("cannot read TLS certificate {}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow!("bad PEM in TLS certificate {}: {e}", cert.display()))?;
    if certs.is_empty() {
        anyhow::bail!("no certificate found in {}", cert.display());
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| anyhow!("cannot read TLS private key {}: {e}", key.display()))?;
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
