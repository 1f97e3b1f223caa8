//! The session and stream handles a session machine uses: `moqx_net::transport` over the
//! shared connection.

use std::task::Poll;
use std::time::Instant;

use bytes::{Buf, Bytes};
use moqx_kio::Waiter;
use moqx_net::transport::{
    RecvStream, SendStream, Session, StatsReader, StreamError, StreamPriority, TransportError,
    TransportStats,
};

use super::fins::LastWrite;
use super::{QuicConnection, QuicRecvStream, QuicSendStream, QuicSession};

impl QuicSession {
    pub(super) fn send_half(&self, id: u64) -> QuicSendStream {
        QuicSendStream {
            last_write: None,
            park_sweeps_seen: 0,
            connection: self.connection.clone(),
            id,
            ended: false,
        }
    }

    pub(super) fn recv_half(&self, id: u64) -> QuicRecvStream {
        QuicRecvStream {
            connection: self.connection.clone(),
            id,
            ended: false,
        }
    }
}

impl Session for QuicSession {
    type SendStream = QuicSendStream;
    type RecvStream = QuicRecvStream;

    fn poll_open_uni(&mut self, waiter: &Waiter) -> Poll<Result<QuicSendStream, TransportError>> {
        let shared = &self.connection.shared;
        let mut state = shared.state.lock();
        if let Some(error) = state.closed() {
            return Poll::Ready(Err(error));
        }
        if state.conn.peer_streams_left_uni() == 0 {
            shared.credit.register(waiter);
            return Poll::Pending;
        }
        let id = state.open(false);
        drop(state);
        Poll::Ready(Ok(self.send_half(id)))
    }

