//! The in-memory transport: a pair of [`TestTransport`]s joined by a link with latency,
//! bandwidth and seeded faults, delivering in virtual time.
//!
//! It behaves like QUIC where sessions can tell: streams are ordered and independent, a
//! stream appears at the peer when its first data (or FIN, or reset) arrives, and closing
//! the connection reaches the peer one latency later. Flow control is unlimited: a write is
//! accepted at once and arrives when the link has carried it.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use moqx_kio::{Waiter, WaiterList};

use super::TestRuntime;
use crate::id_map::IdMap;
use crate::transport::{
    RecvStream, SendStream, Session, StreamError, StreamPriority, TransportError, TransportStats,
};

/// How the link between two test transports behaves. Every figure is per direction.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LinkConfig {
    /// One-way delay.
    pub latency: Duration,
    /// Bits per second each direction carries; `None` is unlimited.
    pub bandwidth: Option<u64>,
    /// Up to this much extra delay, drawn per write, so that data of different streams
    /// overtakes each other (data of one stream stays in order).
    pub reorder: Duration,
    /// The probability that a write on a unidirectional stream, after the stream's first
    /// write, resets the stream instead: the receiver sees a reset and the sender a
    /// STOP_SENDING, both with code 0. (A group cut off in flight; control streams and the
    /// first bytes of a stream, which say what it is, are left alone.)
    pub reset_probability: f64,
    /// The probability that a datagram is lost.
    pub datagram_loss: f64,
    /// The connection is lost (both sides see [`TransportError::Lost`]) at this virtual time
    /// since the link was made.
    pub drop_after: Option<Duration>,
    /// For this long before `drop_after`, the link carries nothing either way: a peer that
    /// died goes silent well before its link's idle timeout says it is gone.
    pub silent_for: Duration,
    /// The protocol both transports report as negotiated.
    pub protocol: Option<String>,
    /// The largest datagram; `None` disables datagrams.
    pub max_datagram_size: Option<usize>,
    /// The most uni streams each end may open over the link's life; `None` is unlimited.
    /// One more stays pending for good: a peer that never raises MAX_STREAMS.
    pub max_uni_streams: Option<u64>,
}

impl Default for LinkConfig {
    /// 10 ms each way, unlimited bandwidth, no faults, `moq-lite-05`, 1200-byte datagrams,
    /// unlimited streams.
    fn default() -> Self {
        Self {
            latency: Duration::from_millis(10),
            bandwidth: None,
            reorder: Duration::ZERO,
            reset_probability: 0.0,
            datagram_loss: 0.0,
            drop_after: None,
            silent_for: Duration::ZERO,
            protocol: Some(crate::coding::Version::Lite05.alpn().to_owned()),
            max_datagram_size: Some(1200),
            max_uni_streams: None,
        }
    }
}

/// One end of an in-memory connection.
pub struct TestTransport {
    link: Rc<RefCell<Link>>,
    runtime: TestRuntime,
    side: usize,
    protocol: Option<String>,
}

/// The sending half of a test stream.
pub struct TestSendStream {
    link: Rc<RefCell<Link>>,
    runtime: TestRuntime,
    side: usize,
    id: u64,
}

/// The receiving half of a test stream.
pub struct TestRecvStream {
    link: Rc<RefCell<Link>>,
    runtime: TestRuntime,
    side: usize,
    id: u64,
}

struct Link {
    config: LinkConfig,
    rng: fastrand::Rng,
    ends: [End; 2],
    /// From this virtual time on, nothing arrives (see [`LinkConfig::silent_for`]).
    silent_from: Option<Duration>,
}

/// What one end knows: the streams it sends and receives, and its queues.
#[derive(Default)]
struct End {
    recv: IdMap<RecvState>,
    send: IdMap<SendState>,
    incoming_uni: VecDeque<u64>,
    incoming_bidi: VecDeque<u64>,
    /// Waiting for a new uni stream, and for a new bidi stream: separate, as a transport's
    /// queues are, so that a session waiting on one is not woken by the other.
    accept_uni: Rc<WaiterList>,
    accept_bidi: Rc<WaiterList>,
    datagrams: VecDeque<Bytes>,
    datagram_waiters: Rc<WaiterList>,
    closed: Option<TransportError>,
    closed_waiters: Rc<WaiterList>,
    next_uni: u64,
    next_bidi: u64,
    /// When this end's outgoing direction is free again (bandwidth).
    busy_until: Duration,
    /// Per outgoing stream, when its last write arrives (keeps a stream in order).
    last_arrival: IdMap<Duration>,
    stats: TransportStats,
}

