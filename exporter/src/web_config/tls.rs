//! `tls_server_config` as rustls (ring provider) can honour it: the
//! certificate and key, TLS 1.2 and 1.3, TLS 1.2's cipher suites in the
//! server's order or the client's, the key-exchange curves, and every
//! `client_auth_type` of exporter-toolkit (Go's `tls.ClientAuthType`).

use std::path::PathBuf;
use std::sync::Arc;

use serde_saphyr::{Location, Spanned};
use tokio_rustls::rustls::client::danger::HandshakeSignatureValid;
use tokio_rustls::rustls::crypto::{ring, CryptoProvider, WebPkiSupportedAlgorithms};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use tokio_rustls::rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use tokio_rustls::rustls::server::{NoClientAuth, WebPkiClientVerifier};
use tokio_rustls::rustls::{
    self, DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme,
    SupportedProtocolVersion,
};

use super::{FileTls, Place};
use crate::tls::MAX_PEM_FILE;

/// Go's names of the TLS 1.3 suites (not configurable, there as here) and
/// of the CBC suites rustls does not implement.
const TLS13_SUITES: [&str; 3] = [
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];
const CBC_SUITES: [&str; 4] = [
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
];

/// The TLS side of a web config: (None for plain HTTP, the files it read).
pub(super) fn server_config(
    place: &Place,
    t: &FileTls,
    at: Location,
) -> anyhow::Result<(Option<Arc<ServerConfig>>, Vec<PathBuf>)> {
    if let Some(s) = &t.client_allowed_sans {
        return place.err(
            s.referenced,
            "client_allowed_sans is not supported by nfsdtopd: remove it, and let client_ca_file \
             hold only the CA that signs the clients allowed",
        );
    }
    let mut files = Vec::new();
    let certs = pem(place, &t.cert, &t.cert_file, "cert", &mut files)?;
    let key = pem(place, &t.key, &t.key_file, "key", &mut files)?;
    let (certs, key) = match (certs, key) {
        (Some(c), Some(k)) => (c, k),
        _ => return place.err(at, "tls_server_config needs a certificate and its key: cert_file (or cert) and key_file (or key)"),
    };
    let (cert_pem, cert_at) = certs;
    let (key_pem, key_at) = key;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .or_else(|e| place.err(cert_at, format!("bad PEM in the certificate: {e}")))?;
    if chain.is_empty() {
        return place.err(cert_at, "no PEM certificate in it");
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .or_else(|e| place.err(key_at, format!("no usable PEM private key in it: {e}")))?;

    let versions = versions(place, t)?;
    let mut provider = ring::default_provider();
    if let Some(suites) = &t.cipher_suites {
        provider.cipher_suites = cipher_suites(place, &provider, suites)?;
    }
    if let Some(curves) = &t.curve_preferences {
        provider.kx_groups = curves
            .iter()
            .map(|c| curve(place, &provider, c))
            .collect::<anyhow::Result<_>>()?;
    }
    let provider = Arc::new(provider);
    let verifier = client_verifier(place, t, &provider, &mut files)?;
    let mut cfg = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .or_else(|e| place.err(at, format!("TLS versions: {e}")))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .or_else(|e| {
            place.err(
                key_at,
                format!("the certificate and key do not form a usable pair: {e}"),
            )
        })?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    // Upstream's default: the server's order of cipher_suites.
    cfg.ignore_client_order = t
        .prefer_server_cipher_suites
        .as_ref()
        .is_none_or(|p| p.value);
    Ok((Some(Arc::new(cfg)), files))
}

/// PEM from inline text or a file (one of the two): (bytes, where named).
fn pem(
    place: &Place,
    inline: &Option<Spanned<String>>,
    file: &Option<Spanned<PathBuf>>,
    what: &str,
    files: &mut Vec<PathBuf>,
) -> anyhow::Result<Option<(Vec<u8>, Location)>> {
    match (inline, file) {
        (Some(_), Some(f)) => place.err(
            f.referenced,
            format!("both {what} and {what}_file: give one of the two"),
        ),
        (Some(text), None) => Ok(Some((text.value.clone().into_bytes(), text.referenced))),
        (None, Some(f)) => {
            let path = place.file(&f.value);
            let bytes = nfsdtop_agent::input::read_bytes(
                &path,
                &format!("{what}_file"),
                &format!("{what}_file in --web.config.file"),
                MAX_PEM_FILE,
            )
            .or_else(|e| place.err(f.referenced, format!("{e:#}")))?;
            files.push(path);
            Ok(Some((bytes, f.referenced)))
        }
        (None, None) => Ok(None),
    }
}

fn version(
    place: &Place,
    v: &Spanned<String>,
) -> anyhow::Result<&'static SupportedProtocolVersion> {
    match v.value.as_str() {
        "TLS12" => Ok(&rustls::version::TLS12),
        "TLS13" => Ok(&rustls::version::TLS13),
        "TLS10" | "TLS11" => place.err(
            v.referenced,
            format!(
                "{} cannot be honoured: nfsdtopd (rustls) speaks TLS 1.2 and 1.3 only; use TLS12",
                v.value
            ),
        ),
        other => place.err(
            v.referenced,
            format!("unknown TLS version {other:?}: expected TLS12 or TLS13"),
        ),
    }
}

