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
        let session = match path_in_request {
            // The path (and token) came with the request: decide now.
            true => {
                let path = request.path().unwrap_or_default();
                match policy
                    .authorizer
                    .authorize(&self.origin, &path, SystemTime::now())
                {
                    Ok(grant) if grant.peer => {
                        // It may be a peer: its SETUP says whether it is a relay.
                        tracing::info!(?remote, %version, root = %grant.root, "{binding} session");
                        let (cluster, metrics, origins) =
                            (self.cluster.clone(), self.metrics.clone(), grant.origins);
                        let hook = Authorize::new(move |setup| {
                            let mut origins = origins.clone();
                            origins.trust_routes = is_peer(setup);
                            if origins.trust_routes {
                                record_peer(&cluster, &metrics, id, remote);
                            }
                            Ok(origins)
                        });
                        request.accept_with(session_config(&policy, Origins::default(), Some(hook)))
                    }
                    Ok(grant) => {
                        tracing::info!(?remote, %version, root = %grant.root, "{binding} session");
                        request.accept_with(session_config(&policy, grant.origins, None))
                    }
                    Err(error) => {
                        tracing::warn!(
                            ?remote,
                            error = %moqx_net::redact::Redacted(&error.to_string()),
                            "refused"
                        );
                        self.metrics.refused(Refusal::Unauthorized);
                        request.reject(StatusCode::FORBIDDEN, moqx_net::Error::Unauthorized);
                        return None;
                    }
                }
            }
            // The path arrives in SETUP: the session decides when it does.
            false => {
                let (authorizer, origin, metrics, max_sessions, cluster) = (
                    policy.authorizer.clone(),
                    self.origin.clone(),
                    self.metrics.clone(),
                    policy.max_sessions,
                    self.cluster.clone(),
                );
                let hook = Authorize::new(move |setup| {
                    let path = setup.path.as_deref().unwrap_or("/");
                    match authorizer.authorize(&origin, path, SystemTime::now()) {
                        Ok(_) if !metrics.try_establish(id, max_sessions) => {
                            tracing::warn!(
                                ?remote,
                                "refused at SETUP: limits.max_sessions reached"
                            );
                            metrics.refused(Refusal::TooManySessions);
                            Err(moqx_net::Error::BoundsExceeded)
                        }
                        Ok(mut grant) => {
                            let peer = grant.peer && is_peer(setup);
                            tracing::info!(?remote, %version, root = %grant.root, peer, "{binding} session");
                            if peer {
                                record_peer(&cluster, &metrics, id, remote);
                            }
                            grant.origins.trust_routes = peer;
                            Ok(grant.origins)
                        }
                        Err(error) => {
                            tracing::warn!(
                                ?remote,
                                error = %moqx_net::redact::Redacted(&error.to_string()),
                                "refused"
                            );
                            metrics.refused(Refusal::Unauthorized);
                            Err(moqx_net::Error::Unauthorized)
                        }
                    }
                });
                request.accept_with(session_config(&policy, Origins::default(), Some(hook)))
            }
        };
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

/// What a session starts from under `policy`: `origins` (or what `authorize` decides at
/// its SETUP).
fn session_config(
    policy: &Policy,
    origins: Origins,
    authorize: Option<Authorize>,
) -> SessionConfig {
    SessionConfig {
        publish: origins.publish,
        subscribe: origins.subscribe,
        valid_for: origins.valid_for,
        trust_peer_routes: origins.trust_routes || policy.session.trust_peer_routes,
        subscribe_prefix: Path::root(),
        authorize,
        ..policy.session.clone()
    }
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