#[derive(Default)]
struct RecvState {
    chunks: VecDeque<Bytes>,
    fin: bool,
    reset: Option<u64>,
    /// This side sent STOP_SENDING: data still arriving is discarded.
    stopped: bool,
    waiters: Rc<WaiterList>,
}

#[derive(Default)]
struct SendState {
    stopped: Option<u64>,
    /// The last priority the sender set.
    priority: StreamPriority,
    /// Finished or reset: no more writes.
    done: bool,
    waiters: Rc<WaiterList>,
}

enum Event {
    Data(u64, Bytes),
    Fin(u64),
    Reset(u64, u64),
    Stop(u64, u64),
    Datagram(Bytes),
    Closed(TransportError),
}

const BIDI: u64 = 0;
const UNI: u64 = 2;

impl TestRuntime {
    /// A connected pair of transports: `(client, server)`.
    pub fn connect(&self, config: LinkConfig) -> (TestTransport, TestTransport) {
        let seed = self.seed() ^ self.inner.next_timer.get().rotate_left(17);
        let drop_after = config.drop_after;
        let protocol = config.protocol.clone();
        let silent_from =
            drop_after.map(|after| (self.elapsed() + after).saturating_sub(config.silent_for));
        let link = Rc::new(RefCell::new(Link {
            config,
            rng: fastrand::Rng::with_seed(seed),
            ends: [End::default(), End::default()],
            silent_from,
        }));
        if let Some(after) = drop_after {
            let lost = link.clone();
            self.schedule(self.elapsed() + after, move || {
                for side in 0..2 {
                    deliver(
                        &lost,
                        side,
                        Event::Closed(TransportError::Lost("link dropped".into())),
                    );
                }
            });
        }
        let end = |side| TestTransport {
            link: link.clone(),
            runtime: self.clone(),
            side,
            protocol: protocol.clone(),
        };
        (end(0), end(1))
    }
}

impl TestTransport {
    /// Cuts the link now, as a network partition would: nothing more arrives either way,
    /// and both ends see the connection lost ([`TransportError::Lost`]) at once, as
    /// sessions do when their idle timeout notices a silent peer (here without waiting
    /// for it). Data already in flight is lost with it.
    pub fn cut(&self) {
        self.link.borrow_mut().silent_from = Some(self.runtime.elapsed());
        for side in 0..2 {
            deliver(
                &self.link,
                side,
                Event::Closed(TransportError::Lost("link cut (a partition)".into())),
            );
        }
    }

    /// Another handle to this end of the link, for [`cut`](Self::cut)ting it later
    /// while a session owns the transport.
    pub fn handle(&self) -> TestTransport {
        TestTransport {
            link: self.link.clone(),
            runtime: self.runtime.clone(),
            side: self.side,
            protocol: self.protocol.clone(),
        }
    }

    /// The priorities the peer last set on the streams it sends and has not finished, by
    /// stream id: what a scheduler would order them by.
    pub fn peer_priorities(&self) -> Vec<(u64, StreamPriority)> {
        let link = self.link.borrow();
        let mut priorities: Vec<(u64, StreamPriority)> = link.ends[1 - self.side]
            .send
            .iter()
            .filter(|(_, state)| !state.done)
            .map(|(id, state)| (*id, state.priority))
            .collect();
        priorities.sort_unstable();
        priorities
    }

    fn open(&mut self, kind: u64) -> Result<u64, TransportError> {
        let mut link = self.link.borrow_mut();
        let end = &mut link.ends[self.side];
        if let Some(error) = &end.closed {
            return Err(error.clone());
        }
        let counter = if kind == BIDI {
            &mut end.next_bidi
        } else {
            &mut end.next_uni
        };
        let id = (*counter << 2) | kind | self.side as u64;
        *counter += 1;
        end.send.insert(id, SendState::default());
        if kind == BIDI {
            end.recv.insert(id, RecvState::default());
        }
        Ok(id)
    }

    fn send_half(&self, id: u64) -> TestSendStream {
        TestSendStream {
            link: self.link.clone(),
            runtime: self.runtime.clone(),
            side: self.side,
            id,
        }
    }

    fn recv_half(&self, id: u64) -> TestRecvStream {
        TestRecvStream {
            link: self.link.clone(),
            runtime: self.runtime.clone(),
            side: self.side,
            id,
        }
    }

