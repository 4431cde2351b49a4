//! Connection authentication: both ends prove they hold the cluster key.
//!
//! ```text
//! server -> client: "LOOMAUTH" | nonce_s (32)
//! client -> server: nonce_c (32) | HMAC-SHA256(key, "client" | nonce_s | nonce_c)
//! server -> client: HMAC-SHA256(key, "server" | nonce_c | nonce_s)
//! ```
//! The key itself never crosses the wire; fresh nonces on both sides stop
//! replays in either direction.

use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

type HmacSha256 = Hmac<Sha256>;

const HELLO: &[u8; 8] = b"LOOMAUTH";
/// How long the handshake may take before the connection is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// The cluster's shared secret.
#[derive(Clone)]
pub struct ClusterKey(Vec<u8>);

impl std::fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterKey(..)")
    }
}

/// Why a handshake failed.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The peer's proof did not match: it holds another key.
    #[error("peer does not know the cluster key")]
    BadProof,
    /// The peer is not speaking the loomfs handshake.
    #[error("peer did not send the loomfs handshake greeting")]
    BadHello,
    /// Too slow.
    #[error("handshake timed out")]
    Timeout,
    /// Socket error.
    #[error("handshake I/O: {0}")]
    Io(#[from] std::io::Error),
}

impl ClusterKey {
    /// A key from raw bytes (at least 16).
    pub fn from_bytes(b: Vec<u8>) -> Result<ClusterKey, String> {
        if b.len() < 16 {
            return Err(format!(
                "cluster key is {} bytes; at least 16 are needed",
                b.len()
            ));
        }
        Ok(ClusterKey(b))
    }

    /// A new random 32-byte key.
    pub fn generate() -> ClusterKey {
        let mut b = vec![0u8; 32];
        rand::thread_rng().fill_bytes(&mut b);
        ClusterKey(b)
    }

    /// The key as hex, for a key file.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parse a key file's hex contents (whitespace ignored).
    pub fn from_hex(s: &str) -> Result<ClusterKey, String> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        if !s.len().is_multiple_of(2) {
            return Err("cluster key: odd number of hex digits".into());
        }
        let mut b = Vec::with_capacity(s.len() / 2);
        for i in (0..s.len()).step_by(2) {
            let byte = u8::from_str_radix(&s[i..i + 2], 16)
                .map_err(|_| format!("cluster key: bad hex at position {i}"))?;
            b.push(byte);
        }
        ClusterKey::from_bytes(b)
    }

    fn mac(&self, label: &[u8], a: &[u8], b: &[u8]) -> [u8; 32] {
        // new_from_slice only fails for zero-length keys on some MACs; HMAC
        // accepts any length, so fall back to an impossible-to-match value.
        let Ok(mut m) = HmacSha256::new_from_slice(&self.0) else {
            return [0u8; 32];
        };
        m.update(label);
        m.update(a);
        m.update(b);
        m.finalize().into_bytes().into()
    }

    fn verify(&self, label: &[u8], a: &[u8], b: &[u8], proof: &[u8]) -> bool {
        let Ok(mut m) = HmacSha256::new_from_slice(&self.0) else {
            return false;
        };
        m.update(label);
        m.update(a);
        m.update(b);
        // Constant-time comparison.
        m.verify_slice(proof).is_ok()
    }
}

fn nonce() -> [u8; 32] {
    let mut n = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut n);
    n
}

/// Server side of the handshake.
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    key: &ClusterKey,
) -> Result<(), AuthError> {
    tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
        let ns = nonce();
        let mut hello = Vec::with_capacity(40);
        hello.extend_from_slice(HELLO);
        hello.extend_from_slice(&ns);
        s.write_all(&hello).await?;
        let mut msg = [0u8; 64];
        s.read_exact(&mut msg).await?;
        let (nc, proof) = msg.split_at(32);
        if !key.verify(b"client", &ns, nc, proof) {
            return Err(AuthError::BadProof);
        }
        s.write_all(&key.mac(b"server", nc, &ns)).await?;
        Ok(())
    })
    .await
    .map_err(|_| AuthError::Timeout)?
}

/// Client side of the handshake.
pub async fn connect<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    key: &ClusterKey,
) -> Result<(), AuthError> {
    tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
        let mut hello = [0u8; 40];
        s.read_exact(&mut hello).await?;
        if &hello[..8] != HELLO {
            return Err(AuthError::BadHello);
        }
        let ns = &hello[8..];
        let nc = nonce();
        let mut msg = Vec::with_capacity(64);
        msg.extend_from_slice(&nc);
        msg.extend_from_slice(&key.mac(b"client", ns, &nc));
        s.write_all(&msg).await?;
        let mut proof = [0u8; 32];
        s.read_exact(&mut proof).await?;
        if !key.verify(b"server", &nc, ns, &proof) {
            return Err(AuthError::BadProof);
        }
        Ok(())
    })
    .await
    .map_err(|_| AuthError::Timeout)?
}
