//! The client side every driver shares: a URL read into what to connect to, and an
//! established QUIC connection turned into a running session.
//!
//! A driver parses the URL ([`Target::parse`]), resolves its host (the one step that
//! needs its I/O), binds a socket, makes the connection's endpoint with
//! [`ClientConfig::endpoint`] and opens the connection in it, then polls a [`Connecting`]
//! until it is ready: the QUIC handshake within its deadline, then a [`ClientSetup`] (the
//! pinned certificate checked, for WebTransport the CONNECT within its deadline, then the
//! moq-lite session started).
//!
//! - `moqt://host:port/path` (or `moql://`) is raw QUIC, offering each version of
//!   [`ClientConfig::versions`] as an ALPN (`moq-lite-05`, …; the server picks); the path
//!   and query go in SETUP (-05 on; older versions carry none).
//! - `https://host:port/path` is WebTransport over HTTP/3 (ALPN `h3`; port 443 unless
//!   given): the path and query go in the extended CONNECT, offering the versions in
//!   `wt-available-protocols` (the server picks the first it has).
//! - `ws://host:port/path` and `wss://…` are QMux over a WebSocket (port 80 or 443
//!   unless given), offering each version over each QMux draft as a subprotocol
//!   (`qmux-01.moq-lite-05`, [`crate::qmux`]); the path and query go in the upgrade
//!   request.
//! - `tls://host:port/path` is QMux over TLS over TCP, the same names offered as ALPNs;
//!   `tcp://host:port/path` is QMux over plain TCP (trusted networks only), the versions
//!   offered in the QMux transport parameters. The path and query go in SETUP.

use std::net::SocketAddr;
use std::task::Poll;
use std::time::Duration;

use moqx_kio::Waiter;
use moqx_net::coding::Version;
use moqx_net::model::Origin;
use moqx_net::runtime::{Deadline, Runtime};
use moqx_net::session::{self, Session, SessionConfig};
use moqx_net::transport::Session as _;

use crate::binding::{Binding, BindingSession};
use crate::quic::QuicConnection;
use crate::quiche_config::{ConfigError, QuicLimits, client_config};
use crate::tls::Fingerprint;
use crate::udp::UdpConfig;
use crate::webtransport::{ClientHandshake, H3_REQUEST_CANCELLED, WebTransportError};

mod connecting;

pub use connecting::Connecting;

/// Why a client could not connect, said so that a user can act on it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL is not one a client connects to.
    #[error("bad URL {url:?}: {problem}")]
    Url {
        /// The URL.
        url: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The QUIC configuration could not be built.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// QUIC or TLS refused: a handshake failure, a certificate rejected, no common ALPN.
    #[error("QUIC: {0}")]
    Quic(String),
    /// The connection closed, or did not complete, before the handshakes did.
    #[error("the handshake did not complete: {0}")]
    Handshake(String),
    /// The WebTransport handshake failed: the server refused the CONNECT (its HTTP
    /// status), does not support WebTransport, or selected no version we offered.
    #[error("WebTransport: {0}")]
    WebTransport(#[from] WebTransportError),
    /// The server speaks none of the offered versions: on raw QUIC it refuses the TLS
    /// handshake (alert 120, no_application_protocol), on WebTransport its CONNECT
    /// response (400) or the protocol it names says so.
    #[error("no protocol version in common with the server: offered {}; {detail}", offered.iter().map(|v| v.name()).collect::<Vec<_>>().join(", "))]
    NoCommonVersion {
        /// What the client offered.
        offered: Vec<Version>,
        /// What the server said.
        detail: String,
    },
    /// The server ended the session before it was established: it refused the client
    /// (a missing or rejected token is `unauthorized`, code 6) or failed.
    #[error("the server refused the session: {error} (code {code})", code = .error.to_code())]
    Refused {
        /// The code the session ended with.
        error: moqx_net::Error,
    },
    /// The server's certificate is not the pinned one.
    #[error("the server's certificate has fingerprint {}, not the pinned {expected}", .presented.map_or_else(|| "(none)".to_owned(), |f| f.to_string()))]
    CertificateRejected {
        /// The pinned fingerprint.
        expected: Fingerprint,
        /// The presented certificate's, if it presented one.
        presented: Option<Fingerprint>,
    },
}

impl ConnectError {
    /// Why `connection` closed before its QUIC handshake completed: a refused ALPN (no
    /// version in common, to be named with [`offered`](Self::offered)) or the close's
    /// reason.
    pub fn handshake_failed(connection: &QuicConnection) -> Self {
        match connection.refused_alpn() {
            true => Self::NoCommonVersion {
                offered: Vec::new(),
                detail: "the server refused the TLS handshake (alert 120, no_application_protocol)"
                    .to_owned(),
            },
            false => Self::Handshake(connection.close_reason()),
        }
    }

    /// This error, naming `versions` as what was offered if it is a
    /// [`NoCommonVersion`](Self::NoCommonVersion) that does not say yet.
    pub fn offered(self, versions: &[Version]) -> Self {
        match self {
            Self::NoCommonVersion { offered, detail } if offered.is_empty() => {
                Self::NoCommonVersion {
                    offered: versions.to_vec(),
                    detail,
                }
            }
            other => other,
        }
    }
}

/// What a URL says to connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The binding its scheme names.
    pub binding: Binding,
    /// The host to resolve, and the TLS server name.
    pub host: String,
    /// The port (UDP for QUIC, TCP for the QMux bindings).
    pub port: u16,
    /// The whole URL (a WebTransport CONNECT sends it).
    pub url: url::Url,
}

