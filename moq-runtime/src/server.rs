//! The server side every driver shares: from an established QUIC connection to a
//! [`Request`] the application accepts or refuses.
//!
//! A driver hands each connection its endpoint established to [`Acceptor::incoming`] and
//! drives the [`Incoming`] it gets back (`poll` with a waiter, on whatever task it likes)
//! until it yields a request. Everything in between is here, once: the dispatch by ALPN
//! (raw QUIC is a request at once; `h3` runs the WebTransport handshake), the cap on
//! WebTransport clients that have not sent their CONNECT, the deadline for it, the choice
//! of version, and the refusals, each closed with its named HTTP/3 or moq-lite code.
//!
//! ```text
//! endpoint.accept() ─▶ Acceptor::incoming ─▶ Incoming::poll … ─▶ Request ─▶ accept / reject
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use moqx_kio::Waiter;
use moqx_net::coding::Version;
use moqx_net::runtime::{Deadline, Runtime};
use moqx_net::session::{self, Session, SessionConfig};
use moqx_qmux::QmuxSession;

use crate::admission::{Admission, Gate};
use crate::binding::{Binding, BindingSession};
use crate::certificates::Certificates;
use crate::endpoint::Endpoint;
use crate::quic::QuicConnection;
use crate::quic_trace::QuicTrace;
use crate::quiche_config::{ConfigError, QuicLimits, server_config};
use crate::reset::StatelessResetKey;
use crate::tls::Certificate;
use crate::udp::UdpConfig;
use crate::webtransport::{
    H3_REQUEST_CANCELLED, H3_REQUEST_REJECTED, ServerHandshake, StatusCode, WebTransportRequest,
};

/// How long a refused WebTransport client has to read its refusal before its connection
/// is closed anyway (it normally closes it itself on reading the status).
pub const REFUSAL_LINGER: Duration = Duration::from_secs(2);

/// How a server listens, on any driver.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The address to bind.
    pub bind: SocketAddr,
    /// The certificate it presents: replace it ([`Certificates::replace`]) while the
    /// server runs and new handshakes get the new one.
    pub certificates: Certificates,
    /// What every session serves and fills (a relay: both halves on one origin), unless
    /// the application accepts a request with a configuration of its own. Its `version`
    /// is replaced by each connection's negotiated one.
    pub session: SessionConfig,
    /// The moq-lite versions it accepts, in its order of preference: a raw QUIC client
    /// gets the first of them it offered (ALPN), a WebTransport client the first of its
    /// own offer (`wt-available-protocols`) that is here.
    pub versions: Vec<Version>,
    /// Who may start a handshake: caps on connections, on handshakes in progress and per
    /// address, and when to ask for address validation (QUIC Retry).
    pub admission: Admission,
    /// Each connection's QUIC limits: idle timeout, streams, flow-control windows.
    pub limits: QuicLimits,
    /// How long a WebTransport client has to send its CONNECT after the QUIC handshake.
    pub handshake_timeout: Duration,
    /// The most WebTransport clients waiting to send their CONNECT at once; one more is
    /// closed (H3_REQUEST_REJECTED), so that connections that never say what they want
    /// cannot fill the connection table.
    pub max_pending_handshakes: usize,
    /// The UDP socket's setup (GSO, GRO, buffers).
    pub udp: UdpConfig,
    /// What its stateless reset tokens are derived from ([`crate::reset`]); `None`: a key
    /// derived from the certificate's private key, so that the server restarted with the
    /// same certificate resets the connections it lost at once, at their peers' next
    /// packet.
    pub stateless_reset_key: Option<StatelessResetKey>,
    /// What is traced of each connection: a qlog per connection, the TLS keys (both off
    /// by default).
    pub trace: QuicTrace,
}

impl ServerConfig {
    /// A server on `bind` presenting `certificate`, with the defaults: the released
    /// versions (moq-lite-05, -04, -03, in that order), 10,000 connections,
    /// 1,024 handshakes in progress with Retry past 256, no cap per address, the default
    /// [`QuicLimits`], 10 s and 1,024 pending for the WebTransport handshake, GSO and GRO
    /// on.
    pub fn new(bind: SocketAddr, certificate: Certificate, session: SessionConfig) -> Self {
        Self {
            bind,
            certificates: Certificates::new(certificate),
            session,
            versions: Version::DEFAULT_OFFER.to_vec(),
            admission: Admission::default(),
            limits: QuicLimits::default(),
            handshake_timeout: Duration::from_secs(10),
            max_pending_handshakes: 1024,
            udp: UdpConfig::default(),
            stateless_reset_key: None,
            trace: QuicTrace::default(),
        }
    }

