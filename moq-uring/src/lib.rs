//! # moqx-uring: MoQ on io_uring, thread per core
//!
//! This crate **is** the io_uring driver: it runs `moqx_net` session machines over real QUIC
//! connections on pinned worker threads, one ring per worker, with
//!
//! - **receives** as one multishot `recvmsg` per socket into a ring of provided buffers
//!   (consumed incrementally where the kernel can, so a buffer holds hundreds of small
//!   datagrams), with GRO trains split by their segment size;
//! - **sends** as `sendmsg` with an explicit `UDP_SEGMENT` on every batch, the packets of
//!   all of a turn's connections coalesced by destination, submitted together: one
//!   `io_uring_enter` per turn, however many sends and receives;
//! - **time** from `moqx_runtime`'s timer wheel and one absolute-timeout wait per turn,
//!   never a submission per deadline;
//! - **tasks** on a local executor: session machines are `!Send` here and never leave
//!   their worker; wakers from other threads (a track written on another core) queue the
//!   task and wake the worker through a futex word, with a system call only when it is
//!   parked.
//!
//! A [`Server`] binds one UDP port with a `SO_REUSEPORT` socket per worker; the kernel
//! steers each packet to the worker owning its connection (`moqx_runtime::steering`), and
//! the application's loop runs on every worker ([`Worker::accept`]). A [`Client`] is a set
//! of workers for client sessions ([`Worker::connect`]).
//!
//! It **is not** the protocol, nor the binding policy: every byte of moq-lite is
//! `moqx_net`'s, and the QUIC configuration, the ALPN dispatch, the WebTransport handshake
//! and the close codes are `moqx_runtime`'s. It needs Linux 6.12 or later: [`probe`] tries
//! every kernel feature the driver uses before a worker starts, and names what is missing
//! (or that io_uring is refused, as container runtimes do by default).
//!
//! ```no_run
//! use moqx_runtime::server::ServerConfig;
//! use moqx_runtime::tls::Certificate;
//!
//! let certificate = Certificate::self_signed(&["localhost".into()]).unwrap();
//! let config = ServerConfig::new("127.0.0.1:4443".parse().unwrap(), certificate, Default::default());
//! let server = moqx_uring::Server::bind(config, 2, Default::default(), |worker| async move {
//!     while let Some(request) = worker.accept().await {
//!         let _session = request.accept();
//!     }
//! })
//! .unwrap();
//! server.join();
//! ```

mod buffers;
mod client;
mod cmsg;
mod counters;
mod error;
mod executor;
mod pool;
mod port;
mod probe;
mod recv;
mod ring;
mod runtime;
mod send;
mod server;
mod user_data;
mod wake;
mod worker;

use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;

pub use client::Client;
pub use counters::{WorkerCounters, WorkerSnapshot};
pub use error::Error;
pub use moqx_runtime::binding::Binding;
pub use moqx_runtime::cid::MAX_WORKERS;
pub use moqx_runtime::client::ClientConfig;
pub use moqx_runtime::server::ServerConfig;
pub use pool::{JoinHandle, WorkerFailure};
pub use probe::{Capabilities, Feature, ProbeError, probe};
pub use runtime::{UringDeadline, UringRuntime};
pub use server::{Request, Server};

/// How the driver uses its rings and sockets (what the ablation benchmarks switch).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UringConfig {
    /// Send batches as one GSO `sendmsg` each (off: one `sendmsg` per datagram).
    pub gso: bool,
    /// Receive GRO trains (off: one datagram per receive).
    pub gro: bool,
    /// Receive buffers per worker: a power of two, 1 to 32,768.
    pub recv_buffers: u16,
    /// Bytes per receive buffer where buffers are consumed incrementally (at least twice
    /// the largest receive, about 64 KiB; whole buffers are always the largest receive).
    pub recv_buffer_bytes: u32,
    /// Pin each worker to a core.
    pub pin: bool,
    /// Consume receive buffers incrementally where the kernel can (`min_left`); off, every
    /// receive takes a whole buffer, as on kernels without it.
    pub incremental_buffers: bool,
    /// Payload bytes one port may have handed to the kernel and not yet sent; at it, the
    /// port takes no more packets from its connections until sends complete
    /// (backpressure: packets wait in quiche, under its congestion control). One turn's
    /// sends may take it past the bound.
    pub max_send_bytes_in_flight: usize,
}

impl Default for UringConfig {
    /// GSO and GRO on; 16 receive buffers of 512 KiB per worker, consumed incrementally
    /// where the kernel can (each then holds ~450 KiB of datagrams: a few thousand chat
    /// packets; else 16 of ~66 KiB, a receive each); pinned; 4 MiB of sends in flight per
    /// port (a default socket send buffer's worth).
    fn default() -> Self {
        Self {
            gso: true,
            gro: true,
            recv_buffers: 16,
            recv_buffer_bytes: 512 << 10,
            pin: true,
            incremental_buffers: true,
            max_send_bytes_in_flight: 4 << 20,
        }
    }
}

impl UringConfig {
    fn validate(&self) -> Result<(), Error> {
        if !self.recv_buffers.is_power_of_two() || self.recv_buffers > 1 << 15 {
            return Err(Error::RecvBuffers(self.recv_buffers));
        }
        Ok(())
    }
}

/// One worker, as the tasks on it see it: accept requests, connect, spawn local tasks.
/// `!Send`: it is made by the worker and stays on its thread.
#[derive(Clone)]
pub struct Worker {
    core: Rc<worker::Core>,
}

impl Worker {
    pub(crate) fn from_core(core: Rc<worker::Core>) -> Self {
        Self { core }
    }

    /// This worker's index (0-based) in its server or client.
    pub fn index(&self) -> usize {
        self.core.index
    }

    /// The runtime of this worker's sessions.
    pub fn runtime(&self) -> &UringRuntime {
        &self.core.runtime
    }

    /// Runs `future` on this worker as a task of its own.
    pub fn spawn(&self, future: impl Future<Output = ()> + 'static) {
        self.core.local.executor.spawn(future);
    }

    /// Waits until `at` (a deadline in the worker's timer wheel: no system call).
    pub async fn sleep_until(&self, at: std::time::Instant) {
        use moqx_net::runtime::{Deadline, Runtime};
        let mut deadline = self.core.runtime.deadline();
        deadline.set(Some(at));
        moqx_kio::wait(|waiter| deadline.poll(waiter)).await;
    }

    /// Waits for `duration`.
    pub async fn sleep(&self, duration: std::time::Duration) {
        self.sleep_until(std::time::Instant::now() + duration).await;
    }

    /// This worker's ring counters.
    pub fn counters(&self) -> Arc<WorkerCounters> {
        self.core.remote.counters.clone()
    }

    /// The next client whose handshakes completed on this worker (QUIC, and for
    /// WebTransport the CONNECT); `None` once the server stops. One slow WebTransport
    /// client holds up no other: handshakes run in tasks of their own.
    pub async fn accept(&self) -> Option<Request> {
        std::future::poll_fn(|cx| {
            let mut requests = self.core.requests.borrow_mut();
            if let Some(request) = requests.queue.pop_front() {
                return Poll::Ready(Some(request));
            }
            if requests.closed {
                return Poll::Ready(None);
            }
            requests.waker = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("index", &self.core.index)
            .finish_non_exhaustive()
    }
}
