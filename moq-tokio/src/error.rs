//! What can go wrong setting up a connection, said so that a user can act on it.

use moqx_runtime::client::ConnectError;
use moqx_runtime::quiche_config::ConfigError;

/// Why a client or server could not start or connect.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A socket operation failed (binding, resolving a name).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// Connecting failed: a bad URL, a refused handshake, a certificate not the pinned
    /// one, a WebTransport refusal.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The QUIC configuration could not be built (the certificate or key refused).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A thread-per-core server was asked for a worker count it cannot have.
    #[error("workers: {0} is not between 1 and 256 (a connection ID names its worker in one byte)")]
    Workers(usize),
    /// The endpoint task is gone (its runtime shut down).
    #[error("the endpoint stopped")]
    EndpointGone,
}

impl Error {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let context = context.into();
        move |source| Error::Io { context, source }
    }
}
