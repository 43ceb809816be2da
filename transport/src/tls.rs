//! TLS 1.3 setup through rustls (ring provider).
//!
//! Tests and examples use [`SelfSigned::generate`]. For real certificates,
//! load PEM files:
//!
//! ```no_run
//! # use tollgate_transport::tls;
//! let server = tls::server_crypto_from_pem("/etc/tollgate/cert.pem", "/etc/tollgate/key.pem")?;
//! let client = tls::client_crypto_with_roots_pem("/etc/ssl/certs/ca-certificates.crt")?;
//! # Ok::<(), tollgate_transport::tls::TlsError>(())
//! ```
//!
//! The certificate file holds the full chain (leaf first); the key file one
//! PKCS#8, PKCS#1 or SEC1 private key. Clients verify the server name given to
//! [`Endpoint::connect`](crate::Endpoint::connect) against the certificate.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use quinn_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// ALPN protocol id of Tollgate's bulk-transfer protocol.
pub const ALPN: &[u8] = b"tollgate-bulk";

/// A TLS setup error.
#[derive(Debug)]
pub struct TlsError(pub String);

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tls: {}", self.0)
    }
}

impl std::error::Error for TlsError {}

fn err(e: impl fmt::Display) -> TlsError {
    TlsError(e.to_string())
}

/// A self-signed certificate and its key, for tests and examples.
#[derive(Debug)]
pub struct SelfSigned {
    /// DER certificate.
    pub cert: CertificateDer<'static>,
    /// DER PKCS#8 private key.
    pub key: PrivatePkcs8KeyDer<'static>,
    cert_pem: String,
    key_pem: String,
}

impl SelfSigned {
    /// A fresh certificate valid for `names` (e.g. `["localhost"]`).
    pub fn generate(names: &[&str]) -> Result<Self, TlsError> {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let certified = rcgen::generate_simple_self_signed(names).map_err(err)?;
        Ok(SelfSigned {
            cert: certified.cert.der().clone(),
            key: PrivatePkcs8KeyDer::from(certified.key_pair.serialize_der()),
            cert_pem: certified.cert.pem(),
            key_pem: certified.key_pair.serialize_pem(),
        })
    }

    /// The certificate as PEM (to hand to a peer such as quiche).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The key as PEM.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// Server crypto presenting this certificate.
    pub fn server_crypto(&self) -> Result<Arc<QuicServerConfig>, TlsError> {
        server_crypto(
            vec![self.cert.clone()],
            PrivateKeyDer::Pkcs8(self.key.clone_key()),
        )
    }

    /// Client crypto trusting only this certificate.
    pub fn client_crypto(&self) -> Result<Arc<QuicClientConfig>, TlsError> {
        client_crypto_with_roots(vec![self.cert.clone()])
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Server crypto (TLS 1.3 only, ALPN [`ALPN`]) for a certificate chain and key.
pub fn server_crypto(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<QuicServerConfig>, TlsError> {
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(err)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(err)?;
    cfg.alpn_protocols = vec![ALPN.to_vec()];
    cfg.max_early_data_size = 0;
    Ok(Arc::new(QuicServerConfig::try_from(cfg).map_err(err)?))
}

/// Server crypto from PEM files: `cert_path` holds the chain, `key_path` the key.
pub fn server_crypto_from_pem(
    cert_path: impl AsRef<Path>,
    key_path: impl AsRef<Path>,
) -> Result<Arc<QuicServerConfig>, TlsError> {
    let chain = CertificateDer::pem_file_iter(cert_path.as_ref())
        .map_err(err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)?;
    let key = PrivateKeyDer::from_pem_file(key_path.as_ref()).map_err(err)?;
    server_crypto(chain, key)
}

/// Client crypto trusting exactly `roots`.
pub fn client_crypto_with_roots(
    roots: Vec<CertificateDer<'static>>,
) -> Result<Arc<QuicClientConfig>, TlsError> {
    let mut store = rustls::RootCertStore::empty();
    for root in roots {
        store.add(root).map_err(err)?;
    }
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(err)?
        .with_root_certificates(store)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![ALPN.to_vec()];
    Ok(Arc::new(QuicClientConfig::try_from(cfg).map_err(err)?))
}

/// Client crypto trusting the CA certificates in a PEM bundle.
pub fn client_crypto_with_roots_pem(
    path: impl AsRef<Path>,
) -> Result<Arc<QuicClientConfig>, TlsError> {
    let roots = CertificateDer::pem_file_iter(path.as_ref())
        .map_err(err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)?;
    client_crypto_with_roots(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_pem_round_trips() {
        let ss = SelfSigned::generate(&["localhost"]).unwrap();
        let back = CertificateDer::from_pem_slice(ss.cert_pem().as_bytes()).unwrap();
        assert_eq!(back, ss.cert);
        let key = PrivateKeyDer::from_pem_slice(ss.key_pem().as_bytes()).unwrap();
        assert_eq!(key.secret_der(), ss.key.secret_pkcs8_der());
        ss.server_crypto().unwrap();
        ss.client_crypto().unwrap();
    }
}
