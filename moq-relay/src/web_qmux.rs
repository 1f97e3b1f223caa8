//! QMux clients on the relay's web port (TCP, the same number as its UDP one): moq-lite
//! over a WebSocket (`ws://host:port/path`, and `wss://` once TLS is sorted out below),
//! for browsers whose WebTransport is missing or broken (every Safari) and networks that
//! block UDP; and over TLS (`tls://`), for relay links and native clients where UDP is
//! blocked.
//!
//! Each connection is sorted by its first byte: a TLS record (0x16) gets the TLS
//! handshake, whose ALPN then says QMux (`qmux-01.moq-lite-05`) or HTTP (`http/1.1`, or
//! none); anything else is plain HTTP. A WebSocket request is checked and its subprotocol
//! chosen by `moqx_tokio`. Either way the client then goes through the same [`Gatekeeper`]
//! as every QUIC client: its path and `?jwt=` (in the URL, or in SETUP over TLS) authorize
//! it, the same limits count it, and `/metrics` shows it by binding.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;
use moqx_runtime::tcp_tls;
use moqx_tokio::{QmuxServerConfig, WebSocketUpgrade};
use tokio::net::TcpStream;

use crate::gatekeeper::Gatekeeper;
use crate::per_address::{AddressSlot, PerAddress, session_slot};

/// What the web port needs to serve QMux clients.
pub(crate) struct QmuxService {
    pub(crate) gatekeeper: Arc<Gatekeeper>,
    pub(crate) config: QmuxServerConfig,
    /// The relay's certificate, and the ALPN choice between QMux and HTTP.
    pub(crate) tls: WebTls,
    /// Sessions per client address, within `limits.max_sessions_per_address` (0: no cap),
    /// as the QUIC endpoint counts its connections.
    pub(crate) per_address: Arc<PerAddress>,
    pub(crate) max_per_address: usize,
}

impl std::fmt::Debug for QmuxService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QmuxService").finish_non_exhaustive()
    }
}

/// The web port's TLS context, rebuilt for the first handshake after the relay's
/// certificate is replaced.
pub(crate) struct WebTls {
    certificates: moqx_runtime::certificates::Certificates,
    versions: Vec<moqx_net::coding::Version>,
    /// The context, and the certificates' generation it was built at.
    current: std::sync::Mutex<(u64, Arc<boring::ssl::SslAcceptor>)>,
}

impl WebTls {
    /// The context for `certificates`' current certificate, offering QMux for `versions`
    /// and HTTP.
    pub(crate) fn new(
        certificates: moqx_runtime::certificates::Certificates,
        versions: Vec<moqx_net::coding::Version>,
    ) -> Result<Self, moqx_runtime::quiche_config::ConfigError> {
        let generation = certificates.generation();
        let acceptor = tcp_tls::server_context(&certificates.current(), &versions)?;
        Ok(Self {
            certificates,
            versions,
            current: std::sync::Mutex::new((generation, Arc::new(acceptor))),
        })
    }

    /// The context for the certificate in force (a certificate the TLS library refuses
    /// leaves the old one, logged).
    fn acceptor(&self) -> Arc<boring::ssl::SslAcceptor> {
        let mut current = self
            .current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let generation = self.certificates.generation();
        if current.0 != generation {
            current.0 = generation;
            match tcp_tls::server_context(&self.certificates.current(), &self.versions) {
                Ok(acceptor) => current.1 = Arc::new(acceptor),
                Err(error) => tracing::warn!(%error, "the web port keeps its old certificate"),
            }
        }
        current.1.clone()
    }
}

/// What a connection on the web port turned out to be.
pub(crate) enum Sorted {
    /// Plain HTTP (or `ws://`).
    Plain(TcpStream),
    /// HTTP over TLS (or `wss://`).
    Tls(tokio_boring::SslStream<TcpStream>),
    /// A QMux client over TLS, handed to the gatekeeper.
    Session,
    /// Nothing to serve: silent, or a failed TLS handshake.
    Gone,
}

