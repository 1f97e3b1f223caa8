//! Why an endpoint refused a datagram or a connection attempt.

use crate::admission::Refused;

/// Why a datagram or a connection attempt was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EndpointError {
    /// quiche refused (a malformed packet, a failed handshake, a bad configuration).
    #[error("QUIC: {0}")]
    Quic(#[from] quiche::Error),
    /// The system's random source failed while making a connection ID.
    #[error(transparent)]
    Cid(#[from] crate::cid::CidError),
    /// Admission turned the connection away (a cap on connections, handshakes, or
    /// connections from one address).
    #[error(transparent)]
    Refused(#[from] Refused),
    /// The endpoint is stopping: it takes no new connection.
    #[error("the server is stopping")]
    Stopping,
}
