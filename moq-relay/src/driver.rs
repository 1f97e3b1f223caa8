//! What the relay needs of a socket driver, and the drivers it can run on.
//!
//! The relay's policy (who may connect, with which rights, how many: the [`Gatekeeper`])
//! is the same on every driver; a driver only has to bind the port, hand each client
//! whose handshakes completed to the gatekeeper (on whichever thread holds the
//! connection), and shut down. [`Listener`] is that contract; `[server] driver`
//! (`--driver`) picks the implementation.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use moqx_net::runtime::Runtime;
use moqx_runtime::binding::BindingSession;
use moqx_runtime::server::Request;

use moqx_runtime::endpoint::EndpointCounters;
use moqx_runtime::server::ServerConfig;

use crate::config::{Driver, ServerSection};
use crate::gatekeeper::Gatekeeper;

/// What the relay needs of a driver's worker: the requests of its clients, and a place
/// beside their sessions for the tasks that watch them.
trait ServingWorker {
    /// The runtime its sessions run on.
    type Runtime: Runtime<Transport = BindingSession>;

    /// The next client whose handshakes completed on this worker; `None` once it stops.
    async fn accept(&self) -> Option<Request<Self::Runtime>>;

    /// Runs `task` on this worker.
    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static);
}

impl ServingWorker for moqx_tokio::Worker {
    type Runtime = moqx_tokio::TokioRuntime;

    async fn accept(&self) -> Option<Request<Self::Runtime>> {
        moqx_tokio::Worker::accept(self).await
    }

    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        moqx_tokio::Worker::spawn(self, task);
    }
}

#[cfg(uring)]
impl ServingWorker for moqx_uring::Worker {
    type Runtime = moqx_uring::UringRuntime;

    async fn accept(&self) -> Option<Request<Self::Runtime>> {
        moqx_uring::Worker::accept(self).await
    }

    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        moqx_uring::Worker::spawn(self, task);
    }
}

/// A worker's loop once it ran, whichever driver's handle it came as.
type Joined = Pin<Box<dyn Future<Output = ()> + Send>>;

fn joined<T>(handle: impl Future<Output = T> + Send + 'static) -> Joined {
    Box::pin(async move {
        let _ = handle.await;
    })
}

/// One worker's share of serving: every client it accepts goes through the gatekeeper,
/// and the task that counts an admitted session runs on the worker.
async fn admit_all<W: ServingWorker>(worker: W, gatekeeper: Arc<Gatekeeper>) {
    while let Some(request) = worker.accept().await {
        if let Some(watch) = gatekeeper.admit(request) {
            worker.spawn(watch);
        }
    }
}

/// A bound server of some driver.
pub trait Listener: Send + 'static {
    /// The UDP address both bindings listen on.
    fn local_addr(&self) -> SocketAddr;

    /// Each worker's endpoint counters, in worker order, for `/metrics`.
    fn counters(&self) -> Vec<Arc<EndpointCounters>>;

    /// Admits clients through `gatekeeper`, running the task it returns for each accepted
    /// session, until the driver stops accepting.
    fn serve(&mut self, gatekeeper: Arc<Gatekeeper>) -> impl Future<Output = ()> + Send;

    /// A future that resolves if the driver fails while serving (an io_uring worker
    /// whose loop ended with an error or a panic), with what failed; never, for a driver
    /// that cannot. It does not borrow the listener.
    fn failed(&self) -> impl Future<Output = String> + Send + 'static;

    /// Stops admitting connections: the workers drop new Initials and close the
    /// connections still in their handshake; sessions already running go on (the drain
    /// closes them).
    fn stop_admitting(&self);

    /// Stops accepting and waits for the driver's workers to end (each once its last
    /// connection closed). Dropping the future leaves nothing behind that keeps the
    /// process from exiting.
    fn shutdown(self) -> impl Future<Output = ()> + Send;
}

/// The driver `[server] driver` chose, bound.
#[derive(Debug)]
pub enum Server {
    /// tokio, work-stealing or thread per core.
    Tokio(moqx_tokio::Server),
    /// io_uring, thread per core.
    #[cfg(uring)]
    Uring(moqx_uring::Server),
}

