//! What can go wrong starting a worker or connecting, said so that a user can act on it.

use moqx_runtime::client::ConnectError;
use moqx_runtime::quiche_config::ConfigError;

use crate::probe::ProbeError;

/// Why a server or client could not start, or a connection could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// io_uring cannot serve here: refused, or the kernel lacks what the driver needs.
    #[error(transparent)]
    Probe(#[from] ProbeError),
    /// A system call failed (binding, building a ring, resolving a name).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// Connecting failed: a bad URL, a refused handshake, a certificate not the pinned
    /// one, a WebTransport refusal, no answer in time.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The QUIC configuration could not be built (the certificate or key refused).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A worker count the server cannot have.
    #[error("workers: {0} is not between 1 and 256 (a connection ID names its worker in one byte)")]
    Workers(usize),
    /// `recv_buffers` is not a power of two between 1 and 32,768.
    #[error("recv_buffers: {0} is not a power of two between 1 and 32768")]
    RecvBuffers(u16),
    /// The worker stopped before answering.
    #[error("the worker stopped")]
    WorkerGone,
}

impl Error {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let context = context.into();
        move |source| Error::Io { context, source }
    }
}
