//! Connecting as a client, over either binding.

use std::net::SocketAddr;
use std::time::Duration;
use tracing::Instrument;

use moq_net::session::{self, Session, SessionConfig};
use moq_runtime::binding::BindingSession;
use moq_runtime::endpoint::Endpoint;
use moq_runtime::tls::Fingerprint;
use moq_runtime::udp::{UdpConfig, UdpSocket};
use moq_runtime::webtransport::ClientHandshake;

use crate::driver;
use crate::poll::drive;
use crate::quic_config::{Limits, RAW_QUIC, WEBTRANSPORT, quiche_config};
use crate::{Error, TokioRuntime};

/// How a client connects.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// What the session serves and fills.
    pub session: SessionConfig,
    /// Skip verifying the server's certificate. For loopback tests only: anyone can then
    /// impersonate the server.
    pub insecure_skip_verify: bool,
    /// Accept exactly the server certificate with this SHA-256 fingerprint (of its DER),
    /// instead of verifying it against trusted roots: how a client trusts a relay's
    /// self-signed certificate.
    pub fingerprint: Option<Fingerprint>,
    /// The client socket's setup (GSO, GRO, buffers).
    pub udp: UdpConfig,
    /// How long the QUIC handshake and, for WebTransport, the HTTP/3 CONNECT may take.
    pub handshake_timeout: Duration,
}

impl Default for ClientConfig {
    /// Verifying the server, 10 s to connect.
    fn default() -> Self {
        Self {
            session: SessionConfig::default(),
            insecure_skip_verify: false,
            fingerprint: None,
            udp: UdpConfig::default(),
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// Connects to `url` and starts a session on the current tokio runtime.
///
/// - `moqt://host:port/path` (or `moql://`) is raw QUIC (ALPN `moq-lite-05`); the path
///   and query go in SETUP.
/// - `https://host:port/path` is WebTransport over HTTP/3 (ALPN `h3`): the path and query
///   go in the extended CONNECT, offering `moq-lite-05` in `wt-available-protocols`.
pub async fn connect(url: &str, config: ClientConfig) -> Result<Session, Error> {
    // The connection and its session log inside this span: which relay.
    let span = tracing::debug_span!("moq_connection", %url);
    let result = connect_in_span(url, config).instrument(span).await;
    if let Err(error) = &result {
        tracing::debug!(%url, %error, "connecting failed");
    }
    result
}

async fn connect_in_span(url: &str, config: ClientConfig) -> Result<Session, Error> {
    let bad = |problem: &str| Error::Url {
        url: url.to_owned(),
        problem: problem.to_owned(),
    };
    let parsed = url::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
    let webtransport = match parsed.scheme() {
        "moqt" | "moql" => false,
        "https" => true,
        _ => {
            return Err(bad(
                "the scheme must be moqt:// (raw QUIC) or https:// (WebTransport)",
            ));
        }
    };
    let host = parsed.host_str().ok_or_else(|| bad("no host"))?.to_owned();
    let port = parsed
        .port()
        .or(webtransport.then_some(443))
        .ok_or_else(|| bad("no port"))?;
    let peer: SocketAddr = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(Error::io(format!("resolving {host}")))?
        .next()
        .ok_or_else(|| bad("the host has no address"))?;
    let local: SocketAddr = if peer.is_ipv4() {
        SocketAddr::from(([0, 0, 0, 0], 0))
    } else {
        SocketAddr::from(([0u16; 8], 0))
    };
    let alpn = if webtransport { WEBTRANSPORT } else { RAW_QUIC };
    tracing::debug!(%peer, alpn = %String::from_utf8_lossy(alpn), "connecting");
    // A pinned fingerprint replaces root verification; it is checked after the handshake.
    let verify = !config.insecure_skip_verify && config.fingerprint.is_none();
    let limits = Limits::default();
    let quiche = quiche_config(None, verify, &limits, &[alpn])?;
    let socket =
        UdpSocket::bind(local, &config.udp).map_err(Error::io("binding a client socket"))?;
    let local = socket
        .local_addr()
        .map_err(Error::io("reading the bound address"))?;
    let mut endpoint = Endpoint::new(quiche, local, 0, 1, std::time::Instant::now());
    // A client keeps a quiet session alive (a chat member in a quiet room): a PING after a
    // third of the idle timeout without sending, well before the server's idle timer.
    endpoint.set_keep_alive(Some(std::time::Duration::from_millis(
        limits.idle_timeout_ms / 3,
    )));
    // One connection: one datagram (or GRO train) per receive call is enough.
    let endpoint = driver::start(socket, endpoint, None, 1)?;
    let timed_out = || {
        Error::Handshake(format!(
            "no answer from {peer} within {:?}",
            config.handshake_timeout
        ))
    };
    let connection = tokio::time::timeout(config.handshake_timeout, endpoint.connect(&host, peer))
        .await
        .map_err(|_| timed_out())??;
    // The endpoint task keeps running while the connection lives.
    drop(endpoint);
    if let Some(expected) = config.fingerprint {
        let presented = connection
            .peer_certificate()
            .map(|der| Fingerprint::of(&der));
        if presented != Some(expected) {
            tracing::debug!(%expected, ?presented, "the relay's certificate is not the pinned one");
            connection.close(0, "certificate fingerprint mismatch");
            return Err(Error::CertificateRejected {
                expected,
                presented,
            });
        }
    }

    let mut path = parsed.path().to_owned();
    if let Some(query) = parsed.query() {
        path.push('?');
        path.push_str(query);
    }
    let version = config.session.version;
    let (transport, session_config) = if webtransport {
        let mut handshake = ClientHandshake::new(
            connection.session(),
            parsed.clone(),
            vec![version.alpn().to_owned()],
        );
        let session = tokio::time::timeout(
            config.handshake_timeout,
            drive(|waiter| handshake.poll(waiter)),
        )
        .await
        .map_err(|_| {
            connection.close(0x10c, "WebTransport handshake timed out");
            timed_out()
        })??;
        // The path travelled in the CONNECT; SETUP carries none.
        let session_config = SessionConfig {
            path: None,
            ..config.session
        };
        (BindingSession::from(session), session_config)
    } else {
        let session_config = SessionConfig {
            path: Some(path),
            ..config.session
        };
        (BindingSession::from(connection.session()), session_config)
    };
    Ok(session::connect(
        TokioRuntime::current(),
        transport,
        session_config,
    ))
}
