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
//!
//! **Packet protection off** (`packet_protection = false`, `tollgate sim
//! --no-packet-protection`): the handshake runs with real TLS and real
//! Initial and Handshake keys, but the 1-RTT keys are replaced by a null
//! cipher ([`NullPacketKey`], [`NullHeaderKey`]) with the real keys' tag
//! length, sample size and usage limits. Every packet keeps its size and
//! nothing in the emulator reads packet contents, so a run's results are the
//! same with and without protection; only AES-GCM's CPU time (about a fifth
//! of a run) goes. Both ends of every emulated connection use it.

use std::any::Any;
use std::sync::Arc;

use bytes::BytesMut;
use quinn_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn_proto::crypto::{
    self, CryptoError, ExportKeyingMaterialError, HeaderKey, KeyPair, Keys, PacketKey,
    UnsupportedVersion,
};
use quinn_proto::transport_parameters::TransportParameters;
use quinn_proto::{ConnectError, ConnectionId, Side, TransportError};
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
    pub server: Arc<dyn crypto::ServerConfig>,
    /// For clients.
    pub client: Arc<dyn crypto::ClientConfig>,
}

impl Crypto {
    /// Build the fixed certificate and both configurations; without
    /// `protect`, 1-RTT packets use the null cipher (module docs).
    pub fn new(protect: bool) -> anyhow::Result<Self> {
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
        Ok(if protect {
            Crypto { server, client }
        } else {
            Crypto {
                server: Arc::new(Unprotected(server)),
                client: Arc::new(Unprotected(client)),
            }
        })
    }
}

impl std::fmt::Debug for Crypto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Crypto { .. }")
    }
}

/// A crypto configuration whose sessions use the null cipher once the
/// handshake reaches 1-RTT.
struct Unprotected<C: ?Sized>(Arc<C>);

impl crypto::ClientConfig for Unprotected<QuicClientConfig> {
    fn start_session(
        self: Arc<Self>,
        version: u32,
        server_name: &str,
        params: &TransportParameters,
    ) -> Result<Box<dyn crypto::Session>, ConnectError> {
        let inner = self.0.clone().start_session(version, server_name, params)?;
        Ok(Box::new(UnprotectedSession::new(inner)))
    }
}

impl crypto::ServerConfig for Unprotected<QuicServerConfig> {
    fn initial_keys(
        &self,
        version: u32,
        dst_cid: &ConnectionId,
    ) -> Result<Keys, UnsupportedVersion> {
        self.0.initial_keys(version, dst_cid)
    }

    fn retry_tag(&self, version: u32, orig_dst_cid: &ConnectionId, packet: &[u8]) -> [u8; 16] {
        self.0.retry_tag(version, orig_dst_cid, packet)
    }

    fn start_session(
        self: Arc<Self>,
        version: u32,
        params: &TransportParameters,
    ) -> Box<dyn crypto::Session> {
        Box::new(UnprotectedSession::new(
            self.0.clone().start_session(version, params),
        ))
    }
}

/// A real TLS session whose 1-RTT keys are swapped for null ones.
struct UnprotectedSession {
    inner: Box<dyn crypto::Session>,
    /// Key sets handed out by `write_handshake` so far: the first is the
    /// Handshake space's, the second the 1-RTT keys.
    key_changes: u8,
}

impl UnprotectedSession {
    fn new(inner: Box<dyn crypto::Session>) -> Self {
        UnprotectedSession {
            inner,
            key_changes: 0,
        }
    }
}

