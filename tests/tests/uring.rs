//! The conformance scenarios on the io_uring driver, over both bindings: servers of 1 and
//! of 2 workers, clients on a worker of their own. Where io_uring is refused or the kernel
//! is too old, every test fails with the probe's message naming what is missing.

use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use moq_conformance::{Harness, Task};
use moq_net::session::{Session, SessionConfig};
use moq_runtime::tls::Certificate;
use moq_uring::{Client, ClientConfig, Server, ServerConfig, UringConfig};

/// The bound on any one step over real sockets: against hangs, not a speed threshold.
const REAL_PATIENCE: Duration = Duration::from_secs(10);

/// Real-time scenarios run one at a time (see tests/support/mod.rs).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

struct UringHarness {
    /// `moqt` (raw QUIC) or `https` (WebTransport).
    scheme: &'static str,
    workers: usize,
    certificate: Certificate,
    client: Client,
    /// Kept alive for the scenario.
    servers: Vec<Server>,
    _turn: MutexGuard<'static, ()>,
}

impl UringHarness {
    fn new(scheme: &'static str, workers: usize) -> Self {
        let turn = ONE_AT_A_TIME
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let client =
            Client::start(1, UringConfig::default()).unwrap_or_else(|error| panic!("{error}"));
        Self {
            scheme,
            workers,
            certificate: Certificate::self_signed(&["localhost".into()]).expect("a certificate"),
            client,
            servers: Vec::new(),
            _turn: turn,
        }
    }
}

impl Harness for UringHarness {
    fn connect(&mut self, server: SessionConfig, client: SessionConfig) -> (Session, Session) {
        let config = ServerConfig::new(
            "127.0.0.1:0".parse().expect("an address"),
            self.certificate.clone(),
            server,
        );
        let (accepted, sessions) = mpsc::channel();
        let server = Server::bind(
            config,
            self.workers,
            UringConfig::default(),
            move |worker| {
                let accepted = accepted.clone();
                async move {
                    while let Some(request) = worker.accept().await {
                        let _ = accepted.send(request.accept());
                    }
                }
            },
        )
        .unwrap_or_else(|error| panic!("the server binds: {error}"));
        let url = format!(
            "{}://localhost:{}/",
            self.scheme,
            server.local_addr().port()
        );
        let client = self
            .client
            .connect(
                0,
                &url,
                ClientConfig {
                    session: client,
                    insecure_skip_verify: true,
                    handshake_timeout: Duration::from_secs(5),
                    ..ClientConfig::default()
                },
            )
            .wait()
            .expect("the client's worker runs")
            .expect("the client connects");
        let server_session = sessions
            .recv_timeout(REAL_PATIENCE)
            .expect("the server accepts");
        self.servers.push(server);
        (client, server_session)
    }

    fn run_until(&mut self, patience: Duration, done: &mut dyn FnMut() -> bool) -> bool {
        let limit = patience.max(REAL_PATIENCE);
        let start = Instant::now();
        loop {
            if done() {
                return true;
            }
            if start.elapsed() > limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn spawn(&mut self, task: Task) {
        drop(self.client.run_on(0, move |_| task));
    }
}

impl Drop for UringHarness {
    fn drop(&mut self) {
        for server in &self.servers {
            server.stop();
        }
    }
}

mod quic_one_worker {
    moq_conformance::conformance_tests!(super::UringHarness::new("moqt", 1));
}

mod quic_two_workers {
    moq_conformance::conformance_tests!(super::UringHarness::new("moqt", 2));
}

mod webtransport_one_worker {
    moq_conformance::conformance_tests!(super::UringHarness::new("https", 1));
}

mod webtransport_two_workers {
    moq_conformance::conformance_tests!(super::UringHarness::new("https", 2));
}
