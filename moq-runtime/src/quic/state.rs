//! The connection's state under its lock: what happens after a packet, a timer or a
//! write (streams surfaced, waiters woken, credit and close noticed), and reading.

use std::net::SocketAddr;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use moqx_kio::Waiter;
use moqx_net::transport::TransportError;

use super::{MAX_QUEUED_DATAGRAMS, READ_CHUNK, SMALL_READ, State, StreamEntry, Wakes, parking};

impl State {
    /// After the connection changed (`received`: a datagram arrived, the only thing that
    /// gives writers credit or brings a STOP_SENDING): surface new streams, wake parked
    /// readers and writers whose stream changed, stream credit, datagrams, the close.
    pub(super) fn process(&mut self, received: bool) -> Wakes {
        let mut wakes = Wakes::default();
        while let Some(id) = self.conn.stream_readable_next() {
            self.heard_data = true;
            let peer_initiated = (id & 1 == 1) != self.server;
            if peer_initiated && self.surface(id, &mut wakes) {
                continue;
            }
            let Some(entry) = self.streams.get_mut(&id) else {
                continue;
            };
            if entry.discarding {
                self.discard(id);
                continue;
            }
            wakes.streams.extend(entry.reader.take());
        }
        if received && !self.credit_waiters.is_empty() {
            self.wake_writers_with_credit(&mut wakes);
        }
        if received && !self.stop_watchers.is_empty() {
            let stops = self.conn.stats().stopped_stream_count_remote;
            if stops != self.stops_seen {
                self.stops_seen = stops;
                self.wake_stopped_writers(&mut wakes);
            }
        }
        wakes.credit =
            self.conn.peer_streams_left_bidi() > 0 || self.conn.peer_streams_left_uni() > 0;
        // Sized to each queued datagram: no buffer to zero on the (many) calls with none.
        while let Some(len) = self.conn.dgram_recv_front_len() {
            self.heard_data = true;
            if !self.datagrams_wanted {
                // Nobody reads datagrams on this connection: none is kept.
                let mut discard = [0u8; SMALL_READ];
                let taken = match discard.get_mut(..len) {
                    Some(slot) => self.conn.dgram_recv(slot),
                    None => self.conn.dgram_recv(&mut vec![0u8; len]),
                };
                if taken.is_err() {
                    break;
                }
                self.datagrams_dropped += 1;
                continue;
            }
            let mut datagram = vec![0u8; len];
            match self.conn.dgram_recv(&mut datagram) {
                Ok(read) => {
                    datagram.truncate(read);
                    if self.received_datagrams.len() == MAX_QUEUED_DATAGRAMS {
                        self.received_datagrams.pop_front();
                        self.datagrams_dropped += 1;
                    }
                    self.received_datagrams.push_back(Bytes::from(datagram));
                    wakes.datagrams = true;
                }
                Err(_) => break,
            }
        }
        while let Some(event) = self.conn.path_event_next() {
            match event {
                quiche::PathEvent::PmtuUpdated { pmtu, .. } => {
                    tracing::debug!(conn = self.conn.trace_id(), pmtu, "path MTU");
                    self.path_mtu = pmtu;
                }
                quiche::PathEvent::PeerMigrated(local, peer) => {
                    if received {
                        tracing::debug!(conn = self.conn.trace_id(), %peer, "the peer moved to a new address");
                    } else {
                        tracing::debug!(conn = self.conn.trace_id(), %peer, "quiche gave the path up and fell back to an older one; packets go where the peer was last seen");
                    }
                    let left = self.migrations.on_peer_migrated(local, peer, !received);
                    self.probe_paths_left(left);
                    if let Some((local, last_seen)) =
                        self.migrations.last_seen().filter(|_| !received)
                    {
                        // Validated again at once, the path is a candidate should quiche
                        // give the one it fell back to up too (`migration.rs`).
                        let _ = self.conn.probe_path(local, last_seen);
                    }
                }
                quiche::PathEvent::New(local, peer) => {
                    tracing::trace!(%peer, "a new path");
                    self.migrations.on_new_path(local, peer);
                }
                quiche::PathEvent::Validated(local, peer) => {
                    tracing::trace!(?event, "path event");
                    self.migrations.on_validated(local, peer);
                }
                quiche::PathEvent::FailedValidation(local, peer) => {
                    tracing::debug!(conn = self.conn.trace_id(), %peer, "quiche gave a path up: its challenges were lost");
                    self.migrations.on_validation_failed(local, peer);
                }
                event => tracing::trace!(?event, "path event"),
            }
        }
        if !self.established_announced && self.conn.is_established() {
            self.established_announced = true;
            wakes.established = true;
        }
        if !self.close_announced && (self.is_closed() || self.conn.is_draining()) {
            self.close_announced = true;
            wakes.closed = true;
            wakes.accept_uni = true;
            wakes.accept_bidi = true;
            wakes.credit = true;
            wakes.datagrams = true;
            for entry in self.streams.values_mut() {
                wakes.streams.extend(entry.reader.take());
                wakes.streams.extend(entry.writer.take());
            }
        }
        wakes
    }