impl Target {
    /// The address to connect to among `resolved` (the host's addresses, in the
    /// resolver's order: the first), or why there is none.
    pub fn peer(
        &self,
        resolved: impl IntoIterator<Item = SocketAddr>,
    ) -> Result<SocketAddr, ConnectError> {
        resolved
            .into_iter()
            .next()
            .ok_or_else(|| ConnectError::Url {
                url: self.url.to_string(),
                problem: "the host has no address".to_owned(),
            })
    }

    /// Where a client socket for `peer` binds: the unspecified address of its family, any
    /// port.
    pub fn local_address(peer: SocketAddr) -> SocketAddr {
        if peer.is_ipv4() {
            SocketAddr::from(([0, 0, 0, 0], 0))
        } else {
            SocketAddr::from(([0u16; 8], 0))
        }
    }

    /// Reads `url`: its scheme picks the binding, and it must name a host and (raw QUIC)
    /// a port.
    pub fn parse(url: &str) -> Result<Self, ConnectError> {
        let bad = |problem: &str| ConnectError::Url {
            url: url.to_owned(),
            problem: problem.to_owned(),
        };
        let parsed = url::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
        let binding = match parsed.scheme() {
            "moqt" | "moql" => Binding::Quic,
            "https" => Binding::WebTransport,
            "ws" | "wss" => Binding::WebSocket,
            "tls" => Binding::Tls,
            "tcp" => Binding::Tcp,
            _ => {
                return Err(bad(
                    "the scheme must be moqt:// (raw QUIC), https:// (WebTransport), ws:// or wss:// (WebSocket), tls:// or tcp://",
                ));
            }
        };
        let host = parsed.host_str().ok_or_else(|| bad("no host"))?;
        // A bracketed IPv6 literal resolves (and names the server) without its brackets.
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = parsed
            .port_or_known_default()
            .ok_or_else(|| bad("no port"))?;
        Ok(Self {
            binding,
            host,
            port,
            url: parsed,
        })
    }

    /// Whether the carrier is encrypted by TLS of its own over TCP (`wss://`, `tls://`);
    /// the QUIC bindings always are, by QUIC.
    pub fn tls_over_tcp(&self) -> bool {
        matches!(self.url.scheme(), "wss" | "tls")
    }

    /// The path and query, as SETUP carries them on raw QUIC (`/room?jwt=…`).
    pub fn path(&self) -> String {
        match self.url.query() {
            Some(query) => format!("{}?{query}", self.url.path()),
            None => self.url.path().to_owned(),
        }
    }

    /// The quiche configuration to connect to this target with `config`.
    pub fn quiche_config(&self, config: &ClientConfig) -> Result<quiche::Config, ConnectError> {
        // A pinned fingerprint replaces root verification; it is checked after the
        // handshake.
        let verify = !config.insecure_skip_verify && config.fingerprint.is_none();
        Ok(client_config(
            self.binding,
            &config.versions,
            verify,
            &config.limits,
        )?)
    }
}