    fn accept(&mut self, waiter: &Waiter, kind: u64) -> Poll<Result<u64, TransportError>> {
        let mut link = self.link.borrow_mut();
        let end = &mut link.ends[self.side];
        let queue = if kind == BIDI {
            &mut end.incoming_bidi
        } else {
            &mut end.incoming_uni
        };
        if let Some(id) = queue.pop_front() {
            return Poll::Ready(Ok(id));
        }
        if let Some(error) = &end.closed {
            return Poll::Ready(Err(error.clone()));
        }
        if kind == BIDI {
            end.accept_bidi.register(waiter);
        } else {
            end.accept_uni.register(waiter);
        }
        Poll::Pending
    }
}

impl Session for TestTransport {
    type SendStream = TestSendStream;
    type RecvStream = TestRecvStream;

    fn poll_open_uni(&mut self, _waiter: &Waiter) -> Poll<Result<TestSendStream, TransportError>> {
        {
            let link = self.link.borrow();
            let opened = link.ends[self.side].next_uni;
            if link.config.max_uni_streams.is_some_and(|max| opened >= max) {
                return Poll::Pending; // no credit, and none will come
            }
        }
        Poll::Ready(self.open(UNI).map(|id| self.send_half(id)))
    }

    fn poll_open_bidi(
        &mut self,
        _waiter: &Waiter,
    ) -> Poll<Result<(TestSendStream, TestRecvStream), TransportError>> {
        Poll::Ready(
            self.open(BIDI)
                .map(|id| (self.send_half(id), self.recv_half(id))),
        )
    }

    fn poll_accept_uni(&mut self, waiter: &Waiter) -> Poll<Result<TestRecvStream, TransportError>> {
        self.accept(waiter, UNI)
            .map(|result| result.map(|id| self.recv_half(id)))
    }

    fn poll_accept_bidi(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<(TestSendStream, TestRecvStream), TransportError>> {
        self.accept(waiter, BIDI).map(|result| {
            result.map(|id| {
                self.link.borrow_mut().ends[self.side]
                    .send
                    .insert(id, SendState::default());
                (self.send_half(id), self.recv_half(id))
            })
        })
    }

    fn send_datagram(&mut self, payload: Bytes) -> Result<(), TransportError> {
        let mut link = self.link.borrow_mut();
        if let Some(error) = &link.ends[self.side].closed {
            return Err(error.clone());
        }
        let fits = link
            .config
            .max_datagram_size
            .is_some_and(|max| payload.len() <= max);
        let lost = link.rng.f64() < link.config.datagram_loss;
        drop(link);
        if fits && !lost {
            transmit(
                &self.link,
                &self.runtime,
                self.side,
                None,
                payload.len(),
                Event::Datagram(payload),
            );
        }
        Ok(())
    }

    fn poll_recv_datagram(&mut self, waiter: &Waiter) -> Poll<Result<Bytes, TransportError>> {
        let mut link = self.link.borrow_mut();
        let end = &mut link.ends[self.side];
        if let Some(datagram) = end.datagrams.pop_front() {
            return Poll::Ready(Ok(datagram));
        }
        if let Some(error) = &end.closed {
            return Poll::Ready(Err(error.clone()));
        }
        end.datagram_waiters.register(waiter);
        Poll::Pending
    }

    fn max_datagram_size(&self) -> Option<usize> {
        self.link.borrow().config.max_datagram_size
    }

    fn close(&mut self, code: u64, reason: &str) {
        if self.link.borrow().ends[self.side].closed.is_some() {
            return;
        }
        deliver(
            &self.link,
            self.side,
            Event::Closed(TransportError::Closed {
                code,
                reason: reason.to_owned(),
                remote: false,
            }),
        );
        let event = Event::Closed(TransportError::Closed {
            code,
            reason: reason.to_owned(),
            remote: true,
        });
        let latency = self.link.borrow().config.latency;
        let link = self.link.clone();
        let peer = 1 - self.side;
        self.runtime
            .schedule(self.runtime.elapsed() + latency, move || {
                deliver(&link, peer, event)
            });
    }

    fn poll_closed(&mut self, waiter: &Waiter) -> Poll<TransportError> {
        let link = self.link.borrow();
        let end = &link.ends[self.side];
        match &end.closed {
            Some(error) => Poll::Ready(error.clone()),
            None => {
                end.closed_waiters.register(waiter);
                Poll::Pending
            }
        }
    }

    fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    fn stats(&self) -> TransportStats {
        let link = self.link.borrow();
        TransportStats {
            rtt: Some(link.config.latency * 2),
            ..link.ends[self.side].stats
        }
    }
}

impl SendStream for TestSendStream {
    fn poll_write(&mut self, _waiter: &Waiter, data: &mut Bytes) -> Poll<Result<(), StreamError>> {
        if let Err(error) = self.writable() {
            return Poll::Ready(Err(error));
        }
        if data.is_empty() {
            return Poll::Ready(Ok(()));
        }
        let chunk = data.split_to(data.len());
        let len = chunk.len();
        transmit(
            &self.link,
            &self.runtime,
            self.side,
            Some(self.id),
            len,
            Event::Data(self.id, chunk),
        );
        Poll::Ready(Ok(()))
    }

