//! The conformance scenarios on the io_uring driver, over both bindings: servers of 1 and
//! of 2 workers, clients on a worker of their own. Where io_uring is refused or the kernel
//! is too old, every test fails with the probe's message naming what is missing.

#[path = "support/netns.rs"]
mod netns;
#[path = "support/paths.rs"]
mod paths;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use moq_conformance::{Harness, Task};
use moq_impair::Impairment;
use moqx_net::session::{Session, SessionConfig};
use moqx_runtime::tls::Certificate;
use moqx_uring::{Client, ClientConfig, Server, ServerConfig, UringConfig, WorkerSnapshot};

/// The bound on any one step over real sockets: against hangs, not a speed threshold.
const REAL_PATIENCE: Duration = Duration::from_secs(10);

/// Real-time scenarios run one at a time (see tests/support/mod.rs).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

struct UringHarness {
    /// `moqt` (raw QUIC) or `https` (WebTransport).
    scheme: &'static str,
    workers: usize,
    options: UringConfig,
    /// The servers' `SO_SNDBUF`, where a test sets one (`None`: the default).
    server_send_buffer: Option<usize>,
    certificate: Certificate,
    client: Client,
    /// Kept alive for the scenario.
    servers: Vec<Server>,
    /// How clients reach servers.
    paths: paths::Paths,
    _turn: MutexGuard<'static, ()>,
}

impl UringHarness {
    fn new(scheme: &'static str, workers: usize) -> Self {
        Self::with(scheme, workers, UringConfig::default())
    }

    /// Servers and clients with `options` (GSO, GRO, receive buffers).
    fn with(scheme: &'static str, workers: usize, options: UringConfig) -> Self {
        // RUST_LOG=debug shows the sessions' and workers' events in a failing test's output.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let turn = ONE_AT_A_TIME
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let client = Client::start(1, options.clone()).unwrap_or_else(|error| panic!("{error}"));
        Self {
            scheme,
            workers,
            options,
            server_send_buffer: None,
            certificate: Certificate::self_signed(&["localhost".into()]).expect("a certificate"),
            client,
            servers: Vec::new(),
            paths: paths::Paths::new(),
            _turn: turn,
        }
    }

    /// The same harness, every connection through an impairment proxy (see
    /// `moq_conformance::impaired`).
    fn impaired(mut self, impairment: Impairment, seed: u64) -> Self {
        self.paths.impair(impairment, seed);
        self
    }

    /// The same harness over another loopback address (`::1` for IPv6).
    fn on(mut self, address: IpAddr) -> Self {
        self.paths.bind_to(address);
        self
    }

    /// The same harness with servers bound to `bound` (a wildcard address) and reached at
    /// `reached` through a proxy that takes replies only from `reached`.
    fn reached_at(mut self, bound: IpAddr, reached: IpAddr) -> Self {
        self.paths.reach_at(bound, reached);
        self
    }

    /// Path MTU probes the servers' kernel refused as larger than the interface carries.
    fn mtu_probes_refused(&self) -> u64 {
        self.servers
            .iter()
            .flat_map(Server::counters)
            .map(|counters| {
                counters
                    .oversize_refused
                    .load(std::sync::atomic::Ordering::Relaxed)
            })
            .sum()
    }
}

