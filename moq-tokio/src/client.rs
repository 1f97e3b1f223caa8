//! Connecting as a client.

use std::net::SocketAddr;

use moq_net::session::{self, Session, SessionConfig};
use moq_runtime::endpoint::Endpoint;
use moq_runtime::udp::{UdpConfig, UdpSocket};

use crate::driver;
use crate::quic_config::{Limits, quiche_config};
use crate::{Error, TokioRuntime};

/// How a client connects.
#[derive(Debug, Clone, Default)]
pub struct ClientConfig {
    /// What the session serves and fills.
    pub session: SessionConfig,
    /// Skip verifying the server's certificate. For loopback tests only: anyone can then
    /// impersonate the server.
    pub insecure_skip_verify: bool,
    /// The client socket's setup (GSO, GRO, buffers).
    pub udp: UdpConfig,
}

/// Connects to `url` and starts a session on the current tokio runtime.
///
/// `moqt://host:port/path` is raw QUIC (ALPN `moq-lite-05`); the path (and query) go in
/// SETUP. `https://` (WebTransport) is not served by this driver yet.
pub async fn connect(url: &str, config: ClientConfig) -> Result<Session, Error> {
    let bad = |problem: &str| Error::Url {
        url: url.to_owned(),
        problem: problem.to_owned(),
    };
    let parsed = url::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
    match parsed.scheme() {
        "moqt" => {}
        "https" => {
            return Err(bad(
                "WebTransport (https://) is not supported by this driver yet; use moqt://",
            ));
        }
        _ => return Err(bad("the scheme must be moqt://")),
    }
    let host = parsed.host_str().ok_or_else(|| bad("no host"))?.to_owned();
    let port = parsed.port().ok_or_else(|| bad("no port"))?;
    let peer: SocketAddr = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(Error::io(format!("resolving {host}")))?
        .next()
        .ok_or_else(|| bad("the host has no address"))?;
    let local: SocketAddr = if peer.is_ipv4() {
        "0.0.0.0:0".parse().expect("a valid address")
    } else {
        "[::]:0".parse().expect("a valid address")
    };
    let quiche = quiche_config(None, !config.insecure_skip_verify, &Limits::default())?;
    let socket = UdpSocket::bind(local, &UdpConfig::default())
        .map_err(Error::io("binding a client socket"))?;
    let local = socket
        .local_addr()
        .map_err(Error::io("reading the bound address"))?;
    let endpoint = Endpoint::new(quiche, local, 0, 1, std::time::Instant::now());
    let endpoint = driver::start(socket, endpoint, None)?;
    let connection = endpoint.connect(&host, peer).await?;
    let mut path = parsed.path().to_owned();
    if let Some(query) = parsed.query() {
        path.push('?');
        path.push_str(query);
    }
    let session_config = SessionConfig {
        path: Some(path),
        ..config.session
    };
    // The endpoint task keeps running while the connection lives.
    drop(endpoint);
    Ok(session::connect(
        TokioRuntime::current(),
        connection.session(),
        session_config,
    ))
}
