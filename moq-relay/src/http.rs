//! The relay's HTTP side (TCP): `/metrics` for Prometheus, and `/certificate.sha256` so a
//! browser can pin the relay's self-signed certificate before it connects over
//! WebTransport.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use moq_net::model::Origin;

use crate::metrics::Metrics;

/// What the handlers read.
#[derive(Clone)]
struct Shared {
    metrics: Arc<Metrics>,
    origin: Origin,
    fingerprint: String,
}

/// A bound HTTP listener, not yet serving.
#[derive(Debug)]
pub(crate) struct HttpServer {
    listener: tokio::net::TcpListener,
}

impl HttpServer {
    /// Binds `address` (TCP).
    pub(crate) async fn bind(address: SocketAddr) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(address).await?;
        Ok(Self { listener })
    }

    /// The bound address.
    pub(crate) fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the task is aborted.
    pub(crate) fn spawn(
        self,
        metrics: Arc<Metrics>,
        origin: Origin,
        fingerprint: String,
    ) -> tokio::task::JoinHandle<()> {
        let shared = Shared {
            metrics,
            origin,
            fingerprint,
        };
        let app = Router::new()
            .route("/metrics", get(metrics_text))
            .route("/certificate.sha256", get(certificate))
            .with_state(shared);
        tokio::spawn(async move {
            if let Err(error) = axum::serve(self.listener, app).await {
                tracing::error!(%error, "the HTTP server stopped");
            }
        })
    }
}

async fn metrics_text(State(shared): State<Shared>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        shared.metrics.render(&shared.origin),
    )
}

async fn certificate(State(shared): State<Shared>) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/plain"),
            // Browsers on another origin (a web page served elsewhere) fetch it too.
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
        ],
        shared.fingerprint,
    )
}