/// A TLS record's first byte (a handshake: the ClientHello).
const TLS_HANDSHAKE: u8 = 0x16;

impl QmuxService {
    /// Sorts `stream` (from `peer`) by its first byte and, for TLS, its ALPN, within
    /// `patience` for each step.
    pub(crate) async fn sort(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        patience: std::time::Duration,
    ) -> Sorted {
        let mut first = [0u8; 1];
        match tokio::time::timeout(patience, stream.peek(&mut first)).await {
            Ok(Ok(1)) if first[0] == TLS_HANDSHAKE => {}
            Ok(Ok(1)) => return Sorted::Plain(stream),
            _ => return Sorted::Gone,
        }
        let stream = match tokio::time::timeout(
            patience,
            tokio_boring::accept(&self.tls.acceptor(), stream),
        )
        .await
        {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => {
                tracing::debug!(%peer, %error, "TLS handshake on the web port failed");
                return Sorted::Gone;
            }
            Err(_) => {
                tracing::debug!(%peer, "no TLS handshake on the web port in time");
                return Sorted::Gone;
            }
        };
        let Some(negotiated) = tcp_tls::negotiated(stream.ssl(), &self.config.versions) else {
            return Sorted::Tls(stream);
        };
        let Some(slot) = self.address_slot(peer) else {
            return Sorted::Gone;
        };
        let request = moqx_tokio::accept_tls(stream, peer, negotiated, &self.config);
        if let Some(watch) = self.gatekeeper.admit(request) {
            tokio::spawn(async move {
                watch.await;
                drop(slot);
            });
        }
        Sorted::Session
    }

    /// A place for one more session from `peer` (see [`session_slot`]).
    fn address_slot(&self, peer: SocketAddr) -> Option<Option<AddressSlot>> {
        session_slot(&self.per_address, peer, self.max_per_address)
    }
}

/// The client address of an HTTP connection, put in each of its requests.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer(pub(crate) SocketAddr);

/// Answers a WebSocket request: `101` and the session admitted once upgraded, or the
/// status that says why not.
pub(crate) fn upgrade(service: Arc<QmuxService>, request: Request) -> Response {
    let (mut parts, _body) = request.into_parts();
    let remote = parts.extensions.get::<Peer>().map(|peer| peer.0);
    let upgrade = match WebSocketUpgrade::check(&parts.method, &parts.headers, &service.config) {
        Ok(upgrade) => upgrade,
        Err(refused) => {
            tracing::debug!(?remote, %refused, "refused a WebSocket upgrade");
            return (refused.status, refused.reason).into_response();
        }
    };
    let slot = match remote {
        Some(peer) => match service.address_slot(peer) {
            Some(slot) => slot,
            None => {
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "too many sessions from this address",
                )
                    .into_response();
            }
        },
        None => None,
    };
    let Some(on_upgrade) = parts.extensions.remove::<hyper::upgrade::OnUpgrade>() else {
        // The connection was not served with upgrades: a bug of ours, not the client's.
        tracing::warn!("a WebSocket request on a connection that cannot upgrade");
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let path = parts
        .uri
        .path_and_query()
        .map_or_else(|| "/".to_owned(), |path| path.as_str().to_owned());
    let headers = upgrade.headers();
    tokio::spawn(async move {
        let upgraded = match on_upgrade.await {
            Ok(upgraded) => upgraded,
            Err(error) => {
                tracing::debug!(?remote, %error, "a WebSocket upgrade did not complete");
                return;
            }
        };
        let request = upgrade.accept(TokioIo::new(upgraded), path, remote, &service.config);
        if let Some(watch) = service.gatekeeper.admit(request) {
            watch.await;
        }
        drop(slot);
    });
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    for (name, value) in headers {
        response.headers_mut().insert(name, value);
    }
    response
}