    /// Before a packet from `from` to `to` is received: whether it comes from a path
    /// quiche gave up on that the peer did not leave (`migration.rs`); a challenge is
    /// asked for there.
    pub(super) fn revive_path(&mut self, from: SocketAddr, to: SocketAddr) -> bool {
        let revive = self.migrations.revive(from, to);
        if revive {
            tracing::debug!(conn = self.conn.trace_id(), peer = %from, "validating again a path quiche gave up on");
            let _ = self.conn.probe_path(to, from);
        }
        revive
    }

    /// Probes each of the paths the peer `left`: what was in flight to them is declared
    /// lost once its probe is acknowledged (`migration.rs`).
    fn probe_paths_left(&mut self, left: Vec<(SocketAddr, SocketAddr)>) {
        for (local, left) in left {
            if let Err(error) = self.conn.probe_path(local, left) {
                tracing::debug!(conn = self.conn.trace_id(), %error, %left, "the path left cannot be probed");
            }
        }
    }

    /// After that packet was received: a revived path's challenge leaves now, before the
    /// next packet; a path under validation may ask for another; a packet from the path
    /// quiche fell back to shows the peer is there (`migration.rs`).
    pub(super) fn validate_path(&mut self, revived: bool, from: SocketAddr, to: SocketAddr) {
        let left = self.migrations.on_packet(from, to);
        if !left.is_empty() {
            tracing::debug!(conn = self.conn.trace_id(), peer = %from, "the peer is on the path quiche fell back to");
            self.probe_paths_left(left);
        }
        if revived {
            let emitted = self.packets_emitted;
            let stopped_by = self.emit_now();
            tracing::debug!(
                conn = self.conn.trace_id(),
                peer = %from,
                packets = self.packets_emitted - emitted,
                ?stopped_by,
                paths = %describe_paths(&self.conn),
                "what left right after the packet that revived a path"
            );
        } else if self.migrations.revalidate(from, to, Instant::now) {
            let _ = self.conn.probe_path(to, from);
        }
    }

    /// After quiche's timers ran: a revived path quiche marked failed again (it tells of a
    /// path's failure only once) is revived again by the peer's next packet from it
    /// (`migration.rs`). Nothing to look at on a connection that never revived one.
    pub(super) fn notice_paths_failed_again(&mut self) {
        if self.migrations.watched().is_empty() {
            return;
        }
        let failed: Vec<(SocketAddr, SocketAddr)> = failed_paths(&self.conn)
            .filter(|path| self.migrations.watched().contains(path))
            .collect();
        for (local, peer) in failed {
            // quiche keeps the path failed until the peer's next packet from it: told
            // once, not at every timer until then.
            if self.migrations.on_validation_failed(local, peer) {
                tracing::debug!(conn = self.conn.trace_id(), %peer, "quiche gave a revived path up again");
            }
        }
    }

