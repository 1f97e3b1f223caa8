//! A client whose handshakes completed, to accept or refuse.

use std::net::SocketAddr;

use moqx_net::coding::Version;
use moqx_net::runtime::Runtime;
use moqx_net::session::{self, Session, SessionConfig};
use moqx_qmux::QmuxSession;

use super::REFUSAL_LINGER;
use crate::binding::{Binding, BindingSession};
use crate::quic::QuicConnection;
use crate::webtransport::{H3_REQUEST_REJECTED, StatusCode, WebTransportRequest};

/// A client whose handshakes completed: accept it (with the server's session
/// configuration or one chosen for this client, e.g. after checking its path) or refuse
/// it.
#[derive(Debug)]
pub struct Request<R: Runtime> {
    pub(super) carrier: Carrier,
    pub(super) session: SessionConfig,
    pub(super) version: Version,
    pub(super) runtime: R,
}

/// What a [`Request`] came over. The QUIC variant is the large one (a WebTransport
/// request's headers) and the common one: boxing it would cost an allocation per client
/// to save bytes in a value that lives for one handshake.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(super) enum Carrier {
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

/// Answers a WebTransport client's CONNECT with `status`, then closes its connection
/// after [`REFUSAL_LINGER`] unless the client closes it first.
pub(super) fn refuse_webtransport<R: Runtime>(
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