impl Harness for UringHarness {
    fn connect(&mut self, server: SessionConfig, client: SessionConfig) -> (Session, Session) {
        // The server accepts every version; the client offers only its session's.
        let mut config = {
            let mut server_config = ServerConfig::new(
                self.paths.server_address(),
                self.certificate.clone(),
                server,
            );
            server_config.versions = moq_conformance::server_versions(client.version);
            server_config
        };
        if let Some(bytes) = self.server_send_buffer {
            config.udp.send_buffer = Some(bytes);
        }
        let versions = vec![client.version];
        let (accepted, sessions) = mpsc::channel();
        let server = Server::bind(config, self.workers, self.options.clone(), move |worker| {
            let accepted = accepted.clone();
            async move {
                while let Some(request) = worker.accept().await {
                    let _ = accepted.send(request.accept());
                }
            }
        })
        .unwrap_or_else(|error| panic!("the server binds: {error}"));
        let url = self.paths.url(self.scheme, server.local_addr());
        let handshake_timeout = self.paths.handshake_timeout();
        let patience = handshake_timeout + REAL_PATIENCE;
        let client = self
            .client
            .connect(
                0,
                &url,
                ClientConfig::default()
                    .with_session(client)
                    .with_versions(versions)
                    .with_insecure_skip_verify()
                    .with_handshake_timeout(handshake_timeout),
            )
            .wait()
            .expect("the client's worker runs")
            .expect("the client connects");
        let server_session = sessions.recv_timeout(patience).expect("the server accepts");
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

    fn send_errors(&self) -> u64 {
        self.servers
            .iter()
            .flat_map(Server::counters)
            .map(|counters| {
                counters
                    .send_errors
                    .load(std::sync::atomic::Ordering::Relaxed)
            })
            .sum()
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

/// Through the impairment proxy, under each condition of `moq_conformance::impaired`.
mod impaired_quic {
    moq_conformance::impaired_tests!(|impairment, seed| {
        super::UringHarness::new("moqt", 2).impaired(impairment, seed)
    });
}

/// Review finding F9 on io_uring (see `tokio_quic.rs`, `small_path_mtu`): on a loopback
/// of MTU 1,300 (IPv4) and 1,280 (IPv6), the handshake and a megabyte frame, no send
/// refused, and probes past the MTU refused and given up.
#[test]
fn a_path_mtu_of_1300_bytes_over_ipv4_carries_a_megabyte_frame() {
    netns::loopback_with_mtu(1300);
    let mut harness = UringHarness::new("moqt", 1);
    moq_conformance::scenarios::a_burst_of_groups_and_a_megabyte_frame_arrive_intact_and_in_order(
        &mut harness,
    );
    assert!(
        harness.mtu_probes_refused() > 0,
        "PMTU discovery probed past 1,300"
    );
}

#[test]
fn a_path_mtu_of_1280_bytes_over_ipv6_carries_a_megabyte_frame() {
    netns::loopback_with_mtu(1280);
    let mut harness = UringHarness::new("moqt", 1).on(Ipv6Addr::LOCALHOST.into());
    moq_conformance::scenarios::a_burst_of_groups_and_a_megabyte_frame_arrive_intact_and_in_order(
        &mut harness,
    );
    assert!(
        harness.mtu_probes_refused() > 0,
        "PMTU discovery probed past 1,280"
    );
}

/// Review finding F10 on io_uring (see `tokio_quic.rs`, `source_address`): a server bound
/// to a wildcard address answers from the address each client reached.
#[test]
fn replies_come_from_the_second_ipv4_address_the_client_reached() {
    let mut harness = UringHarness::new("moqt", 2).reached_at(
        Ipv4Addr::UNSPECIFIED.into(),
        Ipv4Addr::new(127, 0, 0, 2).into(),
    );
    moq_conformance::scenarios::a_burst_of_groups_and_a_megabyte_frame_arrive_intact_and_in_order(
        &mut harness,
    );
}

#[test]
fn replies_come_from_the_second_ipv6_address_the_client_reached() {
    netns::loopback_with_address("fd00::2/128");
    let reached: Ipv6Addr = "fd00::2".parse().unwrap();
    let mut harness =
        UringHarness::new("moqt", 1).reached_at(Ipv6Addr::UNSPECIFIED.into(), reached.into());
    moq_conformance::scenarios::a_burst_of_groups_and_a_megabyte_frame_arrive_intact_and_in_order(
        &mut harness,
    );
}

mod quic_across_versions {
    moq_conformance::cross_version_tests!(super::UringHarness::new("moqt", 2));
}

mod quic_moq_transport {
    moq_conformance::moq_transport_version_tests!(super::UringHarness::new("moqt", 2));
}

/// The sums of every server worker's ring counters, and of the client's.
fn totals(harness: &UringHarness) -> (WorkerSnapshot, WorkerSnapshot) {
    let sum = |counters: Vec<std::sync::Arc<moqx_uring::WorkerCounters>>| {
        counters
            .iter()
            .map(|c| c.snapshot())
            .fold(WorkerSnapshot::default(), |a, b| a + b)
    };
    let servers = harness
        .servers
        .iter()
        .flat_map(Server::worker_counters)
        .collect();
    (sum(servers), sum(harness.client.worker_counters()))
}

/// A megabyte frame (and 200 small ones) from a publisher through a relay to a
/// subscriber arrives byte-identical whether batches leave as GSO sends or one datagram
/// per `sendmsg`, and arrive as GRO trains or one datagram per receive; and the counters
/// show each mode really ran.
#[test]
fn megabyte_frames_arrive_intact_with_gso_and_gro_on_and_off() {
    for gso in [true, false] {
        for gro in [true, false] {
            let mut harness = UringHarness::with("moqt", 1, {
                let mut uring_config = UringConfig::default();
                uring_config.gso = gso;
                uring_config.gro = gro;
                uring_config
            });
            moq_conformance::scenarios::a_burst_of_groups_and_a_megabyte_frame_arrive_intact_and_in_order(&mut harness);
            let (server, client) = totals(&harness);
            let case = format!("gso {gso}, gro {gro}: server {server:?}, client {client:?}");
            // Batches of several datagrams left as one sendmsg only with GSO, and arrived
            // as one receive only with GRO (and GSO: loopback keeps a batch whole).
            assert_eq!(
                client.batched_sendmsgs > 0 && server.batched_sendmsgs > 0,
                gso,
                "GSO batches: {case}"
            );
            assert_eq!(
                server.coalesced_receives > 0 && client.coalesced_receives > 0,
                gso && gro,
                "GRO trains: {case}"
            );
            assert_eq!(server.truncated + client.truncated, 0, "{case}");
            // The driver's I/O in the endpoint's counters too (what /metrics shows).
            let endpoint = &harness.servers[0].counters()[0];
            let read =
                |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
            assert!(read(&endpoint.receive_calls) > 0, "{case}");
            assert!(
                read(&endpoint.receive_calls) <= read(&endpoint.datagrams),
                "{case}"
            );
            assert!(read(&endpoint.send_calls) > 0, "{case}");
            assert!(
                read(&endpoint.send_calls) <= read(&endpoint.datagrams_sent),
                "{case}"
            );
            drop(harness);
        }
    }
}

/// Every receive in a whole buffer of its own, as on kernels without `min_left` (where
/// the driver does this by itself): the megabyte frame arrives whole with GSO and GRO,
/// and with one buffer the receive runs out and recovers again and again.
#[test]
fn whole_receive_buffers_carry_megabyte_frames_and_recover_from_running_out() {
    for recv_buffers in [16, 1] {
        let mut harness = UringHarness::with("https", 1, {
            let mut uring_config = UringConfig::default();
            uring_config.incremental_buffers = false;
            uring_config.recv_buffers = recv_buffers;
            uring_config
        });
        moq_conformance::scenarios::a_burst_of_groups_and_a_megabyte_frame_arrive_intact_and_in_order(&mut harness);
        let (server, client) = totals(&harness);
        let case = format!("{recv_buffers} buffers: server {server:?}, client {client:?}");
        assert!(
            server.coalesced_receives > 0,
            "GRO trains in whole buffers: {case}"
        );
        assert_eq!(server.truncated + client.truncated, 0, "{case}");
        if recv_buffers == 1 {
            assert!(server.buffer_exhaustions > 0, "{case}");
        }
    }
}

/// With one receive buffer, the burst of a megabyte frame runs the buffers out again and
/// again (`ENOBUFS` ends the multishot receive); each time the receive is armed again once
/// the buffer is back, and the frame still arrives whole: the datagrams waited in the
/// socket, none was lost.
#[test]
fn running_out_of_receive_buffers_under_a_burst_loses_nothing() {
    let mut harness = UringHarness::with("moqt", 1, {
        let mut uring_config = UringConfig::default();
        uring_config.recv_buffers = 1;
        uring_config.recv_buffer_bytes = 0;
        uring_config
    });
    moq_conformance::scenarios::a_burst_of_groups_and_a_megabyte_frame_arrive_intact_and_in_order(
        &mut harness,
    );
    let (server, client) = totals(&harness);
    assert!(
        server.buffer_exhaustions > 0 && client.buffer_exhaustions > 0,
        "the buffers ran out: server {server:?}, client {client:?}"
    );
    assert_eq!(server.truncated + client.truncated, 0);
}

/// Review finding F8: io_uring sends had no backpressure (every turn queued a `sendmsg`
/// per batch, whatever the kernel had not taken yet), and sends completing late, after
/// the socket's buffer filled, had no test. On a loopback shaped to 20 Mbit/s, with the
/// smallest send buffer the kernel allows and one turn's sends in flight at most, the
/// megabyte frame fills the buffer again and again: the port stops taking packets
/// (counted), sends complete late, and everything arrives intact with no send refused.
#[test]
fn a_slow_egress_holds_packets_back_and_loses_nothing() {
    netns::loopback_with_rate("20mbit");
    let mut harness = UringHarness::with("moqt", 1, {
        let mut uring_config = UringConfig::default();
        // Any byte in flight holds the next turn's packets back.
        uring_config.max_send_bytes_in_flight = 1;
        uring_config
    });
    harness.server_send_buffer = Some(4096); // the kernel raises it to its minimum
    moq_conformance::scenarios::a_burst_of_groups_and_a_megabyte_frame_arrive_intact_and_in_order(
        &mut harness,
    );
    let (server, _client) = totals(&harness);
    assert!(
        server.send_backpressure > 0,
        "the server's port held packets back: {server:?}"
    );
}

/// Review finding F7: a worker whose loop ended (an I/O error of its ring, or a panic
/// outside its tasks) only logged "worker failed", and the process went on with that
/// worker's socket unread in the port's group. Now the failure is reported (the relay
/// drains and exits non-zero on it), naming the worker and why.
#[test]
fn a_worker_that_dies_is_reported_with_why() {
    let (_turn, server) = idle_server(2);
    assert_eq!(server.failure(), None);
    // A job's closure runs in the worker's loop itself, outside any task: its panic
    // ends the worker, as a fault in the loop would.
    drop(server.run_on(1, |_worker| -> std::future::Ready<()> {
        panic!("an injected fault")
    }));
    let start = Instant::now();
    while server.failure().is_none() && start.elapsed() < REAL_PATIENCE {
        std::thread::sleep(Duration::from_millis(5));
    }
    let failure = server.failure().expect("the failure is reported");
    assert_eq!(failure.worker, 1);
    assert!(failure.reason.contains("an injected fault"), "{failure}");
    let failed = pollster::block_on(server.failed());
    assert_eq!(failed, failure);
    server.stop();
}

/// Review finding F19: the per-turn datagram budget was the tokio driver's only; an
/// io_uring worker reaped every completion in a turn. With the worker held while 4,096
/// datagrams wait in its socket, its next turn stops at the budget (counted) and takes
/// the rest on the turns after, its timers and sends running in between.
#[test]
fn a_backlog_of_datagrams_is_taken_a_budget_per_turn() {
    let (_turn, server) = idle_server(1);
    // Hold the worker until the backlog is in its socket.
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (holding, started) = std::sync::mpsc::channel::<()>();
    drop(server.run_on(0, move |_worker| {
        let _ = holding.send(());
        let _ = held.recv_timeout(REAL_PATIENCE);
        std::future::ready(())
    }));
    started
        .recv_timeout(REAL_PATIENCE)
        .expect("the worker runs the job");
    // GSO batches of 64, which arrive as GRO trains: 64 datagrams a completion, so one
    // turn finds far more than the budget waiting.
    let sender = moqx_runtime::udp::UdpSocket::bind(
        "127.0.0.1:0".parse().expect("an address"),
        &moqx_runtime::udp::UdpConfig::default(),
    )
    .expect("bind");
    for batch in 0..64u32 {
        // Short-header-looking junk for no connection: dropped once read.
        let mut datagrams = vec![0x40u8; 64 * 64];
        datagrams[1..5].copy_from_slice(&batch.to_be_bytes());
        sender
            .send(server.local_addr(), &datagrams, 64)
            .expect("a loopback send");
    }
    release.send(()).expect("the job waits");
    let counters = &server.counters()[0];
    let start = Instant::now();
    let read = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    while read(&counters.datagrams) < 4096 && start.elapsed() < REAL_PATIENCE {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(read(&counters.datagrams), 4096, "every datagram was taken");
    let worker = server.worker_counters()[0].snapshot();
    assert!(
        worker.receive_budget_exhausted >= 1,
        "a turn stopped at the budget: {worker:?}"
    );
    server.stop();
}

/// Review finding F15: every io_uring worker's stop waited out a whole second for its
/// park wait, which nothing woke. The wait is cancelled now: no stop ends with it pending.
#[test]
fn stopping_workers_cancels_their_park_wait() {
    let (_turn, server) = idle_server(2);
    // Let both workers park (their futex wait armed), however long a busy machine takes.
    let counters = server.worker_counters();
    let start = Instant::now();
    while !counters.iter().all(|c| c.snapshot().parks > 0) && start.elapsed() < REAL_PATIENCE {
        std::thread::sleep(Duration::from_millis(5));
    }
    server.join();
    let unclean: u64 = counters.iter().map(|c| c.snapshot().unclean_stops).sum();
    assert_eq!(unclean, 0, "every park wait ended when cancelled");
    assert!(
        counters.iter().all(|c| c.snapshot().parks > 0),
        "the workers parked"
    );
}

/// The real-time turn (see `ONE_AT_A_TIME`), and a server of `workers` workers whose
/// application accepts nobody (bind the guard first: it is released after the server).
fn idle_server(workers: usize) -> (MutexGuard<'static, ()>, Server) {
    let turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let certificate = Certificate::self_signed(&["localhost".into()]).expect("a certificate");
    let config = ServerConfig::new(
        "127.0.0.1:0".parse().expect("an address"),
        certificate,
        SessionConfig::default(),
    );
    let server = Server::bind(config, workers, UringConfig::default(), |_| async {})
        .unwrap_or_else(|error| panic!("the server binds: {error}"));
    (turn, server)
}
