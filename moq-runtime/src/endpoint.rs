//! A QUIC endpoint without sockets: the table of connections on one UDP port, routing
//! datagrams in by connection ID and batching datagrams out by destination.
//!
//! A driver reads datagrams from its socket into [`Endpoint::handle_datagram`], sends what
//! [`Endpoint::poll_transmits`] returns, parks until [`Endpoint::next_timeout`] (or a
//! socket or flush wake) and calls [`Endpoint::handle_timeouts`]. Everything in between
//! (accepting Initials with connection IDs of our own, the timer wheel, which connections
//! have something to send) is here, once, for every driver.
//!
//! **Batching across connections.** A chat relay has one or two packets per connection per
//! turn, so per-connection GSO batches would be one packet long. `poll_transmits` drains
//! every connection that has something to send, then groups packets by destination:
//! consecutive packets to one address, of one size (the last may be shorter), leave as one
//! GSO batch (DESIGN.md, "Thread-per-core").

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};
use std::time::Instant;

use kio::Waiter;

use crate::cid::{CID_LEN, CidGenerator};
use crate::quic::QuicConnection;
use crate::timer::TimerWheel;

/// The largest UDP payload a QUIC packet from us may have.
pub const MAX_DATAGRAM: usize = 1350;

/// One batch of datagrams to one destination: `contents` split every `segment_size` bytes
/// (the last datagram may be shorter). Send it with one GSO `sendmsg`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// Where the datagrams go.
    pub destination: SocketAddr,
    /// The datagrams, back to back.
    pub contents: Vec<u8>,
    /// The size of every datagram but the last.
    pub segment_size: usize,
}

