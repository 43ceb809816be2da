//! A deterministic certificate for the emulator.
//!
//! `tollgate_transport::tls::SelfSigned` makes an ECDSA P-256 certificate:
//! its key is random and ECDSA signatures are randomised and vary in length
//! (70-72 bytes DER), so the server's handshake flight would change size from
//! run to run, shifting every later packet by a few nanoseconds and breaking
//! byte-identical results. Here the key is an Ed25519 key from a fixed seed
//! with a fixed serial number: Ed25519 signatures are deterministic and always
//! 64 bytes, so the certificate and every handshake have the same sizes in
//! every run. (TLS randoms and key shares still differ between runs, but
//! their sizes are fixed, and nothing in the emulator depends on their values.)

use std::sync::Arc;

use quinn_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tollgate_transport::tls;

/// The server name every emulated client connects to.
pub const SERVER_NAME: &str = "tollgate.sim";

/// PKCS#8 v1 prefix of an Ed25519 private key (RFC 8410), followed by the 32-byte seed.
const ED25519_PKCS8_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

/// Client and server crypto configurations shared by every emulated host.
#[derive(Clone)]
pub struct Crypto {
    /// For servers.
    pub server: Arc<QuicServerConfig>,
    /// For clients.
    pub client: Arc<QuicClientConfig>,
}

impl Crypto {
    /// Build the fixed certificate and both configurations.
    pub fn new() -> anyhow::Result<Self> {
        let mut pkcs8 = ED25519_PKCS8_PREFIX.to_vec();
        pkcs8.extend_from_slice(&[0x5a; 32]);
        let key = rcgen::KeyPair::try_from(pkcs8.as_slice())?;
        let mut params = rcgen::CertificateParams::new(vec![SERVER_NAME.to_string()])?;
        params.serial_number = Some(rcgen::SerialNumber::from(1u64));
        let cert = params.self_signed(&key)?;
        let der: CertificateDer<'static> = cert.der().clone();
        let server = tls::server_crypto(
            vec![der.clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )?;
        let client = tls::client_crypto_with_roots(vec![der])?;
        Ok(Crypto { server, client })
    }
}

impl std::fmt::Debug for Crypto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Crypto { .. }")
    }
}
