//! Thread per core on tokio (Linux): a pinned thread per worker, each running a
//! current-thread runtime with its own socket in the port's `SO_REUSEPORT` group, its own
//! endpoint, and the application's loop.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use moqx_runtime::endpoint::{Endpoint, EndpointCounters};
use moqx_runtime::server::{Acceptor, ServerConfig};
use moqx_runtime::udp::UdpSocket;
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

use crate::driver::EndpointHandle;
use crate::serving::{Failure, report, start_worker};
use crate::{Error, TokioRuntime, Worker};

/// What a started thread-per-core server is made of.
pub(crate) struct Started {
    pub(crate) local_addr: SocketAddr,
    pub(crate) endpoints: Vec<EndpointHandle>,
    pub(crate) counters: Vec<Arc<EndpointCounters>>,
    pub(crate) workers: Vec<Worker>,
    pub(crate) finished: Vec<oneshot::Receiver<()>>,
    pub(crate) failure: Failure,
}

/// The application's loop, run on every worker.
type Serve<F> = Arc<F>;

/// Binds `workers` sockets on `config.bind` and starts a thread per worker, each running
/// `serve` once its endpoint is up.
pub(crate) async fn start<F, Fut>(
    config: ServerConfig,
    workers: usize,
    serve: Serve<F>,
) -> Result<Started, Error>
where
    F: Fn(Worker) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    Error::check_workers(workers)?;
    let (sockets, local_addr) =
        moqx_runtime::steering::bind_workers(config.bind, workers, &config.udp)
            .map_err(Error::io(format!("binding {}", config.bind)))?;
    let now = Instant::now();
    let gate = config.gate(now);
    let acceptor = config.acceptor();
    let cpus = moqx_runtime::cores::available();
    let mut started = Started {
        local_addr,
        endpoints: Vec::with_capacity(workers),
        counters: Vec::with_capacity(workers),
        workers: Vec::with_capacity(workers),
        finished: Vec::with_capacity(workers),
        failure: Failure::default(),
    };
    for (index, socket) in sockets.into_iter().enumerate() {
        // `index` < MAX_WORKERS = 256.
        let endpoint = config.endpoint(local_addr, index as u8, &gate, now)?;
        started.counters.push(endpoint.counters());
        let (ready, up) = oneshot::channel();
        let (done, finished) = oneshot::channel();
        let thread = WorkerThread {
            index,
            cpu: cpus[index % cpus.len()],
            socket,
            endpoint,
            acceptor: acceptor.clone(),
            recv_batch: config.udp.recv_batch,
            failure: started.failure.clone(),
        };
        let serve = serve.clone();
        std::thread::Builder::new()
            .name(format!("moq-worker-{index}"))
            .spawn(move || thread.run(serve, ready, done))
            .map_err(Error::io(format!("starting worker {index}")))?;
        let (endpoint, worker) = up.await.map_err(|_| Error::Stopped)??;
        started.endpoints.push(endpoint);
        started.workers.push(worker);
        started.finished.push(finished);
    }
    tracing::info!(%local_addr, workers, "serving (thread per core)");
    Ok(started)
}

/// One worker of a thread-per-core server, before its thread starts.
struct WorkerThread {
    index: usize,
    cpu: usize,
    socket: UdpSocket,
    endpoint: Endpoint,
    acceptor: Acceptor,
    recv_batch: usize,
    failure: Failure,
}

impl WorkerThread {
    /// The worker thread: pins itself, runs its endpoint, its sessions and the
    /// application's loop on a current-thread runtime until the endpoint ends. `ready`
    /// gets the endpoint's handle and the worker (or why it did not start); `done` closes
    /// when the thread ends.
    fn run<F, Fut>(
        self,
        serve: Serve<F>,
        ready: oneshot::Sender<Result<(EndpointHandle, Worker), Error>>,
        done: oneshot::Sender<()>,
    ) where
        F: Fn(Worker) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let _done = done;
        let span = tracing::info_span!("worker", index = self.index, cpu = self.cpu);
        let _entered = span.enter();
        if let Err(error) = moqx_runtime::cores::pin_current_thread(self.cpu) {
            tracing::warn!(%error, "running unpinned");
        }
        let counters = self.endpoint.counters();
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .on_thread_park(move || {
                counters
                    .parks
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            })
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
                let (requests_sender, requests) = mpsc::unbounded_channel();
                match start_worker(
                    self.socket,
                    self.endpoint,
                    self.acceptor,
                    requests_sender,
                    TokioRuntime::current(),
                    self.recv_batch,
                ) {
                    Ok((handle, task)) => {
                        let worker =
                            Worker::new(self.index, tokio::runtime::Handle::current(), requests);
                        tokio::spawn(serve(worker.clone()).in_current_span());
                        let _ = ready.send(Ok((handle, worker)));
                        report(task.await, self.index, &self.failure);
                        // The endpoint ended with its last connection: let the tasks its
                        // sessions' ends woke (an application's accounting) run before
                        // the runtime, and what is left on it, goes.
                        for _ in 0..3 {
                            tokio::task::yield_now().await;
                        }
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