fn versions(place: &Place, t: &FileTls) -> anyhow::Result<Vec<&'static SupportedProtocolVersion>> {
    let min = t
        .min_version
        .as_ref()
        .map(|v| version(place, v))
        .transpose()?;
    let max = t
        .max_version
        .as_ref()
        .map(|v| version(place, v))
        .transpose()?;
    let all = [&rustls::version::TLS12, &rustls::version::TLS13];
    let lo = all.iter().position(|v| Some(*v) == min).unwrap_or(0);
    let hi = all.iter().position(|v| Some(*v) == max).unwrap_or(1);
    if lo > hi {
        let at = t
            .max_version
            .as_ref()
            .map_or(Location::UNKNOWN, |m| m.referenced);
        return place.err(at, "max_version is below min_version");
    }
    Ok(all[lo..=hi].to_vec())
}

/// TLS 1.2's suites in the order listed; TLS 1.3's all kept (Go's
/// cipher_suites does not touch them either).
fn cipher_suites(
    place: &Place,
    provider: &CryptoProvider,
    names: &[Spanned<String>],
) -> anyhow::Result<Vec<rustls::SupportedCipherSuite>> {
    let mut out: Vec<_> = Vec::new();
    for n in names {
        let name = n.value.as_str();
        let found = provider
            .cipher_suites
            .iter()
            .find(|s| s.tls13().is_none() && format!("{:?}", s.suite()) == name);
        match found {
            Some(s) => out.push(*s),
            None if TLS13_SUITES.contains(&name) => {
                return place.err(
                    n.referenced,
                    format!("{name} is a TLS 1.3 suite: those are not configurable (cipher_suites is for TLS 1.2, as in exporter-toolkit); remove it"),
                )
            }
            None if CBC_SUITES.contains(&name) => {
                return place.err(
                    n.referenced,
                    format!("{name} cannot be honoured: rustls has no CBC suites; use an AES-GCM or ChaCha20 one"),
                )
            }
            None => {
                let known: Vec<String> = provider
                    .cipher_suites
                    .iter()
                    .filter(|s| s.tls13().is_none())
                    .map(|s| format!("{:?}", s.suite()))
                    .collect();
                return place.err(
                    n.referenced,
                    format!("unknown or unsupported cipher suite {name:?}: nfsdtopd has {}", known.join(", ")),
                );
            }
        }
    }
    out.extend(
        provider
            .cipher_suites
            .iter()
            .filter(|s| s.tls13().is_some()),
    );
    Ok(out)
}

