//! From an established connection to a [`Request`]: the dispatch by ALPN, the cap on
//! WebTransport clients waiting for their CONNECT, its deadline, the choice of version.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use moqx_kio::Waiter;
use moqx_net::coding::Version;
use moqx_net::runtime::{Deadline, Runtime};
use moqx_net::session::SessionConfig;

use super::request::{Carrier, Request, refuse_webtransport};
use crate::binding::{Binding, BindingSession};
use crate::quic::QuicConnection;
use crate::webtransport::{H3_REQUEST_CANCELLED, H3_REQUEST_REJECTED, ServerHandshake, StatusCode};

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
            // names none (a browser always names its versions) gets the first we accept
            // of those that may come unnamed: the released moq-lite versions (never a work
            // in progress it did not ask for) and moq-transport 14, which defines no
            // protocol string for WebTransport. The two cannot be told apart here: the
            // operator's order decides (moq-lite first by default).
            let offered = request.protocols();
            let chosen = match offered.is_empty() {
                true => self.versions.iter().copied().find(|version| {
                    Version::DEFAULT_OFFER.contains(version) || *version == Version::Moqt14
                }),
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
                        "refusing a WebTransport client: no protocol version in common"
                    );
                    refuse_webtransport(
                        &self.runtime,
                        &connection,
                        webtransport,
                        StatusCode::BAD_REQUEST,
                        "no common protocol version",
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