    /// The admission gate of this server: make one and give it to every worker's
    /// endpoint, so that the caps are server-wide and a Retry token from one worker is
    /// good on another.
    pub fn gate(&self, now: Instant) -> Gate {
        Gate::new(self.admission.clone(), now)
    }

    /// The endpoint of worker `worker` (its index in every connection ID it issues),
    /// serving this configuration on a socket bound to `local`, admitting through `gate`.
    pub fn endpoint(
        &self,
        local: SocketAddr,
        worker: u8,
        gate: &Gate,
        now: Instant,
    ) -> Result<Endpoint, ConfigError> {
        let certificate = self.certificates.current();
        let keylog = self.trace.keylog.is_some();
        let build = {
            let (limits, versions) = (self.limits.clone(), self.versions.clone());
            move |certificate: &Certificate| {
                let mut config = server_config(certificate, &limits, &versions)?;
                if keylog {
                    config.log_keys();
                }
                Ok(config)
            }
        };
        let quiche = build(&certificate)?;
        let mut endpoint =
            Endpoint::new(quiche, local, worker, self.admission.max_connections, now);
        endpoint.follow_certificates(self.certificates.clone(), build);
        endpoint.set_trace(self.trace.clone());
        endpoint.set_gate(gate.clone());
        endpoint.set_stateless_reset_key(
            self.stateless_reset_key
                .clone()
                .unwrap_or_else(|| StatelessResetKey::for_certificate(&certificate)),
        );
        Ok(endpoint)
    }

    /// What turns this server's established connections into requests. Make one per
    /// server and share it between its workers: the cap on pending handshakes is
    /// server-wide.
    pub fn acceptor(&self) -> Acceptor {
        Acceptor::new(
            self.session.clone(),
            self.versions.clone(),
            self.handshake_timeout,
            self.max_pending_handshakes,
        )
    }
}

/// How a server turns established connections into requests.
#[derive(Debug, Clone)]
pub struct Acceptor {
    session: SessionConfig,
    versions: Vec<Version>,
    handshake_timeout: Duration,
    handshakes: HandshakeSlots,
}

impl Acceptor {
    /// Requests start with `session` (what every session serves and fills, unless the
    /// application accepts one with its own) at the version negotiated among `versions`
    /// (the server's, in its order of preference); a WebTransport client has
    /// `handshake_timeout` after the QUIC handshake to send its CONNECT, and at most
    /// `max_pending_handshakes` wait for theirs at once.
    pub fn new(
        session: SessionConfig,
        versions: Vec<Version>,
        handshake_timeout: Duration,
        max_pending_handshakes: usize,
    ) -> Self {
        Self {
            session,
            versions,
            handshake_timeout,
            handshakes: HandshakeSlots::new(max_pending_handshakes),
        }
    }

    /// Starts turning `connection` into a request for sessions on `runtime`; `None` if it
    /// was refused at once (closed: too many WebTransport clients waiting for their
    /// CONNECT, H3_REQUEST_REJECTED).
    pub fn incoming<R>(&self, runtime: &R, connection: QuicConnection) -> Option<Incoming<R>>
    where
        R: Runtime<Transport = BindingSession>,
    {
        let alpn = connection.application_protocol().unwrap_or_default();
        let binding = Binding::from_alpn(&alpn).unwrap_or(Binding::Quic);
        // Raw QUIC: the ALPN TLS chose is the version. WebTransport: chosen at its CONNECT.
        let version = std::str::from_utf8(&alpn)
            .ok()
            .and_then(Version::from_alpn)
            .unwrap_or(Version::Lite05);
        let stage = match binding {
            // `from_alpn` names only the QUIC bindings.
            Binding::Quic | Binding::WebSocket | Binding::Tls | Binding::Tcp => Stage::Ready,
            Binding::WebTransport => {
                let Some(slot) = self.handshakes.take() else {
                    tracing::debug!(
                        peer = ?connection.peer_address(),
                        "refusing a WebTransport client: too many waiting for their CONNECT"
                    );
                    connection.close(H3_REQUEST_REJECTED, "too many pending handshakes");
                    return None;
                };
                let mut deadline = runtime.deadline();
                deadline.set(Some(runtime.now() + self.handshake_timeout));
                Stage::Handshake {
                    handshake: Box::new(ServerHandshake::new(connection.session())),
                    deadline,
                    _slot: slot,
                }
            }
        };
        Some(Incoming {
            connection: Some(connection),
            runtime: runtime.clone(),
            session: self.session.clone(),
            versions: self.versions.clone(),
            version,
            stage,
        })
    }
}

