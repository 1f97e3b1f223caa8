//! What an independent implementation sees: a raw QUIC client written directly on quiche,
//! over a real UDP socket, sends the byte sequences of `shared/spec/moq-lite-05.md` to a
//! `moqx-tokio` server and checks the replies byte for byte.

mod common;

use std::time::Duration;

use common::RawPeer;
use moqx_net::model::{BroadcastProducer, Origin, Track};
use moqx_net::session::SessionConfig;
use moqx_runtime::tls::Certificate;
use moqx_tokio::{Server, ServerConfig};

fn hex(text: &str) -> Vec<u8> {
    let text: String = text.split_whitespace().collect();
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_built_peer_sees_the_spec_bytes() {
    let published = Origin::new();
    let broadcast = BroadcastProducer::new();
    let mut track = broadcast.create_track(Track::new("video"));
    published.publish("demo", &broadcast).unwrap();
    let mut server = Server::bind(ServerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        Certificate::self_signed(&["localhost".into()]).unwrap(),
        SessionConfig::default().with_publisher(&published),
    ))
    .await
    .unwrap();
    let address = server.local_addr();
    let sessions = tokio::spawn(async move {
        let mut sessions = Vec::new();
        while let Some(request) = server.accept().await {
            sessions.push(request.accept());
        }
    });
    let (subscribed_tx, subscribed_rx) = std::sync::mpsc::channel::<()>();
    let (published_tx, published_rx) = std::sync::mpsc::channel::<()>();

    let peer = tokio::task::spawn_blocking(move || {
        let mut peer = RawPeer::connect(address);

        // SETUP with Path "/": stream type 1; length 4; one parameter: id 2, length 1, "/".
        peer.write(2, &hex("01 04 01 02 01 2f"), true);

        // The server's SETUP: type 1, length 1, no parameters.
        let setup_stream = peer.next_uni(&[]);
        let (setup, fin) = peer.read_to_end(setup_stream);
        assert_eq!(setup, hex("01 01 00"), "the server's SETUP");
        assert!(fin);

        // ANNOUNCE_REQUEST for everything: stream type 1, then length 2, prefix "", hop 0.
        peer.write(0, &hex("01 02 00 00"), false);
        // ANNOUNCE_OK (hop 0, 1 active), then ANNOUNCE active "demo", no hops.
        let (announce, _) = peer.read(0, 11);
        assert_eq!(announce, hex("02 00 01  07 01 04 64656d6f 00"));

        // TRACK "demo" / "video": type 6; length 11.
        peer.write(4, &hex("06 0b 04 64656d6f 05 766964656f"), true);
        // TRACK_INFO: priority 0, unordered, 5000 ms, timescale 1000; then FIN.
        let (info, fin) = peer.read_to_end(4);
        assert_eq!(info, hex("06 00 00 5388 43e8"));
        assert!(fin, "TRACK_INFO is the sole reply");

        // SUBSCRIBE id 0, "demo", "video", priority 0, unordered, 5000 ms, latest, open end.
        peer.write(
            8,
            &hex("02 12 00 04 64656d6f 05 766964656f 00 00 5388 00 00"),
            false,
        );
        subscribed_tx.send(()).unwrap();
        // Keep the connection moving while the server's side publishes.
        assert!(peer.drive(|_| published_rx.try_recv().is_ok()), "published");

        // SUBSCRIBE_START for group 0 on the subscribe stream.
        let (start, _) = peer.read(8, 3);
        assert_eq!(start, hex("00 01 00"));
        // The group on its own uni stream: type 0, GROUP(id 0, seq 0), FRAME(ts 0, "hi").
        let group_stream = peer.next_uni(&[setup_stream]);
        let (group, fin) = peer.read_to_end(group_stream);
        assert_eq!(group, hex("00 02 00 00 00 02 6869"));
        assert!(fin, "the group stream ends with the group");
    });

    tokio::task::spawn_blocking(move || subscribed_rx.recv_timeout(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("the peer subscribed");
    tokio::time::timeout(Duration::from_secs(10), async {
        while track.consumer_count() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the subscription reached the track");
    let mut group = track.append_group();
    group.write(0, bytes::Bytes::from_static(b"hi"));
    group.finish();
    published_tx.send(()).unwrap();

    peer.await.expect("every byte as the spec says");
    sessions.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_alpn_is_refused_and_the_server_keeps_serving() {
    let mut server = Server::bind(ServerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        Certificate::self_signed(&["localhost".into()]).unwrap(),
        SessionConfig::default(),
    ))
    .await
    .unwrap();
    let address = server.local_addr();
    let sessions = tokio::spawn(async move {
        let mut sessions = Vec::new();
        while let Some(request) = server.accept().await {
            sessions.push(request.accept());
        }
    });
    tokio::task::spawn_blocking(move || {
        // A client speaking only some other protocol: nothing in common.
        let mut stranger = RawPeer::start(address, b"hq-interop");
        assert!(stranger.drive(|conn| conn.is_closed()), "refused");
        assert!(!stranger.conn.is_established());
        let error = stranger
            .conn
            .peer_error()
            .or(stranger.conn.local_error())
            .expect("a close with a reason");
        // TLS alert 120 (no_application_protocol) as a QUIC crypto error: 0x100 + 120.
        assert_eq!(error.error_code, 0x178, "{error:?}");

        // The server is unaffected: a moq-lite-05 client gets through.
        let _friend = RawPeer::connect(address);
    })
    .await
    .expect("refused, then served");
    sessions.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_connect_is_refused_and_the_server_keeps_serving() {
    let mut server = Server::bind(ServerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        Certificate::self_signed(&["localhost".into()]).unwrap(),
        SessionConfig::default(),
    ))
    .await
    .unwrap();
    let address = server.local_addr();
    let accepted = tokio::spawn(async move {
        let mut sessions = Vec::new();
        while let Some(request) = server.accept().await {
            sessions.push(request.accept());
        }
    });
    tokio::task::spawn_blocking(move || {
        // An HTTP/3 client that sends valid SETTINGS, then a HEADERS frame of garbage.
        let mut stranger = RawPeer::start(address, b"h3");
        assert!(
            stranger.drive(|conn| conn.is_established()),
            "QUIC handshake"
        );
        // Control stream: type 0, SETTINGS (type 4, length 2) ENABLE_CONNECT_PROTOCOL=1.
        stranger.write(2, &[0x00, 0x04, 0x02, 0x08, 0x01], false);
        stranger.write(0, &[0x01, 0x04, 0xff, 0xff, 0xff, 0xff], false);
        assert!(stranger.drive(|conn| conn.is_closed()), "refused");
        let error = stranger.conn.peer_error().expect("closed by the server");
        assert_eq!(error.error_code, 0x10e, "H3_MESSAGE_ERROR: {error:?}");
        let reason = String::from_utf8_lossy(&error.reason);
        assert!(reason.contains("malformed CONNECT"), "{reason}");
    })
    .await
    .expect("refused with a reason");

    // The server is unaffected: a WebTransport client gets through.
    let session = tokio::time::timeout(
        Duration::from_secs(10),
        moqx_tokio::connect(
            &format!("https://localhost:{}/", address.port()),
            moqx_tokio::ClientConfig::default().with_insecure_skip_verify(),
        ),
    )
    .await
    .expect("no hang")
    .expect("a well-formed client is served");
    assert!(!session.is_closed());
    accepted.abort();
}
