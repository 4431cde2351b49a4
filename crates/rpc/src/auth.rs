//! Connection authentication: both ends prove they hold a key of the
//! cluster.
//!
//! There are two keys. Servers hold the cluster key; clients hold the
//! client key, which is derived from it ([`ClusterKey::client_key`]) and
//! cannot be turned back into it. A server accepts either and learns from
//! the proof which one the other end holds ([`Standing`]): operations meant
//! only for servers are refused on a client's connection. A client cannot
//! tell which key a server would accept from it, so it simply uses its own.
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

/// Which key the other end of an accepted connection proved it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// The cluster key: another server of the cluster (or an admin tool
    /// run with the cluster key).
    Peer,
    /// The client key: a client mount or tool.
    Client,
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

    /// The key servers sign and check capabilities with
    /// (`loom_proto::capa::key_of`). Derived from the cluster key, so a
    /// client holding only the client key cannot make one.
    pub fn capa_key(&self) -> [u8; 32] {
        loom_proto::capa::key_of(&self.0)
    }

    /// The client key of this cluster key: HMAC-SHA256(cluster key,
    /// "loomfs client key v1"). Given to client nodes instead of the
    /// cluster key; a server recognises it, and nobody can derive the
    /// cluster key from it.
    pub fn client_key(&self) -> ClusterKey {
        ClusterKey(self.mac(b"loomfs client key v1", &[], &[]).to_vec())
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

/// Server side of the handshake, holding cluster key `key`: the other end
/// may prove either the cluster key or its client key.
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    key: &ClusterKey,
) -> Result<Standing, AuthError> {
    let client_key = key.client_key();
    tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
        let ns = nonce();
        let mut hello = Vec::with_capacity(40);
        hello.extend_from_slice(HELLO);
        hello.extend_from_slice(&ns);
        s.write_all(&hello).await?;
        let mut msg = [0u8; 64];
        s.read_exact(&mut msg).await?;
        let (nc, proof) = msg.split_at(32);
        let (standing, proven) = if key.verify(b"client", &ns, nc, proof) {
            (Standing::Peer, key)
        } else if client_key.verify(b"client", &ns, nc, proof) {
            (Standing::Client, &client_key)
        } else {
            return Err(AuthError::BadProof);
        };
        // Answered with the key the other end proved: the one it can check.
        s.write_all(&proven.mac(b"server", nc, &ns)).await?;
        Ok(standing)
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

#[cfg(test)]
mod tests {
    use super::*;

    async fn handshake(server: &ClusterKey, client: &ClusterKey) -> Result<Standing, AuthError> {
        let (mut a, mut b) = tokio::io::duplex(256);
        // The server's end closes once it has decided, as its connection
        // task's would.
        let serve = async move { accept(&mut a, server).await };
        let (s, c) = tokio::join!(serve, connect(&mut b, client));
        if s.is_ok() {
            c.expect("the client accepts the server's proof");
        }
        s
    }

    #[tokio::test]
    async fn the_key_proven_sets_the_standing() {
        let k = ClusterKey::generate();
        assert_eq!(handshake(&k, &k).await.expect("peer"), Standing::Peer);
        let ck = k.client_key();
        assert_eq!(handshake(&k, &ck).await.expect("client"), Standing::Client);
        assert!(matches!(
            handshake(&k, &ClusterKey::generate()).await,
            Err(AuthError::BadProof)
        ));
        // The client key of a client key is no key of this cluster.
        assert!(matches!(
            handshake(&k, &ck.client_key()).await,
            Err(AuthError::BadProof)
        ));
        assert_ne!(ck.to_hex(), k.to_hex());
    }
}
