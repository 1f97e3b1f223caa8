//! A worker of a server: where its clients' requests arrive and where their sessions run.
//! A thread-per-core server has one per core, each on a thread of its own; a work-stealing
//! server has one, on tokio's pool. The shape is io_uring's (`moqx_uring::Worker`), so
//! that an application serves both drivers with the same loop.

use std::future::Future;
use std::sync::Arc;

use moqx_net::session::Session;
use moqx_runtime::client::ClientConfig;
use tokio::sync::{Mutex, mpsc};

use crate::{Error, Request, TokioRuntime};

/// One worker of a [`Server`](crate::Server): [`accept`](Self::accept) its clients,
/// [`spawn`](Self::spawn) their tasks beside their sessions, or
/// [`connect`](Self::connect) from it. Clones are handles to the same worker.
#[derive(Debug, Clone)]
pub struct Worker {
    index: usize,
    runtime: TokioRuntime,
    handle: tokio::runtime::Handle,
    /// The requests of this worker's connections. Tasks accepting at once take turns
    /// (tokio's mutex queues them fairly), so none is left unwoken.
    requests: Arc<Mutex<mpsc::UnboundedReceiver<Request>>>,
}

impl Worker {
    /// A worker on the runtime of `handle` whose requests arrive on `requests`.
    pub(crate) fn new(
        index: usize,
        handle: tokio::runtime::Handle,
        requests: mpsc::UnboundedReceiver<Request>,
    ) -> Self {
        Self {
            index,
            runtime: TokioRuntime::new(handle.clone()),
            handle,
            requests: Arc::new(Mutex::new(requests)),
        }
    }

    /// Its index among the server's workers (in every connection ID it issues).
    pub fn index(&self) -> usize {
        self.index
    }

    /// The runtime its sessions run on.
    pub fn runtime(&self) -> &TokioRuntime {
        &self.runtime
    }

    /// The tokio runtime it runs on.
    pub(crate) fn runtime_handle(&self) -> &tokio::runtime::Handle {
        &self.handle
    }

    /// The next client whose handshakes completed on this worker (QUIC, and for
    /// WebTransport the CONNECT); `None` once its endpoint stopped. WebTransport
    /// handshakes run in tasks of their own, so one slow client holds up no other.
    pub async fn accept(&self) -> Option<Request> {
        self.requests.lock().await.recv().await
    }

    /// Runs `task` on this worker's runtime, beside its sessions.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.handle.spawn(task);
    }

    /// Connects to `url` from this worker: the client's endpoint and session run on its
    /// runtime (see [`connect`](crate::connect)).
    pub async fn connect(&self, url: &str, config: ClientConfig) -> Result<Session, Error> {
        let url = url.to_owned();
        self.handle
            .spawn(async move { crate::connect(&url, config).await })
            .await
            .map_err(|_| Error::Stopped)?
    }
}