impl Acceptor {
    /// What a driver does with an established `connection`: a raw QUIC client is a
    /// [`Request`] at once; a WebTransport client is a [`Handshaking`] future for the
    /// driver to spawn where the connection lives (it resolves with the request once the
    /// CONNECT arrived in time, or `None`); a client refused at once is closed already.
    pub fn admit<R>(&self, runtime: &R, connection: QuicConnection) -> Admitted<R>
    where
        R: Runtime<Transport = BindingSession>,
    {
        let Some(mut incoming) = self.incoming(runtime, connection) else {
            return Admitted::Refused;
        };
        // The first poll registers nothing to wake: a raw QUIC client is ready without
        // waiting, and a WebTransport one is polled again by its own task.
        match incoming.poll(&Waiter::new(std::task::Waker::noop())) {
            Poll::Ready(Some(request)) => Admitted::Request(request),
            Poll::Ready(None) => Admitted::Refused,
            Poll::Pending => Admitted::Handshake(Handshaking {
                incoming: Box::new(incoming),
                waiter: None,
            }),
        }
    }
}

/// What became of an established connection: see [`Acceptor::admit`].
// A request is large (its session's configuration) and the other variants small, but an
// `Admitted` lives only from `admit` to the driver's match, once per connection: boxing
// would cost an allocation per connection to save a move.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Admitted<R: Runtime> {
    /// A client to accept or refuse now.
    Request(Request<R>),
    /// A WebTransport client waiting for its CONNECT: spawn it.
    Handshake(Handshaking<R>),
    /// Refused (closed with the code that says why, and logged).
    Refused,
}

/// A WebTransport client's CONNECT, awaited within the handshake timeout: resolves with
/// the request, or `None` if the client failed (closed, and logged).
#[derive(Debug)]
pub struct Handshaking<R: Runtime> {
    incoming: Box<Incoming<R>>,
    waiter: Option<Waiter>,
}

impl<R> std::future::Future for Handshaking<R>
where
    R: Runtime<Transport = BindingSession>,
{
    type Output = Option<Request<R>>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let waiter = this.waiter.get_or_insert_with(|| Waiter::new(cx.waker()));
        waiter.set_waker(cx.waker());
        this.incoming.poll(waiter)
    }
}

/// A connection on its way to becoming a [`Request`]: a raw QUIC one is one already; a
/// WebTransport one once its CONNECT arrived in time and offered our version.
pub struct Incoming<R: Runtime> {
    /// `None` once yielded or failed.
    connection: Option<QuicConnection>,
    runtime: R,
    session: SessionConfig,
    /// The server's versions, in its order of preference.
    versions: Vec<Version>,
    /// The negotiated version (a WebTransport client's once its CONNECT arrived).
    version: Version,
    stage: Stage<R::Deadline>,
}

enum Stage<D> {
    /// Nothing to wait for.
    Ready,
    /// Reading the CONNECT, within the deadline; the slot counts it as pending.
    Handshake {
        handshake: Box<ServerHandshake>,
        deadline: D,
        _slot: HandshakeSlot,
    },
}

