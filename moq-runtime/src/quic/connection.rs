//! [`QuicConnection`]'s methods: what the endpoint calls (packets in and out, timers,
//! status, connection IDs, closing) and the two a stream handle calls under the lock.

use std::collections::{BTreeSet, VecDeque};

use foldhash::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::task::Waker;
use std::time::{Duration, Instant};

use std::task::Poll;

use moqx_kio::sync::Mutex;
use moqx_kio::{Waiter, WaiterList};

use super::{
    Bookkeeping, ConnectionStatus, MIN_DATAGRAM, PeerStreams, QuicConnection, QuicSession, Shared,
    State, fins, migration, pacing, parking, stall, state,
};
use crate::urgency::Urgencies;

impl QuicConnection {
    /// Wraps a quiche connection (from `quiche::connect` or `quiche::accept`).
    pub fn new(conn: quiche::Connection) -> Self {
        let server = conn.is_server();
        let path = conn
            .path_stats()
            .find(|path| path.active)
            .map(|path| (path.local_addr, path.peer_addr));
        // Stream ids: bit 0 is the initiator (1 = server), bit 1 uni.
        let peer = u64::from(!server);
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    conn,
                    server,
                    streams: HashMap::default(),
                    incoming_uni: VecDeque::new(),
                    incoming_bidi: VecDeque::new(),
                    peer_uni: PeerStreams {
                        next: 2 | peer,
                        skipped: BTreeSet::new(),
                    },
                    peer_bidi: PeerStreams {
                        next: peer,
                        skipped: BTreeSet::new(),
                    },
                    next_uni: 2 | u64::from(server),
                    next_bidi: u64::from(server),
                    credit_waiters: Vec::new(),
                    stop_watchers: Vec::new(),
                    stops_seen: 0,
                    received_datagrams: VecDeque::new(),
                    datagrams_wanted: false,
                    datagrams_dropped: 0,
                    lone_fin: false,
                    held_fins: fins::HeldFins::default(),
                    path_mtu: MIN_DATAGRAM,
                    packets_emitted: 0,
                    losses_seen: 0,
                    probes_seen: 0,
                    park_sweeps: 0,
                    finished: parking::FinishedStreams::default(),
                    open_parked: 0,
                    parked_may_send: false,
                    sends_past_parked: 0,
                    kept: stall::KeptBytes::default(),
                    resent_seen: 0,
                    acked_seen: 0,
                    probes_at_ack: 0,
                    acked_at_loss: 0,
                    reset_by_peer: false,
                    outbox: VecDeque::new(),
                    paced: pacing::Paced::default(),
                    close_announced: false,
                    established_announced: false,
                    urgencies: Urgencies::default(),
                    urgency_changes: Vec::new(),
                    close_at: None,
                    closing_long_headers: 0,
                    abandoned: false,
                    close_packet: None,
                    migrations: migration::Migrations::new(path),
                    unsendable: Default::default(),
                    dcid_in_use: 0,
                    heard_data: false,
                }),
                flush_pending: AtomicBool::new(false),
                flush_waker: std::sync::Mutex::new(None),
                accept_uni: WaiterList::new(),
                accept_bidi: WaiterList::new(),
                credit: WaiterList::new(),
                datagrams: WaiterList::new(),
                closed: WaiterList::new(),
                established: WaiterList::new(),
            }),
        }
    }

    /// Feeds one received datagram to the connection, then wakes whoever it concerns.
    pub fn recv(
        &self,
        datagram: &mut [u8],
        from: SocketAddr,
        to: SocketAddr,
    ) -> Result<usize, quiche::Error> {
        let mut state = self.shared.state.lock();
        if state.lone_fin {
            state.emit_before_acks();
        }
        let was_closed = state.conn.is_closed();
        let closing = state.conn.local_error().is_some();
        let revive = state.revive_path(from, to);
        let result = state.conn.recv(datagram, quiche::RecvInfo { from, to });
        state.note_refused(&result, from);
        state.validate_path(revive, from, to);
        if closing {
            state.answer_with_close();
        }
        // quiche closes a connection on a packet that ends in the server's stateless reset
        // token without a word (no error, no timeout): that silence is how it is told
        // apart, so that the reason says what happened.
        if !was_closed
            && state.conn.is_closed()
            && !state.conn.is_timed_out()
            && state.conn.peer_error().is_none()
            && state.conn.local_error().is_none()
        {
            state.reset_by_peer = true;
        }
        state.park_if_lossy(false);
        let wakes = state.process(true);
        drop(state);
        wakes.deliver(&self.shared);
        result
    }

    /// How long until [`on_timeout`](Self::on_timeout) is due, if a timer is set: quiche's
    /// own, a held FIN's, a check of kept bytes, a scheduled close's or a paced packet's,
    /// whichever comes first.
    pub fn timeout(&self) -> Option<Duration> {
        let state = self.shared.state.lock();
        let now = Instant::now();
        let ours = [
            state.held_fins.next_due(),
            state.kept.check_at(),
            state.close_at.as_ref().map(|(at, ..)| *at),
            state.paced.at(),
        ]
        .into_iter()
        .flatten()
        .min()
        .map(|at| at.saturating_duration_since(now));
        match (state.conn.timeout(), ours) {
            (Some(quiche), Some(ours)) => Some(quiche.min(ours)),
            (quiche, ours) => quiche.or(ours),
        }
    }

    /// Runs the connection's timers (loss recovery, idle timeout), a scheduled close
    /// ([`close_at`](Self::close_at)) once `now` reaches it, writes the held FINs
    /// that are due ([`ConnectionStatus::held_fin_at`]), and parks every stream if bytes
    /// quiche kept still have not left ([`ConnectionStatus::kept_bytes_check_at`]).
    pub fn on_timeout(&self, now: Instant) {
        let mut state = self.shared.state.lock();
        // Before quiche's timers: a late turn may also be the one quiche closes in.
        state.resend_close_if_due(now);
        state.conn.on_timeout();
        state.notice_paths_failed_again();
        state.park_if_lossy(true);
        state.check_kept_bytes(now);
        if state.migrations.may_probe_again() {
            state.probe_paths_left_again(now);
        }
        if !state.held_fins.is_empty() {
            let state = &mut *state;
            let recovery = state.recovery();
            let finished = &mut state.finished;
            if state
                .held_fins
                .release_due(&mut state.conn, recovery, now, |id, conn| {
                    finished.add(id, conn)
                })
            {
                state.lone_fin = true;
                // On parked streams: maybe behind a stuck one (`parking.rs`).
                state.parked_may_send = true;
            }
        }
        if state.close_at.as_ref().is_some_and(|(at, ..)| *at <= now)
            && let Some((_, code, reason)) = state.close_at.take()
        {
            tracing::debug!(conn = state.conn.trace_id(), code, %reason, "closing after lingering");
            let _ = state.conn.close(true, code, reason.as_bytes());
        }
        let wakes = state.process(false);
        drop(state);
        wakes.deliver(&self.shared);
    }

    /// Whether the peer sent stream data or a datagram since the last call: what tells a
    /// client that its server is sending it something (not only acknowledging).
    pub fn take_heard_data(&self) -> bool {
        std::mem::take(&mut self.shared.state.lock().heard_data)
    }

    /// Sends a PING (an ack-eliciting packet) with the next packets: a keep-alive, so that
    /// the peer's idle timer does not close a connection that is quiet but wanted.
    pub fn ping(&self) {
        let mut state = self.shared.state.lock();
        let _ = state.conn.send_ack_eliciting();
    }

    /// The stateless reset token the server gave for its first connection ID (its
    /// transport parameters), once known: a client's way to recognise the server's reset.
    pub fn peer_reset_token(&self) -> Option<u128> {
        let state = self.shared.state.lock();
        state
            .conn
            .peer_transport_params()
            .and_then(|params| params.stateless_reset_token)
    }

    /// Whether it is closed, established, and when its timer is due, in one lock.
    pub fn status(&self) -> ConnectionStatus {
        let state = self.shared.state.lock();
        ConnectionStatus {
            closed: state.is_closed(),
            established: state.conn.is_established(),
            timeout: state.conn.timeout(),
            peer_idle_timeout: state
                .conn
                .peer_transport_params()
                .map(|params| params.max_idle_timeout)
                .filter(|millis| *millis > 0)
                .map(Duration::from_millis),
            close_at: state.close_at.as_ref().map(|(at, ..)| *at),
            held_fin_at: state.held_fins.next_due(),
            kept_bytes_check_at: state.kept.check_at(),
            paced_at: state.paced.at(),
            close_resend_at: state.close_resend_at(),
            // Only once established: the handshake gives the peer our first one.
            cids_wanted: if state.conn.is_established() {
                state.conn.scids_left()
            } else {
                0
            },
            cids_retired: state.conn.retired_scids(),
        }
    }

    /// Ready with `true` once the handshake completed, with `false` if the connection
    /// closed before it did (`ConnectError::handshake_failed` says why); until then the
    /// waiter is woken by whichever comes first.
    pub fn poll_established(&self, waiter: &Waiter) -> Poll<bool> {
        let state = self.shared.state.lock();
        if state.conn.is_established() {
            return Poll::Ready(true);
        }
        if state.closed().is_some() {
            return Poll::Ready(false);
        }
        self.shared.established.register(waiter);
        Poll::Pending
    }

    /// Whether the handshake completed.
    pub fn is_established(&self) -> bool {
        self.shared.state.lock().conn.is_established()
    }

    /// Whether the connection is closed for good.
    pub fn is_closed(&self) -> bool {
        self.shared.state.lock().is_closed()
    }

    /// The ALPN the handshake selected (empty before it completes).
    pub fn application_protocol(&self) -> Option<Vec<u8>> {
        let state = self.shared.state.lock();
        let protocol = state.conn.application_proto();
        (!protocol.is_empty()).then(|| protocol.to_vec())
    }

    /// The peer's leaf certificate (DER), once the handshake received it.
    pub fn peer_certificate(&self) -> Option<Vec<u8>> {
        self.shared
            .state
            .lock()
            .conn
            .peer_cert()
            .map(<[u8]>::to_vec)
    }

    /// quiche's name for the connection in logs and qlog (its first source connection
    /// ID, in hex): stable across the peer's moves, so one connection's lines can be
    /// followed in a relay's debug log.
    pub fn trace_id(&self) -> String {
        self.shared.state.lock().conn.trace_id().to_owned()
    }

    /// The peer's address on the connection's active path.
    pub fn peer_address(&self) -> Option<SocketAddr> {
        let state = self.shared.state.lock();
        migration::active_path(&state.conn).map(|path| path.peer_addr)
    }

    /// Every path quiche keeps, for a log line: peer address, validation state, and
    /// which one is active (why a connection that went silent after its peer moved did).
    pub fn paths(&self) -> String {
        state::describe_paths(&self.shared.state.lock().conn)
    }

    /// Closes the connection with an application `code` and `reason`.
    pub fn close(&self, code: u64, reason: &str) {
        self.with(|state| {
            let _ = state.conn.close(true, code, reason.as_bytes());
        });
    }

    /// Closes the connection with `code` and `reason` at `at`, unless it closed before
    /// (the peer closing it, having read what it was sent): a refused client gets a
    /// moment to read its refusal. The endpoint's timer runs it.
    pub fn close_at(&self, at: Instant, code: u64, reason: &str) {
        self.with(|state| {
            if !state.conn.is_closed() {
                state.close_at = Some((at, code, reason.to_owned()));
            }
        });
    }

    /// Whether the handshake failed on ALPN: TLS alert 120 (no_application_protocol), a
    /// server that accepts none of the protocols the client offered.
    pub fn refused_alpn(&self) -> bool {
        let state = self.shared.state.lock();
        [state.conn.peer_error(), state.conn.local_error()]
            .into_iter()
            .flatten()
            .any(|error| !error.is_app && error.error_code == 0x100 + 120)
    }

    /// Why the connection closed, in words (empty while it is open). A TLS alert is named:
    /// alert 120 (no_application_protocol) is a server that speaks none of the versions the
    /// client offered.
    pub fn close_reason(&self) -> String {
        let state = self.shared.state.lock();
        let tls_alert = [state.conn.peer_error(), state.conn.local_error()]
            .into_iter()
            .flatten()
            .find(|error| !error.is_app && (0x100..0x200).contains(&error.error_code))
            .map(|error| error.error_code - 0x100);
        match (tls_alert, state.closed()) {
            (Some(120), _) => "TLS alert 120 (no_application_protocol): the server speaks none \
                of the offered moq-lite versions"
                .to_owned(),
            (Some(alert), Some(error)) => format!("TLS alert {alert}: {error}"),
            (None, Some(error)) => error.to_string(),
            (_, None) => String::new(),
        }
    }

    /// The waker to wake when a session wrote something (or closed): the endpoint should
    /// then call [`send`](Self::send) until it returns `None`. It is woken once per
    /// `send` pass, not once per write.
    pub fn set_flush_waker(&self, waker: &Waker) {
        *self
            .shared
            .flush_waker
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(waker.clone());
    }

    /// How much the adapter keeps per stream right now. Every figure returns to its idle
    /// size once streams end, however many came and went (for tests and diagnostics).
    pub fn bookkeeping(&self) -> Bookkeeping {
        let state = self.shared.state.lock();
        Bookkeeping {
            streams: state.streams.len(),
            waiting_to_be_accepted: state.incoming_uni.len() + state.incoming_bidi.len(),
            parked_writers: state.credit_waiters.len() + state.stop_watchers.len(),
            skipped_peer_streams: state.peer_uni.skipped.len() + state.peer_bidi.skipped.len(),
            queued_datagrams: state.received_datagrams.len(),
            datagrams_dropped: state.datagrams_dropped,
            finished_streams: state.finished.len(),
        }
    }

    /// The session side, for `moqx_net::session::connect` / `accept`. Call it once the
    /// handshake is done.
    pub fn session(&self) -> QuicSession {
        let protocol = {
            let state = self.shared.state.lock();
            std::str::from_utf8(state.conn.application_proto())
                .ok()
                .filter(|protocol| !protocol.is_empty())
                .map(str::to_owned)
        };
        QuicSession {
            connection: self.clone(),
            protocol,
        }
    }

    /// Runs `f` on the state, then asks for a flush: whatever a session does may produce
    /// packets.
    pub(super) fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let mut state = self.shared.state.lock();
        let result = f(&mut state);
        drop(state);
        self.shared.request_flush();
        result
    }

    /// A handle to stream `id` went away; `end` is what its half still needs done.
    pub(super) fn release(&self, id: u64, end: impl FnOnce(&mut State)) {
        let mut state = self.shared.state.lock();
        end(&mut state);
        if let Some(entry) = state.streams.get_mut(&id) {
            entry.handles = entry.handles.saturating_sub(1);
        }
        state.forget_if_done(id);
        drop(state);
        self.shared.request_flush();
    }
}
