//! A server: one UDP port, both moq-lite bindings, requests as clients connect; on
//! tokio's work-stealing pool or thread per core, in the same shape either way: a
//! [`Worker`] per worker, whose requests its application loop accepts.
//!
//! What a connection goes through before it is a request (the dispatch by ALPN, the
//! WebTransport handshake with its deadline and cap, the version check, the refusals) is
//! `moqx_runtime::server`'s (`Acceptor::admit`); this file runs it on tokio tasks.
//!
//! **Work-stealing** ([`Server::bind`]): one socket and one endpoint task on the caller's
//! runtime, one worker; session machines go wherever tokio's pool puts them.
//!
//! **Thread per core** (`Server::bind_per_core`, Linux): N workers, each a thread
//! pinned to a core running a current-thread runtime, with its own `SO_REUSEPORT` socket
//! on the shared port, its own endpoint and timer wheel, and the application's loop
//! (`serve`) on it. The kernel steers each packet to the worker that owns its connection
//! (`moqx_runtime::steering`); a connection lives on the worker that received its first
//! Initial, and so does its session. Sessions on different workers meet only in the
//! shared model (a relay's origin): no channel between workers. The admission counts
//! (`moqx_runtime::admission::Gate`) and the cap on pending WebTransport handshakes are
//! server-wide.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use moqx_runtime::endpoint::EndpointCounters;
use moqx_runtime::server::ServerConfig;
use moqx_runtime::udp::UdpSocket;
use tokio::sync::{mpsc, oneshot};

use crate::driver::EndpointHandle;
use crate::serving::{Failure, report, start_worker};
use crate::{Error, TokioRuntime, Worker};

/// A client whose handshakes completed, to accept or refuse.
pub type Request = moqx_runtime::server::Request<TokioRuntime>;

/// A listening server.
#[derive(Debug)]
pub struct Server {
    local_addr: SocketAddr,
    /// One per worker: the endpoints serve while these live.
    endpoints: Vec<EndpointHandle>,
    counters: Vec<Arc<EndpointCounters>>,
    workers: Vec<Worker>,
    /// Work-stealing: [`accept`](Self::accept) takes the one worker's requests.
    work_stealing: bool,
    /// Each closes when its worker (its endpoint task, or its thread) has ended.
    finished: Vec<oneshot::Receiver<()>>,
    /// Why a worker died (a panic), once one has: its connections died with it.
    failure: Failure,
}

impl Server {
    /// Binds the port and serves on the current tokio runtime (work-stealing mode): one
    /// worker, whose requests [`accept`](Self::accept) takes.
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
            workers: vec![Worker::new(0, tokio::runtime::Handle::current(), requests)],
            work_stealing: true,
            finished: vec![finished],
            failure,
        })
    }

    /// Binds the port with `workers` sockets (1 to [`MAX_WORKERS`](crate::MAX_WORKERS))
    /// and serves thread per core: each worker a thread pinned to one of the cores the
    /// process may use (in turn, if there are more workers than cores), running a
    /// current-thread runtime, on which `serve` runs as the application's loop (typically:
    /// [`Worker::accept`] each request, and accept or refuse it there). A loop can also be
    /// started later on any worker with [`run_on`](Self::run_on); requests wait until one
    /// accepts them.
    ///
    /// Linux only: it needs the kernel's steering program (`SO_ATTACH_REUSEPORT_CBPF`) to
    /// keep each connection's packets on its worker.
    #[cfg(target_os = "linux")]
    pub async fn bind_per_core<F, Fut>(
        config: ServerConfig,
        workers: usize,
        serve: F,
    ) -> Result<Self, Error>
    where
        F: Fn(Worker) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let started = crate::per_core::start(config, workers, Arc::new(serve)).await?;
        Ok(Self {
            local_addr: started.local_addr,
            endpoints: started.endpoints,
            counters: started.counters,
            workers: started.workers,
            work_stealing: false,
            finished: started.finished,
            failure: started.failure,
        })
    }

    /// Runs `task` with worker `index` (modulo the worker count) on that worker's runtime:
    /// an application loop started after the bind, or any work that belongs beside the
    /// worker's sessions.
    pub fn run_on<F, Fut, T>(&self, index: usize, task: F) -> tokio::task::JoinHandle<T>
    where
        F: FnOnce(Worker) -> Fut,
        Fut: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        let worker = self.workers[index % self.workers.len()].clone();
        let handle = worker.runtime_handle().clone();
        handle.spawn(task(worker))
    }

    /// Resolves if a worker dies (a panic in its endpoint), with why: its connections
    /// died with it, and the process should stop so that its supervisor starts it again.
    /// Never resolves while the workers serve, nor when they end by
    /// [`shutdown`](Self::shutdown).
    pub fn failed(&self) -> impl Future<Output = String> + Send + 'static {
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
        self.workers.len()
    }

    /// Each worker's endpoint counters (datagrams, misrouted packets), in worker order.
    pub fn counters(&self) -> &[Arc<EndpointCounters>] {
        &self.counters
    }

    /// The next client whose handshake completed (QUIC, and for WebTransport the HTTP/3
    /// CONNECT); `None` once the endpoint stopped (see [`Worker::accept`]).
    ///
    /// # Panics
    ///
    /// On a thread-per-core server, whose requests each worker's own loop accepts
    /// (`bind_per_core`'s `serve`, or [`run_on`](Self::run_on)): waiting here would wait
    /// forever.
    pub async fn accept(&mut self) -> Option<Request> {
        assert!(
            self.work_stealing,
            "Server::accept on a thread-per-core server: accept on each worker (bind_per_core's serve, or run_on)"
        );
        self.workers[0].accept().await
    }

    /// Accepts every client with the server's session configuration, on every worker,
    /// from now until the server stops: a relay of one shared origin, or a test server.
    /// The loops run on the workers; keep the server (it serves while it lives) and
    /// [`shutdown`](Self::shutdown) it as usual.
    pub fn accept_all(&self) {
        for index in 0..self.workers() {
            drop(self.run_on(index, |worker| async move {
                while let Some(request) = worker.accept().await {
                    request.accept();
                }
            }));
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
            workers,
            finished,
            ..
        } = self;
        drop(workers);
        drop(endpoints);
        for worker in finished {
            let _ = worker.await;
        }
    }
}
