//! Many concurrent sessions through one relay on loopback, each publishing and subscribing,
//! with large frames, under every GSO / GRO setting: the same bytes arrive every time.

mod common;

use bytes::Bytes;
use moqx_net::model::Origin;
use moqx_net::session::SessionConfig;
use moqx_runtime::tls::Certificate;
use moqx_runtime::udp::UdpConfig;
use moqx_tokio::{Server, ServerConfig};

/// `peers` clients through one relay: client `i` publishes `peer-i` with one frame of
/// `size` bytes (every byte `i`), and reads `peer-(i+1)`'s. Returns what each one read.
async fn ring(peers: usize, size: usize, udp: UdpConfig) -> Vec<Bytes> {
    let relay_origin = Origin::new();
    let mut config = ServerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        Certificate::self_signed(&["localhost".into()]).unwrap(),
        SessionConfig::default()
            .with_publisher(&relay_origin)
            .with_subscriber(&relay_origin),
    );
    config.udp = udp.clone();
    let mut server = Server::bind(config).await.unwrap();
    let url = format!("moqt://localhost:{}/", server.local_addr().port());
    let relay = tokio::spawn(async move {
        let mut sessions = Vec::new();
        while let Some(request) = server.accept().await {
            sessions.push(request.accept());
        }
    });
    let received = common::ring(&url, peers, |i| Bytes::from(vec![i as u8; size]), udp).await;
    relay.abort();
    received
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_sessions_each_publish_and_subscribe_through_one_server() {
    let received = ring(100, 64 * 1024, UdpConfig::default()).await;
    for (i, payload) in received.iter().enumerate() {
        let from = ((i + 1) % 100) as u8;
        assert_eq!(payload.len(), 64 * 1024, "peer {i}");
        assert!(
            payload.iter().all(|byte| *byte == from),
            "peer {i} got peer {from}'s bytes"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_megabyte_frames_arrive_identical_with_gso_and_gro_on_or_off() {
    let mut results = Vec::new();
    for gso in [true, false] {
        for gro in [true, false] {
            let udp = {
                let mut udp_config = UdpConfig::default();
                udp_config.gso = gso;
                udp_config.gro = gro;
                udp_config
            };
            results.push(ring(4, 1 << 20, udp).await);
        }
    }
    for result in &results[1..] {
        assert_eq!(result, &results[0], "every setting delivers the same bytes");
    }
    assert!(results[0].iter().all(|payload| payload.len() == 1 << 20));
}
