//! A server: one UDP port, both moq-lite bindings, requests as clients connect; on
//! tokio's work-stealing pool or thread per core.
//!
//! What a connection goes through before it is a request (the dispatch by ALPN, the
//! WebTransport handshake with its deadline and cap, the version check, the refusals) is
//! `moqx_runtime::server`'s; this file runs it on tokio tasks.
//!
//! **Work-stealing** ([`Server::bind`]): one socket and one endpoint task on the caller's
//! runtime; session machines go wherever tokio's pool puts them.
//!
//! **Thread per core** ([`Server::bind_per_core`]): N workers, each a thread pinned to a
//! core running a current-thread runtime, with its own `SO_REUSEPORT` socket on the shared
//! port, its own endpoint and timer wheel. The kernel steers each packet to the worker
//! that owns its connection (`moqx_runtime::steering`); a connection lives on the worker
//! that received its first Initial, and so does its session. Sessions on different
//! workers meet only in the shared model (a relay's origin): no channel between workers.
//! The admission counts (`moqx_runtime::admission::Gate`) and the cap on pending
//! WebTransport handshakes are server-wide.

use std::net::SocketAddr;
use std::sync::Arc;

use std::time::Instant;

use moqx_runtime::endpoint::{Endpoint, EndpointCounters};
use moqx_runtime::quic::QuicConnection;
use moqx_runtime::server::{Acceptor, Admitted, ServerConfig};
use moqx_runtime::udp::UdpSocket;
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

use crate::driver::{self, EndpointHandle};
use crate::{Error, TokioRuntime};

/// A client whose handshakes completed, to accept or refuse.
pub type Request = moqx_runtime::server::Request<TokioRuntime>;

/// A listening server.
#[derive(Debug)]
pub struct Server {
    local_addr: SocketAddr,
    /// One per worker (one in work-stealing mode): the endpoints serve while these live.
    endpoints: Vec<EndpointHandle>,
    counters: Vec<Arc<EndpointCounters>>,
    requests: mpsc::UnboundedReceiver<Request>,
    /// Each closes when its worker (its endpoint task, or its thread) has ended.
    finished: Vec<oneshot::Receiver<()>>,
    /// Why a worker died (a panic), once one has: its connections died with it.
    failure: Failure,
}

/// Where a worker that died reports why.
type Failure = Arc<tokio::sync::watch::Sender<Option<String>>>;

/// Reports `ended` (a worker's endpoint task) to `failure` if it panicked.
fn report(ended: Result<(), tokio::task::JoinError>, worker: usize, failure: &Failure) {
    let Err(error) = ended else { return };
    if !error.is_panic() {
        return;
    }
    let payload = error.into_panic();
    let message = payload
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_owned());
    let reason = format!("worker {worker} panicked: {message}");
    tracing::error!(%reason, "a worker died, and its connections with it");
    failure.send_replace(Some(reason));
}

impl Server {
    /// Binds the port and serves on the current tokio runtime (work-stealing mode).
    pub async fn bind(config: ServerConfig) -> Result<Self, Error> {
        let socket = UdpSocket::bind(config.bind, &config.udp)
            .map_err(Error::io(format!("binding {}", config.bind)))?;
        let local_addr = socket
            .local_addr()
            .map_err(Error::io("reading the bound address"))?;
        let now = Instant::now();
        let endpoint = config.endpoint(local_addr, 0, &config.gate(now), now)?;
        let counters = vec![endpoint.counters()];
        let (requests_sender, requests) = mpsc::unbounded_channel();
        let (handle, task) = start_worker(
            socket,
            endpoint,
            config.acceptor(),
            requests_sender,
            TokioRuntime::current(),
            config.udp.recv_batch,
        )?;
        let (done, finished) = oneshot::channel();
        let failure = Failure::default();
        let reporter = failure.clone();
        tokio::spawn(async move {
            report(task.await, 0, &reporter);
            drop(done);
        });
        tracing::info!(%local_addr, "serving (work-stealing)");
        Ok(Self {
            local_addr,
            endpoints: vec![handle],
            counters,
            requests,
            finished: vec![finished],
            failure,
        })
    }

