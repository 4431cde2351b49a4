//! Random bytes, oversized lengths, a wrong key and half-sent frames on
//! every server port: each bad connection is dropped and the servers keep
//! serving the mounted client.
mod common;
use common::*;
use rand::RngCore;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    s
}

/// Read until the server closes the connection (bounded by the timeout).
fn expect_closed(mut s: TcpStream, what: &str) {
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return,
            Err(e) => panic!("{what}: server neither answered nor closed: {e}"),
        }
    }
}

/// Whether a `loom up` port is an HTTP endpoint, not a server's.
fn is_http(key: &str) -> bool {
    key.starts_with("metrics-") || key == "dashboard"
}

#[test]
fn garbage_on_server_ports_does_not_disturb_clients() {
    let c = Cluster::up(1, 2, &[]);
    let f = c.path("alive.txt");
    std::fs::write(&f, b"before").expect("write");
    let mut rng = rand::thread_rng();
    let ports = c.ports();
    // The HTTP endpoints (metrics, dashboard) drop garbage too, and keep
    // answering.
    for (name, port) in ports.iter().filter(|(k, _)| is_http(k)) {
        let mut s = connect(*port);
        let mut junk = vec![0u8; 9000];
        rng.fill_bytes(&mut junk);
        let _ = s.write_all(&junk);
        expect_closed(s, &format!("{name}: random bytes"));
        let mut s = connect(*port);
        s.write_all(b"GET /nothing HTTP/1.1\r\n\r\n").expect("send");
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        assert!(answer.starts_with("HTTP/1.1 404"), "{name}: {answer}");
    }
    for (name, port) in ports.into_iter().filter(|(k, _)| !is_http(k)) {
        // 1. Random bytes instead of a handshake.
        for _ in 0..5 {
            let mut s = connect(port);
            let mut junk = vec![0u8; 1 + (rng.next_u32() % 5000) as usize];
            rng.fill_bytes(&mut junk);
            let _ = s.write_all(&junk);
            expect_closed(s, &format!("{name}: random bytes"));
        }
        // 2. A proof made with the wrong key.
        let mut s = connect(port);
        let mut hello = [0u8; 40];
        s.read_exact(&mut hello).expect("server greeting");
        assert_eq!(&hello[..8], b"LOOMAUTH", "{name}");
        let mut reply = [0u8; 64];
        rng.fill_bytes(&mut reply);
        s.write_all(&reply).expect("send bad proof");
        expect_closed(s, &format!("{name}: wrong key"));
        // 3. Silence: the handshake times out and the server drops us.
        let s = connect(port);
        expect_closed(s, &format!("{name}: silent peer"));
        // 4. A connection dropped half-way through the greeting.
        let mut s = connect(port);
        let _ = s.read(&mut [0u8; 10]);
        drop(s);
        // 5. Authenticated with the right key, then malformed frames.
        authenticated_abuse(&c, port, &name);
        // The mount still works after each server was abused.
        std::fs::write(&f, format!("after {name}")).expect("write after abuse");
        assert_eq!(
            std::fs::read_to_string(&f).expect("read"),
            format!("after {name}")
        );
    }
}

/// With the real key: an oversized body length, an oversized bulk length,
/// a bad header checksum and an undecodable body. The first three must
/// close the connection; the last gets an EPROTO reply on a connection
/// that stays usable.
fn authenticated_abuse(c: &Cluster, port: u16, name: &str) {
    use loom_proto::frame::{FrameHeader, HEADER_LEN, MAX_BODY, MAX_BULK};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let key_hex = std::fs::read_to_string(c.state.join("cluster.key")).expect("key");
    let key = loom_rpc::ClusterKey::from_hex(&key_hex).expect("key");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    rt.block_on(async {
        let open = || async {
            let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .expect("connect");
            loom_rpc::auth::connect(&mut s, &key)
                .await
                .expect("handshake with the right key");
            s
        };
        let closes = |mut s: tokio::net::TcpStream, what: String| async move {
            let mut b = [0u8; 64];
            let r = tokio::time::timeout(Duration::from_secs(20), s.read(&mut b)).await;
            assert!(
                matches!(r, Ok(Ok(0)) | Ok(Err(_))),
                "{what}: connection not closed: {r:?}"
            );
        };
        let mut h = FrameHeader::new(0, 1, 1, b"", b"");
        h.body_len = MAX_BODY + 1;
        let mut s = open().await;
        s.write_all(&h.encode()).await.expect("send");
        closes(s, format!("{name}: oversized body")).await;

        let mut h = FrameHeader::new(0, 50, 2, b"", b"");
        h.bulk_len = MAX_BULK + 1;
        let mut s = open().await;
        s.write_all(&h.encode()).await.expect("send");
        closes(s, format!("{name}: oversized bulk")).await;

        let mut bytes = FrameHeader::new(0, 1, 3, b"", b"").encode();
        bytes[16] ^= 0xff;
        let mut s = open().await;
        s.write_all(&bytes).await.expect("send");
        closes(s, format!("{name}: bad header crc")).await;

        // A valid header around a body that is not a request (opcode 21,
        // GetAttr: pings, opcode 1, are answered by the transport without
        // looking at the body).
        let body = [0xffu8; 16];
        let h = FrameHeader::new(0, 21, 4, &body, b"");
        let mut s = open().await;
        s.write_all(&h.encode()).await.expect("send");
        s.write_all(&body).await.expect("send");
        let mut hb = [0u8; HEADER_LEN];
        tokio::time::timeout(Duration::from_secs(20), s.read_exact(&mut hb))
            .await
            .expect("reply in time")
            .expect("reply");
        let rh = FrameHeader::decode(&hb)
            .expect("valid reply header")
            .expect("complete");
        assert_eq!(rh.request_id, 4);
        assert!(
            rh.flags & loom_proto::frame::flags::ERROR != 0,
            "{name}: undecodable body must get an error reply"
        );
    });
}