/// How a client connects, on any driver.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClientConfig {
    /// What the session serves and fills. Its `version` is replaced by the negotiated one.
    pub session: SessionConfig,
    /// The moq-lite versions offered, in order of preference (one, to pin it).
    pub versions: Vec<Version>,
    /// Skip verifying the server's certificate. For loopback tests only: anyone can then
    /// impersonate the server.
    pub insecure_skip_verify: bool,
    /// Accept exactly the server certificate with this SHA-256 fingerprint (of its DER),
    /// instead of verifying it against trusted roots: how a client trusts a relay's
    /// self-signed certificate.
    pub fingerprint: Option<Fingerprint>,
    /// How long the QUIC handshake and, for WebTransport, the HTTP/3 CONNECT may take.
    pub handshake_timeout: Duration,
    /// The client socket's setup (GSO, GRO, buffers).
    pub udp: UdpConfig,
    /// Its QUIC limits.
    pub limits: QuicLimits,
    /// How often the connection switches to another of the connection IDs the server gave
    /// it, so that an observer on the path cannot follow it by its ID (RFC 9000 §9.5);
    /// `None` (the default): only when quiche must.
    pub cid_rotation: Option<Duration>,
}

impl ClientConfig {
    /// Offers the broadcasts of `origin` to the server (the session's
    /// [`publish`](SessionConfig::publish)).
    pub fn with_publisher(mut self, origin: &Origin) -> Self {
        self.session.publish = Some(origin.clone());
        self
    }

    /// Publishes the server's broadcasts into `origin` (the session's
    /// [`subscribe`](SessionConfig::subscribe)).
    pub fn with_subscriber(mut self, origin: &Origin) -> Self {
        self.session.subscribe = Some(origin.clone());
        self
    }

    /// Starts sessions with `session` (what they serve and fill, their bounds).
    pub fn with_session(mut self, session: SessionConfig) -> Self {
        self.session = session;
        self
    }

    /// Trusts exactly the server certificate with this fingerprint
    /// ([`fingerprint`](Self::fingerprint)): how a client trusts a relay's self-signed
    /// certificate.
    pub fn with_fingerprint(mut self, fingerprint: Fingerprint) -> Self {
        self.fingerprint = Some(fingerprint);
        self
    }

    /// Offers `versions`, in order of preference ([`versions`](Self::versions)).
    pub fn with_versions(mut self, versions: impl IntoIterator<Item = Version>) -> Self {
        self.versions = versions.into_iter().collect();
        self
    }

    /// Gives the handshakes `timeout` ([`handshake_timeout`](Self::handshake_timeout)).
    pub fn with_handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    /// Skips verifying the server's certificate
    /// ([`insecure_skip_verify`](Self::insecure_skip_verify)): loopback tests only.
    pub fn with_insecure_skip_verify(mut self) -> Self {
        self.insecure_skip_verify = true;
        self
    }

    /// How often a client connection that sent nothing sends a PING: a third of its idle
    /// timeout, so that a quiet session (a chat member in a quiet room) stays alive well
    /// before the server's idle timer.
    pub fn keep_alive(&self) -> Duration {
        self.limits.idle_timeout / 3
    }
}

impl Default for ClientConfig {
    /// Offering the released versions (moq-lite-05, -04, -03), verifying the server, 10 s
    /// to connect, GSO and GRO on, the default QUIC limits.
    fn default() -> Self {
        Self {
            session: SessionConfig::default(),
            versions: Version::DEFAULT_OFFER.to_vec(),
            insecure_skip_verify: false,
            fingerprint: None,
            handshake_timeout: Duration::from_secs(10),
            udp: UdpConfig::default(),
            limits: QuicLimits::default(),
            cid_rotation: None,
        }
    }
}