    /// Binds the port with `workers` sockets (1 to [`MAX_WORKERS`](crate::MAX_WORKERS)) and serves thread
    /// per core: each worker a thread pinned to one of the cores the process may use (in
    /// turn, if there are more workers than cores), running a current-thread runtime. The
    /// caller's runtime only receives the requests.
    ///
    /// Linux only: it needs the kernel's steering program (`SO_ATTACH_REUSEPORT_CBPF`) to
    /// keep each connection's packets on its worker.
    #[cfg(target_os = "linux")]
    pub async fn bind_per_core(config: ServerConfig, workers: usize) -> Result<Self, Error> {
        Error::check_workers(workers)?;
        let (sockets, local_addr) =
            moqx_runtime::steering::bind_workers(config.bind, workers, &config.udp)
                .map_err(Error::io(format!("binding {}", config.bind)))?;
        let now = Instant::now();
        let gate = config.gate(now);
        let acceptor = config.acceptor();
        let cpus = moqx_runtime::cores::available();
        let (requests_sender, requests) = mpsc::unbounded_channel();
        let mut server = Self {
            local_addr,
            endpoints: Vec::with_capacity(workers),
            counters: Vec::with_capacity(workers),
            requests,
            finished: Vec::with_capacity(workers),
            failure: Failure::default(),
        };
        for (index, socket) in sockets.into_iter().enumerate() {
            // `index` < MAX_WORKERS = 256.
            let endpoint = config.endpoint(local_addr, index as u8, &gate, now)?;
            server.counters.push(endpoint.counters());
            let (ready, handle) = oneshot::channel();
            let (done, finished) = oneshot::channel();
            let worker = Worker {
                index,
                cpu: cpus[index % cpus.len()],
                socket,
                endpoint,
                acceptor: acceptor.clone(),
                requests: requests_sender.clone(),
                recv_batch: config.udp.recv_batch,
                failure: server.failure.clone(),
            };
            std::thread::Builder::new()
                .name(format!("moq-worker-{index}"))
                .spawn(move || worker.run(ready, done))
                .map_err(Error::io(format!("starting worker {index}")))?;
            server
                .endpoints
                .push(handle.await.map_err(|_| Error::Stopped)??);
            server.finished.push(finished);
        }
        tracing::info!(%local_addr, workers, "serving (thread per core)");
        Ok(server)
    }

    /// Resolves if a worker dies (a panic in its endpoint), with why: its connections
    /// died with it, and the process should stop so that its supervisor starts it again.
    /// Never resolves while the workers serve, nor when they end by
    /// [`shutdown`](Self::shutdown).
    pub fn failed(&self) -> impl std::future::Future<Output = String> + Send + 'static {
        let mut failure = self.failure.subscribe();
        async move {
            loop {
                if let Some(reason) = failure.borrow_and_update().clone() {
                    return reason;
                }
                if failure.changed().await.is_err() {
                    return std::future::pending().await;
                }
            }
        }
    }

    /// The bound address (with the port the system chose, if it was 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// How many workers serve the port (1 in work-stealing mode).
    pub fn workers(&self) -> usize {
        self.endpoints.len()
    }

    /// Each worker's endpoint counters (datagrams, misrouted packets), in worker order.
    pub fn counters(&self) -> &[Arc<EndpointCounters>] {
        &self.counters
    }

    /// The next client whose handshake completed (QUIC, and for WebTransport the HTTP/3
    /// CONNECT); `None` once the endpoints stopped. WebTransport handshakes run in tasks
    /// of their own, whether or not the application is waiting here, so one slow client
    /// holds up no other; one that fails (a malformed CONNECT, a timeout, no version in
    /// common) closes its own connection and is not returned.
    pub async fn accept(&mut self) -> Option<Request> {
        self.requests.recv().await
    }

    /// Accepts every client with the server's session configuration, until the server
    /// stops: a relay of one shared origin, or a test server. Spawn it; sessions run
    /// until they close.
    pub async fn accept_all(mut self) {
        while let Some(request) = self.accept().await {
            request.accept();
        }
    }

    /// Stops admitting clients: every worker drops new Initials and closes the
    /// connections still in their handshake; sessions already accepted go on. For a
    /// drain: call it first, then close the sessions, then [`shutdown`](Self::shutdown).
    pub fn stop_admitting(&self) {
        for endpoint in &self.endpoints {
            endpoint.stop();
        }
    }

    /// Stops accepting, and waits for every worker to end: each endpoint ends once its
    /// last connection closed (close the sessions first; a connection that never
    /// finished its handshake lasts until its idle timeout).
    pub async fn shutdown(self) {
        let Self {
            endpoints,
            requests,
            finished,
            ..
        } = self;
        drop(requests);
        drop(endpoints);
        for worker in finished {
            let _ = worker.await;
        }
    }
}

