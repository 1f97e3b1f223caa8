//! The tokio driver as a conformance harness: every connection a real server on its own
//! loopback port and a real client, over the binding a URL scheme picks, with the server
//! work-stealing or thread per core.

pub(crate) mod netns;
mod paths;

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use moq_conformance::{Harness, Task};
use moq_impair::Impairment;
use moqx_net::coding::Version;
use moqx_net::session::{Session, SessionConfig};
use moqx_runtime::binding::Binding;
use moqx_runtime::endpoint::EndpointCounters;
use moqx_runtime::tls::Certificate;
use moqx_tokio::{ClientConfig, QmuxListener, QmuxServerConfig, Server, ServerConfig, connect};

use paths::Paths;

/// The bound on any one step over real sockets: against hangs, not a speed threshold.
const REAL_PATIENCE: Duration = Duration::from_secs(10);

/// Real-time scenarios run one at a time: on a 2-core machine, nine of them at once (each
/// with its runtime, servers and clients) starve each other into timeouts that say
/// nothing about the driver.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

pub(crate) struct TokioHarness {
    runtime: tokio::runtime::Runtime,
    /// `moqt` (raw QUIC), `https` (WebTransport), or QMux over `ws`, `wss` (a WebSocket,
    /// over TLS), `tls` or `tcp`.
    scheme: &'static str,
    /// Thread per core with this many workers, or work-stealing (`None`).
    workers: Option<usize>,
    certificate: Certificate,
    /// Kept alive for the scenario: dropping a server stops its endpoint.
    servers: Vec<Server>,
    /// The same, for the QMux schemes (`ws`, `tcp`).
    qmux_servers: Vec<QmuxListener>,
    /// How clients reach servers.
    paths: Paths,
    _turn: MutexGuard<'static, ()>,
}

impl TokioHarness {
    /// Servers on the work-stealing pool.
    #[allow(dead_code)] // not every test file runs work-stealing
    pub(crate) fn new(scheme: &'static str) -> Self {
        Self::with_workers(scheme, None)
    }

    /// Servers thread per core, with `workers` workers.
    #[allow(dead_code)] // not every test file runs thread per core
    pub(crate) fn per_core(scheme: &'static str, workers: usize) -> Self {
        Self::with_workers(scheme, Some(workers))
    }

    fn with_workers(scheme: &'static str, workers: Option<usize>) -> Self {
        // RUST_LOG=debug shows the sessions' and connections' events in a failing test.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        // A scenario that panicked poisoned the lock; the next one runs anyway.
        let turn = ONE_AT_A_TIME
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Self {
            runtime: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a tokio runtime"),
            scheme,
            workers,
            certificate: Certificate::self_signed(&["localhost".into()]).expect("a certificate"),
            servers: Vec::new(),
            qmux_servers: Vec::new(),
            paths: Paths::new(),
            _turn: turn,
        }
    }

    /// The same harness, every connection through an impairment proxy (see
    /// `moq_conformance::impaired`).
    #[allow(dead_code)] // not every test file runs impaired
    pub(crate) fn impaired(mut self, impairment: Impairment, seed: u64) -> Self {
        self.paths.impair(impairment, seed);
        self
    }

    /// The same harness over another loopback address (`::1` for IPv6).
    #[allow(dead_code)] // not every test file runs IPv6
    pub(crate) fn on(mut self, address: IpAddr) -> Self {
        self.paths.bind_to(address);
        self
    }

    /// The same harness with servers bound to `bound` (a wildcard address) and reached at
    /// `reached` through a proxy that takes replies only from `reached` (see
    /// [`Paths::reach_at`]).
    #[allow(dead_code)] // not every test file looks
    pub(crate) fn reached_at(mut self, bound: IpAddr, reached: IpAddr) -> Self {
        self.paths.reach_at(bound, reached);
        self
    }

    /// Path MTU probes the servers' kernel refused as larger than the interface carries
    /// (not send errors: the probe's way of failing on a small local link).
    #[allow(dead_code)] // not every test file looks
    pub(crate) fn mtu_probes_refused(&self) -> u64 {
        self.sum(|counters| counters.oversize_refused.load(Ordering::Relaxed))
    }

    /// A counter summed over every server's endpoints.
    fn sum(&self, read: impl Fn(&EndpointCounters) -> u64) -> u64 {
        self.servers
            .iter()
            .flat_map(Server::counters)
            .map(|counters| read(counters))
            .sum()
    }
}

