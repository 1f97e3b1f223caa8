//! What the quiche tests share: a busy-loop runtime for session machines, quiche
//! configurations, and a self-signed certificate on disk.
#![allow(dead_code, missing_docs)] // each test file uses a part

pub(crate) mod chat;
pub(crate) mod webtransport;

use std::cell::RefCell;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use moqx_kio::Waiter;
use moqx_net::runtime::{Deadline, Runtime};
use moqx_net::session::SessionMachine;
use moqx_runtime::binding::BindingSession;
use moqx_runtime::quic::QuicConnection;
use moqx_runtime::tls::Certificate;

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// Shows the library's log lines as `RUST_LOG` asks (none without it), in the output of
/// the test that wrote them: a failing test's connection events.
pub(crate) fn show_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// Runs session machines (and test tasks) by polling all of them every turn.
#[derive(Clone, Default)]
pub(crate) struct BusyRuntime {
    tasks: Rc<RefCell<Vec<Task>>>,
}

/// A deadline the busy loop polls every turn: no waking needed.
pub(crate) struct BusyDeadline(Option<Instant>);

impl Deadline for BusyDeadline {
    fn set(&mut self, at: Option<Instant>) {
        self.0 = at;
    }

    fn poll(&mut self, _waiter: &Waiter) -> Poll<()> {
        match self.0 {
            Some(at) if Instant::now() >= at => Poll::Ready(()),
            _ => Poll::Pending,
        }
    }
}

impl Runtime for BusyRuntime {
    type Transport = BindingSession;
    type Deadline = BusyDeadline;

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn deadline(&self) -> BusyDeadline {
        BusyDeadline(None)
    }

    fn spawn(&self, machine: SessionMachine<Self>) {
        self.tasks.borrow_mut().push(Box::pin(machine));
    }
}

impl BusyRuntime {
    pub(crate) fn spawn_task(&self, task: impl Future<Output = ()> + 'static) {
        self.tasks.borrow_mut().push(Box::pin(task));
    }

    /// Polls every task once; drops the finished ones.
    pub(crate) fn turn(&self) {
        let mut tasks = std::mem::take(&mut *self.tasks.borrow_mut());
        let mut context = Context::from_waker(Waker::noop());
        tasks.retain_mut(|task| task.as_mut().poll(&mut context).is_pending());
        // Tasks spawned during the turn were pushed to the (now empty) shared list.
        tasks.append(&mut self.tasks.borrow_mut());
        *self.tasks.borrow_mut() = tasks;
    }
}

/// A fresh self-signed certificate for `localhost`, written to a temporary directory of
/// its own: (the directory, chain file, key file). Keep the directory bound for as long
/// as the files are read: dropping it removes them. Its own: tests running side by side
/// in one process with the same `name` once shared one, and a test read a file another
/// was writing (`TlsFail`).
pub(crate) fn certificate_files(name: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let certificate = Certificate::self_signed(&["localhost".into()]).unwrap();
    let dir = tempfile::Builder::new()
        .prefix(&format!("moq-quiche-{name}-"))
        .tempdir()
        .unwrap();
    let (chain, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&chain, certificate.chain_pem()).unwrap();
    std::fs::write(&key, certificate.key_pem()).unwrap();
    (dir, chain, key)
}

/// A quiche configuration for moq-lite-05: a server's with `certificate`, a client's
/// (not verifying, for loopback) without.
pub(crate) fn config(certificate: Option<(&std::path::Path, &std::path::Path)>) -> quiche::Config {
    config_with_alpn(certificate, &[b"moq-lite-05"])
}

