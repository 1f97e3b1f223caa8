//! A WebSocket upgrade served by an HTTP server of the application's own (the relay's web
//! port): the request checked and the subprotocol chosen before the `101`, then the
//! upgraded connection turned into a [`Request`]. The HTTP server stays the application's;
//! this is what QMux over WebSocket needs of it.

use std::net::SocketAddr;
use std::time::Instant;

use moqx_qmux::{Connection, QmuxConnection, Side};
use moqx_runtime::binding::Binding;
use moqx_runtime::qmux::{self, Negotiated};
use moqx_runtime::server::Request;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use tokio_tungstenite::tungstenite::protocol::Role;

use super::carrier::WebSocket;
use super::driver::drive;
use super::{QmuxServerConfig, websocket_config};
use crate::TokioRuntime;

/// An HTTP request that asks for a WebSocket carrying moq-lite, checked: answer it with
/// [`headers`](Self::headers) and status 101, then hand the upgraded connection to
/// [`accept`](Self::accept).
#[derive(Debug, Clone)]
pub struct WebSocketUpgrade {
    accept_key: String,
    negotiated: Negotiated,
    /// The client named a subprotocol (one that offers none gets none back).
    named: bool,
}

/// Why a request is not a WebSocket upgrade this server takes, with the status to answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status}: {reason}")]
pub struct UpgradeRefused {
    /// The HTTP status: 400, or 426 for a WebSocket version other than 13.
    pub status: StatusCode,
    /// What is wrong, for the response body and the log.
    pub reason: &'static str,
}

impl WebSocketUpgrade {
    /// Whether `headers` ask for a WebSocket at all (`Upgrade: websocket`): a request that
    /// does not is an ordinary HTTP request.
    pub fn is_requested(headers: &HeaderMap) -> bool {
        headers
            .get(header::UPGRADE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.eq_ignore_ascii_case("websocket"))
    }

    /// Checks a WebSocket request (RFC 6455 §4.2.1) and chooses its subprotocol among the
    /// moq-lite versions the server accepts (`config.versions`).
    pub fn check(
        method: &Method,
        headers: &HeaderMap,
        config: &QmuxServerConfig,
    ) -> Result<Self, UpgradeRefused> {
        let refuse = |reason| UpgradeRefused {
            status: StatusCode::BAD_REQUEST,
            reason,
        };
        if method != Method::GET {
            return Err(refuse("a WebSocket upgrade is a GET"));
        }
        let connection_upgrade = headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .any(|token| token.trim().eq_ignore_ascii_case("upgrade"));
        if !connection_upgrade || !Self::is_requested(headers) {
            return Err(refuse(
                "not a WebSocket upgrade (Connection: Upgrade, Upgrade: websocket)",
            ));
        }
        if headers
            .get(header::SEC_WEBSOCKET_VERSION)
            .map(HeaderValue::as_bytes)
            != Some(b"13")
        {
            return Err(UpgradeRefused {
                status: StatusCode::UPGRADE_REQUIRED,
                reason: "only WebSocket version 13",
            });
        }
        let key = headers
            .get(header::SEC_WEBSOCKET_KEY)
            .ok_or(refuse("no Sec-WebSocket-Key"))?;
        let offered: Vec<String> = headers
            .get_all(header::SEC_WEBSOCKET_PROTOCOL)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .map(|name| name.trim().to_owned())
            .filter(|name| !name.is_empty())
            .collect();
        let negotiated = match qmux::choose(&offered, &config.versions) {
            Some(negotiated) => negotiated,
            // A client that offers nothing gets QMux draft 01 and the default version,
            // as deployed relays do.
            None if offered.is_empty() => qmux::choose(&["qmux-01".to_owned()], &config.versions)
                .ok_or(refuse("no moq-lite version to speak"))?,
            None => return Err(refuse("no subprotocol in common")),
        };
        Ok(Self {
            accept_key: derive_accept_key(key.as_bytes()),
            negotiated,
            named: !offered.is_empty(),
        })
    }

    /// The headers of the `101 Switching Protocols` answer.
    pub fn headers(&self) -> Vec<(header::HeaderName, HeaderValue)> {
        let mut headers = vec![
            (header::UPGRADE, HeaderValue::from_static("websocket")),
            (header::CONNECTION, HeaderValue::from_static("Upgrade")),
        ];
        if let Ok(accept) = HeaderValue::from_str(&self.accept_key) {
            headers.push((header::SEC_WEBSOCKET_ACCEPT, accept));
        }
        if self.named
            && let Ok(name) = HeaderValue::from_str(&self.negotiated.name)
        {
            headers.push((header::SEC_WEBSOCKET_PROTOCOL, name));
        }
        headers
    }

    /// The moq-lite version the session will speak.
    pub fn version(&self) -> moqx_net::coding::Version {
        self.negotiated.version
    }

    /// Runs QMux over the upgraded connection `io` (on the current tokio runtime) and
    /// returns the client as a request to accept or refuse; `path` is the request's path
    /// and query.
    pub fn accept<S>(
        self,
        io: S,
        path: String,
        remote: Option<SocketAddr>,
        config: &QmuxServerConfig,
    ) -> Request<TokioRuntime>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let socket = WebSocketStream::from_raw_socket(io, Role::Server, Some(websocket_config()));
        start(socket, self.negotiated, path, remote, config)
    }
}

/// Starts QMux over an upgraded WebSocket, as a request.
pub(super) fn start<S>(
    socket: impl std::future::Future<Output = WebSocketStream<S>> + Send + 'static,
    negotiated: Negotiated,
    path: String,
    remote: Option<SocketAddr>,
    config: &QmuxServerConfig,
) -> Request<TokioRuntime>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let connection = QmuxConnection::new(Connection::new(
        Side::Server,
        negotiated.draft,
        qmux::config(&config.limits),
        Vec::new(),
        Instant::now(),
    ));
    let driven = connection.clone();
    tokio::spawn(async move {
        let socket = socket.await;
        drive(WebSocket::new(socket), driven, Some(qmux::KEEP_ALIVE)).await;
    });
    Request::qmux(
        TokioRuntime::current(),
        connection.session(Some(negotiated.version.alpn().to_owned())),
        Binding::WebSocket,
        negotiated.version,
        Some(path),
        remote,
        config.session.clone(),
    )
}