impl<R> Incoming<R>
where
    R: Runtime<Transport = BindingSession>,
{
    /// Ready with the request, or with `None` if the client failed (a malformed CONNECT,
    /// no CONNECT in time, no version in common): its connection was closed with the
    /// code that says why, and logged. After `Ready`, `Pending` forever.
    pub fn poll(&mut self, waiter: &Waiter) -> Poll<Option<Request<R>>> {
        let Some(connection) = &self.connection else {
            return Poll::Pending;
        };
        let webtransport = match &mut self.stage {
            Stage::Ready => None,
            Stage::Handshake {
                handshake,
                deadline,
                ..
            } => match handshake.poll(waiter) {
                Poll::Ready(Ok(request)) => Some(request),
                // The handshake closed the connection itself, with the HTTP/3 code.
                Poll::Ready(Err(error)) => {
                    tracing::debug!(peer = ?connection.peer_address(), %error, "WebTransport handshake failed");
                    self.connection = None;
                    return Poll::Ready(None);
                }
                Poll::Pending => {
                    if deadline.poll(waiter).is_pending() {
                        return Poll::Pending;
                    }
                    tracing::debug!(peer = ?connection.peer_address(), "no WebTransport CONNECT in time");
                    connection.close(H3_REQUEST_CANCELLED, "no WebTransport CONNECT in time");
                    self.connection = None;
                    return Poll::Ready(None);
                }
            },
        };
        let Some(connection) = self.connection.take() else {
            return Poll::Pending;
        };
        // Done with the handshake: its slot is free for the next client.
        self.stage = Stage::Ready;
        if let Some(request) = &webtransport {
            // The client's preference decides, among the versions we accept. A client that
            // names none (a browser always names its versions) gets -05 if we accept it,
            // never a work in progress it did not ask for.
            let offered = request.protocols();
            let chosen = match offered.is_empty() {
                true => Version::DEFAULT_OFFER
                    .into_iter()
                    .find(|version| self.versions.contains(version)),
                false => offered
                    .iter()
                    .filter_map(|protocol| Version::from_alpn(protocol))
                    .find(|version| self.versions.contains(version)),
            };
            match chosen {
                Some(version) => self.version = version,
                None => {
                    tracing::debug!(
                        peer = ?connection.peer_address(),
                        ?offered,
                        accepted = ?self.versions,
                        "refusing a WebTransport client: no moq-lite version in common"
                    );
                    refuse_webtransport(
                        &self.runtime,
                        &connection,
                        webtransport,
                        StatusCode::BAD_REQUEST,
                        "no common moq-lite version",
                    );
                    return Poll::Ready(None);
                }
            }
        }
        Poll::Ready(Some(Request {
            carrier: Carrier::Quic {
                connection,
                webtransport,
            },
            session: self.session.clone(),
            version: self.version,
            runtime: self.runtime.clone(),
        }))
    }
}

/// A client whose handshakes completed: accept it (with the server's session
/// configuration or one chosen for this client, e.g. after checking its path) or refuse
/// it.
#[derive(Debug)]
pub struct Request<R: Runtime> {
    carrier: Carrier,
    session: SessionConfig,
    version: Version,
    runtime: R,
}

/// What a [`Request`] came over. The QUIC variant is the large one (a WebTransport
/// request's headers) and the common one: boxing it would cost an allocation per client
/// to save bytes in a value that lives for one handshake.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
enum Carrier {
    /// Raw QUIC, or WebTransport once its CONNECT arrived.
    Quic {
        connection: QuicConnection,
        webtransport: Option<WebTransportRequest>,
    },
    /// QMux over a WebSocket, TLS or TCP.
    Qmux {
        session: QmuxSession,
        binding: Binding,
        /// The WebSocket upgrade request's path and query.
        path: Option<String>,
        remote: Option<SocketAddr>,
    },
}