impl crypto::Session for UnprotectedSession {
    fn initial_keys(&self, dst_cid: &ConnectionId, side: Side) -> Keys {
        self.inner.initial_keys(dst_cid, side)
    }
    fn handshake_data(&self) -> Option<Box<dyn Any>> {
        self.inner.handshake_data()
    }
    fn peer_identity(&self) -> Option<Box<dyn Any>> {
        self.inner.peer_identity()
    }
    fn early_crypto(&self) -> Option<(Box<dyn HeaderKey>, Box<dyn PacketKey>)> {
        self.inner.early_crypto()
    }
    fn early_data_accepted(&self) -> Option<bool> {
        self.inner.early_data_accepted()
    }
    fn is_handshaking(&self) -> bool {
        self.inner.is_handshaking()
    }
    fn read_handshake(&mut self, buf: &[u8]) -> Result<bool, TransportError> {
        self.inner.read_handshake(buf)
    }
    fn transport_parameters(&self) -> Result<Option<TransportParameters>, TransportError> {
        self.inner.transport_parameters()
    }
    fn write_handshake(&mut self, buf: &mut Vec<u8>) -> Option<Keys> {
        let keys = self.inner.write_handshake(buf)?;
        self.key_changes += 1;
        Some(if self.key_changes >= 2 {
            null_keys(keys)
        } else {
            keys
        })
    }
    fn next_1rtt_keys(&mut self) -> Option<KeyPair<Box<dyn PacketKey>>> {
        let next = self.inner.next_1rtt_keys()?;
        Some(KeyPair {
            local: NullPacketKey::like(&*next.local),
            remote: NullPacketKey::like(&*next.remote),
        })
    }
    fn is_valid_retry(&self, orig_dst_cid: &ConnectionId, header: &[u8], payload: &[u8]) -> bool {
        self.inner.is_valid_retry(orig_dst_cid, header, payload)
    }
    fn export_keying_material(
        &self,
        output: &mut [u8],
        label: &[u8],
        context: &[u8],
    ) -> Result<(), ExportKeyingMaterialError> {
        self.inner.export_keying_material(output, label, context)
    }
}

fn null_keys(keys: Keys) -> Keys {
    Keys {
        header: KeyPair {
            local: NullHeaderKey::like(&*keys.header.local),
            remote: NullHeaderKey::like(&*keys.header.remote),
        },
        packet: KeyPair {
            local: NullPacketKey::like(&*keys.packet.local),
            remote: NullPacketKey::like(&*keys.packet.remote),
        },
    }
}

/// A packet "cipher" that leaves the payload as it is and an unchecked tag
/// of the real key's length in place.
#[derive(Debug)]
pub struct NullPacketKey {
    tag_len: usize,
    confidentiality_limit: u64,
    integrity_limit: u64,
}

impl NullPacketKey {
    fn like(real: &dyn PacketKey) -> Box<dyn PacketKey> {
        Box::new(NullPacketKey {
            tag_len: real.tag_len(),
            confidentiality_limit: real.confidentiality_limit(),
            integrity_limit: real.integrity_limit(),
        })
    }
}

impl PacketKey for NullPacketKey {
    fn encrypt(&self, _packet: u64, _buf: &mut [u8], _header_len: usize) {}
    fn decrypt(
        &self,
        _packet: u64,
        _header: &[u8],
        payload: &mut BytesMut,
    ) -> Result<(), CryptoError> {
        let len = payload.len().checked_sub(self.tag_len).ok_or(CryptoError)?;
        payload.truncate(len);
        Ok(())
    }
    fn tag_len(&self) -> usize {
        self.tag_len
    }
    fn confidentiality_limit(&self) -> u64 {
        self.confidentiality_limit
    }
    fn integrity_limit(&self) -> u64 {
        self.integrity_limit
    }
}

/// Header protection that masks nothing (same sample size as the real key,
/// so packets are padded exactly as with it).
#[derive(Debug)]
pub struct NullHeaderKey {
    sample_size: usize,
}

impl NullHeaderKey {
    fn like(real: &dyn HeaderKey) -> Box<dyn HeaderKey> {
        Box::new(NullHeaderKey {
            sample_size: real.sample_size(),
        })
    }
}

impl HeaderKey for NullHeaderKey {
    fn decrypt(&self, _pn_offset: usize, _packet: &mut [u8]) {}
    fn encrypt(&self, _pn_offset: usize, _packet: &mut [u8]) {}
    fn sample_size(&self) -> usize {
        self.sample_size
    }
}