fn curve(
    place: &Place,
    provider: &CryptoProvider,
    c: &Spanned<String>,
) -> anyhow::Result<&'static dyn rustls::crypto::SupportedKxGroup> {
    let group = match c.value.as_str() {
        "X25519" => rustls::NamedGroup::X25519,
        "CurveP256" => rustls::NamedGroup::secp256r1,
        "CurveP384" => rustls::NamedGroup::secp384r1,
        "CurveP521" => {
            return place.err(
                c.referenced,
                "CurveP521 cannot be honoured: rustls has no P-521 key exchange; use X25519, CurveP256 or CurveP384",
            )
        }
        other => {
            return place.err(
                c.referenced,
                format!("unknown curve {other:?}: expected X25519, CurveP256 or CurveP384"),
            )
        }
    };
    match provider.kx_groups.iter().find(|g| g.name() == group) {
        Some(g) => Ok(*g),
        None => place.err(c.referenced, format!("{} is not available", c.value)),
    }
}

fn client_verifier(
    place: &Place,
    t: &FileTls,
    provider: &Arc<CryptoProvider>,
    files: &mut Vec<PathBuf>,
) -> anyhow::Result<Arc<dyn ClientCertVerifier>> {
    let kind = t.client_auth_type.as_ref();
    let kind_at = kind.map_or(Location::UNKNOWN, |k| k.referenced);
    let ca = pem(place, &t.client_ca, &t.client_ca_file, "client_ca", files)?;
    let name = kind.map_or("NoClientCert", |k| k.value.as_str());
    let any = |mandatory: bool| -> Arc<dyn ClientCertVerifier> {
        Arc::new(AnyClientCert {
            mandatory,
            algorithms: provider.signature_verification_algorithms,
        })
    };
    let (verifier, verifies) = match name {
        "" | "NoClientCert" => (Arc::new(NoClientAuth) as Arc<dyn ClientCertVerifier>, false),
        "RequestClientCert" => (any(false), false),
        "RequireAnyClientCert" | "RequireClientCert" => (any(true), false),
        "VerifyClientCertIfGiven" | "RequireAndVerifyClientCert" => {
            let Some((ca_pem, ca_at)) = &ca else {
                return place.err(kind_at, format!("{name} needs client_ca_file (or client_ca): the CA that signs the clients' certificates"));
            };
            let mut roots = RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(ca_pem) {
                let c =
                    c.or_else(|e| place.err(*ca_at, format!("bad PEM in the client CA: {e}")))?;
                roots.add(c).or_else(|e| {
                    place.err(
                        *ca_at,
                        format!("a client CA certificate rustls cannot use: {e}"),
                    )
                })?;
            }
            if roots.is_empty() {
                return place.err(*ca_at, "no PEM certificate in the client CA");
            }
            let b = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
            let b = if name == "VerifyClientCertIfGiven" {
                b.allow_unauthenticated()
            } else {
                b
            };
            let v = b
                .build()
                .or_else(|e| place.err(*ca_at, format!("client CA: {e}")))?;
            (v, true)
        }
        other => {
            return place.err(
                kind_at,
                format!(
                    "unknown client_auth_type {other:?}: expected NoClientCert, RequestClientCert, \
                     RequireAnyClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert"
                ),
            )
        }
    };
    if let (Some((_, ca_at)), false) = (&ca, verifies) {
        return place.err(
            *ca_at,
            format!("a client CA with client_auth_type {name} is never used: set client_auth_type to RequireAndVerifyClientCert (or VerifyClientCertIfGiven), or remove the CA"),
        );
    }
    Ok(verifier)
}

/// RequestClientCert and RequireAnyClientCert: a client certificate is
/// asked for (or required) and taken whoever signed it, as Go does; the
/// client must still prove it holds the key (the handshake signature).
#[derive(Debug)]
struct AnyClientCert {
    mandatory: bool,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for AnyClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
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
