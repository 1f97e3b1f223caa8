//! Version negotiation over real sockets: a raw QUIC server chooses by its own order of
//! preference, a WebTransport server by the client's, and a client offering only versions
//! the server does not accept is refused with an error that says so, on both bindings,
//! while the server goes on serving.

use std::time::Duration;

use moqx_net::coding::Version;
use moqx_net::session::SessionConfig;
use moqx_runtime::tls::Certificate;
use moqx_tokio::{ClientConfig, Server, ServerConfig, connect};

/// A bound on how long any step may take before the test fails instead of hanging.
const PATIENCE: Duration = Duration::from_secs(10);

/// A server accepting `versions` (in that order), accepting every request; its port and
/// the versions of the sessions it accepted, as they are accepted.
async fn server(versions: &[Version]) -> (u16, tokio::sync::mpsc::UnboundedReceiver<Version>) {
    let mut server = Server::bind({
        let mut server_config = ServerConfig::new(
            "127.0.0.1:0".parse().unwrap(),
            Certificate::self_signed(&["localhost".into()]).unwrap(),
            SessionConfig::default(),
        );
        server_config.versions = versions.to_vec();
        server_config
    })
    .await
    .unwrap();
    let port = server.local_addr().port();
    let (accepted, versions) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut sessions = Vec::new();
        while let Some(request) = server.accept().await {
            let _ = accepted.send(request.version());
            sessions.push(request.accept());
        }
    });
    (port, versions)
}

/// A client offering `versions`, not verifying the server.
fn offering(versions: &[Version]) -> ClientConfig {
    ClientConfig::default()
        .with_versions(versions.to_vec())
        .with_insecure_skip_verify()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_quic_takes_the_servers_preference_and_webtransport_the_clients() {
    let (port, mut accepted) = server(&Version::DEFAULT_OFFER).await;
    let client = [Version::Lite03, Version::Lite05];
    let quic = tokio::time::timeout(
        PATIENCE,
        connect(&format!("moqt://localhost:{port}/"), offering(&client)),
    )
    .await
    .expect("no hang")
    .expect("connects");
    assert_eq!(quic.version(), Version::Lite05, "the server's first choice");
    assert_eq!(accepted.recv().await, Some(Version::Lite05));

    let webtransport = tokio::time::timeout(
        PATIENCE,
        connect(&format!("https://localhost:{port}/"), offering(&client)),
    )
    .await
    .expect("no hang")
    .expect("connects");
    assert_eq!(
        webtransport.version(),
        Version::Lite03,
        "the client's first choice"
    );
    assert_eq!(accepted.recv().await, Some(Version::Lite03));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_offering_only_an_unaccepted_version_is_refused_clearly_on_both_bindings() {
    // -06-wip is a work in progress: accepted only where configured, and not here.
    let (port, mut accepted) = server(&Version::DEFAULT_OFFER).await;
    for scheme in ["moqt", "https"] {
        let url = format!("{scheme}://localhost:{port}/");
        let error = tokio::time::timeout(PATIENCE, connect(&url, offering(&[Version::Lite06Wip])))
            .await
            .expect("refused rather than hanging")
            .expect_err("nothing in common");
        let text = error.to_string();
        let says_why = match scheme {
            // The TLS handshake fails with alert 120 (no_application_protocol).
            "moqt" => {
                text.contains("no protocol version in common")
                    && text.contains("offered moq-lite-06-wip")
                    && text.contains("alert 120")
            }
            // The CONNECT is answered 400.
            _ => text.contains("400"),
        };
        assert!(says_why, "{scheme}: {text}");
    }
    // The server goes on serving a client it has a version in common with.
    let session = tokio::time::timeout(
        PATIENCE,
        connect(
            &format!("moqt://localhost:{port}/"),
            offering(&[Version::Lite06Wip, Version::Lite04]),
        ),
    )
    .await
    .expect("no hang")
    .expect("connects");
    assert_eq!(session.version(), Version::Lite04);
    assert_eq!(
        accepted.recv().await,
        Some(Version::Lite04),
        "no refused one was accepted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_moq_transport_draft_establishes_over_raw_quic_and_webtransport() {
    let (port, mut accepted) = server(&Version::MOQT).await;
    for version in Version::MOQT {
        // Raw QUIC by ALPN (14's is `moq-00`, confirmed in SETUP); WebTransport by
        // `wt-available-protocols` (14 names none: the server takes it from no name).
        for scheme in ["moqt", "https"] {
            let url = format!("{scheme}://localhost:{port}/room");
            let session = tokio::time::timeout(PATIENCE, connect(&url, offering(&[version])))
                .await
                .expect("no hang")
                .unwrap_or_else(|error| panic!("{version} over {scheme}: {error}"));
            assert_eq!(session.version(), version, "{scheme}");
            assert_eq!(accepted.recv().await, Some(version), "{scheme}");
            tokio::time::timeout(PATIENCE, session.established())
                .await
                .expect("no hang")
                .unwrap_or_else(|error| panic!("{version} over {scheme}: SETUP: {error}"));
            session.close(moqx_net::Error::Cancel);
        }
    }
}