/// One worker of a thread-per-core server, before its thread starts.
#[cfg(target_os = "linux")]
struct Worker {
    index: usize,
    cpu: usize,
    socket: UdpSocket,
    endpoint: Endpoint,
    acceptor: Acceptor,
    requests: mpsc::UnboundedSender<Request>,
    recv_batch: usize,
    failure: Failure,
}

#[cfg(target_os = "linux")]
impl Worker {
    /// The worker thread: pins itself, runs its endpoint and its sessions on a
    /// current-thread runtime until the endpoint ends. `ready` gets the endpoint's handle
    /// (or why it did not start); `done` closes when the thread ends.
    fn run(self, ready: oneshot::Sender<Result<EndpointHandle, Error>>, done: oneshot::Sender<()>) {
        let _done = done;
        let span = tracing::info_span!("worker", index = self.index, cpu = self.cpu);
        let _entered = span.enter();
        if let Err(error) = moqx_runtime::cores::pin_current_thread(self.cpu) {
            tracing::warn!(%error, "running unpinned");
        }
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(error) => {
                let _ = ready.send(Err(Error::io("starting a worker's runtime")(error)));
                return;
            }
        };
        runtime.block_on(
            async move {
                match start_worker(
                    self.socket,
                    self.endpoint,
                    self.acceptor,
                    self.requests,
                    TokioRuntime::current(),
                    self.recv_batch,
                ) {
                    Ok((handle, task)) => {
                        let _ = ready.send(Ok(handle));
                        report(task.await, self.index, &self.failure);
                    }
                    Err(error) => {
                        let _ = ready.send(Err(error));
                    }
                }
            }
            .in_current_span(),
        );
        tracing::debug!("worker ended");
    }
}

/// Starts one endpoint on the current runtime, with the task that turns its established
/// connections into requests; returns its handle and its task.
fn start_worker(
    socket: UdpSocket,
    endpoint: Endpoint,
    acceptor: Acceptor,
    requests: mpsc::UnboundedSender<Request>,
    runtime: TokioRuntime,
    recv_batch: usize,
) -> Result<(EndpointHandle, tokio::task::JoinHandle<()>), Error> {
    let (accepted_sender, accepted) = mpsc::unbounded_channel();
    let started = driver::start(socket, endpoint, Some(accepted_sender), recv_batch)?;
    tokio::spawn(sort_connections(accepted, requests, acceptor, runtime).in_current_span());
    Ok(started)
}

/// Turns established connections into requests: at once for raw QUIC, in a task of its
/// own for a WebTransport handshake.
async fn sort_connections(
    mut accepted: mpsc::UnboundedReceiver<QuicConnection>,
    requests: mpsc::UnboundedSender<Request>,
    acceptor: Acceptor,
    runtime: TokioRuntime,
) {
    while let Some(connection) = accepted.recv().await {
        match acceptor.admit(&runtime, connection) {
            Admitted::Request(request) => {
                let _ = requests.send(request);
            }
            Admitted::Handshake(handshaking) => {
                let requests = requests.clone();
                tokio::spawn(
                    async move {
                        if let Some(request) = handshaking.await {
                            let _ = requests.send(request);
                        }
                    }
                    .in_current_span(),
                );
            }
            Admitted::Refused => {}
        }
    }
}