    /// After quiche's timers ran at `now`: probes again each path the peer left whose
    /// probe quiche gave up on (`migration.rs`): quiche marks such a path failed.
    pub(super) fn probe_paths_left_again(&mut self, now: Instant) {
        let mut failed: Option<Vec<(SocketAddr, SocketAddr)>> = None;
        let conn = &self.conn;
        let again = self
            .migrations
            .take_paths_to_probe_again(now, |(local, peer)| {
                // A cheap lookup first: a path left stays validated once its probe is
                // answered, and connections that moved long ago ask at every timer.
                conn.is_path_validated(local, peer) == Ok(false)
                    && failed
                        .get_or_insert_with(|| failed_paths(conn).collect())
                        .contains(&(local, peer))
            });
        for (local, left) in again {
            tracing::debug!(conn = self.conn.trace_id(), %left, "probing a path left again: its probe was lost");
            if let Err(error) = self.conn.probe_path(local, left) {
                tracing::debug!(%error, %left, "the path left cannot be probed");
            }
        }
    }

    /// Reads and drops what stream `id` has (its receive half is no longer wanted); once
    /// the peer's FIN or reset is reached, quiche frees the stream and its entry goes.
    pub(super) fn discard(&mut self, id: u64) {
        let ended = loop {
            match self.conn.stream_discard(id, usize::MAX) {
                Ok((_, true)) => break true,
                Ok((_, false)) => {}
                Err(quiche::Error::Done) => break false,
                // Reset, or already gone: either way it is over.
                Err(_) => break true,
            }
        };
        if ended {
            if let Some(entry) = self.streams.get_mut(&id) {
                entry.discarding = false;
            }
            self.forget_if_done(id);
        }
    }

    /// Drops stream `id`'s entry once no handle and no discarding needs it.
    pub(super) fn forget_if_done(&mut self, id: u64) {
        let Some(entry) = self.streams.get(&id) else {
            return;
        };
        if entry.handles > 0 || entry.discarding {
            return;
        }
        let parked = (entry.awaiting_credit, entry.watching_stop);
        if entry.parked {
            self.open_parked = self.open_parked.saturating_sub(1);
        }
        self.streams.remove(&id);
        // Writers park rarely and briefly, so these lists stay short.
        if parked.0 {
            self.credit_waiters.retain(|&waiting| waiting != id);
        }
        if parked.1 {
            self.stop_watchers.retain(|&watching| watching != id);
        }
    }

    /// Queues peer stream `id` for accepting if it is new; returns whether it was.
    pub(super) fn surface(&mut self, id: u64, wakes: &mut Wakes) -> bool {
        let bidi = id & 2 == 0;
        let (known, queue) = if bidi {
            (&mut self.peer_bidi, &mut self.incoming_bidi)
        } else {
            (&mut self.peer_uni, &mut self.incoming_uni)
        };
        if !known.first_sight(id) {
            return false;
        }
        queue.push_back(id);
        if bidi {
            wakes.accept_bidi = true;
        } else {
            wakes.accept_uni = true;
        }
        self.streams.insert(
            id,
            StreamEntry {
                handles: if bidi { 2 } else { 1 },
                ..StreamEntry::default()
            },
        );
        true
    }

    /// Wakes the writers waiting for credit whose stream can take bytes again (or failed).
    pub(super) fn wake_writers_with_credit(&mut self, wakes: &mut Wakes) {
        let mut waiting = std::mem::take(&mut self.credit_waiters);
        self.wake_parked(
            &mut waiting,
            wakes,
            |capacity| capacity > 0,
            |entry| {
                entry.awaiting_credit = false;
            },
        );
        self.credit_waiters = waiting;
    }

    /// Wakes the writers watching for STOP_SENDING whose stream the peer stopped.
    pub(super) fn wake_stopped_writers(&mut self, wakes: &mut Wakes) {
        let mut watching = std::mem::take(&mut self.stop_watchers);
        self.wake_parked(
            &mut watching,
            wakes,
            |_| false,
            |entry| {
                entry.watching_stop = false;
            },
        );
        self.stop_watchers = watching;
    }

