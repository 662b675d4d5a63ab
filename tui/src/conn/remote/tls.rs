//! `--connect https://...`'s TLS: rustls with the ring provider (as
//! nfsdtopd), trusting the system's roots or `--ca-cert`, presenting
//! `--client-cert`/`--client-key` when the agent asks for one (mutual TLS),
//! and what a failed handshake means for the user.
//!
//! A certificate in `--ca-cert` is a trust anchor twice over, as for curl
//! and Prometheus: as a CA, for the certificates it signed; and as itself,
//! pinned, when the agent presents exactly it. So the self-signed
//! certificate `openssl req -x509` makes (CA:TRUE, which webpki refuses as
//! a server's own) works; its host names are still checked, and the
//! handshake still proves the agent holds its key.

use std::path::Path;
use std::sync::Arc;

use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::client::{verify_server_name, WebPkiServerVerifier};
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio_rustls::rustls::server::ParsedCertificate;
use tokio_rustls::rustls::{
    self, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

use super::Failure;

/// The most a certificate or key file may hold.
const MAX_PEM: u64 = 16 << 20;

/// A client certificate (chain) and its key, for mutual TLS.
pub struct Identity<'a> {
    pub cert: &'a Path,
    pub key: &'a Path,
}

fn certs(path: &Path, what: &str, flag: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let pem = nfsdtop_agent::input::read_bytes(path, what, flag, MAX_PEM)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("bad PEM in {flag} {}: {e}", path.display()))?;
    if certs.is_empty() {
        anyhow::bail!("{flag} {}: no certificate in it", path.display());
    }
    Ok(certs)
}

/// The client's TLS configuration.
pub fn config(
    ca_cert: Option<&Path>,
    identity: Option<&Identity>,
) -> anyhow::Result<Arc<ClientConfig>> {
    let provider = Arc::new(ring::default_provider());
    let mut roots = RootCertStore::empty();
    let mut pinned = Vec::new();
    match ca_cert {
        Some(path) => {
            for c in certs(path, "CA file", "--ca-cert")? {
                // A certificate webpki cannot take as a CA may still be
                // pinned: only the pin then trusts it.
                let _ = roots.add(c.clone());
                pinned.push(c);
            }
        }
        None => {
            // Unreadable entries of the system store are skipped; an empty
            // store still gives a clear "not trusted" at the handshake.
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
        }
    }
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow::anyhow!("TLS protocol versions: {e}"))?;
    let builder = if pinned.is_empty() {
        builder.with_root_certificates(roots)
    } else {
        let chains = if roots.is_empty() {
            None
        } else {
            Some(
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| anyhow::anyhow!("--ca-cert: {e}"))?,
            )
        };
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedOrCa {
                pinned,
                chains,
                algorithms: provider.signature_verification_algorithms,
            }))
    };
    let mut cfg = match identity {
        None => builder.with_no_client_auth(),
        Some(id) => {
            let chain = certs(id.cert, "client certificate", "--client-cert")?;
            let pem =
                nfsdtop_agent::input::read_bytes(id.key, "key file", "--client-key", MAX_PEM)?;
            let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
                anyhow::anyhow!(
                    "--client-key {}: no usable PEM private key: {e}",
                    id.key.display()
                )
            })?;
            builder.with_client_auth_cert(chain, key).map_err(|e| {
                anyhow::anyhow!(
                    "--client-cert {} and --client-key {} do not form a usable pair: {e}",
                    id.cert.display(),
                    id.key.display()
                )
            })?
        }
    };
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// Trusts a server certificate that is exactly one of `pinned` (for its
/// host names), else one `chains` verifies as signed by a CA of the file.
#[derive(Debug)]
struct PinnedOrCa {
    pinned: Vec<CertificateDer<'static>>,
    chains: Option<Arc<WebPkiServerVerifier>>,
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinnedOrCa {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self
            .pinned
            .iter()
            .any(|p| p.as_ref() == end_entity.as_ref())
        {
            let parsed = ParsedCertificate::try_from(end_entity)?;
            verify_server_name(&parsed, server_name)?;
            return Ok(ServerCertVerified::assertion());
        }
        match &self.chains {
            Some(v) => {
                v.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            }
            None => Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::UnknownIssuer,
            )),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// What a failed handshake means, and whether retrying can help.
pub fn error(authority: &str, e: &std::io::Error) -> Failure {
    let inner = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
    match inner {
        Some(rustls::Error::InvalidCertificate(c)) => Failure::Fatal(format!(
            "the TLS certificate of {authority} is not trusted ({c:?}): give the CA that signed \
             it, or the certificate itself, with --ca-cert FILE"
        )),
        Some(rustls::Error::AlertReceived(
            rustls::AlertDescription::CertificateRequired
            | rustls::AlertDescription::BadCertificate
            | rustls::AlertDescription::UnknownCA
            | rustls::AlertDescription::HandshakeFailure,
        )) => Failure::Fatal(format!(
            "{authority} refused the TLS handshake ({e}): if it requires a client certificate, \
             give one signed by its client CA with --client-cert FILE --client-key FILE"
        )),
        Some(rustls::Error::InvalidMessage(_))
        | Some(rustls::Error::InappropriateMessage { .. }) => Failure::Fatal(format!(
            "TLS with {authority} failed ({e}): does the agent serve plain HTTP? then use http://"
        )),
        _ => Failure::Retry(format!("TLS with {authority} failed: {e}")),
    }
}