/// From an established QUIC connection to a running session: the certificate pin, the
/// WebTransport CONNECT (within the handshake deadline), then the moq-lite session.
pub struct ClientSetup<R: Runtime> {
    runtime: R,
    /// `None` once done.
    connection: Option<QuicConnection>,
    /// A QMux carrier's session and the version its negotiation settled, instead of a
    /// QUIC connection; `None` once done.
    qmux: Option<(BindingSession, Version)>,
    session: SessionConfig,
    /// What was offered, in order of preference.
    versions: Vec<Version>,
    path: String,
    webtransport: Option<(Box<ClientHandshake>, R::Deadline)>,
    /// How long the server may take to answer SETUP.
    setup_timeout: Duration,
    /// The session, until the server's SETUP answers it.
    establishing: Option<(Session, R::Deadline)>,
}

impl<R> ClientSetup<R>
where
    R: Runtime<Transport = BindingSession>,
{
    /// Starts on `connection` (its QUIC handshake completed) to `target`, on `runtime`.
    /// A pinned certificate that does not match closes the connection here.
    pub fn new(
        runtime: R,
        connection: QuicConnection,
        target: &Target,
        config: &ClientConfig,
    ) -> Result<Self, ConnectError> {
        if let Some(expected) = config.fingerprint {
            let presented = connection
                .peer_certificate()
                .map(|der| Fingerprint::of(&der));
            if presented != Some(expected) {
                tracing::debug!(%expected, ?presented, "the server's certificate is not the pinned one");
                connection.close(0, "certificate fingerprint mismatch");
                return Err(ConnectError::CertificateRejected {
                    expected,
                    presented,
                });
            }
        }
        let webtransport = (target.binding == Binding::WebTransport).then(|| {
            let handshake = ClientHandshake::new(
                connection.session(),
                target.url.clone(),
                config
                    .versions
                    .iter()
                    .filter_map(|version| version.webtransport_protocol())
                    .map(str::to_owned)
                    .collect(),
            );
            let mut deadline = runtime.deadline();
            deadline.set(Some(runtime.now() + config.handshake_timeout));
            (Box::new(handshake), deadline)
        });
        Ok(Self {
            runtime,
            connection: Some(connection),
            qmux: None,
            session: config.session.clone(),
            versions: config.versions.clone(),
            path: target.path(),
            webtransport,
            setup_timeout: config.handshake_timeout,
            establishing: None,
        })
    }

    /// Starts on a QMux carrier's `session` (`binding`: WebSocket, TLS or TCP), whose
    /// negotiation settled `version`, to `target`, on `runtime`.
    pub fn qmux(
        runtime: R,
        session: moqx_qmux::QmuxSession,
        binding: Binding,
        version: Version,
        target: &Target,
        config: &ClientConfig,
    ) -> Self {
        Self {
            runtime,
            connection: None,
            qmux: Some((BindingSession::Qmux { session, binding }, version)),
            session: config.session.clone(),
            versions: config.versions.clone(),
            path: target.path(),
            webtransport: None,
            setup_timeout: config.handshake_timeout,
            establishing: None,
        }
    }

    /// Ready with the session once it is established (the server answered SETUP; before
    /// -05, once the connection is up), or with why there is none: a refusal names the
    /// server's code, and the connection is closed then. After `Ready`, `Pending` forever.
    pub fn poll(&mut self, waiter: &Waiter) -> Poll<Result<Session, ConnectError>> {
        if self.establishing.is_none() {
            let session = match self.poll_session(waiter) {
                Poll::Ready(Ok(session)) => session,
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                Poll::Pending => return Poll::Pending,
            };
            let mut deadline = self.runtime.deadline();
            deadline.set(Some(self.runtime.now() + self.setup_timeout));
            self.establishing = Some((session, deadline));
        }
        let Some((session, deadline)) = &mut self.establishing else {
            return Poll::Pending;
        };
        match session.poll_established(waiter) {
            Poll::Ready(Ok(_)) => {}
            Poll::Ready(Err(error)) => {
                tracing::debug!(%error, code = error.to_code(), "the server refused the session");
                self.establishing = None;
                return Poll::Ready(Err(ConnectError::Refused { error }));
            }
            Poll::Pending => {
                if deadline.poll(waiter).is_pending() {
                    return Poll::Pending;
                }
                session.close(moqx_net::Error::Timeout);
                self.establishing = None;
                return Poll::Ready(Err(ConnectError::Handshake(format!(
                    "no SETUP from the server within {:?}",
                    self.setup_timeout
                ))));
            }
        }
        match self.establishing.take() {
            Some((session, _)) => Poll::Ready(Ok(session)),
            None => Poll::Pending,
        }
    }

    /// Ready with the running session, not yet established: the WebTransport CONNECT
    /// done (on that binding), the version chosen.
    fn poll_session(&mut self, waiter: &Waiter) -> Poll<Result<Session, ConnectError>> {
        let (transport, config) = std::task::ready!(self.poll_transport(waiter))?;
        Poll::Ready(Ok(session::connect(
            self.runtime.clone(),
            transport,
            config,
        )))
    }

    /// Ready with the connection, no session on it yet, and the session configuration
    /// it would start with (the version chosen, the path where SETUP carries it): for a
    /// protocol tool that speaks on the streams itself (an interop test client). The
    /// WebTransport CONNECT is done, on that binding.
    pub fn poll_transport(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<(BindingSession, SessionConfig), ConnectError>> {
        if let Some((transport, version)) = self.qmux.take() {
            // A WebSocket's path travelled in its upgrade request; TLS and TCP have no
            // request, so SETUP carries it.
            let path = match transport.binding() {
                Binding::WebSocket => None,
                _ => Some(self.path.clone()),
            };
            tracing::debug!(%version, binding = %transport.binding(), "negotiated");
            let config = {
                let mut session_config = self.session.clone();
                session_config.path = path;
                session_config.version = version;
                session_config
            };
            return Poll::Ready(Ok((transport, config)));
        }
        let Some(connection) = &self.connection else {
            return Poll::Pending;
        };
        let (transport, config) = match &mut self.webtransport {
            None => (
                BindingSession::from(connection.session()),
                // The path travels in SETUP.
                {
                    let mut session_config = self.session.clone();
                    session_config.path = Some(self.path.clone());
                    session_config
                },
            ),
            Some((handshake, deadline)) => match handshake.poll(waiter) {
                Poll::Ready(Ok(session)) => (
                    BindingSession::from(session),
                    // The path travelled in the CONNECT; SETUP carries none.
                    {
                        let mut session_config = self.session.clone();
                        session_config.path = None;
                        session_config
                    },
                ),
                Poll::Ready(Err(error)) => {
                    self.connection = None;
                    return Poll::Ready(Err(error.into()));
                }
                Poll::Pending => {
                    if deadline.poll(waiter).is_pending() {
                        return Poll::Pending;
                    }
                    connection.close(H3_REQUEST_CANCELLED, "WebTransport handshake timed out");
                    self.connection = None;
                    return Poll::Ready(Err(ConnectError::Handshake(
                        "no WebTransport response in time".to_owned(),
                    )));
                }
            },
        };
        self.connection = None;
        // What the server chose: the ALPN on raw QUIC, `wt-protocol` on WebTransport.
        let chosen = transport.protocol().and_then(Version::from_alpn);
        let version = match chosen {
            Some(version) if self.versions.contains(&version) => version,
            // One version offered: a server that names none (an older WebTransport server)
            // speaks it or nothing.
            None if self.versions.len() == 1 => self.versions[0],
            _ => {
                let mut transport = transport;
                transport.close(moqx_net::Error::Version.to_code(), "no common version");
                return Poll::Ready(Err(ConnectError::NoCommonVersion {
                    offered: self.versions.clone(),
                    detail: match chosen {
                        Some(version) => {
                            format!("the server chose {version}, which was not offered")
                        }
                        None => "the server chose none".to_owned(),
                    },
                }));
            }
        };
        tracing::debug!(%version, "negotiated");
        if self.webtransport.is_none()
            && version.is_lite()
            && !version.has_setup_stream()
            && !matches!(self.path.as_str(), "" | "/")
        {
            tracing::warn!(
                %version,
                path = %moqx_net::redact::Redacted(&self.path),
                "this version carries no path on raw QUIC: the server sees its root, not the URL's path"
            );
        }
        Poll::Ready(Ok((transport, config.with_version(version))))
    }
}

impl<R: Runtime> std::fmt::Debug for ClientSetup<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSetup")
            .field("connection", &self.connection)
            .field("path", &moqx_net::redact::redact(&self.path))
            .field("webtransport", &self.webtransport.is_some())
            .finish_non_exhaustive()
    }
}
