//! A client connection from its first packet to a running session, as one poll machine:
//! the QUIC handshake within the configured time, then [`ClientSetup`]. Every socket
//! driver runs the same machine; what differs is only how its endpoint moves packets.

use std::net::SocketAddr;
use std::task::Poll;
use std::time::Instant;

use moqx_kio::Waiter;
use moqx_net::runtime::{Deadline, Runtime};
use moqx_net::session::Session;

use super::{ClientConfig, ClientSetup, ConnectError, Target};
use crate::binding::BindingSession;
use crate::endpoint::Endpoint;
use crate::quic::QuicConnection;

impl ClientConfig {
    /// The endpoint of one client connection to `target`, bound at `local`: its own
    /// (worker 0, room for the one connection), with this configuration's keep-alive and
    /// connection-ID rotation.
    pub fn endpoint(
        &self,
        target: &Target,
        local: SocketAddr,
        now: Instant,
    ) -> Result<Endpoint, ConnectError> {
        let mut endpoint = Endpoint::new(target.quiche_config(self)?, local, 0, 1, now);
        endpoint.set_keep_alive(Some(self.keep_alive()));
        endpoint.set_cid_rotation(self.cid_rotation);
        Ok(endpoint)
    }
}

/// A client connection on its way to a session: ready with the [`Session`] once the QUIC
/// handshake completed within [`ClientConfig::handshake_timeout`] and the
/// [`ClientSetup`] after it did (the pin, the WebTransport CONNECT, SETUP), or with why
/// not. A driver makes one from the connection its endpoint opened and polls it with the
/// waiter of the task that waits (`moqx_kio::wait`).
pub struct Connecting<R: Runtime> {
    step: Step<R>,
}

enum Step<R: Runtime> {
    Handshake(Box<Handshake<R>>),
    Setup(Box<ClientSetup<R>>),
    Done,
}

/// The QUIC handshake in progress, and what the setup after it needs.
struct Handshake<R: Runtime> {
    runtime: R,
    connection: QuicConnection,
    deadline: R::Deadline,
    peer: SocketAddr,
    target: Target,
    config: ClientConfig,
}

impl<R> Connecting<R>
where
    R: Runtime<Transport = BindingSession>,
{
    /// Starts waiting for `connection` (just opened to `peer` for `target`), on
    /// `runtime`'s clock.
    pub fn new(
        runtime: R,
        connection: QuicConnection,
        peer: SocketAddr,
        target: Target,
        config: ClientConfig,
    ) -> Self {
        let mut deadline = runtime.deadline();
        deadline.set(Some(runtime.now() + config.handshake_timeout));
        Self {
            step: Step::Handshake(Box::new(Handshake {
                runtime,
                connection,
                deadline,
                peer,
                target,
                config,
            })),
        }
    }

    /// Ready with the session, or with why there is none (the connection is closed
    /// then). After `Ready`, `Pending` forever.
    pub fn poll(&mut self, waiter: &Waiter) -> Poll<Result<Session, ConnectError>> {
        self.poll_until(waiter, ClientSetup::poll)
    }

    /// As [`poll`](Self::poll), but ready with the connection and the session
    /// configuration it would start with, no session on it
    /// ([`ClientSetup::poll_transport`]): for a protocol tool that speaks on the streams
    /// itself. After `Ready`, `Pending` forever.
    pub fn poll_transport(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<(BindingSession, moqx_net::session::SessionConfig), ConnectError>> {
        self.poll_until(waiter, ClientSetup::poll_transport)
    }

    /// The handshake, then `setup` until it is ready.
    fn poll_until<T>(
        &mut self,
        waiter: &Waiter,
        mut setup: impl FnMut(&mut ClientSetup<R>, &Waiter) -> Poll<Result<T, ConnectError>>,
    ) -> Poll<Result<T, ConnectError>> {
        loop {
            match &mut self.step {
                Step::Handshake(handshake) => match handshake.poll(waiter) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Ok(next)) => self.step = Step::Setup(Box::new(next)),
                    Poll::Ready(Err(error)) => {
                        self.step = Step::Done;
                        return Poll::Ready(Err(error));
                    }
                },
                Step::Setup(next) => {
                    let result = std::task::ready!(setup(next, waiter));
                    self.step = Step::Done;
                    return Poll::Ready(result);
                }
                Step::Done => return Poll::Pending,
            }
        }
    }
}

impl<R> Handshake<R>
where
    R: Runtime<Transport = BindingSession>,
{
    fn poll(&mut self, waiter: &Waiter) -> Poll<Result<ClientSetup<R>, ConnectError>> {
        match self.connection.poll_established(waiter) {
            Poll::Ready(true) => Poll::Ready(ClientSetup::new(
                self.runtime.clone(),
                self.connection.clone(),
                &self.target,
                &self.config,
            )),
            Poll::Ready(false) => Poll::Ready(Err(ConnectError::handshake_failed(
                &self.connection,
            )
            .offered(&self.config.versions))),
            Poll::Pending => {
                if self.deadline.poll(waiter).is_pending() {
                    return Poll::Pending;
                }
                self.connection.close(0, "handshake timed out");
                Poll::Ready(Err(ConnectError::Handshake(format!(
                    "no answer from {} within {:?}",
                    self.peer, self.config.handshake_timeout
                ))))
            }
        }
    }
}

impl<R: Runtime> std::fmt::Debug for Connecting<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let step = match self.step {
            Step::Handshake(_) => "handshake",
            Step::Setup(_) => "setup",
            Step::Done => "done",
        };
        f.debug_struct("Connecting").field("step", &step).finish()
    }
}
