//! The connection IDs an endpoint gives its peers, beyond the first.

use super::{Endpoint, MAX_SPARE_CIDS};
use crate::quic::QuicConnection;

impl Endpoint {
    /// Takes back the connection IDs the peer retired, and tops its spare ones up to what
    /// it takes (at most [`MAX_SPARE_CIDS`]), each naming this worker: a client switching
    /// IDs or moving to a new address, as RFC 9000 lets it at any time, still steers to
    /// the worker that owns its connection.
    pub(super) fn rotate_cids(&mut self, index: usize, connection: &QuicConnection, wanted: usize) {
        let Some(entry) = self.connections[index].as_mut() else {
            return;
        };
        while let Some(retired) = connection.retired_cid() {
            self.by_cid.remove(&retired);
            entry.cids.retain(|cid| *cid != retired);
        }
        for _ in 0..wanted {
            // The IDs routed to it: the client's first choice, ours, and the spares.
            if entry.cids.len() >= MAX_SPARE_CIDS + 2 {
                break;
            }
            let (Ok(cid), Ok(reset_token)) = (self.cids.generate(), random_u128()) else {
                tracing::warn!("no random source: no more connection IDs for the peer");
                return;
            };
            if connection.issue_cid(cid.as_bytes(), reset_token).is_err() {
                return;
            }
            self.by_cid.insert(cid.as_bytes().to_vec(), index);
            entry.cids.push(cid.as_bytes().to_vec());
        }
    }
}

/// A random stateless reset token. We never send stateless resets, but the peer must be
/// unable to guess one.
fn random_u128() -> Result<u128, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(u128::from_le_bytes(bytes))
}
