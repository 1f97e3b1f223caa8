//! The endpoint task: one UDP socket and one socketless `Endpoint`, driven by tokio.
//!
//! Each turn: run due timers, send everything the connections produced (batched by
//! destination into GSO sends), hand established server connections to the server; then
//! wait for the socket, a command, a connection's flush or
//! the next timer. A readable socket is drained up to a budget per turn, so that a flood
//! cannot keep the rest of the turn from running.

use std::io::IoSliceMut;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Wake, Waker};
use std::time::Instant;

use moqx_runtime::client::ConnectError;
use moqx_runtime::endpoint::{Endpoint, EndpointCounters, RECV_BUDGET, Transmit};
use moqx_runtime::quic::QuicConnection;
use moqx_runtime::udp::{RecvMeta, UdpSocket};
use tokio::io::unix::AsyncFd;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::Error;

/// What a handle asks of its endpoint task.
pub(crate) enum Command {
    /// Stop admitting new connections (a server draining).
    Stop,
    /// Open a client connection (its handshake is the caller's to wait for:
    /// `moqx_runtime::client::Connecting`).
    Connect {
        server_name: String,
        peer: SocketAddr,
        reply: oneshot::Sender<Result<QuicConnection, Error>>,
    },
}

/// Talks to a running endpoint task.
#[derive(Debug, Clone)]
pub(crate) struct EndpointHandle {
    commands: mpsc::UnboundedSender<Command>,
}

impl EndpointHandle {
    /// Opens a client connection; its handshake goes on in the endpoint task.
    pub(crate) async fn connect(
        &self,
        server_name: &str,
        peer: SocketAddr,
    ) -> Result<QuicConnection, Error> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::Connect {
                server_name: server_name.to_owned(),
                peer,
                reply,
            })
            .map_err(|_| Error::Stopped)?;
        answer.await.map_err(|_| Error::Stopped)?
    }

    /// Asks the endpoint to stop admitting connections (see `Endpoint::stop`).
    pub(crate) fn stop(&self) {
        let _ = self.commands.send(Command::Stop);
    }
}

/// Starts the endpoint task on the current tokio runtime; it ends once every handle is
/// gone and its last connection closed. Established server connections
/// go to `accepted`. Each receive call takes up to `recv_batch` datagrams (at most
/// [`RECV_BATCH`]); each buffer holds a whole GRO train, so a client's endpoint (one
/// connection) takes one at a time and a server's many.
pub(crate) fn start(
    socket: UdpSocket,
    endpoint: Endpoint,
    accepted: Option<mpsc::UnboundedSender<QuicConnection>>,
    recv_batch: usize,
) -> Result<(EndpointHandle, tokio::task::JoinHandle<()>), Error> {
    let local_addr = socket
        .local_addr()
        .map_err(Error::io("reading the bound address"))?;
    // SAFETY: `UdpSocket` owns its file descriptor (a `std::net::UdpSocket` inside), which
    // stays open, and is the one `as_raw_fd` returns, for as long as the socket lives; the
    // `AsyncFd` owns the socket until it drops. Exercised by every test in tests/loopback.rs.
    let socket = unsafe { AsyncFd::register(socket) }
        .map_err(|error| Error::io("registering the socket with tokio")(error.into()))?;
    let (commands, receiver) = mpsc::unbounded_channel();
    let recv_batch = recv_batch.clamp(1, RECV_BATCH);
    tracing::debug!(%local_addr, server = accepted.is_some(), "endpoint started");
    let task = tokio::spawn(run(socket, endpoint, receiver, accepted, recv_batch));
    Ok((EndpointHandle { commands }, task))
}

struct NotifyWaker(Notify);

impl Wake for NotifyWaker {
    fn wake(self: Arc<Self>) {
        self.0.notify_one();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.notify_one();
    }
}

