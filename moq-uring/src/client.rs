//! Connecting as a client from a worker, over either binding: the URL, the certificate pin
//! and the WebTransport handshake are `moqx_runtime::client`'s; this file binds a socket on
//! the worker's ring and waits.

use std::future::Future;
use std::net::ToSocketAddrs;
use std::time::Instant;

use moqx_net::session::Session;
use moqx_runtime::client::{ClientConfig, ConnectError, Connecting, Target};
use moqx_runtime::endpoint::Endpoint;
use moqx_runtime::udp::UdpSocket;

use crate::pool::{JoinHandle, Pool};
use crate::port::Role;
use crate::{Error, UringConfig, Worker};

impl Worker {
    /// Connects to `url` and starts a session on this worker; resolves once the session is
    /// established (the server answered SETUP; before -05, once the connection is up). A
    /// server that refuses the client is `ConnectError::Refused`, naming its code.
    ///
    /// - `moqt://host:port/path` is raw QUIC (ALPN `moq-lite-05`); the path goes in SETUP.
    /// - `https://host:port/path` is WebTransport over HTTP/3: the path goes in the
    ///   extended CONNECT.
    ///
    /// A host name is resolved with the system resolver, on this thread: give an address
    /// to keep the worker from waiting on DNS.
    pub async fn connect(&self, url: &str, config: ClientConfig) -> Result<Session, Error> {
        let result = self.connect_inner(url, config).await;
        if let Err(error) = &result {
            tracing::debug!(url = %moqx_net::redact::Redacted(url), %error, "connecting failed");
        }
        result
    }

    async fn connect_inner(&self, url: &str, config: ClientConfig) -> Result<Session, Error> {
        let target = Target::parse(url)?;
        let peer = target.peer(
            (target.host.as_str(), target.port)
                .to_socket_addrs()
                .map_err(Error::io(format!("resolving {}", target.host)))?,
        )?;
        let local = Target::local_address(peer);
        tracing::debug!(%peer, binding = %target.binding, "connecting");
        // The worker's switches win over the client configuration's (the driver's
        // ablations switch them per worker).
        let mut udp = config.udp.clone();
        udp.gso &= self.core.gso;
        udp.gro &= self.core.gro;
        let socket = UdpSocket::bind(local, &udp).map_err(Error::io("binding a client socket"))?;
        socket
            .as_std()
            .set_nonblocking(false)
            .map_err(Error::io("setting up a client socket"))?;
        let local = socket
            .local_addr()
            .map_err(Error::io("reading the bound address"))?;
        let endpoint = config.endpoint(&target, local, Instant::now())?;
        let index = self.add_port_for_client(socket, endpoint);
        let connection = {
            let mut ports = self.core.ports.borrow_mut();
            let port = ports.get_mut(index).ok_or(Error::WORKER_GONE)?;
            port.endpoint
                .connect(&target.host, peer, Instant::now())
                .map_err(|error| ConnectError::Quic(error.to_string()))?
        };
        let runtime = self.core.runtime.clone();
        let mut connecting = Connecting::new(runtime, connection, peer, target, config);
        Ok(moqx_kio::wait(|waiter| connecting.poll(waiter)).await?)
    }

    fn add_port_for_client(&self, socket: UdpSocket, endpoint: Endpoint) -> u32 {
        endpoint.set_waker(&self.core.flush_waker);
        let local = socket.local_addr().ok();
        let port = crate::port::Port::new(
            socket,
            endpoint,
            Role::Client,
            self.core.gso,
            self.core.max_send_bytes,
        );
        let index = self.core.ports.borrow_mut().insert(port);
        tracing::debug!(port = index, ?local, "a client port");
        index
    }
}

/// Client workers: threads with a ring each and no server socket, for client sessions
/// (tests, load generators, a CLI).
#[derive(Debug)]
pub struct Client {
    pool: Pool,
}

impl Client {
    /// Probes the kernel and starts `workers` client workers.
    pub fn start(workers: usize, options: UringConfig) -> Result<Self, Error> {
        options.validate()?;
        let capabilities = crate::probe()?;
        let pool = Pool::start(
            "client",
            workers.max(1),
            &options,
            &capabilities,
            std::sync::Arc::new(|_: &Worker| Ok(())),
        )?;
        Ok(Self { pool })
    }

    /// Connects to `url` from worker `worker` (modulo the worker count); the session runs
    /// there.
    pub fn connect(
        &self,
        worker: usize,
        url: &str,
        config: ClientConfig,
    ) -> JoinHandle<Result<Session, Error>> {
        let url = url.to_owned();
        self.pool.run_on(worker, move |worker| async move {
            worker.connect(&url, config).await
        })
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

    /// Each worker's ring counters (system calls, receives, sends), in worker order.
    pub fn worker_counters(&self) -> Vec<std::sync::Arc<crate::WorkerCounters>> {
        self.pool.worker_counters()
    }

    /// Stops the workers once their connections are gone, and waits for them.
    pub fn join(self) {
        self.pool.stop();
        self.pool.join();
    }
}
