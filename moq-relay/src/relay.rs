//! The relay: one UDP port for both bindings, one shared origin, a session per client
//! scoped by its token, and a graceful stop.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;

use moqx_net::model::{MemoryBudget, Origin};
use moqx_net::session::SessionConfig;
use moqx_runtime::admission::Admission;
use moqx_runtime::binding::Binding;
use moqx_runtime::client::ClientConfig;
use moqx_runtime::quic_trace::{KeyLog, QlogDir, QuicTrace};
use moqx_runtime::server::ServerConfig;
use moqx_runtime::tls::{Certificate, Fingerprint};

use crate::auth::AuthError;
use crate::certificate_watch::CertificateFeed;
use crate::cluster::Cluster;
use crate::config::Config;
use crate::driver::{self, Listener};
use crate::gatekeeper::Gatekeeper;
use crate::http::{HttpLimits, HttpServer};
use crate::metrics::Metrics;
use crate::policy::Policy;
use crate::reload::RelayHandle;

/// Why the relay could not start.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// The configuration would not work.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The certificate could not be loaded or made.
    #[error("tls: {0}")]
    Tls(#[from] moqx_runtime::tls::TlsError),
    /// The web port's TLS context (for `wss://` and `tls://`) could not be built from the
    /// certificate.
    #[error("tls (the web port): {0}")]
    WebTls(moqx_runtime::quiche_config::ConfigError),
    /// The auth key could not be loaded.
    #[error("auth.key: {0}")]
    Auth(#[from] AuthError),
    /// The JWK Set at `auth.key_url` could not be fetched.
    #[error("auth.key_url: {0}")]
    KeyUrl(String),
    /// The UDP port could not be bound, or the driver could not start.
    #[error("server.bind: {0}")]
    Bind(driver::BindError),
    /// The cluster token file could not be read.
    #[error("cluster.token: reading {path}: {source}")]
    ClusterToken {
        /// The file.
        path: std::path::PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The plain-TCP port could not be bound.
    #[error("server.tcp_bind {address}: {source}")]
    TcpBind {
        /// The address.
        address: SocketAddr,
        /// What the listener said.
        source: moqx_tokio::Error,
    },
    /// The ops listener's port could not be bound.
    #[error("http.ops_bind {address}: {source}")]
    OpsBind {
        /// The address.
        address: SocketAddr,
        /// What the system said.
        source: std::io::Error,
    },
    /// A debugging file or directory could not be made.
    #[error("{key} {path}: {source}")]
    Debug {
        /// The setting.
        key: &'static str,
        /// Its path.
        path: std::path::PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The HTTP port could not be bound.
    #[error("http.bind {address}: {source}")]
    HttpBind {
        /// The address.
        address: SocketAddr,
        /// What the system said.
        source: std::io::Error,
    },
}

/// A bound relay, ready to [`run`](Relay::run), on the driver `L` (as configured: tokio
/// work-stealing or thread per core, or io_uring).
#[derive(Debug)]
pub struct Relay<L: Listener = driver::Server> {
    server: L,
    http: Option<HttpServer>,
    /// The operator's listener (`http.ops_bind`), if configured.
    ops: Option<HttpServer>,
    /// How QMux clients (WebSocket, TLS) are served on the HTTP port (`None`: they are
    /// not).
    qmux: Option<Arc<crate::web_qmux::QmuxService>>,
    /// The plain-TCP QMux listener (`server.tcp_bind`), if configured.
    tcp: Option<moqx_tokio::QmuxListener>,
    /// `limits.max_sessions_per_address`, which QMux clients count against here.
    max_sessions_per_address: usize,
    gatekeeper: Arc<Gatekeeper>,
    /// What may change while it runs, the certificate every binding presents included.
    handle: RelayHandle,
}

/// How long a stopping relay waits for its driver to close the connections the drain
/// closed (their close frames going out) before it returns anyway.
const DRIVER_SHUTDOWN: Duration = Duration::from_secs(2);

/// How long a driver that stopped serving on its own gets to say why.
const FAILURE_REPORT: Duration = Duration::from_secs(1);

/// How long the sessions closed at the end of a drain get, all together, for their close
/// frames to leave.
const CLOSE_GRACE: Duration = Duration::from_millis(200);

impl Relay {
    /// Loads the certificate and key, binds the UDP port (and the HTTP one), on the
    /// configured tokio mode; the caller's tokio runtime serves HTTP and the accept loop.
    pub async fn bind(config: &Config) -> Result<Self, RelayError> {
        config.validate()?;
        let certificate = match (&config.tls.cert, &config.tls.key) {
            (Some(cert), Some(key)) => Certificate::from_pem_files(cert, key)?,
            _ => {
                Certificate::self_signed_for(&config.tls.names, config.tls.self_signed_validity())?
            }
        };
        let cluster_id = config.cluster.id.unwrap_or_else(origin_id);
        let memory = MemoryBudget::new(config.limits.memory_budget_bytes());
        tracing::info!(bytes = memory.limit(), "memory budget");
        let session = crate::policy::session_limits(&config.limits, {
            let mut session_config = SessionConfig::default();
            session_config.memory_budget = Some(memory.clone());
            // Clients' routes are whatever they claim: every client counts as
            // direct, and the newest publisher of a path is served (README, "Taking
            // over a path").
            session_config.trust_peer_routes = false;
            session_config.origin_id = cluster_id;
            session_config
        });
        let fetched_keys = match &config.auth.key_url {
            Some(url) => Some(
                crate::jwks_fetch::fetch(url)
                    .await
                    .map_err(RelayError::KeyUrl)?,
            ),
            None => None,
        };
        let policy = Policy::new(config, &session, fetched_keys.as_deref())?;
        let mut server_config = ServerConfig::new(config.server.bind, certificate, session.clone());
        server_config.trace = quic_trace(&config.debug)?;
        let certificates = server_config.certificates.clone();
        let feed = CertificateFeed::new(certificates.clone());
        server_config.udp.gso = config.server.gso;
        server_config.udp.gro = config.server.gro;
        server_config.udp.recv_batch = config.server.recv_batch;
        server_config.versions = config.server.parsed_versions()?;
        tracing::info!(versions = ?server_config.versions, "accepting protocol versions");
        // A connection over the session limit must still reach us to be refused cleanly.
        server_config.admission = {
            let mut admission = Admission::default();
            // Established sessions, connections waiting for their SETUP, and a margin
            // for the ones being refused cleanly.
            admission.max_connections = config
                .limits
                .max_sessions
                .saturating_add(config.limits.max_pending_setup)
                .saturating_add(64);
            admission.max_half_open = config.limits.max_half_open;
            admission.retry_above = config.limits.retry_above_half_open;
            admission.max_per_address = config.limits.max_sessions_per_address;
            admission
        };
        // A WebTransport client waiting for its CONNECT is a connection that has not said
        // who it is, like a raw-QUIC one waiting for its SETUP: the same bound.
        server_config.max_pending_handshakes = config.limits.max_pending_setup;
        server_config.limits.idle_timeout = Duration::from_secs(config.limits.idle_timeout_secs);
        server_config.limits.congestion_control = config.server.parsed_congestion_control()?;
        let (server_config_versions, server_limits) =
            (server_config.versions.clone(), server_config.limits.clone());
        let server = driver::bind(&config.server, server_config)
            .await
            .map_err(RelayError::Bind)?;
        let limits = HttpLimits {
            max_connections: config.http.max_connections,
            max_connections_per_address: config.http.max_connections_per_address,
            header_read_timeout: Duration::from_secs(config.http.header_read_timeout_secs),
            connection_lifetime: Duration::from_secs(config.http.connection_lifetime_secs),
        };
        let http = if config.http.enabled {
            let address = config.http.bind.unwrap_or_else(|| server.local_addr());
            let http = HttpServer::bind(address, limits, config.http.web_root.clone())
                .await
                .map_err(|source| RelayError::HttpBind { address, source })?;
            Some(http)
        } else {
            None
        };
        let ops = match config.http.ops_bind {
            Some(address) => Some(
                HttpServer::bind(address, limits, None)
                    .await
                    .map_err(|source| RelayError::OpsBind { address, source })?,
            ),
            None => None,
        };
        // The session each WebSocket client starts from is the gatekeeper's choice, as
        // for every other client; this one is only the listener's default.
        let mut qmux_config = moqx_tokio::QmuxServerConfig::new(session.clone());
        qmux_config.versions = server_config_versions.clone();
        qmux_config.limits = server_limits.clone();
        qmux_config.handshake_timeout = Duration::from_secs(config.limits.setup_timeout_secs);
        qmux_config.max_pending_handshakes = config.limits.max_pending_setup;
        let tcp = match config.server.tcp_bind {
            Some(address) => Some(
                moqx_tokio::QmuxListener::bind(address, Binding::Tcp, qmux_config.clone())
                    .await
                    .map_err(|source| RelayError::TcpBind { address, source })?,
            ),
            None => None,
        };
        let websocket = (config.http.enabled && config.http.websocket).then_some(qmux_config);
        let websocket = match websocket {
            Some(websocket) => {
                let tls =
                    crate::web_qmux::WebTls::new(certificates.clone(), websocket.versions.clone())
                        .map_err(RelayError::WebTls)?;
                Some((websocket, tls))
            }
            None => None,
        };
        let max_sessions_per_address = config.limits.max_sessions_per_address;
        let cluster = Arc::new(cluster(config, cluster_id, &session)?);
        let workers = server.counters();
        let gatekeeper = Arc::new(Gatekeeper {
            origin: Origin::with_memory_budget(memory.clone()),
            metrics: Arc::new(Metrics::with_workers(workers).with_memory_budget(memory)),
            policy: std::sync::RwLock::new(Arc::new(policy)),
            next_id: AtomicU64::new(0),
            draining: AtomicBool::new(false),
            cluster,
        });
        let qmux = websocket.map(|(config, tls)| {
            Arc::new(crate::web_qmux::QmuxService {
                gatekeeper: gatekeeper.clone(),
                config,
                tls,
                per_address: Arc::default(),
                max_per_address: max_sessions_per_address,
            })
        });
        let handle = RelayHandle {
            gatekeeper: gatekeeper.clone(),
            certificates: feed,
            base: session,
            applied: Arc::new(std::sync::Mutex::new(config.clone())),
            fetched_keys: Arc::new(std::sync::Mutex::new(fetched_keys)),
            reloads: Arc::new(tokio::sync::watch::channel(0).0),
        };
        Ok(Self {
            server,
            http,
            ops,
            qmux,
            tcp,
            max_sessions_per_address,
            gatekeeper,
            handle,
        })
    }
}

impl<L: Listener> Relay<L> {
    /// The UDP address both bindings listen on.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// The HTTP address, if HTTP is on.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http.as_ref().and_then(|http| http.local_addr().ok())
    }

    /// The ops listener's address (`http.ops_bind`), if it has one.
    pub fn ops_addr(&self) -> Option<SocketAddr> {
        self.ops.as_ref().and_then(|ops| ops.local_addr().ok())
    }

    /// The certificate's SHA-256 fingerprint, for clients to pin (the one in force now:
    /// it changes when the certificate is replaced).
    pub fn fingerprint(&self) -> Fingerprint {
        self.handle.certificates.certificates.fingerprint()
    }

    /// A handle for what may change while the relay runs: [`RelayHandle::reload`] and
    /// readiness.
    pub fn handle(&self) -> RelayHandle {
        self.handle.clone()
    }

    /// The origin every session shares.
    pub fn origin(&self) -> &Origin {
        &self.gatekeeper.origin
    }

    /// Serves until `shutdown` completes, then drains: GOAWAY to every session, up to the
    /// drain deadline for them to leave, and the rest closed. If the driver fails while
    /// serving (an io_uring worker died, and with it its connections), it drains the
    /// rest the same way and returns the failure: the process should exit non-zero, so
    /// that its supervisor starts a whole relay again.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> Result<(), DriverFailed> {
        let shared = crate::http::routes::Shared {
            gatekeeper: self.gatekeeper.clone(),
            certificates: self.handle.certificates.certificates.clone(),
        };
        let websocket = self.qmux.take();
        let ops = self.ops.take();
        let http = self.http.take().map(|http| {
            let routes = crate::http::routes::public(shared.clone(), ops.is_none());
            http.spawn(routes, websocket)
        });
        let ops = ops.map(|ops| {
            if let Ok(address) = ops.local_addr() {
                tracing::info!(%address, "ops listener: /metrics, /health, /ready, /cluster, /debug/sessions");
            }
            ops.spawn(crate::http::routes::operator(shared), None)
        });
        let renewal = crate::certificate_watch::spawn(
            &self.handle.config().tls,
            self.handle.certificates.clone(),
        );
        let keys = tokio::spawn(crate::key_source::follow(self.handle.clone()));
        let tcp = self.tcp.take().map(|listener| {
            tracing::info!(address = %listener.local_addr(), "serving QMux on plain TCP (tcp://): trusted networks only");
            tokio::spawn(crate::tcp_qmux::serve(
                listener,
                self.gatekeeper.clone(),
                self.max_sessions_per_address,
            ))
        });
        self.gatekeeper.cluster.start(&self.gatekeeper.origin);
        // The driver admits clients through the gatekeeper until it stops, or until the
        // shutdown signal.
        let failed = self.server.failed();
        tokio::pin!(failed);
        let mut failure = None;
        tokio::select! {
            () = self.server.serve(self.gatekeeper.clone()) => {
                // Nobody asked it to stop: a worker died (its reason may be a moment
                // behind the end of its requests).
                let reason = tokio::time::timeout(FAILURE_REPORT, &mut failed)
                    .await
                    .unwrap_or_else(|_| "the driver stopped serving".to_owned());
                tracing::error!(%reason, "the driver failed: draining and stopping");
                failure = Some(DriverFailed(reason));
            }
            () = shutdown => {}
            reason = &mut failed => {
                tracing::error!(%reason, "the driver failed: draining and stopping");
                failure = Some(DriverFailed(reason));
            }
        }
        // No one new during the drain: refused at the gate, and no new connection; no
        // more dials of peers, and GOAWAY to the ones linked.
        self.gatekeeper.begin_drain();
        self.gatekeeper.cluster.stop();
        self.server.stop_admitting();
        if let Some(tcp) = tcp {
            tcp.abort();
        }
        self.drain().await;
        for task in [http, ops, Some(renewal), Some(keys)].into_iter().flatten() {
            task.abort();
        }
        if tokio::time::timeout(DRIVER_SHUTDOWN, self.server.shutdown())
            .await
            .is_err()
        {
            tracing::debug!("the driver still had connections closing; stopping anyway");
        }
        failure.map_or(Ok(()), Err)
    }

    /// GOAWAY to every session, then up to the drain deadline for them to leave; the rest
    /// are closed (a clean close: their subscribers see their tracks end).
    async fn drain(&self) {
        let mut sessions = self.gatekeeper.metrics.live_sessions();
        sessions.extend(self.gatekeeper.cluster.outbound_sessions());
        let drain = self.gatekeeper.policy().drain;
        tracing::info!(sessions = sessions.len(), ?drain, "shutting down");
        for session in &sessions {
            session.goaway("");
        }
        let deadline = tokio::time::Instant::now() + drain;
        for session in &sessions {
            if tokio::time::timeout_at(deadline, session.closed())
                .await
                .is_err()
            {
                break;
            }
        }
        let mut remaining = self.gatekeeper.metrics.live_sessions();
        remaining.extend(self.gatekeeper.cluster.outbound_sessions());
        tracing::info!(
            left = sessions.len().saturating_sub(remaining.len()),
            closed_at_deadline = remaining.len(),
            "drain over"
        );
        // Sessions serving subscriptions first, and the rest once those are closed: a
        // subscriber whose publisher is on this relay learns of the shutdown from its own
        // session's close, not from its track dropped a moment earlier because the
        // publisher's session happened to close first (on another worker).
        let (serving, rest): (Vec<_>, Vec<_>) = remaining
            .into_iter()
            .partition(|session| session.counters().subscriptions_active > 0);
        close_all(&serving).await;
        close_all(&rest).await;
    }
}

/// Closes `sessions` and gives their close frames a moment (all together, not each) to
/// leave before the caller goes on.
async fn close_all(sessions: &[moqx_net::session::Session]) {
    for session in sessions {
        session.close(moqx_net::Error::Cancel);
    }
    let deadline = tokio::time::Instant::now() + CLOSE_GRACE;
    for session in sessions {
        if tokio::time::timeout_at(deadline, session.closed())
            .await
            .is_err()
        {
            break;
        }
    }
}

/// What `[debug]` asks to be traced of each QUIC connection.
fn quic_trace(settings: &crate::config::DebugSection) -> Result<QuicTrace, RelayError> {
    let mut trace = QuicTrace::default();
    if let Some(dir) = &settings.qlog_dir {
        let qlogs = QlogDir::new(dir, settings.qlog_max_files, settings.qlog_max_file_bytes)
            .map_err(|source| RelayError::Debug {
                key: "debug.qlog_dir",
                path: dir.clone(),
                source,
            })?;
        tracing::info!(dir = %dir.display(), max_files = settings.qlog_max_files, "a qlog of each QUIC connection");
        trace.qlog = Some(Arc::new(qlogs));
    }
    if let Some(path) = &settings.keylog_file {
        let keylog = KeyLog::open(path).map_err(|source| RelayError::Debug {
            key: "debug.keylog_file",
            path: path.clone(),
            source,
        })?;
        tracing::warn!(path = %path.display(), "the TLS secrets of every QUIC connection are written to a key log: anyone who reads it can decrypt the traffic");
        trace.keylog = Some(keylog);
    }
    Ok(trace)
}

/// The relay's driver failed while serving: see [`Relay::run`].
#[derive(Debug, Clone, thiserror::Error)]
#[error("the relay's driver failed: {0}")]
pub struct DriverFailed(pub String);

/// A random nonzero hop id, so that relays linked in a mesh drop looped announcements:
/// below 2^53, as `cluster.id` must be (browsers read it as a JavaScript number).
fn origin_id() -> u64 {
    use ring::rand::{SecureRandom, SystemRandom};
    let mut bytes = [0u8; 8];
    let _ = SystemRandom::new().fill(&mut bytes);
    (u64::from_le_bytes(bytes) & crate::cluster::MAX_CLUSTER_ID).max(1)
}

/// The relay's cluster: its peers dialed with the relay's own session limits and
/// versions, over links that notice a dead peer within `cluster.peer_timeout_secs`.
fn cluster(config: &Config, id: u64, session: &SessionConfig) -> Result<Cluster, RelayError> {
    let token = match &config.cluster.token {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|source| RelayError::ClusterToken {
                    path: path.clone(),
                    source,
                })?
                .trim()
                .to_owned(),
        ),
        None => None,
    };
    let peers = config.cluster.peers(token.as_deref())?;
    let mut client = {
        let mut client_config = ClientConfig::default();
        client_config.session = session.clone();
        client_config.versions = config.server.parsed_versions()?;
        client_config.insecure_skip_verify = config.cluster.insecure_skip_verify;
        client_config
    };
    client.limits.idle_timeout = config.cluster.peer_timeout();
    client.limits.congestion_control = config.server.parsed_congestion_control()?;
    if !peers.is_empty() || config.cluster.mesh {
        tracing::info!(
            id,
            peers = peers.len(),
            timeout = ?client.limits.idle_timeout,
            "cluster: dialing peers"
        );
        if config.cluster.insecure_skip_verify {
            tracing::warn!("cluster.insecure_skip_verify: peers' certificates are not checked");
        }
    }
    let node = config.cluster.gossip_node();
    Ok(Cluster::new(
        id,
        peers,
        client,
        token,
        node,
        config.cluster.linger(),
    ))
}
