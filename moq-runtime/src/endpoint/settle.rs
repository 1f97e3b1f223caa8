//! After a connection changed: what the endpoint does with its status (forget it once
//! closed, count its handshake, issue and retire connection IDs, schedule its timers).

use std::time::Instant;

use super::Endpoint;
use crate::quic::QuicConnection;

impl Endpoint {
    /// After a connection was drained: re-arm its timer, hand it over once established,
    /// and forget it once closed.
    pub(super) fn settle(&mut self, index: usize, connection: &QuicConnection, now: Instant) {
        let status = connection.status();
        if status.closed {
            tracing::debug!(
                conn = connection.trace_id(),
                peer = ?connection.peer_address(),
                reason = %connection.close_reason(),
                paths = %connection.paths(),
                "connection closed"
            );
            if let Some(entry) = self.connections[index].take() {
                for cid in &entry.cids {
                    self.by_cid.remove(cid);
                }
                if let Some(token) = entry.reset_token {
                    self.by_reset_token.remove(&token);
                }
                if !entry.reported {
                    self.half_open -= 1;
                }
                if let Some(address) = entry.client {
                    self.gate.ended(address, entry.reported);
                }
            }
            self.timers.remove(index);
            self.free.push(index);
            self.len -= 1;
            return;
        }
        if status.cids_wanted > 0 || status.cids_retired > 0 {
            self.rotate_cids(index, connection, status.cids_wanted);
        }
        if let Some(entry) = self.connections[index].as_mut() {
            if entry.client.is_none() && status.established && entry.reset_token.is_none() {
                // A client connection learned its server's reset token.
                entry.reset_token = connection.peer_reset_token();
                if let Some(token) = entry.reset_token {
                    self.by_reset_token.insert(token, index);
                }
            }
            if !entry.reported && status.established {
                tracing::debug!(
                    conn = connection.trace_id(),
                    peer = ?connection.peer_address(),
                    alpn = %String::from_utf8_lossy(&connection.application_protocol().unwrap_or_default()),
                    "connection established"
                );
                entry.reported = true;
                self.half_open -= 1;
                // A client address counts once its handshake completed: a spoofed
                // Initial never gets that far, so it cannot use up another address's
                // quota.
                if let Some(address) = entry.client {
                    self.gate.established_from(address);
                }
                self.accepted.push_back(connection.clone());
            }
        }
        // Quiet from here on: a PING at `now + keep_alive` unless something happens first,
        // and sooner if the peer's idle timeout is short (a third of it).
        let keep_alive_at = self
            .keep_alive
            .filter(|_| status.established)
            .map(|interval| match status.peer_idle_timeout {
                Some(idle) => interval.min(idle / 3),
                None => interval,
            })
            .map(|interval| now + interval);
        let mut silence_probe_at = None;
        let mut rotate_cid_at = None;
        if let Some(entry) = self.connections[index].as_mut() {
            entry.keep_alive_at = keep_alive_at;
            silence_probe_at = entry.silence.at().filter(|_| status.established);
            if status.established {
                if let (None, Some(interval)) = (entry.rotate_cid_at, self.cid_rotation) {
                    entry.rotate_cid_at = Some(now + interval);
                }
                rotate_cid_at = entry.rotate_cid_at;
            }
        }
        let quiche_at = status.timeout.map(|after| now + after);
        match [
            quiche_at,
            keep_alive_at,
            silence_probe_at,
            rotate_cid_at,
            status.close_at,
            status.held_fin_at,
            status.kept_bytes_check_at,
            status.paced_at,
            status.close_resend_at,
        ]
        .into_iter()
        .flatten()
        .min()
        {
            Some(at) => self.timers.insert(index, at),
            None => {
                self.timers.remove(index);
            }
        }
    }
}
