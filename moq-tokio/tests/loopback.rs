//! A client and a server on loopback, over real UDP sockets and real QUIC.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use moqx_net::model::{BroadcastProducer, Origin, Track};
use moqx_net::session::SessionConfig;
use moqx_runtime::client::ConnectError;
use moqx_runtime::tls::Certificate;
use moqx_tokio::{Binding, ClientConfig, Server, ServerConfig, connect};

/// A bound on how long any step may take before the test fails instead of hanging.
const PATIENCE: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broadcast_flows_over_raw_quic_from_server_to_client() {
    a_broadcast_flows_from_server_to_client("moqt").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broadcast_flows_over_webtransport_from_server_to_client() {
    a_broadcast_flows_from_server_to_client("https").await;
}

/// One server port serves both bindings: the client's scheme picks one.
async fn a_broadcast_flows_from_server_to_client(scheme: &str) {
    let published = Origin::new();
    let broadcast = BroadcastProducer::new();
    let mut track = broadcast.create_track(Track::new("clock"));
    published.publish("time", &broadcast).unwrap();
    let certificate = Certificate::self_signed(&["localhost".into()]).unwrap();
    let mut server = Server::bind(ServerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        certificate,
        SessionConfig::default().with_publisher(&published),
    ))
    .await
    .unwrap();
    let port = server.local_addr().port();
    let accepted = Arc::new(Mutex::new(Vec::new()));
    let server_sessions = tokio::spawn({
        let accepted = accepted.clone();
        async move {
            while let Some(request) = server.accept().await {
                // WebTransport carries the path in the CONNECT, before the session starts.
                let seen = (request.binding(), request.path());
                let session = request.accept();
                accepted.lock().unwrap().push((seen, session));
            }
        }
    });

    let discovered = Origin::new();
    let client = connect(
        &format!("{scheme}://localhost:{port}/room?token=x"),
        ClientConfig::default()
            .with_session(SessionConfig::default().with_subscriber(&discovered))
            .with_insecure_skip_verify(),
    )
    .await
    .unwrap();

    let remote = tokio::time::timeout(PATIENCE, async {
        loop {
            if let Some(broadcast) = discovered.consume_broadcast("time") {
                return broadcast;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the broadcast is announced");
    let reader = tokio::spawn(async move {
        let mut track = remote.subscribe_track("clock").await.unwrap();
        let mut group = track.next_group().await.unwrap().unwrap();
        group.read_frame().await.unwrap().unwrap().payload
    });
    tokio::time::timeout(PATIENCE, async {
        while track.consumer_count() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the subscription reaches the server");
    let mut group = track.append_group();
    group.write(0, bytes::Bytes::from_static(b"12:00:00"));
    group.finish();
    let payload = tokio::time::timeout(PATIENCE, reader)
        .await
        .expect("the frame arrives")
        .unwrap();
    assert_eq!(payload, "12:00:00");
    let accepted = accepted.lock().unwrap();
    let ((binding, path), session) = &accepted[0];
    match scheme {
        "https" => {
            assert_eq!(*binding, Binding::WebTransport);
            assert_eq!(path.as_deref(), Some("/room?token=x"));
        }
        _ => {
            assert_eq!(*binding, Binding::Quic);
            assert_eq!(path, &None, "raw QUIC has no path before SETUP");
            let setup = session.peer_setup().expect("the client's SETUP arrived");
            assert_eq!(setup.path.as_deref(), Some("/room?token=x"));
        }
    }
    drop(client);
    server_sessions.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_urls_and_refused_handshakes_say_what_went_wrong() {
    let error = connect("http://localhost:1/", ClientConfig::default())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("moqt://"), "{error}");
    assert!(error.to_string().contains("https://"), "{error}");

    // A server whose certificate the client does verify (and cannot: self-signed).
    let certificate = Certificate::self_signed(&["localhost".into()]).unwrap();
    let server = Server::bind(ServerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        certificate,
        SessionConfig::default(),
    ))
    .await
    .unwrap();
    let url = format!("moqt://localhost:{}/", server.local_addr().port());
    let error = tokio::time::timeout(PATIENCE, connect(&url, ClientConfig::default()))
        .await
        .expect("the handshake fails rather than hangs")
        .unwrap_err();
    assert!(error.to_string().contains("handshake"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_fingerprint_accepts_that_certificate_and_refuses_any_other() {
    let certificate = Certificate::self_signed(&["localhost".into()]).unwrap();
    let pinned = certificate.fingerprint();
    let mut server = Server::bind(ServerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        certificate,
        SessionConfig::default(),
    ))
    .await
    .unwrap();
    let port = server.local_addr().port();
    let accepting = tokio::spawn(async move {
        let mut sessions = Vec::new();
        while let Some(request) = server.accept().await {
            sessions.push(request.accept());
        }
    });
    for scheme in ["moqt", "https"] {
        let url = format!("{scheme}://localhost:{port}/");
        let session = tokio::time::timeout(
            PATIENCE,
            connect(&url, ClientConfig::default().with_fingerprint(pinned)),
        )
        .await
        .expect("no hang")
        .expect("the pinned certificate is accepted");
        assert!(!session.is_closed());

        let other = Certificate::self_signed(&["localhost".into()])
            .unwrap()
            .fingerprint();
        let error = tokio::time::timeout(
            PATIENCE,
            connect(&url, ClientConfig::default().with_fingerprint(other)),
        )
        .await
        .expect("no hang")
        .unwrap_err();
        assert!(
            matches!(error, moqx_tokio::Error::Connect(ConnectError::CertificateRejected { expected, presented })
                if expected == other && presented == Some(pinned)),
            "{error}"
        );
        assert!(error.to_string().contains("not the pinned"), "{error}");
    }
    accepting.abort();
}

/// Closing a session puts the close on the wire before `closed()` resolves: a process that
/// exits right after does not leave its peer waiting for an idle timeout.
///
/// Regression: the machine stopped watching its handle after acting on a GOAWAY, so a close
/// requested after one (a relay draining on shutdown) was never seen, and this timed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_closed_by_the_server_ends_the_client_promptly() {
    for scheme in ["moqt", "https"] {
        let certificate = Certificate::self_signed(&["localhost".into()]).unwrap();
        let mut server = Server::bind(ServerConfig::new(
            "127.0.0.1:0".parse().unwrap(),
            certificate,
            SessionConfig::default(),
        ))
        .await
        .unwrap();
        let port = server.local_addr().port();
        let accepting = tokio::spawn(async move {
            let session = server.accept().await.expect("a client").accept();
            (server, session)
        });
        let client = connect(
            &format!("{scheme}://localhost:{port}/"),
            ClientConfig::default().with_insecure_skip_verify(),
        )
        .await
        .unwrap();
        let (_server, session) = accepting.await.unwrap();
        // As a relay shutting down does: GOAWAY first, a drain, then the close.
        session.goaway("");
        tokio::time::sleep(Duration::from_millis(100)).await;
        session.close(moqx_net::Error::Cancel);
        let ended = tokio::time::timeout(PATIENCE, session.closed()).await;
        assert_eq!(
            ended.ok(),
            Some(moqx_net::Error::Cancel),
            "{scheme}: the server's end"
        );
        // Far below the 30 s idle timeout the client would otherwise end on; no tighter,
        // as a loaded machine may take seconds to run the client's driver.
        let seen = tokio::time::timeout(Duration::from_secs(10), client.closed()).await;
        assert_eq!(
            seen.ok(),
            Some(moqx_net::Error::Cancel),
            "{scheme}: the client sees it"
        );
    }
}

/// A server that asks every client to prove its address (QUIC Retry before any state)
/// still serves both bindings: the tokio driver sends the endpoint's stateless packets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_complete_a_retry_on_both_bindings() {
    let certificate = Certificate::self_signed(&["localhost".into()]).unwrap();
    let mut config = ServerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        certificate,
        SessionConfig::default(),
    );
    config.admission.retry_above = 0;
    let mut server = Server::bind(config).await.unwrap();
    let port = server.local_addr().port();
    tokio::spawn(async move {
        while let Some(request) = server.accept().await {
            drop(request.accept());
        }
    });
    for scheme in ["moqt", "https"] {
        let client = connect(
            &format!("{scheme}://localhost:{port}/"),
            ClientConfig::default().with_insecure_skip_verify(),
        )
        .await
        .unwrap_or_else(|error| panic!("{scheme}: {error}"));
        tokio::time::timeout(PATIENCE, client.established())
            .await
            .expect("within the patience")
            .unwrap_or_else(|error| panic!("{scheme}: {error}"));
    }
}
