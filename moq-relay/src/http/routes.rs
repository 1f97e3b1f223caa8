//! What the relay's HTTP listeners answer: the public port's routes for clients, and the
//! operator's (`/metrics`, `/cluster`, `/debug/sessions`), on the public port or on an ops
//! listener of their own (`http.ops_bind`).

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use serde::Serialize;

use crate::gatekeeper::Gatekeeper;

/// What the handlers read.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) gatekeeper: Arc<Gatekeeper>,
    /// The certificate in force, whose SHA-256 `/certificate.sha256` serves.
    pub(crate) certificates: moqx_runtime::certificates::Certificates,
}

/// The public port's routes: the certificate's fingerprint and the probes, with the
/// operator's routes too unless they have a listener of their own.
pub(crate) fn public(shared: Shared, with_operator_routes: bool) -> Router {
    let routes = Router::new()
        .route("/certificate.sha256", get(certificate))
        .route("/health", get(health))
        .route("/ready", get(ready));
    let routes = match with_operator_routes {
        true => routes
            .route("/metrics", get(metrics_text))
            .route("/cluster", get(cluster_topology)),
        false => routes,
    };
    routes.with_state(shared)
}

/// The ops listener's routes: metrics, probes, the cluster, and the live sessions.
pub(crate) fn operator(shared: Shared) -> Router {
    Router::new()
        .route("/metrics", get(metrics_text))
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/cluster", get(cluster_topology))
        .route("/debug/sessions", get(debug_sessions))
        .with_state(shared)
}

async fn metrics_text(State(shared): State<Shared>) -> impl IntoResponse {
    let gatekeeper = &shared.gatekeeper;
    let mut text = gatekeeper.metrics.render(&gatekeeper.origin);
    gatekeeper
        .cluster
        .render_metrics(&mut text, &gatekeeper.origin);
    crate::process_metrics::render(&mut text);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}

/// `GET /cluster`: this relay's id, its links to other relays, and the route of every
/// broadcast it knows, as JSON.
async fn cluster_topology(State(shared): State<Shared>) -> impl IntoResponse {
    let gatekeeper = &shared.gatekeeper;
    let topology = gatekeeper.cluster.topology(&gatekeeper.origin);
    let body = serde_json::to_string_pretty(&topology).unwrap_or_else(|_| "{}".to_owned());
    ([(header::CONTENT_TYPE, "application/json")], body)
}

async fn certificate(State(shared): State<Shared>) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/plain"),
            // Browsers on another origin (a web page served elsewhere) fetch it too.
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
        ],
        shared
            .certificates
            .fingerprint()
            .0
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect::<String>(),
    )
}

/// `GET /health`: the process serves HTTP (a liveness probe).
async fn health() -> impl IntoResponse {
    "ok\n"
}

/// `GET /ready`: 200 while new clients are taken, 503 from the start of a drain and while
/// `limits.max_sessions` are established (a readiness probe, a load balancer's check).
async fn ready(State(shared): State<Shared>) -> impl IntoResponse {
    let gatekeeper = &shared.gatekeeper;
    if gatekeeper.is_draining() {
        (StatusCode::SERVICE_UNAVAILABLE, "draining\n")
    } else if !gatekeeper.is_ready() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "full: limits.max_sessions\n",
        )
    } else {
        (StatusCode::OK, "ready\n")
    }
}

/// One live session in `/debug/sessions`.
#[derive(Debug, Serialize)]
struct SessionView {
    id: u64,
    /// The client's address.
    peer: Option<String>,
    binding: &'static str,
    version: String,
    /// Past its SETUP (authorized), or still waiting for it.
    established: bool,
    age_secs: f64,
    subscriptions: u64,
    frames_sent: u64,
    frames_received: u64,
    bytes_sent: u64,
    bytes_received: u64,
    rtt_ms: Option<f64>,
}

/// `GET /debug/sessions` (ops listener only): every live session, as JSON.
async fn debug_sessions(State(shared): State<Shared>) -> impl IntoResponse {
    let now = std::time::Instant::now();
    let sessions: Vec<SessionView> = shared
        .gatekeeper
        .metrics
        .live_details()
        .into_iter()
        .map(|live| {
            let (counters, stats) = (live.session.counters(), live.session.stats());
            SessionView {
                id: live.id,
                peer: live.peer.map(|peer| peer.to_string()),
                binding: live.binding,
                version: live.session.version().to_string(),
                established: live.established,
                age_secs: now.duration_since(live.since).as_secs_f64(),
                subscriptions: counters.subscriptions_active,
                frames_sent: counters.frames_sent,
                frames_received: counters.frames_received,
                bytes_sent: stats.bytes_sent,
                bytes_received: stats.bytes_received,
                rtt_ms: stats.rtt.map(|rtt| rtt.as_secs_f64() * 1000.0),
            }
        })
        .collect();
    let body = serde_json::to_string_pretty(&sessions).unwrap_or_else(|_| "[]".to_owned());
    ([(header::CONTENT_TYPE, "application/json")], body)
}
