//! Connecting as a client, over either binding: the URL, the certificate pin and the
//! WebTransport handshake are `moqx_runtime::client`'s; this file resolves the host, binds
//! a socket, and waits.

use tracing::Instrument;

use std::time::Instant;

use moqx_net::coding::Version;
use moqx_net::model::Origin;
use moqx_net::session::Session;
use moqx_runtime::client::{ClientConfig, Connecting, Target};
use moqx_runtime::tls::Fingerprint;
use moqx_runtime::udp::UdpSocket;

use crate::driver;
use crate::{Error, TokioRuntime};

/// A client, built from its configuration: what its sessions serve and fill, the
/// server's certificate, the versions offered; [`connect`](Self::connect) as often as
/// needed.
///
/// ```no_run
/// # async fn example() -> Result<(), moqx_tokio::Error> {
/// use moqx_tokio::Client;
/// use moqx_tokio::model::Origin;
///
/// let announced = Origin::new();
/// let session = Client::new()
///     .with_subscriber(&announced)
///     .connect("moqt://relay.example:4443/room")
///     .await?;
/// # drop(session);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Client {
    config: ClientConfig,
}

impl Client {
    /// A client with the default configuration: verifying the server's certificate,
    /// offering the released versions, serving and filling nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// A client with `config`.
    pub fn with_config(config: ClientConfig) -> Self {
        Self { config }
    }

    /// Offers the broadcasts of `origin` to the server.
    pub fn with_publisher(mut self, origin: &Origin) -> Self {
        self.config = self.config.with_publisher(origin);
        self
    }

    /// Publishes the server's broadcasts into `origin`.
    pub fn with_subscriber(mut self, origin: &Origin) -> Self {
        self.config = self.config.with_subscriber(origin);
        self
    }

    /// Trusts exactly the server certificate with this fingerprint (a relay's
    /// self-signed one).
    pub fn with_fingerprint(mut self, fingerprint: Fingerprint) -> Self {
        self.config = self.config.with_fingerprint(fingerprint);
        self
    }

    /// Offers `versions`, in order of preference.
    pub fn with_versions(mut self, versions: impl IntoIterator<Item = Version>) -> Self {
        self.config = self.config.with_versions(versions);
        self
    }

    /// The configuration [`connect`](Self::connect) uses.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Connects to `url` (see [`connect`](crate::connect)): resolves once the session is
    /// established.
    pub async fn connect(&self, url: &str) -> Result<Session, Error> {
        connect(url, self.config.clone()).await
    }
}

/// Connects to `url` and starts a session on the current tokio runtime; resolves once the
/// session is established (the server answered SETUP; before -05, once the connection is
/// up). A server that refuses the client (a missing or rejected token) is
/// [`ConnectError::Refused`](moqx_runtime::client::ConnectError::Refused), naming its code, on either binding.
///
/// - `moqt://host:port/path` (or `moql://`) is raw QUIC (ALPN `moq-lite-05`); the path
///   and query go in SETUP.
/// - `https://host:port/path` is WebTransport over HTTP/3 (ALPN `h3`): the path and query
///   go in the extended CONNECT, offering `moq-lite-05` in `wt-available-protocols`.
pub async fn connect(url: &str, config: ClientConfig) -> Result<Session, Error> {
    // The connection and its session log inside this span: which relay.
    let redacted = moqx_net::redact::Redacted(url);
    let span = tracing::debug_span!("moq_connection", url = %redacted);
    let result = connect_in_span(url, config).instrument(span).await;
    if let Err(error) = &result {
        tracing::debug!(url = %redacted, %error, "connecting failed");
    }
    result
}

/// Connects to `url` as [`connect`] does, but starts no session: ready with the connection
/// (its transport: streams, datagrams, close) and the session configuration the
/// negotiation chose (the version, and the path where SETUP carries it). For protocol
/// tools that write and read the protocol's streams themselves, such as an interop test
/// client. Raw QUIC and WebTransport only (`moqt://`, `https://`).
pub async fn connect_transport(
    url: &str,
    config: ClientConfig,
) -> Result<
    (
        moqx_runtime::binding::BindingSession,
        moqx_net::session::SessionConfig,
    ),
    Error,
> {
    let target = Target::parse(url)?;
    if target.binding.is_qmux() {
        return Err(moqx_runtime::client::ConnectError::Url {
            url: moqx_net::redact::Redacted(url).to_string(),
            problem: "a connection without a session is raw QUIC or WebTransport only (moqt://, https://)".to_owned(),
        }
        .into());
    }
    let mut connecting = open(target, config).await?;
    Ok(moqx_kio::wait(|waiter| connecting.poll_transport(waiter)).await?)
}

async fn connect_in_span(url: &str, config: ClientConfig) -> Result<Session, Error> {
    let target = Target::parse(url)?;
    if target.binding.is_qmux() {
        return crate::qmux::client::connect(target, config).await;
    }
    let mut connecting = open(target, config).await?;
    Ok(moqx_kio::wait(|waiter| connecting.poll(waiter)).await?)
}

/// Resolves `target`, binds a client socket, starts its endpoint and opens the connection:
/// what a connection needs before its handshake, with a session on it or not.
async fn open(target: Target, config: ClientConfig) -> Result<Connecting<TokioRuntime>, Error> {
    let peer = target.peer(
        tokio::net::lookup_host((target.host.as_str(), target.port))
            .await
            .map_err(Error::io(format!("resolving {}", target.host)))?,
    )?;
    let local = Target::local_address(peer);
    tracing::debug!(%peer, binding = %target.binding, "connecting");
    let socket =
        UdpSocket::bind(local, &config.udp).map_err(Error::io("binding a client socket"))?;
    let local = socket
        .local_addr()
        .map_err(Error::io("reading the bound address"))?;
    let endpoint = config.endpoint(&target, local, Instant::now())?;
    // One connection: one datagram (or GRO train) per receive call is enough.
    let (endpoint, _task) = driver::start(socket, endpoint, None, 1)?;
    let connection = endpoint.connect(&target.host, peer).await?;
    // The endpoint task keeps running while the connection lives.
    drop(endpoint);
    Ok(Connecting::new(
        TokioRuntime::current(),
        connection,
        peer,
        target,
        config,
    ))
}