/// Why a datagram or a connection attempt was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EndpointError {
    /// quiche refused (a malformed packet, a failed handshake, a bad configuration).
    #[error("QUIC: {0}")]
    Quic(#[from] quiche::Error),
    /// The system's random source failed while making a connection ID.
    #[error(transparent)]
    Cid(#[from] crate::cid::CidError),
    /// The endpoint holds as many connections as it is configured for.
    #[error("connection limit ({0}) reached")]
    Full(usize),
}

/// The connections on one UDP port.
pub struct Endpoint {
    config: quiche::Config,
    local: SocketAddr,
    cids: CidGenerator,
    max_connections: usize,
    connections: Vec<Option<Entry>>,
    free: Vec<usize>,
    by_cid: HashMap<Vec<u8>, usize>,
    timers: TimerWheel<usize>,
    /// Connections that may have packets to send.
    dirty: Arc<Dirty>,
    /// Server connections whose handshake completed, for the application to take.
    accepted: VecDeque<QuicConnection>,
    len: usize,
}

struct Entry {
    connection: QuicConnection,
    /// Registered with the connection's flush list: marks this entry dirty.
    flush: Waiter,
    cids: Vec<Vec<u8>>,
    reported: bool,
}

#[derive(Default)]
struct Dirty {
    indices: Mutex<Vec<usize>>,
    /// The driver's waker: woken when a connection has something to send.
    driver: Mutex<Option<Waker>>,
}

struct DirtyWaker {
    index: usize,
    dirty: Arc<Dirty>,
}

impl Endpoint {
    /// An endpoint on `local` whose connections use `config`, whose server connection IDs
    /// name `worker`, and which holds at most `max_connections`.
    pub fn new(
        config: quiche::Config,
        local: SocketAddr,
        worker: u8,
        max_connections: usize,
        now: Instant,
    ) -> Self {
        Self {
            config,
            local,
            cids: CidGenerator::new(worker),
            max_connections,
            connections: Vec::new(),
            free: Vec::new(),
            by_cid: HashMap::new(),
            timers: TimerWheel::new(now),
            dirty: Arc::new(Dirty::default()),
            accepted: VecDeque::new(),
            len: 0,
        }
    }

    /// How many connections are open.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no connection is open.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The waker to wake when a connection has something to send (the driver's task).
    pub fn set_waker(&self, waker: &Waker) {
        *self.dirty.driver.lock().unwrap_or_else(|e| e.into_inner()) = Some(waker.clone());
    }

    /// Opens a client connection to `peer`, reached as `server_name` (for TLS).
    pub fn connect(
        &mut self,
        server_name: &str,
        peer: SocketAddr,
        now: Instant,
    ) -> Result<QuicConnection, EndpointError> {
        self.check_room()?;
        let scid = self.cids.generate()?;
        let conn = quiche::connect(
            Some(server_name),
            &quiche::ConnectionId::from_ref(scid.as_bytes()),
            self.local,
            peer,
            &mut self.config,
        )?;
        let connection = QuicConnection::new(conn);
        let index = self.insert(
            connection.clone(),
            vec![scid.as_bytes().to_vec()],
            true,
            now,
        );
        self.mark(index);
        Ok(connection)
    }

    /// Handles one datagram received from `from`. A datagram for no known connection is
    /// an Initial starting a new one (on a server), or is dropped.
    pub fn handle_datagram(
        &mut self,
        datagram: &mut [u8],
        from: SocketAddr,
        now: Instant,
    ) -> Result<(), EndpointError> {
        let header = quiche::Header::from_slice(datagram, CID_LEN)?;
        let dcid = header.dcid.to_vec();
        let index = match self.by_cid.get(&dcid) {
            Some(&index) => index,
            None if header.ty == quiche::Type::Initial => {
                self.check_room()?;
                let scid = self.cids.generate()?;
                let conn = quiche::accept(
                    &quiche::ConnectionId::from_ref(scid.as_bytes()),
                    None,
                    self.local,
                    from,
                    &mut self.config,
                )?;
                // The client keeps using its own DCID until it hears ours: route both.
                let cids = vec![scid.as_bytes().to_vec(), dcid];
                self.insert(QuicConnection::new(conn), cids, false, now)
            }
            None => return Ok(()), // a stray packet: nothing to answer
        };
        let Some(entry) = self.connections.get(index).and_then(Option::as_ref) else {
            return Ok(());
        };
        let connection = entry.connection.clone();
        let result = connection.recv(datagram, from, self.local);
        self.after_activity(index, now);
        result.map(|_| ()).map_err(EndpointError::Quic)
    }

    /// Every datagram every connection has to send now, batched by destination.
    pub fn poll_transmits(&mut self, now: Instant, transmits: &mut Vec<Transmit>) {
        let dirty =
            std::mem::take(&mut *self.dirty.indices.lock().unwrap_or_else(|e| e.into_inner()));
        let mut packets: Vec<(SocketAddr, Vec<u8>)> = Vec::new();
        let mut buf = [0u8; MAX_DATAGRAM];
        let mut seen = Vec::new();
        for index in dirty {
            if seen.contains(&index) {
                continue;
            }
            seen.push(index);
            let Some(entry) = self.connections.get(index).and_then(Option::as_ref) else {
                continue;
            };
            // Register for the next write *before* draining (kio's order: register, then
            // check): a session writing between the last `send` and a later registration
            // would wake a waiter already spent, and its data would wait for a timer.
            entry.connection.register_flush(&entry.flush);
            let connection = entry.connection.clone();
            while let Ok(Some((len, info))) = connection.send(&mut buf) {
                packets.push((info.to, buf[..len].to_vec()));
            }
            self.after_activity(index, now);
        }
        batch(packets, transmits);
    }

    /// When the earliest connection timer is due.
    pub fn next_timeout(&self) -> Option<Instant> {
        self.timers.next_deadline()
    }

    /// Runs the timers that are due; the connections they fired for may have packets to
    /// send ([`poll_transmits`](Self::poll_transmits)) or may have closed.
    pub fn handle_timeouts(&mut self, now: Instant) {
        let mut expired = Vec::new();
        self.timers.expire(now, &mut expired);
        for index in expired {
            if let Some(entry) = self.connections.get(index).and_then(Option::as_ref) {
                entry.connection.on_timeout();
                self.mark(index);
                self.after_activity(index, now);
            }
        }
    }

    /// The next server connection whose handshake completed.
    pub fn accept(&mut self) -> Option<QuicConnection> {
        self.accepted.pop_front()
    }

    fn check_room(&self) -> Result<(), EndpointError> {
        if self.len >= self.max_connections {
            return Err(EndpointError::Full(self.max_connections));
        }
        Ok(())
    }

    fn insert(
        &mut self,
        connection: QuicConnection,
        cids: Vec<Vec<u8>>,
        client: bool,
        now: Instant,
    ) -> usize {
        let index = self.free.pop().unwrap_or_else(|| {
            self.connections.push(None);
            self.connections.len() - 1
        });
        let waker = Waker::from(Arc::new(DirtyWaker {
            index,
            dirty: self.dirty.clone(),
        }));
        let flush = Waiter::new(&waker);
        connection.register_flush(&flush);
        for cid in &cids {
            self.by_cid.insert(cid.clone(), index);
        }
        self.connections[index] = Some(Entry {
            connection,
            flush,
            cids,
            reported: client,
        });
        self.len += 1;
        self.after_activity(index, now);
        index
    }

    /// After a connection received, sent or timed out: re-arm its timer, re-register its
    /// flush waiter, hand it over once established, and forget it once closed.
    fn after_activity(&mut self, index: usize, now: Instant) {
        let Some(entry) = self.connections.get_mut(index).and_then(Option::as_mut) else {
            return;
        };
        if entry.connection.is_closed() {
            let entry = self.connections[index].take().expect("checked above");
            for cid in &entry.cids {
                self.by_cid.remove(cid);
            }
            self.timers.remove(index);
            self.free.push(index);
            self.len -= 1;
            return;
        }
        entry.connection.register_flush(&entry.flush);
        if !entry.reported && entry.connection.is_established() {
            entry.reported = true;
            self.accepted.push_back(entry.connection.clone());
        }
        match entry.connection.timeout() {
            Some(after) => self.timers.insert(index, now + after),
            None => {
                self.timers.remove(index);
            }
        }
        // Receiving may have produced packets (ACKs, handshake).
        self.mark(index);
    }

    fn mark(&self, index: usize) {
        self.dirty
            .indices
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(index);
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("local", &self.local)
            .field("connections", &self.len)
            .finish_non_exhaustive()
    }
}

impl Wake for DirtyWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.dirty
            .indices
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(self.index);
        let driver = self
            .dirty
            .driver
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(driver) = driver {
            driver.wake();
        }
    }
}