    fn poll_open_bidi(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<(QuicSendStream, QuicRecvStream), TransportError>> {
        let shared = &self.connection.shared;
        let mut state = shared.state.lock();
        if let Some(error) = state.closed() {
            return Poll::Ready(Err(error));
        }
        if state.conn.peer_streams_left_bidi() == 0 {
            shared.credit.register(waiter);
            return Poll::Pending;
        }
        let id = state.open(true);
        drop(state);
        Poll::Ready(Ok((self.send_half(id), self.recv_half(id))))
    }

    fn poll_accept_uni(&mut self, waiter: &Waiter) -> Poll<Result<QuicRecvStream, TransportError>> {
        let shared = &self.connection.shared;
        let mut state = shared.state.lock();
        if let Some(id) = state.incoming_uni.pop_front() {
            drop(state);
            return Poll::Ready(Ok(self.recv_half(id)));
        }
        if let Some(error) = state.closed() {
            return Poll::Ready(Err(error));
        }
        shared.accept_uni.register(waiter);
        Poll::Pending
    }

    fn poll_accept_bidi(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<(QuicSendStream, QuicRecvStream), TransportError>> {
        let shared = &self.connection.shared;
        let mut state = shared.state.lock();
        if let Some(id) = state.incoming_bidi.pop_front() {
            drop(state);
            return Poll::Ready(Ok((self.send_half(id), self.recv_half(id))));
        }
        if let Some(error) = state.closed() {
            return Poll::Ready(Err(error));
        }
        shared.accept_bidi.register(waiter);
        Poll::Pending
    }

    fn send_datagram(&mut self, payload: Bytes) -> Result<(), TransportError> {
        self.connection.with(|state| {
            if let Some(error) = state.closed() {
                return Err(error);
            }
            // Unreliable by definition: one that does not fit is dropped.
            let _ = state.conn.dgram_send(&payload);
            Ok(())
        })
    }

    fn poll_recv_datagram(&mut self, waiter: &Waiter) -> Poll<Result<Bytes, TransportError>> {
        let shared = &self.connection.shared;
        let mut state = shared.state.lock();
        state.datagrams_wanted = true;
        if let Some(datagram) = state.received_datagrams.pop_front() {
            return Poll::Ready(Ok(datagram));
        }
        if let Some(error) = state.closed() {
            return Poll::Ready(Err(error));
        }
        shared.datagrams.register(waiter);
        Poll::Pending
    }

    fn max_datagram_size(&self) -> Option<usize> {
        self.connection
            .shared
            .state
            .lock()
            .conn
            .dgram_max_writable_len()
    }

    fn close(&mut self, code: u64, reason: &str) {
        self.connection.close(code, reason);
    }

    fn poll_closed(&mut self, waiter: &Waiter) -> Poll<TransportError> {
        let shared = &self.connection.shared;
        let state = shared.state.lock();
        if let Some(error) = state.closed() {
            return Poll::Ready(error);
        }
        shared.closed.register(waiter);
        Poll::Pending
    }

    fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    fn stats(&self) -> TransportStats {
        transport_stats(&self.connection)
    }

    fn stats_reader(&self) -> Option<StatsReader> {
        let connection = self.connection.clone();
        Some(StatsReader::new(move || transport_stats(&connection)))
    }
}

/// The counters of `connection`, read under its lock.
fn transport_stats(connection: &QuicConnection) -> TransportStats {
    let state = connection.shared.state.lock();
    let stats = state.conn.stats();
    let path = super::migration::active_path(&state.conn);
    TransportStats {
        rtt: path.as_ref().map(|p| p.rtt),
        bytes_sent: stats.sent_bytes,
        bytes_received: stats.recv_bytes,
        packets_lost: stats.lost as u64,
        estimated_bitrate: path.and_then(|p| p.delivery_rate.checked_mul(8)),
        peer_migrations: state.migrations.moves(),
        path_fallbacks: state.migrations.fallbacks(),
    }
}

impl QuicSendStream {
    /// The QUIC stream id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Lets go of the handle without ending the stream: it stays open for the connection's
    /// life (an HTTP/3 control stream, whose closing is an error).
    pub fn leave_open(mut self) {
        self.ended = true;
    }

    /// Writes what fits of `data` now (and the FIN once all of it is written, if `fin`),
    /// without waiting: for best-effort writes on the way out, such as a closing capsule.
    pub(crate) fn try_write(&mut self, data: &mut Bytes, fin: bool) {
        let id = self.id;
        let finished = self.connection.with(|state| {
            let Ok(written) = state.conn.stream_send(id, data, fin) else {
                return (false, None);
            };
            data.advance(written);
            // Not unparked (nothing waits on it): maybe behind a stuck stream.
            state.parked_may_send = true;
            let finished = fin && data.is_empty();
            if finished {
                state.finished.add(id, &mut state.conn);
            }
            (finished, Some(LastWrite::now(state)))
        });
        let (finished, wrote_at) = finished;
        self.ended |= finished;
        self.last_write = wrote_at.or(self.last_write);
    }

    /// Writes what fits of `data`, with the FIN behind its last byte if `fin`; `Pending`
    /// (with `waiter` parked for credit) while flow control holds the rest back. quiche
    /// queues the FIN only with the write that takes the last byte, so a partial write
    /// leaves it for a later call.
    pub(super) fn poll_send(
        &mut self,
        waiter: &Waiter,
        data: &mut Bytes,
        fin: bool,
    ) -> Poll<Result<(), StreamError>> {
        let shared = &self.connection.shared;
        let mut state = shared.state.lock();
        if let Some(error) = state.closed() {
            return Poll::Ready(Err(error.into()));
        }
        if let Some(code) = state.stopped(self.id) {
            return Poll::Ready(Err(StreamError::Stopped(code)));
        }
        if self.park_sweeps_seen != state.park_sweeps {
            self.park_sweeps_seen = state.park_sweeps;
            state.unpark(self.id);
        }
        let mut wrote = false;
        let result = loop {
            if data.is_empty() {
                if fin {
                    let state = &mut *state;
                    state.finished.add(self.id, &mut state.conn);
                }
                break Poll::Ready(Ok(()));
            }
            match state.conn.stream_send(self.id, data, fin) {
                Ok(written) if written > 0 => {
                    data.advance(written);
                    state.note_written(written);
                    wrote = true;
                }
                Ok(_) | Err(quiche::Error::Done) => {
                    // No room now, or no stream any more: quiche answers a write to a
                    // stream it already collected (stopped by the peer) with Done too.
                    if let Some(code) = state.gone(self.id) {
                        break Poll::Ready(Err(StreamError::Stopped(code)));
                    }
                    state.park_for_credit(self.id, waiter);
                    break Poll::Pending;
                }
                Err(quiche::Error::StreamStopped(code)) => {
                    state.note_stopped(self.id, code);
                    break Poll::Ready(Err(StreamError::Stopped(code)));
                }
                Err(error) => {
                    break Poll::Ready(Err(
                        TransportError::Lost(format!("stream write: {error}")).into()
                    ));
                }
            }
        };
        if wrote {
            self.last_write = Some(LastWrite::now(&state));
        }
        drop(state);
        if fin && matches!(result, Poll::Ready(Ok(()))) {
            self.ended = true;
        }
        if wrote {
            shared.request_flush();
        }
        result
    }
}

impl SendStream for QuicSendStream {
    fn poll_write(&mut self, waiter: &Waiter, data: &mut Bytes) -> Poll<Result<(), StreamError>> {
        self.poll_send(waiter, data, false)
    }

    fn poll_write_final(
        &mut self,
        waiter: &Waiter,
        data: &mut Bytes,
    ) -> Poll<Result<(), StreamError>> {
        if data.is_empty() {
            return Poll::Ready(self.finish());
        }
        self.poll_send(waiter, data, true)
    }

    fn finish(&mut self) -> Result<(), StreamError> {
        let id = self.id;
        if std::mem::replace(&mut self.ended, true) {
            return Ok(());
        }
        let last_write = self.last_write;
        let park_sweeps_seen = std::mem::replace(&mut self.park_sweeps_seen, u64::MAX);
        self.connection.with(|state| {
            // What is still queued goes at the stream's own place.
            if park_sweeps_seen != state.park_sweeps {
                state.unpark(id);
            }
            // No packet left since the last bytes were written: they are still queued,
            // and the FIN goes out with them. Or they left long enough ago, with nothing
            // lost since, to be acknowledged: the FIN is safe alone. Otherwise it would
            // go alone, and waits until the bytes before it are acknowledged (`fins.rs`:
            // quiche would lose it for good if its packet were lost).
            let fin_is_safe = last_write.is_none_or(|write| {
                write.still_queued(state) || write.acknowledged(state, Instant::now())
            });
            if fin_is_safe {
                return match state.conn.stream_send(id, &[], true) {
                    Ok(_) => {
                        state.lone_fin = true;
                        state.finished.add(id, &mut state.conn);
                        Ok(())
                    }
                    Err(quiche::Error::Done) => match state.gone(id) {
                        Some(code) => Err(StreamError::Stopped(code)),
                        None => Ok(()),
                    },
                    Err(quiche::Error::StreamStopped(code)) => Err(StreamError::Stopped(code)),
                    Err(error) => {
                        Err(TransportError::Lost(format!("stream finish: {error}")).into())
                    }
                };
            }
            // Refused now what a write would be refused now.
            match state.conn.stream_capacity(id) {
                Ok(_) => {
                    let recovery = state.recovery();
                    state
                        .held_fins
                        .hold(id, &state.conn, recovery, std::time::Instant::now());
                    Ok(())
                }
                Err(quiche::Error::StreamStopped(code)) => {
                    state.note_stopped(id, code);
                    Err(StreamError::Stopped(code))
                }
                Err(_) => match state.gone(id) {
                    Some(code) => Err(StreamError::Stopped(code)),
                    None => Ok(()),
                },
            }
        })
    }

    fn reset(&mut self, code: u64) {
        let id = self.id;
        self.ended = true;
        self.connection.with(|state| {
            let _ = state
                .conn
                .stream_shutdown(id, quiche::Shutdown::Write, code);
        });
    }

    fn set_priority(&mut self, priority: StreamPriority) {
        let id = self.id;
        // Nothing to send: no flush.
        let mut state = self.connection.shared.state.lock();
        let state = &mut *state;
        state
            .urgencies
            .set(id, priority, &mut state.urgency_changes);
        for (stream, urgency) in state.urgency_changes.drain(..) {
            // A parked stream keeps its parking place; its next write gives it this one.
            if state.streams.get(&stream).is_some_and(|entry| entry.parked) {
                continue;
            }
            // Not incremental: a group's stream goes whole before the next at its level.
            let _ = state.conn.stream_priority(stream, urgency, false);
        }
    }

    fn poll_stopped(&mut self, waiter: &Waiter) -> Poll<Result<u64, StreamError>> {
        let shared = &self.connection.shared;
        let mut state = shared.state.lock();
        if let Some(error) = state.closed() {
            return Poll::Ready(Err(error.into()));
        }
        if let Some(code) = state.stopped(self.id) {
            return Poll::Ready(Ok(code));
        }
        match state.conn.stream_capacity(self.id) {
            Err(quiche::Error::StreamStopped(code)) => {
                state.note_stopped(self.id, code);
                Poll::Ready(Ok(code))
            }
            // Gone from quiche (the stream exists from its open, see `State::open`): the
            // peer stopped it and quiche collected it before the code was seen here.
            Err(_) => Poll::Ready(Ok(0)),
            Ok(_) => {
                state.park_for_stop(self.id, waiter);
                Poll::Pending
            }
        }
    }
}

impl Drop for QuicSendStream {
    fn drop(&mut self) {
        let (id, ended) = (self.id, self.ended);
        self.connection.release(id, |state| {
            if !ended {
                let _ = state.conn.stream_shutdown(id, quiche::Shutdown::Write, 0);
            }
            state.urgencies.remove(id);
        });
    }
}

impl QuicRecvStream {
    /// The QUIC stream id.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl QuicRecvStream {
    /// Lets go of the handle without stopping the stream: the peer may go on sending (an
    /// HTTP/3 control or QPACK stream, which must not be stopped while the connection
    /// lives); what it sends is buffered within the stream's flow-control window.
    pub fn leave_open(mut self) {
        self.ended = true;
    }
}

impl RecvStream for QuicRecvStream {
    fn at_end(&self) -> bool {
        self.ended
    }

    fn poll_read(&mut self, waiter: &Waiter) -> Poll<Result<Option<Bytes>, StreamError>> {
        if self.ended {
            return Poll::Ready(Ok(None));
        }
        let shared = &self.connection.shared;
        let mut state = shared.state.lock();
        match state.read(self.id) {
            Ok(Some((chunk, fin))) => {
                self.ended = fin;
                drop(state);
                // Reading frees flow-control credit: the peer may be told.
                shared.request_flush();
                if chunk.is_empty() && fin {
                    return Poll::Ready(Ok(None));
                }
                Poll::Ready(Ok(Some(chunk)))
            }
            Ok(None) => {
                if let Some(error) = state.closed() {
                    return Poll::Ready(Err(error.into()));
                }
                state
                    .streams
                    .entry(self.id)
                    .or_default()
                    .reader
                    .register(waiter);
                Poll::Pending
            }
            Err(quiche::Error::StreamReset(code)) => {
                self.ended = true;
                Poll::Ready(Err(StreamError::Reset(code)))
            }
            // Finished and collected already.
            Err(quiche::Error::InvalidStreamState(_)) => {
                self.ended = true;
                Poll::Ready(Ok(None))
            }
            Err(error) => Poll::Ready(Err(
                TransportError::Lost(format!("stream read: {error}")).into()
            )),
        }
    }

    fn stop(&mut self, code: u64) {
        let id = self.id;
        self.ended = true;
        self.connection.with(|state| {
            let _ = state.conn.stream_shutdown(id, quiche::Shutdown::Read, code);
        });
    }
}

impl Drop for QuicRecvStream {
    fn drop(&mut self) {
        let (id, ended) = (self.id, self.ended);
        self.connection.release(id, |state| {
            if !ended {
                // Not STOP_SENDING (see the module documentation): read the rest away.
                if let Some(entry) = state.streams.get_mut(&id) {
                    entry.discarding = true;
                }
                state.discard(id);
            }
        });
    }
}
