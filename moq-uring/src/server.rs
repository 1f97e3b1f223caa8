//! A server on io_uring: one UDP port served by N pinned workers, each with its own
//! `SO_REUSEPORT` socket (packets steered to the worker owning their connection), its own
//! ring and endpoint; the application's loop runs on every worker.
//!
//! What a connection goes through before it is a request (the dispatch by ALPN, the
//! WebTransport handshake with its deadline and cap, the version check, the refusals) is
//! `moqx_runtime::server`'s, as on every driver.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use moqx_runtime::endpoint::EndpointCounters;
use moqx_runtime::server::ServerConfig;
use moqx_runtime::udp::UdpSocket;

use crate::counters::WorkerCounters;
use crate::pool::{JoinHandle, Pool, WorkerFailure};
use crate::port::{Port, Role};
use crate::{Error, UringConfig, Worker};

/// A client whose handshakes completed, to accept or refuse (on its worker).
pub type Request = moqx_runtime::server::Request<crate::UringRuntime>;

/// A listening server: its workers run until [`stop`](Self::stop) and
/// [`join`](Self::join).
#[derive(Debug)]
pub struct Server {
    local_addr: SocketAddr,
    pool: Pool,
    counters: Vec<Arc<EndpointCounters>>,
}

impl Server {
    /// Probes the kernel, binds the port with one socket per worker (1 to
    /// [`MAX_WORKERS`](crate::MAX_WORKERS)) and starts the workers; on each, `serve` runs as the application's
    /// loop (typically: [`Worker::accept`] each request, and accept or refuse it there).
    pub fn bind<F, Fut>(
        config: ServerConfig,
        workers: usize,
        options: UringConfig,
        serve: F,
    ) -> Result<Self, Error>
    where
        F: Fn(Worker) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        moqx_runtime::driver::DriverError::check_workers(workers)?;
        options.validate()?;
        let capabilities = crate::probe()?;
        let mut udp = config.udp.clone();
        udp.gso = options.gso;
        udp.gro = options.gro;
        let (sockets, local_addr) =
            moqx_runtime::steering::bind_workers(config.bind, workers, &udp)
                .map_err(Error::io(format!("binding {}", config.bind)))?;
        for socket in &sockets {
            // The ring waits for readiness itself; a blocking socket lets it.
            socket
                .as_std()
                .set_nonblocking(false)
                .map_err(Error::io("setting up a worker's socket"))?;
        }
        let now = Instant::now();
        let gate = config.gate(now);
        let acceptor = config.acceptor();
        let mut endpoints = Vec::with_capacity(workers);
        let mut counters = Vec::with_capacity(workers);
        for index in 0..workers {
            // `index` < MAX_WORKERS = 256.
            let endpoint = config.endpoint(local_addr, index as u8, &gate, now)?;
            counters.push(endpoint.counters());
            endpoints.push(endpoint);
        }
        let ports: Vec<_> = sockets.into_iter().zip(endpoints).collect();
        let ports = std::sync::Mutex::new(ports.into_iter().map(Some).collect::<Vec<_>>());
        let serve = Arc::new(serve);
        let setup = Arc::new(move |worker: &Worker| -> Result<(), Error> {
            let Some((socket, endpoint)) = ports
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .get_mut(worker.index())
                .and_then(Option::take)
            else {
                return Err(Error::WORKER_GONE);
            };
            worker.add_port(
                socket,
                endpoint,
                Role::Server {
                    acceptor: Box::new(acceptor.clone()),
                },
            );
            let serve = serve.clone();
            worker.spawn(serve(worker.clone()));
            Ok(())
        });
        let pool = Pool::start("server", workers, &options, &capabilities, setup)?;
        tracing::info!(%local_addr, workers, release = %capabilities.release, incremental_buffers = capabilities.incremental_buffers, "serving (io_uring)");
        Ok(Self {
            local_addr,
            pool,
            counters,
        })
    }

    /// The bound address (with the port the system chose, if it was 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// How many workers serve the port.
    pub fn workers(&self) -> usize {
        self.pool.remotes.len()
    }

    /// Each worker's endpoint counters (datagrams, misrouted packets), in worker order.
    pub fn counters(&self) -> &[Arc<EndpointCounters>] {
        &self.counters
    }

    /// Each worker's ring counters (system calls, receives, sends), in worker order.
    pub fn worker_counters(&self) -> Vec<Arc<WorkerCounters>> {
        self.pool.worker_counters()
    }

    /// The first worker that stopped running while the server was up, if one did.
    pub fn failure(&self) -> Option<WorkerFailure> {
        self.pool.failure.borrow().clone()
    }

    /// A future that resolves when a worker fails (see [`WorkerFailure`]): a server's
    /// owner waits on it beside its own work, and stops the server then. It does not
    /// borrow the server.
    pub fn failed(&self) -> impl Future<Output = WorkerFailure> + Send + 'static {
        let failure = self.pool.failure.consume();
        async move {
            match failure.until(Option::clone).await {
                Ok(failure) => failure,
                // The pool holds the cell open for as long as the server lives.
                Err(_) => std::future::pending().await,
            }
        }
    }

    /// Runs `task` on worker `index` (modulo the worker count).
    pub fn run_on<F, Fut, T>(&self, index: usize, task: F) -> JoinHandle<T>
    where
        F: FnOnce(Worker) -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        self.pool.run_on(index, task)
    }

    /// Stops accepting: every worker's [`Worker::accept`] ends, and each worker ends once
    /// its last connection closed (close the sessions first).
    pub fn stop(&self) {
        self.pool.stop();
    }

    /// Stops, and waits for every worker to end.
    pub fn join(self) {
        self.pool.stop();
        self.pool.join();
    }
}

impl Worker {
    fn add_port(
        &self,
        socket: UdpSocket,
        endpoint: moqx_runtime::endpoint::Endpoint,
        role: Role,
    ) -> u32 {
        endpoint.set_waker(&self.core.flush_waker);
        let local = socket.local_addr().ok();
        let port = Port::new(
            socket,
            endpoint,
            role,
            self.core.gso,
            self.core.max_send_bytes,
        );
        let index = self.core.ports.borrow_mut().insert(port);
        tracing::debug!(port = index, ?local, "serving a port");
        index
    }
}