/// Groups packets into GSO batches: per destination, consecutive packets of one size (the
/// last of a batch may be shorter), in the order they were produced.
fn batch(packets: Vec<(SocketAddr, Vec<u8>)>, transmits: &mut Vec<Transmit>) {
    let mut by_destination: Vec<(SocketAddr, Vec<Vec<u8>>)> = Vec::new();
    for (destination, packet) in packets {
        match by_destination.iter_mut().find(|(d, _)| *d == destination) {
            Some((_, list)) => list.push(packet),
            None => by_destination.push((destination, vec![packet])),
        }
    }
    for (destination, list) in by_destination {
        let mut current: Option<Transmit> = None;
        for packet in list {
            if let Some(transmit) = current.as_mut() {
                let open = transmit.contents.len() % transmit.segment_size == 0;
                if open && packet.len() <= transmit.segment_size {
                    transmit.contents.extend_from_slice(&packet);
                    continue;
                }
                transmits.extend(current.take());
            }
            current = Some(Transmit {
                destination,
                segment_size: packet.len(),
                contents: packet,
            });
        }
        transmits.extend(current);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn packets_to_one_destination_form_gso_batches_of_one_size() {
        let packets = vec![
            (addr(1), vec![1; 100]),
            (addr(2), vec![2; 100]),
            (addr(1), vec![1; 100]),
            (addr(1), vec![1; 40]), // shorter: ends the batch
            (addr(1), vec![1; 100]),
        ];
        let mut transmits = Vec::new();
        batch(packets, &mut transmits);
        let shape: Vec<(u16, usize, usize)> = transmits
            .iter()
            .map(|t| (t.destination.port(), t.contents.len(), t.segment_size))
            .collect();
        assert_eq!(shape, [(1, 240, 100), (1, 100, 100), (2, 100, 100)]);
    }
}