    /// Wakes and drops from `parked` each writer whose stream has enough `capacity` or
    /// failed (stopped by the peer, or gone), recording a STOP_SENDING's code; `unpark`
    /// clears the entry's mark for this list. Writers whose stream went away are dropped.
    pub(super) fn wake_parked(
        &mut self,
        parked: &mut Vec<u64>,
        wakes: &mut Wakes,
        enough: impl Fn(usize) -> bool,
        unpark: impl Fn(&mut StreamEntry),
    ) {
        parked.retain(|&id| {
            let Some(entry) = self.streams.get_mut(&id) else {
                return false;
            };
            let ready = match self.conn.stream_capacity(id) {
                Ok(capacity) => enough(capacity),
                Err(quiche::Error::StreamStopped(code)) => {
                    entry.stopped = Some(code);
                    true
                }
                Err(_) => true,
            };
            if ready {
                unpark(entry);
                wakes.streams.extend(entry.writer.take());
            }
            !ready
        });
    }

    /// Parks `waiter` as stream `id`'s writer until it gets credit.
    pub(super) fn park_for_credit(&mut self, id: u64, waiter: &Waiter) {
        let entry = self.streams.entry(id).or_default();
        entry.writer.register(waiter);
        if !entry.awaiting_credit {
            entry.awaiting_credit = true;
            self.credit_waiters.push(id);
        }
    }

    /// Parks `waiter` as stream `id`'s writer until the peer stops the stream.
    pub(super) fn park_for_stop(&mut self, id: u64, waiter: &Waiter) {
        let entry = self.streams.entry(id).or_default();
        entry.writer.register(waiter);
        if !entry.watching_stop {
            entry.watching_stop = true;
            self.stop_watchers.push(id);
        }
    }

    /// The peer's STOP_SENDING code for stream `id`, if it was seen.
    pub(super) fn stopped(&self, id: u64) -> Option<u64> {
        self.streams.get(&id).and_then(|entry| entry.stopped)
    }

    /// After a write that took nothing: whether stream `id`'s send half is gone (the peer
    /// stopped it), with the code when known (0 when quiche collected the stream before
    /// the code was seen here).
    pub(super) fn gone(&mut self, id: u64) -> Option<u64> {
        match self.conn.stream_capacity(id) {
            Ok(_) => None,
            Err(quiche::Error::StreamStopped(code)) => {
                self.note_stopped(id, code);
                Some(code)
            }
            Err(_) => Some(self.stopped(id).unwrap_or(0)),
        }
    }

    /// Records that the peer stopped stream `id`.
    pub(super) fn note_stopped(&mut self, id: u64, code: u64) {
        if let Some(entry) = self.streams.get_mut(&id) {
            entry.stopped = Some(code);
        }
    }

    /// Why the connection is gone, if it is.
    pub(super) fn closed(&self) -> Option<TransportError> {
        if !(self.is_closed() || self.conn.is_draining()) {
            return None;
        }
        if let Some(error) = self.conn.peer_error() {
            return Some(TransportError::Closed {
                code: error.error_code,
                reason: String::from_utf8_lossy(&error.reason).into_owned(),
                remote: true,
            });
        }
        if let Some(error) = self.conn.local_error() {
            return Some(TransportError::Closed {
                code: error.error_code,
                reason: String::from_utf8_lossy(&error.reason).into_owned(),
                remote: false,
            });
        }
        if self.conn.is_timed_out() {
            return Some(TransportError::Lost("idle timeout".into()));
        }
        if self.reset_by_peer {
            return Some(TransportError::Lost(
                "stateless reset: the peer no longer has this connection (it restarted)".into(),
            ));
        }
        Some(TransportError::Lost("connection closed".into()))
    }

    /// Puts whatever quiche has to send into packets now; they wait in the outbox for
    /// the endpoint's next transmit pass. Returns the error that stopped quiche short of
    /// "nothing more to send", if one did.
    pub(super) fn emit_now(&mut self) -> Option<quiche::Error> {
        let size = self.conn.max_send_udp_payload_size();
        loop {
            let mut packet = vec![0; size];
            match self.next_packet(&mut packet) {
                Ok(Some((len, info))) => {
                    packet.truncate(len);
                    self.outbox.push_back((packet, info));
                }
                Ok(None) => return None,
                Err(error) => return Some(error),
            }
        }
    }

