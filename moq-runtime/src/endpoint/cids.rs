//! The connection IDs an endpoint gives its peers beyond the first, their stateless reset
//! tokens, and the stateless resets it answers packets for unknown IDs with
//! ([`crate::reset`]).

use super::{Endpoint, MAX_SPARE_CIDS, Transmit};
use crate::cid::ConnectionId;
use crate::quic::QuicConnection;
use crate::quiche_config::MAX_CLIENT_PATHS;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;

impl Endpoint {
    /// Takes back the connection IDs the peer retired, and tops its spare ones up to what
    /// it takes, each naming this worker. A server gives each client at most
    /// [`MAX_SPARE_CIDS`]: a client switching IDs or moving to a new address, as RFC 9000
    /// lets it at any time, still steers to the worker that owns its connection. A client
    /// gives its server one for each path the server may keep ([`MAX_CLIENT_PATHS`]).
    ///
    /// Why the client gives so many: a server needs an ID of the client's for each of
    /// the client's addresses, and quiche 0.30 retires none of a path the client left
    /// (`migration.rs`). With four spares, the client's sixth address (a NAT's fifth
    /// rebinding) found none, and quiche gave the new path the active path's ID. Every
    /// member the 2-hour rebinding soaks cut off (four) was at its sixth address or
    /// later, none before, and the one whose end the relay's log shows whole had quiche
    /// give that path up, fall back, and then refuse the client's next packet from it
    /// (`InvalidState`), closing the connection.
    pub(super) fn rotate_cids(&mut self, index: usize, connection: &QuicConnection, wanted: usize) {
        let Some(entry) = self.connections[index].as_mut() else {
            return;
        };
        while let Some(retired) = connection.retired_cid() {
            self.by_cid.remove(&retired);
            entry.cids.retain(|cid| *cid != retired);
        }
        // The IDs routed to it: a server connection's are the client's first choice, ours
        // and the spares; a client connection's, ours and the spares.
        let most = match entry.client {
            Some(_) => MAX_SPARE_CIDS + 2,
            None => MAX_CLIENT_PATHS as usize,
        };
        for _ in 0..wanted {
            if entry.cids.len() >= most {
                break;
            }
            let Ok(cid) = self.cids.generate() else {
                tracing::warn!("no random source: no more connection IDs for the peer");
                return;
            };
            let Some(reset_token) = reset_token(self.reset_key.as_ref(), cid.as_bytes()) else {
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

    /// Answers a short-header packet of `len` bytes from `from` to `cid` (at `local`), an ID this
    /// endpoint knows no connection for, with a stateless reset, if the ID is one this
    /// worker would have issued and the endpoint has a reset key: the connection it named
    /// is gone (the process restarted, or it closed), and the peer should hear so now.
    ///
    /// Never for another worker's ID: that connection may be alive on its own worker, and
    /// a packet steered here by mistake must not kill it.
    pub(super) fn answer_with_reset(
        &mut self,
        cid: ConnectionId,
        len: usize,
        from: SocketAddr,
        local: SocketAddr,
    ) {
        let Some(key) = &self.reset_key else { return };
        if cid.worker() != self.worker {
            return;
        }
        let mut contents = self.spare_contents.take();
        if !key.write_reset(cid.as_bytes(), len, &mut contents) {
            self.spare_contents.give_back(contents);
            return;
        }
        self.counters
            .stateless_resets
            .fetch_add(1, Ordering::Relaxed);
        tracing::trace!(%from, "a stateless reset for a connection this endpoint does not have");
        let segment_size = contents.len();
        self.stateless.push(Transmit {
            destination: from,
            source: self.source(local),
            contents,
            segment_size,
        });
    }
}

impl Endpoint {
    /// The client connection a short-header packet for no known connection ID is a
    /// stateless reset of, judged by its last 16 bytes (RFC 9000 §10.3.1); the connection
    /// itself checks again when it receives it.
    pub(super) fn reset_for_us(&self, datagram: &[u8]) -> Option<usize> {
        if self.by_reset_token.is_empty() || datagram.len() < crate::reset::MIN_RESET_LEN {
            return None;
        }
        let tail: [u8; 16] = datagram.get(datagram.len() - 16..)?.try_into().ok()?;
        self.by_reset_token.get(&u128::from_be_bytes(tail)).copied()
    }
}

/// The stateless reset token of connection ID `cid`: the key's, or a random one (which the
/// peer cannot guess, and no reset of ours will ever carry) for an endpoint without a key.
/// `None` only when there is no key and no randomness.
pub(super) fn reset_token(
    key: Option<&crate::reset::StatelessResetKey>,
    cid: &[u8],
) -> Option<u128> {
    match key {
        Some(key) => Some(key.token(cid)),
        None => {
            let mut bytes = [0u8; 16];
            getrandom::fill(&mut bytes).ok()?;
            Some(u128::from_le_bytes(bytes))
        }
    }
}
