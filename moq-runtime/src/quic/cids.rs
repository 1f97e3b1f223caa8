//! Connection IDs: those a server gives its peer beyond the first, those the peer
//! retired, and a client's switch to another of the IDs its server gave it.

use super::QuicConnection;

/// How many of the server's IDs a switch tries past the one it believes in use: an ID
/// the server retired itself (RETIRE_PRIOR_TO) is gone already, and the next is in use.
const MOST_SKIPPED: u64 = 4;

impl QuicConnection {
    /// Gives the peer another connection ID for us, `cid`, with its stateless reset
    /// token (NEW_CONNECTION_ID): the peer may switch to it at any time (RFC 9000 §5.1.1).
    pub fn issue_cid(&self, cid: &[u8], reset_token: u128) -> Result<(), quiche::Error> {
        self.with(|state| {
            state
                .conn
                .new_scid(&quiche::ConnectionId::from_ref(cid), reset_token, false)
                .map(|_| ())
        })
    }

    /// How many of the connection IDs the peer gave are not in use: what this side can
    /// give a new path (a server, one for each new address of its client).
    pub fn spare_peer_cids(&self) -> usize {
        self.shared.state.lock().conn.available_dcids()
    }

    /// A connection ID of ours the peer retired (it routes nothing any more), if any.
    pub fn retired_cid(&self) -> Option<Vec<u8>> {
        let mut state = self.shared.state.lock();
        state.conn.retired_scid_next().map(|cid| cid.to_vec())
    }

    /// Switches to another of the connection IDs the peer gave, retiring the one in use
    /// (RETIRE_CONNECTION_ID; the peer issues a replacement): what an observer on the path
    /// sees changes, the connection does not (RFC 9000 §5.1.2, §9.5). Returns whether it
    /// switched: not without a spare ID.
    ///
    /// quiche moves the path to the lowest-numbered spare ID, and a peer numbers the IDs
    /// it issues in order, so the ID in use after a switch is the next number.
    pub fn rotate_cid(&self) -> bool {
        self.with(|state| {
            for _ in 0..=MOST_SKIPPED {
                match state.conn.retire_dcid(state.dcid_in_use) {
                    Ok(()) => {
                        state.dcid_in_use += 1;
                        tracing::trace!(
                            seq = state.dcid_in_use,
                            "switched to another connection ID"
                        );
                        return true;
                    }
                    // Retired already (or never issued): the one in use is further on.
                    Err(quiche::Error::InvalidState) => state.dcid_in_use += 1,
                    Err(error) => {
                        tracing::debug!(%error, "no other connection ID to switch to");
                        return false;
                    }
                }
            }
            false
        })
    }
}