    fn finish(&mut self) -> Result<(), StreamError> {
        self.writable()?;
        self.mark_done();
        transmit(
            &self.link,
            &self.runtime,
            self.side,
            Some(self.id),
            0,
            Event::Fin(self.id),
        );
        Ok(())
    }

    fn reset(&mut self, code: u64) {
        if self.writable().is_err() {
            return;
        }
        self.mark_done();
        transmit(
            &self.link,
            &self.runtime,
            self.side,
            Some(self.id),
            0,
            Event::Reset(self.id, code),
        );
    }

    fn set_priority(&mut self, priority: StreamPriority) {
        // The in-memory link delivers in send order; the priority is recorded for tests
        // (`TestTransport::peer_priorities`), not acted on.
        if let Some(state) = self.link.borrow_mut().ends[self.side]
            .send
            .get_mut(&self.id)
        {
            state.priority = priority;
        }
    }

    fn poll_stopped(&mut self, waiter: &Waiter) -> Poll<Result<u64, StreamError>> {
        let link = self.link.borrow();
        let end = &link.ends[self.side];
        let Some(state) = end.send.get(&self.id) else {
            return Poll::Pending;
        };
        if let Some(code) = state.stopped {
            return Poll::Ready(Ok(code));
        }
        if let Some(error) = &end.closed {
            return Poll::Ready(Err(error.clone().into()));
        }
        state.waiters.register(waiter);
        Poll::Pending
    }
}

impl TestSendStream {
    fn writable(&self) -> Result<(), StreamError> {
        let link = self.link.borrow();
        let end = &link.ends[self.side];
        if let Some(error) = &end.closed {
            return Err(error.clone().into());
        }
        match end.send.get(&self.id) {
            Some(SendState {
                stopped: Some(code),
                ..
            }) => Err(StreamError::Stopped(*code)),
            Some(SendState { done: true, .. }) => Err(StreamError::Stopped(0)),
            _ => Ok(()),
        }
    }

    fn mark_done(&self) {
        if let Some(state) = self.link.borrow_mut().ends[self.side]
            .send
            .get_mut(&self.id)
        {
            state.done = true;
        }
    }
}

impl RecvStream for TestRecvStream {
    fn poll_read(&mut self, waiter: &Waiter) -> Poll<Result<Option<Bytes>, StreamError>> {
        let mut link = self.link.borrow_mut();
        let end = &mut link.ends[self.side];
        let closed = end.closed.clone();
        let state = end.recv.entry(self.id).or_default();
        if let Some(chunk) = state.chunks.pop_front() {
            return Poll::Ready(Ok(Some(chunk)));
        }
        if let Some(code) = state.reset {
            return Poll::Ready(Err(StreamError::Reset(code)));
        }
        if state.fin {
            return Poll::Ready(Ok(None));
        }
        if let Some(error) = closed {
            return Poll::Ready(Err(error.into()));
        }
        state.waiters.register(waiter);
        Poll::Pending
    }

    fn at_end(&self) -> bool {
        let link = self.link.borrow();
        link.ends[self.side]
            .recv
            .get(&self.id)
            .is_some_and(|state| state.chunks.is_empty() && state.fin && state.reset.is_none())
    }

    fn stop(&mut self, code: u64) {
        let mut link = self.link.borrow_mut();
        let state = link.ends[self.side].recv.entry(self.id).or_default();
        if state.stopped || state.fin || state.reset.is_some() {
            return;
        }
        state.stopped = true;
        state.chunks.clear();
        drop(link);
        transmit(
            &self.link,
            &self.runtime,
            self.side,
            None,
            0,
            Event::Stop(self.id, code),
        );
    }
}

impl std::fmt::Debug for TestTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestTransport")
            .field("side", &self.side)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for TestSendStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestSendStream")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for TestRecvStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestRecvStream")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Sends `event` from `side` across the link: after the bandwidth delay of `len` bytes, the