impl<R> Request<R>
where
    R: Runtime<Transport = BindingSession>,
{
    /// A client over a QMux carrier (`binding`: WebSocket, TLS or TCP) whose negotiation
    /// settled `version`; `path` is a WebSocket upgrade request's path and query.
    pub fn qmux(
        runtime: R,
        session: QmuxSession,
        binding: Binding,
        version: Version,
        path: Option<String>,
        remote: Option<SocketAddr>,
        config: SessionConfig,
    ) -> Self {
        Self {
            carrier: Carrier::Qmux {
                session,
                binding,
                path,
                remote,
            },
            session: config,
            version,
            runtime,
        }
    }

    /// The binding the client chose.
    pub fn binding(&self) -> Binding {
        match &self.carrier {
            Carrier::Quic {
                webtransport: Some(_),
                ..
            } => Binding::WebTransport,
            Carrier::Quic { .. } => Binding::Quic,
            Carrier::Qmux { binding, .. } => *binding,
        }
    }

    /// The request path and query (`/room?jwt=…`) of a WebTransport or WebSocket client.
    /// A raw QUIC, TLS or TCP client sends its path in SETUP, after the session starts:
    /// [`Session::peer_setup`] has it.
    pub fn path(&self) -> Option<String> {
        match &self.carrier {
            Carrier::Quic { webtransport, .. } => {
                webtransport.as_ref().map(WebTransportRequest::path)
            }
            Carrier::Qmux { path, .. } => path.clone(),
        }
    }

    /// The moq-lite version the client and the server agreed on: the session speaks it.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The subprotocols a WebTransport client offered.
    pub fn protocols(&self) -> &[String] {
        match &self.carrier {
            Carrier::Quic {
                webtransport: Some(request),
                ..
            } => request.protocols(),
            _ => &[],
        }
    }

    /// Where the client connects from.
    pub fn remote_addr(&self) -> Option<SocketAddr> {
        match &self.carrier {
            Carrier::Quic { connection, .. } => connection.peer_address(),
            Carrier::Qmux { remote, .. } => *remote,
        }
    }

    /// Starts the session with the server's configuration.
    pub fn accept(self) -> Session {
        let config = self.session.clone();
        self.accept_with(config)
    }

    /// Starts the session with `config` (e.g. origins scoped to what this client may
    /// publish and subscribe to), at the negotiated version (whatever `config.version`
    /// says). A WebTransport client gets that version selected in `wt-protocol`.
    pub fn accept_with(self, mut config: SessionConfig) -> Session {
        config.version = self.version;
        // An authorization hook decides on the path the client named, wherever it did.
        if config.request_path.is_none() {
            config.request_path = self.path();
        }
        // The session logs inside this span: which peer, over which binding.
        let span = tracing::debug_span!(
            "moq_connection",
            peer = ?self.remote_addr(),
            binding = %self.binding(),
            version = %self.version
        );
        let _entered = span.enter();
        let transport = match self.carrier {
            Carrier::Quic {
                connection,
                webtransport: None,
            } => BindingSession::from(connection.session()),
            Carrier::Quic {
                webtransport: Some(request),
                ..
            } => BindingSession::from(request.accept(Some(config.version.alpn()))),
            Carrier::Qmux {
                session, binding, ..
            } => BindingSession::Qmux { session, binding },
        };
        session::accept(self.runtime, transport, config)
    }

    /// Refuses the client: a WebTransport client gets `status` (403 for "not allowed")
    /// and a moment to read it; a raw QUIC or QMux connection is closed with moq-lite's
    /// `error` code.
    pub fn reject(self, status: StatusCode, error: moqx_net::Error) {
        tracing::debug!(
            peer = ?self.remote_addr(),
            status = status.as_u16(),
            %error,
            "refusing a client"
        );
        match self.carrier {
            Carrier::Quic {
                connection,
                webtransport: webtransport @ Some(_),
            } => refuse_webtransport(
                &self.runtime,
                &connection,
                webtransport,
                status,
                status.as_str(),
            ),
            Carrier::Quic { connection, .. } => {
                connection.close(error.to_code(), &error.to_string())
            }
            Carrier::Qmux { mut session, .. } => moqx_net::transport::Session::close(
                &mut session,
                error.to_code(),
                &error.to_string(),
            ),
        }
    }
}

impl<R: Runtime> std::fmt::Debug for Incoming<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let stage = match self.stage {
            Stage::Ready => "ready",
            Stage::Handshake { .. } => "webtransport handshake",
        };
        f.debug_struct("Incoming")
            .field("connection", &self.connection)
            .field("stage", &stage)
            .finish_non_exhaustive()
    }
}

/// Answers a WebTransport client's CONNECT with `status`, then closes its connection
/// after [`REFUSAL_LINGER`] unless the client closes it first.
fn refuse_webtransport<R: Runtime>(
    runtime: &R,
    connection: &QuicConnection,
    request: Option<WebTransportRequest>,
    status: StatusCode,
    reason: &str,
) {
    if let Some(request) = request {
        request.reject(status);
    }
    connection.close_at(runtime.now() + REFUSAL_LINGER, H3_REQUEST_REJECTED, reason);
}

/// Counts WebTransport clients waiting for their CONNECT, against a cap. Shared by every
/// worker of a server.
#[derive(Debug, Clone)]
struct HandshakeSlots {
    taken: Arc<AtomicUsize>,
    max: usize,
}

/// One pending handshake, counted until dropped.
#[derive(Debug)]
struct HandshakeSlot(Arc<AtomicUsize>);

impl HandshakeSlots {
    fn new(max: usize) -> Self {
        Self {
            taken: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// A slot, unless all are taken.
    fn take(&self) -> Option<HandshakeSlot> {
        self.taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |taken| {
                (taken < self.max).then_some(taken + 1)
            })
            .ok()
            .map(|_| HandshakeSlot(self.taken.clone()))
    }
}

impl Drop for HandshakeSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
