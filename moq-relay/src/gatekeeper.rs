//! Who may connect, with which rights, how many: the relay's admission policy, the same
//! on every driver, callable from any of its threads.
//!
//! A driver hands each client whose handshakes completed to [`Gatekeeper::admit`] (the
//! tokio drivers on the relay's accept loop, the io_uring one on the worker that holds
//! the connection) and runs the task it returns.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use moqx_net::model::{Origin, Path};
use moqx_net::runtime::Runtime;
use moqx_net::session::{Authorize, Origins, Session, SessionConfig};
use moqx_runtime::binding::{Binding, BindingSession};
use moqx_runtime::server::Request;
use moqx_runtime::webtransport::StatusCode;

use crate::metrics::{Metrics, Refusal};
use crate::policy::Policy;

/// The relay's admission policy and what it counts with.
#[derive(Debug)]
pub struct Gatekeeper {
    pub(crate) origin: Origin,
    pub(crate) metrics: Arc<Metrics>,
    /// What a reload can change; read once per client.
    pub(crate) policy: RwLock<Arc<Policy>>,
    /// The last session id given.
    pub(crate) next_id: AtomicU64,
    /// Set when the relay starts draining: new clients are refused.
    pub(crate) draining: AtomicBool,
    /// The relay's cluster: the peers among the sessions admitted here are recorded in it.
    pub(crate) cluster: Arc<crate::cluster::Cluster>,
}

impl Gatekeeper {
    /// The policy in force.
    pub(crate) fn policy(&self) -> Arc<Policy> {
        self.policy
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Puts `policy` in force for the clients that come from now on.
    pub(crate) fn set_policy(&self, policy: Policy) {
        *self
            .policy
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(policy);
    }

    /// Whether the relay is draining (refusing every new client).
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Whether a new client would be taken now: not draining, and below
    /// `limits.max_sessions` (what `/ready` says).
    pub fn is_ready(&self) -> bool {
        !self.is_draining() && self.metrics.session_count() < self.policy().max_sessions
    }

    /// Refuses every client from now on: the relay is draining.
    pub fn begin_drain(&self) {
        self.draining.store(true, Ordering::Release);
    }

    /// Accepts or refuses one client; if accepted, returns the task that counts its
    /// session until it ends (the caller runs it, on the driver's runtime).
    ///
    /// A session counts against `limits.max_sessions` once established: at its CONNECT
    /// over WebTransport, at its SETUP over raw QUIC. A raw-QUIC connection waiting for
    /// its SETUP counts against `limits.max_pending_setup` instead, so that connections
    /// that never say who they are cannot take established sessions' places.
    pub fn admit<R>(&self, request: Request<R>) -> Option<impl Future<Output = ()> + Send + 'static>
    where
        R: Runtime<Transport = BindingSession>,
    {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let policy = self.policy();
        let remote = request.remote_addr();
        let binding = request.binding();
        let version = request.version();
        if self.draining.load(Ordering::Acquire) {
            // A client that completed its handshake as the drain began: it would only be
            // closed at the drain's deadline (review finding F6).
            tracing::debug!(?remote, "refused: the relay is draining");
            self.metrics.refused(Refusal::Draining);
            request.reject(StatusCode::SERVICE_UNAVAILABLE, moqx_net::Error::Cancel);
            return None;
        }
        // WebTransport and WebSocket clients name their path (and token) in their request;
        // raw QUIC, TLS and TCP ones in SETUP, once the session runs.
        let path_in_request = matches!(binding, Binding::WebTransport | Binding::WebSocket);
        if path_in_request && self.metrics.session_count() >= policy.max_sessions {
            tracing::warn!(?remote, "refused: limits.max_sessions reached");
            self.metrics.refused(Refusal::TooManySessions);
            request.reject(
                StatusCode::SERVICE_UNAVAILABLE,
                moqx_net::Error::BoundsExceeded,
            );
            return None;
        }
        if !path_in_request && self.metrics.pending_count() >= policy.max_pending_setup {
            tracing::warn!(?remote, "refused: limits.max_pending_setup reached");
            self.metrics.refused(Refusal::TooManyPending);
            request.reject(
                StatusCode::SERVICE_UNAVAILABLE,
                moqx_net::Error::BoundsExceeded,
            );
            return None;
        }
        let decision = Decision {
            authorizer: policy.authorizer.clone(),
            origin: self.origin.clone(),
            metrics: self.metrics.clone(),
            cluster: self.cluster.clone(),
            max_sessions: policy.max_sessions,
            id,
            remote,
            binding,
            version,
            established: path_in_request,
        };
        // A client that named its path in its request is refused before its session
        // starts, so that it gets its HTTP status (403) at once; it is decided again, the
        // same way, at its SETUP (which says whether it is a relay of the cluster).
        if path_in_request && let Err(error) = decision.check(&request.path().unwrap_or_default()) {
            request.reject(StatusCode::FORBIDDEN, error);
            return None;
        }
        let hook = Authorize::new(move |setup| decision.decide(setup));
        let session = request.accept_with(session_config(&policy, Origins::default(), Some(hook)));
        Some(self.watch(id, session, path_in_request, binding, remote))
    }

    /// Counts the session while it lives (established already, or once its SETUP is
    /// authorized), and how it ended.
    fn watch(
        &self,
        id: u64,
        session: Session,
        established: bool,
        binding: Binding,
        remote: Option<std::net::SocketAddr>,
    ) -> impl Future<Output = ()> + Send + 'static {
        self.metrics
            .opened(id, session.clone(), established, binding, remote);
        // A WebTransport peer was recorded before its session existed.
        self.cluster.inbound_session(id, &session);
        let (metrics, cluster) = (self.metrics.clone(), self.cluster.clone());
        async move {
            let error = session.closed().await;
            tracing::debug!(id, %error, "session ended");
            metrics.closed(id, error);
            cluster.inbound_closed(id);
        }
    }
}

