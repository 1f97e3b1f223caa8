//! A path quiche can no longer build a packet for, and sending around it.
//!
//! Why: quiche (0.30) keeps, for each path, the sequence number of the connection ID of
//! ours the peer last used there, and looks that ID up for every packet it builds on the
//! path, failing the whole `send` (`InvalidState`) once the peer has retired it. quiche
//! forgets a retired ID only on the path the ID was first seen on; a path that took an
//! ID over from another (a NAT rebinding: same ID, new address) keeps it. A client that
//! switches IDs in the same flight as its NAT rebinds (the retirement arrives from the
//! new address) thus leaves the previous path holding a retired ID. That path is probed
//! (`migration.rs`; quiche probes it too), quiche sends a probe before anything else, and
//! so every `send` failed from then on: the server sent nothing more, ever, and the
//! client's connection ended in its idle timeout (the CI soak's chat members whose
//! connection-ID rotation fell on a rebinding; a relay trace showed no packet after the
//! migration, every packet of the client's received).
//!
//! What is done: once `send` fails with anything but `Done`, each path is asked in turn
//! (`send_on_path`), the paths left first as quiche would, the active one last; a path
//! left that fails is remembered and skipped from then on (what it had to send was a
//! probe, and the peer is not there). The active path is always asked: an error there
//! is the connection's own. Until `send` first fails, nothing changes and nothing is
//! spent. `tests/migration.rs`
//! `a_client_that_switches_connection_ids_as_its_nat_rebinds_keeps_its_connection`
//! reproduces it.
//!
//! Remove once quiche clears a retired ID from every path that holds it.

use std::net::SocketAddr;

use super::State;

/// The paths quiche can no longer build a packet for: (local address, peer address).
/// Bounded by the paths quiche keeps (as many as the peer's connection IDs).
#[derive(Debug, Default)]
pub(super) struct UnsendablePaths {
    paths: Vec<(SocketAddr, SocketAddr)>,
}

impl UnsendablePaths {
    /// How many were found so far.
    pub(super) fn found(&self) -> u64 {
        self.paths.len() as u64
    }
}

impl State {
    /// quiche's next packet: `Connection::send`, or path by path once a path failed it.
    pub(super) fn quiche_send(
        &mut self,
        out: &mut [u8],
    ) -> Result<(usize, quiche::SendInfo), quiche::Error> {
        if self.unsendable.paths.is_empty() {
            match self.conn.send(out) {
                Err(quiche::Error::Done) => return Err(quiche::Error::Done),
                Err(error) => {
                    tracing::debug!(
                        conn = self.conn.trace_id(),
                        %error,
                        "quiche failed to send: looking for a path it cannot build packets for"
                    );
                }
                sent => return sent,
            }
        }
        self.send_path_by_path(out)
    }

    /// Asks each path left that is not known unsendable, then the active path.
    fn send_path_by_path(
        &mut self,
        out: &mut [u8],
    ) -> Result<(usize, quiche::SendInfo), quiche::Error> {
        let mut active = None;
        let mut left = Vec::new();
        for path in self.conn.path_stats() {
            let addresses = (path.local_addr, path.peer_addr);
            if path.active {
                active = Some(addresses);
            } else if !self.unsendable.paths.contains(&addresses) {
                left.push(addresses);
            }
        }
        for (local, peer) in left {
            match self.conn.send_on_path(out, Some(local), Some(peer)) {
                Err(quiche::Error::Done) => {}
                Err(error) => {
                    tracing::debug!(
                        conn = self.conn.trace_id(),
                        %peer,
                        %error,
                        "a path left quiche cannot build packets for: sending around it"
                    );
                    self.unsendable.paths.push((local, peer));
                }
                sent => return sent,
            }
        }
        match active {
            Some((local, peer)) => self.conn.send_on_path(out, Some(local), Some(peer)),
            // No active path (a closed connection): quiche's own choice, whatever it is.
            None => self.conn.send(out),
        }
    }
}