    /// After quiche refused a packet from `from` (and closed the connection, for most
    /// errors): the state of every path, which is what a refusal after a NAT rebinding
    /// depends on.
    pub(super) fn note_refused(&self, result: &Result<usize, quiche::Error>, from: SocketAddr) {
        if let Err(error) = result
            && *error != quiche::Error::Done
        {
            tracing::debug!(
                conn = self.conn.trace_id(),
                %from,
                %error,
                paths = %describe_paths(&self.conn),
                "the paths when quiche refused a packet"
            );
        }
    }

    /// Closed for good: by quiche, or abandoned ([`State::next_packet`]).
    pub(super) fn is_closed(&self) -> bool {
        self.conn.is_closed() || self.abandoned
    }

    /// Opens the next local stream. quiche counts a stream against the peer's limit only
    /// once it exists, so it is made to exist now: opening several before writing any
    /// cannot overrun the limit. Giving it quiche's own default priority does that and
    /// nothing else (nothing goes on the wire); an empty write would do the same and go
    /// through quiche's whole send path for it.
    pub(super) fn open(&mut self, bidi: bool) -> u64 {
        let counter = if bidi {
            &mut self.next_bidi
        } else {
            &mut self.next_uni
        };
        let id = *counter;
        *counter += 4;
        let _ = self
            .conn
            .stream_priority(id, parking::DEFAULT_URGENCY, true);
        self.streams.insert(
            id,
            StreamEntry {
                handles: if bidi { 2 } else { 1 },
                ..StreamEntry::default()
            },
        );
        id
    }

    /// Reads what stream `id` has: `Ok(None)` when nothing is there yet.
    pub(super) fn read(&mut self, id: u64) -> Result<Option<(Bytes, bool)>, quiche::Error> {
        let mut small = [0u8; SMALL_READ];
        let (len, fin) = match self.conn.stream_recv(id, &mut small) {
            Ok(read) => read,
            Err(quiche::Error::Done) => return Ok(None),
            Err(error) => return Err(error),
        };
        if len < SMALL_READ || fin {
            return Ok(Some((Bytes::copy_from_slice(&small[..len]), fin)));
        }
        // More than a small read's worth: take up to a chunk in this call.
        let mut chunk = BytesMut::with_capacity(READ_CHUNK);
        chunk.extend_from_slice(&small);
        let mut fin = false;
        while chunk.len() + SMALL_READ <= READ_CHUNK && !fin {
            match self.conn.stream_recv(id, &mut small) {
                Ok((len, end)) => {
                    chunk.extend_from_slice(&small[..len]);
                    fin = end;
                }
                // What was read stands; an error (a reset) shows on the next read.
                Err(_) => break,
            }
        }
        Ok(Some((chunk.freeze(), fin)))
    }
}

/// Every path of `conn`: the peer's address, quiche's validation state, and which one is
/// active (`127.0.0.1:4433 Validated active, …`).
pub(super) fn describe_paths(conn: &quiche::Connection) -> String {
    let paths: Vec<String> = conn
        .path_stats()
        .map(|path| {
            let active = if path.active { " active" } else { "" };
            format!("{} {:?}{active}", path.peer_addr, path.validation_state)
        })
        .collect();
    paths.join(", ")
}

/// The paths quiche marked failed, as (local address, peer address): not those under
/// validation, whose challenge may still be answered.
fn failed_paths(conn: &quiche::Connection) -> impl Iterator<Item = (SocketAddr, SocketAddr)> + '_ {
    conn.path_stats()
        // quiche 0.30 exports `PathStats::validation_state` but not its type: its name is
        // the only way to tell a failed path from one under validation.
        .filter(|path| format!("{:?}", path.validation_state) == "Failed")
        .map(|path| (path.local_addr, path.peer_addr))
}