/// [`config`] offering `alpn`.
pub(crate) fn config_with_alpn(
    certificate: Option<(&std::path::Path, &std::path::Path)>,
    alpn: &[&[u8]],
) -> quiche::Config {
    let mut config = quiche::Config::new(quiche::PROTOCOL_VERSION).expect("a quiche config");
    config.set_application_protos(alpn).expect("ALPN");
    match certificate {
        Some((chain, key)) => {
            config
                .load_cert_chain_from_pem_file(chain.to_str().unwrap())
                .expect("the certificate loads");
            config
                .load_priv_key_from_pem_file(key.to_str().unwrap())
                .expect("the key loads");
        }
        // Loopback test: the client does not verify the self-signed certificate.
        None => config.verify_peer(false),
    }
    config.set_max_idle_timeout(10_000);
    config.set_initial_max_data(10_000_000);
    config.set_initial_max_stream_data_bidi_local(1_000_000);
    config.set_initial_max_stream_data_bidi_remote(1_000_000);
    config.set_initial_max_stream_data_uni(1_000_000);
    config.set_initial_max_streams_bidi(100);
    config.set_initial_max_streams_uni(100);
    config.enable_dgram(true, 100, 100);
    config
}

/// Moves every pending packet from `from` to `to`.
pub(crate) fn pump(from: &QuicConnection, to: &QuicConnection) {
    let mut buf = [0u8; 65_536];
    while let Ok(Some((len, info))) = from.send(&mut buf) {
        let _ = to.recv(&mut buf[..len], info.from, info.to);
    }
    if from.timeout() == Some(Duration::ZERO) {
        from.on_timeout(std::time::Instant::now());
    }
}

/// Runs `runtime` and the pump until `done`, for at most 10 s of real time.
pub(crate) fn run_until(
    runtime: &BusyRuntime,
    client: &QuicConnection,
    server: &QuicConnection,
    mut done: impl FnMut() -> bool,
) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        pump(client, server);
        pump(server, client);
        runtime.turn();
        if done() {
            return true;
        }
    }
    false
}

/// The client's address in a [`connected_pair`].
pub(crate) const CLIENT_ADDRESS: &str = "127.0.0.1:4000";

/// The server's address in a [`connected_pair`].
pub(crate) const SERVER_ADDRESS: &str = "127.0.0.1:4433";

/// A client/server pair of quiche connections on an in-memory pump, handshake done, the
/// client offering `alpn` (the server offers moq-lite-05 and h3).
pub(crate) fn connected_pair(
    runtime: &BusyRuntime,
    name: &str,
    alpn: &[u8],
) -> (QuicConnection, QuicConnection) {
    connected_pair_with(runtime, name, alpn, |_| {})
}

/// [`connected_pair`], the server's configuration changed by `configure` first.
pub(crate) fn connected_pair_with(
    runtime: &BusyRuntime,
    name: &str,
    alpn: &[u8],
    configure: impl FnOnce(&mut quiche::Config),
) -> (QuicConnection, QuicConnection) {
    connected_pair_measuring(runtime, name, alpn, Duration::ZERO, configure)
}

/// [`connected_pair_with`], the client's first answer to the server held `first_rtt` of
/// real time: the server's first RTT sample, so its smoothed RTT (an eighth of each later
/// sample moves it).
pub(crate) fn connected_pair_measuring(
    runtime: &BusyRuntime,
    name: &str,
    alpn: &[u8],
    first_rtt: Duration,
    configure: impl FnOnce(&mut quiche::Config),
) -> (QuicConnection, QuicConnection) {
    let (_certificate_dir, chain, key) = certificate_files(name);
    let mut server_config = config_with_alpn(Some((&chain, &key)), &[b"moq-lite-05", b"h3"]);
    configure(&mut server_config);
    let client_addr: SocketAddr = CLIENT_ADDRESS.parse().unwrap();
    let server_addr: SocketAddr = SERVER_ADDRESS.parse().unwrap();
    let client = QuicConnection::new(
        quiche::connect(
            Some("localhost"),
            &quiche::ConnectionId::from_ref(&[3; 16]),
            client_addr,
            server_addr,
            &mut config_with_alpn(None, &[alpn]),
        )
        .expect("connect"),
    );
    let server = QuicConnection::new(
        quiche::accept(
            &quiche::ConnectionId::from_ref(&[4; 16]),
            None,
            server_addr,
            client_addr,
            &mut server_config,
        )
        .expect("accept"),
    );
    // The client's Initial, the server's first flight (its RTT's start), then the wait.
    pump(&client, &server);
    pump(&server, &client);
    std::thread::sleep(first_rtt);
    assert!(run_until(runtime, &client, &server, || client
        .is_established()
        && server.is_established()));
    (client, server)
}
