//! What every socket driver reports the same way: why it could not start, serve or
//! connect ([`DriverError`]), and the worker counts a thread-per-core server may have.
//!
//! A driver's own error wraps this one and adds only what is its own (io_uring: the
//! kernel probe); `moqx-tokio` has nothing of its own to add and uses it as is.

use crate::cid::MAX_WORKERS;
use crate::client::ConnectError;
use crate::quiche_config::ConfigError;

/// Why a driver's client or server could not start or connect, said so that a user can
/// act on it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    /// A system call failed (binding, resolving a name, starting a thread).
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
    /// A thread-per-core server was asked for a worker count it cannot have.
    #[error(
        "workers: {0} is not between 1 and {MAX_WORKERS} (a connection ID names its worker in one byte)"
    )]
    Workers(usize),
    /// The endpoint or worker that was to answer has stopped (its runtime shut down).
    #[error("the driver's endpoint stopped")]
    Stopped,
}

impl DriverError {
    /// Makes an [`Io`](Self::Io) error saying what was being done, for `map_err`.
    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let context = context.into();
        move |source| Self::Io { context, source }
    }

    /// `Ok` if a server may have `workers` workers (1 to [`MAX_WORKERS`]).
    pub fn check_workers(workers: usize) -> Result<(), Self> {
        if (1..=MAX_WORKERS).contains(&workers) {
            Ok(())
        } else {
            Err(Self::Workers(workers))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_count_is_checked_against_the_connection_id_byte() {
        assert!(DriverError::check_workers(1).is_ok());
        assert!(DriverError::check_workers(MAX_WORKERS).is_ok());
        for bad in [0, MAX_WORKERS + 1] {
            let error = DriverError::check_workers(bad).unwrap_err();
            assert!(matches!(error, DriverError::Workers(n) if n == bad));
            assert!(error.to_string().contains("between 1 and 256"), "{error}");
        }
    }
}