/// Why a driver could not bind or start.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// The tokio driver's error.
    #[error(transparent)]
    Tokio(#[from] moqx_tokio::Error),
    /// The io_uring driver's error (among them: io_uring refused, or the kernel too old,
    /// with what is missing).
    #[cfg(uring)]
    #[error(transparent)]
    Uring(#[from] moqx_uring::Error),
    /// The driver `[server] driver` names is not in this build: thread per core needs
    /// Linux (its kernel steering program), io_uring needs Linux and the `uring` feature.
    #[error("server.driver = \"{0}\" is not available in this build: {1}")]
    Unavailable(&'static str, &'static str),
}

/// Binds `config` on the driver `server` names.
pub async fn bind(server: &ServerSection, config: ServerConfig) -> Result<Server, BindError> {
    Ok(match server.driver {
        Driver::Tokio => Server::Tokio(moqx_tokio::Server::bind(config).await?),
        // The workers' application loops start when the relay serves (`serve`); until
        // then their requests wait.
        #[cfg(target_os = "linux")]
        Driver::TokioPerCore => Server::Tokio(
            moqx_tokio::Server::bind_per_core(config, server.worker_count(), |_| async {}).await?,
        ),
        #[cfg(not(target_os = "linux"))]
        Driver::TokioPerCore => {
            return Err(BindError::Unavailable(
                "tokio-per-core",
                "it needs Linux's reuseport steering; use \"tokio\"",
            ));
        }
        // The workers' application loops start when the relay serves (`serve`); until
        // then their requests wait.
        #[cfg(uring)]
        Driver::Uring => {
            let mut options = moqx_uring::UringConfig::default();
            options.gso = server.gso;
            options.gro = server.gro;
            Server::Uring(moqx_uring::Server::bind(
                config,
                server.worker_count(),
                options,
                |_| async {},
            )?)
        }
        #[cfg(not(uring))]
        Driver::Uring => {
            return Err(BindError::Unavailable(
                "uring",
                "it needs Linux and the relay's `uring` feature (on by default)",
            ));
        }
    })
}

impl Listener for Server {
    fn local_addr(&self) -> SocketAddr {
        match self {
            Self::Tokio(server) => server.local_addr(),
            #[cfg(uring)]
            Self::Uring(server) => server.local_addr(),
        }
    }

    fn counters(&self) -> Vec<Arc<EndpointCounters>> {
        match self {
            Self::Tokio(server) => server.counters().to_vec(),
            #[cfg(uring)]
            Self::Uring(server) => server.counters().to_vec(),
        }
    }

    async fn serve(&mut self, gatekeeper: Arc<Gatekeeper>) {
        // Each worker admits its own clients: the request (and the session it becomes)
        // never leaves the worker's thread. Every driver has the same shape here.
        let gk = || gatekeeper.clone();
        let loops: Vec<Joined> = match self {
            Self::Tokio(server) => (0..server.workers())
                .map(|i| (i, gk()))
                .map(|(i, gk)| joined(server.run_on(i, move |w| admit_all(w, gk))))
                .collect(),
            #[cfg(uring)]
            Self::Uring(server) => (0..server.workers())
                .map(|i| (i, gk()))
                .map(|(i, gk)| joined(server.run_on(i, move |w| admit_all(w, gk))))
                .collect(),
        };
        for worker in loops {
            worker.await;
        }
    }

    fn failed(&self) -> impl Future<Output = String> + Send + 'static {
        // Asked for once per relay: a boxed future keeps the drivers' types apart.
        let failed: std::pin::Pin<Box<dyn Future<Output = String> + Send>> = match self {
            Self::Tokio(server) => Box::pin(server.failed()),
            #[cfg(uring)]
            Self::Uring(server) => {
                let failed = server.failed();
                Box::pin(async move { failed.await.to_string() })
            }
        };
        failed
    }

    fn stop_admitting(&self) {
        match self {
            Self::Tokio(server) => server.stop_admitting(),
            // Its workers stop accepting requests and admitting connections.
            #[cfg(uring)]
            Self::Uring(server) => server.stop(),
        }
    }

    async fn shutdown(self) {
        match self {
            Self::Tokio(server) => server.shutdown().await,
            #[cfg(uring)]
            Self::Uring(server) => {
                // Joining blocks until every worker's connections are gone: on a thread
                // of its own, not tokio's blocking pool, whose shutdown would wait for it
                // (review finding F6: a relay that never exited on SIGTERM).
                let (done, joined) = tokio::sync::oneshot::channel();
                let spawned = std::thread::Builder::new()
                    .name("moq-uring-join".into())
                    .spawn(move || {
                        server.join();
                        let _ = done.send(());
                    });
                if spawned.is_ok() {
                    let _ = joined.await;
                }
            }
        }
    }
}