async fn run(
    socket: AsyncFd<UdpSocket>,
    mut endpoint: Endpoint,
    mut commands: mpsc::UnboundedReceiver<Command>,
    accepted: Option<mpsc::UnboundedSender<QuicConnection>>,
    recv_batch: usize,
) {
    let flush = Arc::new(NotifyWaker(Notify::new()));
    endpoint.set_waker(&Waker::from(flush.clone()));
    let counters = endpoint.counters();
    // One receive call takes up to `recv_batch` datagrams (recvmmsg), each buffer large
    // enough for a GRO train of them.
    let mut storage = vec![0u8; recv_batch * RECV_BUFFER];
    let mut meta = [RecvMeta::default(); RECV_BATCH];
    let mut transmits: Vec<Transmit> = Vec::new();
    let mut handles_open = true;
    // One timer for the loop's life, moved only when the earliest deadline moves.
    let timer = tokio::time::sleep_until(far_future());
    tokio::pin!(timer);
    let mut armed: Option<Instant> = None;
    loop {
        let now = Instant::now();
        endpoint.handle_timeouts(now);
        endpoint.poll_transmits(now, &mut transmits);
        for transmit in &transmits {
            if let Err(error) = send(&socket, transmit, &counters).await {
                let datagrams = transmit
                    .contents
                    .len()
                    .div_ceil(transmit.segment_size.max(1));
                endpoint.record_send_failure(&error, transmit.destination, datagrams, now);
            }
        }
        endpoint.reclaim(transmits.drain(..));
        while let Some(connection) = endpoint.accept() {
            if let Some(accepted) = &accepted {
                let _ = accepted.send(connection);
            }
        }
        if !handles_open && endpoint.is_empty() {
            return;
        }

        let timeout = endpoint.next_timeout();
        if timeout != armed {
            armed = timeout;
            let at = timeout.map_or_else(far_future, tokio::time::Instant::from_std);
            timer.as_mut().reset(at);
        }
        tokio::select! {
            ready = socket.readable() => {
                let Ok(mut guard) = ready else { return };
                // At most RECV_BUDGET datagrams before the loop's other work (timers,
                // sends, accepts) runs again: a flood must not starve the connections it
                // is not for. Readiness stays set, so the next turn comes straight back.
                receive_within(RECV_BUDGET, || {
                    let received = guard.try_io(|socket| {
                        // On the stack: no allocation per receive call.
                        let mut chunks = storage.chunks_mut(RECV_BUFFER);
                        let mut buffers: [IoSliceMut<'_>; RECV_BATCH] = std::array::from_fn(|_| {
                            IoSliceMut::new(chunks.next().unwrap_or_default())
                        });
                        socket.get_ref().recv(&mut buffers[..recv_batch], &mut meta)
                    });
                    if let Ok(Ok(count)) = received {
                        counters.receive_calls.fetch_add(1, Ordering::Relaxed);
                        let now = Instant::now();
                        for (meta, buffer) in
                            meta[..count].iter().zip(storage.chunks_mut(RECV_BUFFER))
                        {
                            let len = meta.len.min(buffer.len());
                            for datagram in buffer[..len].chunks_mut(meta.stride.max(1)) {
                                let _ = endpoint.handle_datagram(datagram, meta.addr, meta.dst_ip, now);
                            }
                        }
                    }
                    received.ok()
                });
            }
            command = commands.recv(), if handles_open => match command {
                Some(Command::Connect { server_name, peer, reply }) => {
                    let opened = endpoint
                        .connect(&server_name, peer, Instant::now())
                        .map_err(|error| ConnectError::Quic(error.to_string()).into());
                    let _ = reply.send(opened);
                }
                Some(Command::Stop) => endpoint.stop(),
                None => {
                    handles_open = false;
                    // A server whose handles are gone is shutting down: no one new.
                    if accepted.is_some() {
                        endpoint.stop();
                    }
                }
            },
            () = flush.0.notified() => {}
            () = &mut timer, if armed.is_some() => {}
        }
    }
}

/// Calls `receive_once` (one receive call, its datagrams handled: `Some` with how many it
/// took or the call's error, `None` when the socket would block) until the socket is empty
/// or `budget` datagrams were taken; returns whether the budget ran out (the socket may
/// hold more, for the next turn). A failed call counts as one datagram, so that a socket
/// that keeps failing cannot hold the loop either.
fn receive_within(
    budget: usize,
    mut receive_once: impl FnMut() -> Option<std::io::Result<usize>>,
) -> bool {
    let mut left = budget;
    while left > 0 {
        match receive_once() {
            Some(Ok(count)) => left = left.saturating_sub(count.max(1)),
            // A read error other than "nothing there" is a datagram lost.
            Some(Err(error)) => {
                left -= 1;
                tracing::debug!(%error, "a receive failed");
            }
            None => return false,
        }
    }
    true
}

/// Datagrams one receive call takes at most (`recvmmsg`).
pub(crate) const RECV_BATCH: usize = moqx_runtime::udp::RECV_BATCH;

/// Bytes per receive buffer: a whole GRO train (the kernel coalesces up to 64 KiB).
const RECV_BUFFER: usize = 65_536;

/// A deadline far enough away to mean "none" for a timer that must exist.
fn far_future() -> tokio::time::Instant {
    tokio::time::Instant::now() + std::time::Duration::from_secs(86_400 * 365)
}

/// Sends one batch, waiting for the socket when its buffer is full; counts the system
/// calls and datagrams that left. An error is the kernel refusing the batch (its
/// datagrams are lost; QUIC retransmits them).
async fn send(
    socket: &AsyncFd<UdpSocket>,
    transmit: &Transmit,
    counters: &EndpointCounters,
) -> std::io::Result<()> {
    loop {
        match socket.get_ref().send_from(
            transmit.source,
            transmit.destination,
            &transmit.contents,
            transmit.segment_size,
        ) {
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                let mut guard = socket.writable().await?;
                guard.clear_ready();
            }
            Err(error) => return Err(error),
            Ok(calls) => {
                let datagrams = transmit
                    .contents
                    .len()
                    .div_ceil(transmit.segment_size.max(1));
                counters
                    .send_calls
                    .fetch_add(calls as u64, Ordering::Relaxed);
                counters
                    .datagrams_sent
                    .fetch_add(datagrams as u64, Ordering::Relaxed);
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flood (a socket that never runs dry) holds the loop for one budget, no more: the
    /// loop's timers and sends run between budgets.
    #[test]
    fn a_socket_that_never_runs_dry_is_read_for_one_budget() {
        let mut calls = 0;
        let exhausted = receive_within(RECV_BUDGET, || {
            calls += 1;
            Some(Ok(RECV_BATCH))
        });
        assert!(exhausted, "the budget ran out: the socket may hold more");
        assert_eq!(calls, RECV_BUDGET.div_ceil(RECV_BATCH));

        // Failing calls count too.
        let mut calls = 0;
        receive_within(RECV_BUDGET, || {
            calls += 1;
            Some(Err(std::io::Error::other("failing")))
        });
        assert_eq!(calls, RECV_BUDGET);
    }

    #[test]
    fn an_empty_socket_ends_the_receiving_at_once() {
        let mut calls = 0;
        let exhausted = receive_within(RECV_BUDGET, || {
            calls += 1;
            (calls < 3).then_some(Ok(1))
        });
        assert!(!exhausted);
        assert_eq!(calls, 3);
    }
}