impl TokioHarness {
    /// A QMux server (`ws`: WebSocket, `tcp`: plain TCP) and a client of it.
    fn connect_qmux(&mut self, server: SessionConfig, client: SessionConfig) -> (Session, Session) {
        let binding = match self.scheme {
            "ws" | "wss" => Binding::WebSocket,
            "tls" => Binding::Tls,
            _ => Binding::Tcp,
        };
        let config = {
            let mut qmux_server_config = QmuxServerConfig::new(server);
            qmux_server_config.versions = Version::ALL.to_vec();
            qmux_server_config.certificate =
                matches!(self.scheme, "wss" | "tls").then(|| self.certificate.clone());
            qmux_server_config
        };
        let address = self.paths.server_address();
        let mut listener = self
            .runtime
            .block_on(QmuxListener::bind(address, binding, config))
            .expect("the server binds");
        // By name: the certificate is for `localhost`, and the client checks its pin.
        let url = format!(
            "{}://localhost:{}/",
            self.scheme,
            listener.local_addr().port()
        );
        let versions = vec![client.version];
        let fingerprint = Some(self.certificate.fingerprint());
        let (client, server_session, listener) = self.runtime.block_on(async move {
            let accepting = async {
                let request = tokio::time::timeout(REAL_PATIENCE, listener.accept())
                    .await
                    .expect("no hang")
                    .expect("the server accepts");
                request.accept()
            };
            let connecting = async {
                tokio::time::timeout(
                    REAL_PATIENCE,
                    connect(&url, {
                        let mut client_config = ClientConfig::default();
                        client_config.session = client;
                        client_config.versions = versions;
                        client_config.fingerprint = fingerprint;
                        client_config
                    }),
                )
                .await
                .expect("no hang")
                .expect("the client connects")
            };
            let (server_session, client) = tokio::join!(accepting, connecting);
            (client, server_session, listener)
        });
        self.qmux_servers.push(listener);
        (client, server_session)
    }
}

impl Harness for TokioHarness {
    fn connect(&mut self, server: SessionConfig, client: SessionConfig) -> (Session, Session) {
        if matches!(self.scheme, "ws" | "wss" | "tls" | "tcp") {
            return self.connect_qmux(server, client);
        }
        // The server accepts every version (-06-wip and moq-transport too); the client
        // offers only its session's, so the one it speaks is negotiated.
        let config = {
            let mut server_config = ServerConfig::new(
                self.paths.server_address(),
                self.certificate.clone(),
                server,
            );
            server_config.versions = moq_conformance::server_versions(client.version);
            server_config
        };
        let versions = vec![client.version];
        let workers = self.workers;
        // Thread per core: every worker hands its requests to the test, which accepts
        // them (a request is accepted on any thread; its session stays on its worker).
        let (requests, mut accepted) = tokio::sync::mpsc::unbounded_channel();
        let mut server = self
            .runtime
            .block_on(async move {
                match workers {
                    None => Server::bind(config).await,
                    Some(workers) => {
                        Server::bind_per_core(config, workers, move |worker| {
                            let requests = requests.clone();
                            async move {
                                while let Some(request) = worker.accept().await {
                                    let _ = requests.send(request);
                                }
                            }
                        })
                        .await
                    }
                }
            })
            .expect("the server binds");
        let per_core = workers.is_some();
        let url = self.paths.url(self.scheme, server.local_addr());
        let handshake_timeout = self.paths.handshake_timeout();
        let patience = handshake_timeout + REAL_PATIENCE;
        let (client, server_session, server) = self.runtime.block_on(async move {
            // Concurrently: a WebTransport client's CONNECT is answered only once the
            // server's application accepts its request.
            let accepting = async {
                let next = async {
                    if per_core {
                        accepted.recv().await
                    } else {
                        server.accept().await
                    }
                };
                let request = tokio::time::timeout(patience, next)
                    .await
                    .expect("no hang")
                    .expect("the server accepts");
                request.accept()
            };
            let connecting = async {
                tokio::time::timeout(
                    patience,
                    connect(
                        &url,
                        ClientConfig::default()
                            .with_session(client)
                            .with_versions(versions)
                            .with_insecure_skip_verify()
                            .with_handshake_timeout(handshake_timeout),
                    ),
                )
                .await
                .expect("no hang")
                .expect("the client connects")
            };
            let (server_session, client) = tokio::join!(accepting, connecting);
            (client, server_session, server)
        });
        self.servers.push(server);
        (client, server_session)
    }

    fn run_until(&mut self, patience: Duration, done: &mut dyn FnMut() -> bool) -> bool {
        let limit = patience.max(REAL_PATIENCE);
        self.runtime.block_on(async {
            let start = tokio::time::Instant::now();
            loop {
                if done() {
                    return true;
                }
                if start.elapsed() > limit {
                    return false;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    }

    fn spawn(&mut self, task: Task) {
        self.runtime.spawn(task);
    }

    fn send_errors(&self) -> u64 {
        self.sum(|counters| counters.send_errors.load(Ordering::Relaxed))
    }
}
