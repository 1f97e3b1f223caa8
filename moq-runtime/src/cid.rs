//! Server connection IDs that name the worker owning the connection.
//!
//! A multi-worker endpoint (a UDP socket per core with `SO_REUSEPORT`) must hand every
//! packet of a connection to the worker that holds the connection's state. The kernel's
//! reuseport hash knows nothing of QUIC, but the connection ID does, because the server
//! chooses every CID the client sends to: ours are `[worker index][entropy]`, [`CID_LEN`]
//! bytes. The steering program (`crate::steering`, Linux) reads that first byte of a
//! short-header packet's DCID; the endpoint counts a packet whose byte names another
//! worker as misrouted.

use std::fmt;

/// The length of every server connection ID. Fixed, because a short-header packet does not
/// carry its DCID's length.
pub const CID_LEN: usize = 16;

/// The most workers a server can have: a connection ID names its worker in one byte.
pub const MAX_WORKERS: usize = 256;

/// A connection ID this endpoint chose.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnectionId([u8; CID_LEN]);

/// Makes connection IDs for one worker.
#[derive(Debug, Clone, Copy)]
pub struct CidGenerator {
    worker: u8,
}

/// Why a connection ID could not be made.
#[derive(Debug, thiserror::Error)]
#[error("the system's random source failed: {0}")]
pub struct CidError(getrandom::Error);

impl ConnectionId {
    /// The ID's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The worker that owns the connection.
    pub fn worker(&self) -> u8 {
        self.0[0]
    }

    /// The ID in `bytes`, if they have our length.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        bytes.try_into().ok().map(Self)
    }
}

impl fmt::Debug for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl CidGenerator {
    /// A generator for `worker`'s connections.
    pub fn new(worker: u8) -> Self {
        Self { worker }
    }

    /// A fresh connection ID: this worker's index, then entropy from the system's secure
    /// random source (CIDs must not be guessable, or an off-path attacker could aim packets
    /// at a connection).
    pub fn generate(&self) -> Result<ConnectionId, CidError> {
        let mut bytes = [0u8; CID_LEN];
        getrandom::fill(&mut bytes[1..]).map_err(CidError)?;
        bytes[0] = self.worker;
        Ok(ConnectionId(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_id_names_its_worker_and_differs_every_time() {
        let generator = CidGenerator::new(5);
        let a = generator.generate().unwrap();
        let b = generator.generate().unwrap();
        assert_eq!((a.worker(), b.worker()), (5, 5));
        assert_ne!(a, b, "15 bytes of entropy");
        assert_eq!(ConnectionId::from_bytes(a.as_bytes()), Some(a));
        assert_eq!(ConnectionId::from_bytes(&[0; 8]), None);
    }
}