/// latency and a reordering jitter, never before the stream's previous write.
fn transmit(
    link_cell: &Rc<RefCell<Link>>,
    runtime: &TestRuntime,
    side: usize,
    stream: Option<u64>,
    len: usize,
    mut event: Event,
) {
    let now = runtime.elapsed();
    let mut link = link_cell.borrow_mut();
    let Link {
        config,
        rng,
        ends,
        silent_from,
    } = &mut *link;
    let silent_from = *silent_from;
    let end = &mut ends[side];
    let transmit_time = config.bandwidth.map_or(Duration::ZERO, |bps| {
        Duration::from_secs_f64(len as f64 * 8.0 / bps.max(1) as f64)
    });
    let start = now.max(end.busy_until);
    end.busy_until = start + transmit_time;
    let jitter = if config.reorder.is_zero() {
        Duration::ZERO
    } else {
        config.reorder.mul_f64(rng.f64())
    };
    let mut arrival = end.busy_until + config.latency + jitter;
    end.stats.bytes_sent += len as u64;
    let later_uni_write =
        stream.is_some_and(|id| id & UNI != 0 && end.last_arrival.contains_key(&id));
    if let (Some(id), Event::Data(..), true) = (stream, &event, later_uni_write)
        && rng.f64() < config.reset_probability
    {
        // Fault: the stream is reset in flight. The sender learns of it as a stop.
        event = Event::Reset(id, 0);
        if let Some(state) = end.send.get_mut(&id) {
            state.stopped = Some(0);
            state.done = true;
            let waiters = state.waiters.clone();
            drop(link);
            waiters.wake_all();
            link = link_cell.borrow_mut();
        }
    }
    if let Some(id) = stream {
        let end = &mut link.ends[side];
        let previous = end.last_arrival.get(&id).copied().unwrap_or_default();
        arrival = arrival.max(previous);
        end.last_arrival.insert(id, arrival);
    }
    drop(link);
    if silent_from.is_some_and(|silent| arrival >= silent) {
        return; // lost in the silence before the link drops
    }
    let link = link_cell.clone();
    let peer = 1 - side;
    runtime.schedule(arrival, move || deliver(&link, peer, event));
}

/// Applies an event at end `side`, then wakes whoever waits on what changed.
fn deliver(link_cell: &Rc<RefCell<Link>>, side: usize, event: Event) {
    let mut link = link_cell.borrow_mut();
    let end = &mut link.ends[side];
    let mut wake: Vec<Rc<WaiterList>> = Vec::new();
    if end.closed.is_some() {
        return; // nothing arrives at a closed end
    }
    match event {
        Event::Data(id, _) | Event::Fin(id) | Event::Reset(id, _) => {
            let incoming = !end.recv.contains_key(&id) && (id & 1) as usize != side;
            if incoming {
                if id & UNI == 0 {
                    end.incoming_bidi.push_back(id);
                    wake.push(end.accept_bidi.clone());
                } else {
                    end.incoming_uni.push_back(id);
                    wake.push(end.accept_uni.clone());
                }
            }
            let state = end.recv.entry(id).or_default();
            if !state.stopped {
                match event {
                    Event::Data(_, bytes) => {
                        end.stats.bytes_received += bytes.len() as u64;
                        state.chunks.push_back(bytes);
                    }
                    Event::Fin(_) => state.fin = true,
                    Event::Reset(_, code) => {
                        state.reset = Some(code);
                        state.chunks.clear();
                    }
                    _ => {}
                }
            }
            wake.push(state.waiters.clone());
        }
        Event::Stop(id, code) => {
            if let Some(state) = end.send.get_mut(&id) {
                state.stopped.get_or_insert(code);
                wake.push(state.waiters.clone());
            }
        }
        Event::Datagram(payload) => {
            end.stats.bytes_received += payload.len() as u64;
            end.datagrams.push_back(payload);
            wake.push(end.datagram_waiters.clone());
        }
        Event::Closed(error) => {
            end.closed = Some(error);
            wake.extend(end.recv.values().map(|s| s.waiters.clone()));
            wake.extend(end.send.values().map(|s| s.waiters.clone()));
            wake.push(end.accept_uni.clone());
            wake.push(end.accept_bidi.clone());
            wake.push(end.datagram_waiters.clone());
            wake.push(end.closed_waiters.clone());
        }
    }
    drop(link);
    for waiters in wake {
        waiters.wake_all();
    }
}
