//! The relay's HTTP side (TCP): the listeners and their limits. What they answer is
//! [`routes`]: `/certificate.sha256` so a browser can pin the relay's self-signed
//! certificate before it connects over WebTransport, `/health` and `/ready`, `/metrics` for
//! Prometheus; QMux clients (WebSocket on any path, and TLS: [`crate::web_qmux`]), and
//! optionally a directory of static files (a web page) at `/`.

pub(crate) mod routes;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};

use crate::per_address::PerAddress;
use crate::web_qmux::{Peer, QmuxService, Sorted};

/// What bounds the HTTP side: a client that opens connections and sends nothing, or
/// sends headers a byte at a time, holds at most `max_connections` sockets, each for a
/// bounded time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HttpLimits {
    /// The most connections served at once; one more is closed as soon as it is accepted.
    pub(crate) max_connections: usize,
    /// The most of them from one IP address (review finding F12: one client could hold
    /// every slot and lock out `/metrics` and `/certificate.sha256`).
    pub(crate) max_connections_per_address: usize,
    /// How long a client has to send a request's headers (the first request's, and each
    /// next one's on a kept-alive connection).
    pub(crate) header_read_timeout: Duration,
    /// How long one connection may live, requests and idle time together.
    pub(crate) connection_lifetime: Duration,
}

/// A bound HTTP listener, not yet serving.
#[derive(Debug)]
pub(crate) struct HttpServer {
    listener: tokio::net::TcpListener,
    limits: HttpLimits,
    /// Static files served at `/`, if any.
    web_root: Option<PathBuf>,
}

impl HttpServer {
    /// Binds `address` (TCP); `web_root`'s files are served at `/` beside the relay's own
    /// routes.
    pub(crate) async fn bind(
        address: SocketAddr,
        limits: HttpLimits,
        web_root: Option<PathBuf>,
    ) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(address).await?;
        Ok(Self {
            listener,
            limits,
            web_root,
        })
    }

    /// The bound address.
    pub(crate) fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves `routes` until the task is aborted, with `web_root`'s files for any other
    /// path; QMux clients go to `qmux`, if given.
    pub(crate) fn spawn(
        self,
        routes: Router,
        qmux: Option<Arc<QmuxService>>,
    ) -> tokio::task::JoinHandle<()> {
        // Files only (no directory listings); `index.html` for a directory; a path that
        // leaves the root is refused by `ServeDir`. Content types by extension
        // (`application/wasm` for a wasm module, which browsers require to stream it).
        let files = self.web_root.map(tower_http::services::ServeDir::new);
        // Any other path: a WebSocket upgrade (moq-lite over QMux, the path is the
        // session's), else a file, else 404.
        let websocket = qmux.clone();
        let app = routes.fallback(move |request: axum::extract::Request| {
            let (websocket, files) = (websocket.clone(), files.clone());
            async move {
                use axum::response::IntoResponse;
                if let Some(websocket) = websocket
                    && moqx_tokio::WebSocketUpgrade::is_requested(request.headers())
                {
                    return crate::web_qmux::upgrade(websocket, request);
                }
                match files {
                    Some(files) => match tower::ServiceExt::oneshot(files, request).await {
                        Ok(response) => response.into_response(),
                        Err(never) => match never {},
                    },
                    None => axum::http::StatusCode::NOT_FOUND.into_response(),
                }
            }
        });
        tokio::spawn(serve(self.listener, app, self.limits, qmux))
    }
}

/// Accepts connections and serves each on its own task, within `limits`.
async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: HttpLimits,
    qmux: Option<Arc<QmuxService>>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let per_address = Arc::new(PerAddress::default());
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors, say: try again shortly rather than spin.
                tracing::warn!(%error, "accepting an HTTP connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // A WebSocket or TLS session lives on this socket after the upgrade: its small
        // records must not wait for Nagle's algorithm (40 ms at p99 with delayed ACKs).
        let _ = stream.set_nodelay(true);
        let Some(address_slot) =
            PerAddress::try_take(&per_address, peer.ip(), limits.max_connections_per_address)
        else {
            tracing::debug!(%peer, limit = limits.max_connections_per_address, "HTTP connections from this address at their limit: closing a new one");
            drop(stream);
            continue;
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, limit = limits.max_connections, "HTTP connections at their limit: closing a new one");
            drop(stream);
            continue;
        };
        // Each request carries the client's address (a WebSocket session is admitted by
        // it).
        let app = app.clone();
        let service = hyper::service::service_fn(
            move |mut request: hyper::Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(Peer(peer));
                tower::ServiceExt::oneshot(app.clone(), request)
            },
        );
        let qmux = qmux.clone();
        tokio::spawn(async move {
            // TLS or not, QMux or HTTP: see `web_qmux`.
            let sorted = match &qmux {
                Some(qmux) => qmux.sort(stream, peer, limits.header_read_timeout).await,
                None => Sorted::Plain(stream),
            };
            match sorted {
                Sorted::Plain(stream) => serve_http(stream, service, limits, peer).await,
                Sorted::Tls(stream) => serve_http(stream, service, limits, peer).await,
                Sorted::Session | Sorted::Gone => {}
            }
            drop(slot);
            drop(address_slot);
        });
    }
}

/// Serves HTTP/1.1 on one connection, within its limits.
async fn serve_http<I, S>(io: I, service: S, limits: HttpLimits, peer: std::net::SocketAddr)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::HttpService<hyper::body::Incoming> + Send,
    S::Future: Send + 'static,
    S::ResBody: Send + 'static,
    <S::ResBody as hyper::body::Body>::Data: Send,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    // With upgrades: a WebSocket's connection leaves the HTTP server (its slot, its
    // lifetime) once upgraded, and lives as the session it became.
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    match tokio::time::timeout(limits.connection_lifetime, connection).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::debug!(%peer, %error, "HTTP connection failed"),
        Err(_) => tracing::debug!(%peer, "HTTP connection closed at its lifetime"),
    }
}
