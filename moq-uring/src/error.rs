//! What can go wrong starting a worker or connecting, said so that a user can act on it:
//! what every socket driver reports ([`DriverError`]), and the io_uring driver's own.

use moqx_runtime::client::ConnectError;
use moqx_runtime::driver::DriverError;
use moqx_runtime::quiche_config::ConfigError;

use crate::probe::ProbeError;

/// Why a server or client could not start, or a connection could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// What any socket driver can meet: a failed system call, a failed connect, a bad
    /// configuration, a worker count out of range, a worker gone.
    #[error(transparent)]
    Driver(#[from] DriverError),
    /// io_uring cannot serve here: refused, or the kernel lacks what the driver needs.
    #[error(transparent)]
    Probe(#[from] ProbeError),
    /// `recv_buffers` is not a power of two between 1 and 32,768.
    #[error("recv_buffers: {0} is not a power of two between 1 and 32768")]
    RecvBuffers(u16),
}

impl Error {
    /// The worker that was to answer stopped first.
    pub(crate) const WORKER_GONE: Self = Self::Driver(DriverError::Stopped);

    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let io = DriverError::io(context);
        move |source| Self::Driver(io(source))
    }
}

impl From<ConnectError> for Error {
    fn from(error: ConnectError) -> Self {
        Self::Driver(error.into())
    }
}

impl From<ConfigError> for Error {
    fn from(error: ConfigError) -> Self {
        Self::Driver(error.into())
    }
}
