//! WebSocket clients on the relay's HTTP port: moq-lite over QMux (`ws://host:port/path`),
//! for browsers whose WebTransport is missing or broken (every Safari) and networks that
//! block UDP. The request is checked and its subprotocol chosen by `moq_tokio`; once
//! upgraded, the client goes through the same [`Gatekeeper`] as every QUIC client: its
//! path and `?jwt=` authorize it, the same limits count it, and `/metrics` shows it under
//! `binding="websocket"`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;
use moq_tokio::{QmuxServerConfig, WebSocketUpgrade};

use crate::gatekeeper::Gatekeeper;

/// What the HTTP side needs to serve WebSocket clients.
#[derive(Debug)]
pub(crate) struct WebSocketService {
    pub(crate) gatekeeper: Arc<Gatekeeper>,
    pub(crate) config: QmuxServerConfig,
}

/// The client address of an HTTP connection, put in each of its requests.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer(pub(crate) SocketAddr);

/// Answers a WebSocket request: `101` and the session admitted once upgraded, or the
/// status that says why not.
pub(crate) fn upgrade(service: Arc<WebSocketService>, request: Request) -> Response {
    let (mut parts, _body) = request.into_parts();
    let remote = parts.extensions.get::<Peer>().map(|peer| peer.0);
    let upgrade = match WebSocketUpgrade::check(&parts.method, &parts.headers, &service.config) {
        Ok(upgrade) => upgrade,
        Err(refused) => {
            tracing::debug!(?remote, %refused, "refused a WebSocket upgrade");
            return (refused.status, refused.reason).into_response();
        }
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
    });
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    for (name, value) in headers {
        response.headers_mut().insert(name, value);
    }
    response
}