/// The one authorization point, for every binding: the client's path (and token), named
/// in its SETUP or in its request, against the authorizer in force when it came.
struct Decision {
    authorizer: Arc<moqx_auth::Authorizer>,
    origin: Origin,
    metrics: Arc<Metrics>,
    cluster: Arc<crate::cluster::Cluster>,
    max_sessions: usize,
    id: u64,
    remote: Option<std::net::SocketAddr>,
    binding: Binding,
    version: moqx_net::coding::Version,
    /// Counted against `limits.max_sessions` already (at its request); else it is at its
    /// SETUP, here.
    established: bool,
}

impl Decision {
    /// Whether the token in `path` lets the client in at all (logged and counted if not).
    fn check(&self, path: &str) -> Result<moqx_auth::Grant, moqx_net::Error> {
        self.authorizer
            .authorize(&self.origin, path, SystemTime::now())
            .map_err(|error| {
                tracing::warn!(
                    remote = ?self.remote,
                    error = %moqx_net::redact::Redacted(&error.to_string()),
                    "refused"
                );
                self.metrics.refused(Refusal::Unauthorized);
                moqx_net::Error::Unauthorized
            })
    }

    /// The session's origins, decided at the client's SETUP (whose path is the one the
    /// client named, wherever it did): what its token grants, within `max_sessions`, and
    /// whether it is a relay of the cluster (its SETUP names its hop id).
    fn decide(&self, setup: &moqx_net::coding::Setup) -> Result<Origins, moqx_net::Error> {
        let mut grant = self.check(setup.path.as_deref().unwrap_or("/"))?;
        if !self.established && !self.metrics.try_establish(self.id, self.max_sessions) {
            tracing::warn!(remote = ?self.remote, "refused at SETUP: limits.max_sessions reached");
            self.metrics.refused(Refusal::TooManySessions);
            return Err(moqx_net::Error::BoundsExceeded);
        }
        let peer = grant.peer && is_peer(setup);
        tracing::info!(remote = ?self.remote, version = %self.version, root = %grant.root, peer, "{} session", self.binding);
        if peer {
            record_peer(&self.cluster, &self.metrics, self.id, self.remote);
        }
        grant.origins.trust_routes = peer;
        Ok(grant.origins)
    }
}

/// What a session starts from under `policy`: `origins` (or what `authorize` decides at
/// its SETUP).
fn session_config(
    policy: &Policy,
    origins: Origins,
    authorize: Option<Authorize>,
) -> SessionConfig {
    let mut session_config = policy.session.clone();
    session_config.publish = origins.publish;
    session_config.subscribe = origins.subscribe;
    session_config.valid_for = origins.valid_for;
    session_config.trust_peer_routes = origins.trust_routes || policy.session.trust_peer_routes;
    session_config.subscribe_prefix = Path::root();
    session_config.authorize = authorize;
    session_config
}

/// Whether a client whose token makes it eligible is a relay of the cluster: relays name
/// their hop id in SETUP (the Origin parameter), clients do not.
fn is_peer(setup: &moqx_net::coding::Setup) -> bool {
    setup.origin.is_some()
}

/// Records the session `id` as an inbound peer of `cluster`, with its handle if `metrics`
/// has it already (else the gatekeeper's watch attaches it).
fn record_peer(
    cluster: &crate::cluster::Cluster,
    metrics: &Metrics,
    id: u64,
    remote: Option<std::net::SocketAddr>,
) {
    cluster.inbound_opened(id, remote);
    if let Some(session) = metrics.session(id) {
        cluster.inbound_session(id, &session);
    }
}
