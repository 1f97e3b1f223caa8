//! One UDP socket on a worker's ring and the endpoint that owns its connections: the
//! server's port, or one client connection's.

use std::os::fd::AsRawFd;
use std::time::Instant;

use io_uring::{opcode, types};
use moqx_runtime::endpoint::{Endpoint, Transmit};
use moqx_runtime::server::Acceptor;
use moqx_runtime::udp::UdpSocket;

use crate::buffers::BufferRing;
use crate::counters::WorkerCounters;
use crate::recv::Receiver;
use crate::ring::Queue;
use crate::send::{Prepared, Sends};
use crate::user_data::UserData;

/// A socket, its endpoint, its receive and its sends in flight.
pub(crate) struct Port {
    pub(crate) socket: UdpSocket,
    pub(crate) endpoint: Endpoint,
    receiver: Receiver,
    /// The multishot receive is in flight.
    armed: bool,
    /// Closing: its receive was cancelled; the port goes once the receive has ended and
    /// its sends completed.
    closing: bool,
    sends: Sends,
    pub(crate) role: Role,
    /// The endpoint's counters, where the driver's I/O is counted too.
    io_counters: std::sync::Arc<moqx_runtime::endpoint::EndpointCounters>,
    /// Reused each turn.
    transmits: Vec<Transmit>,
    prepared: Vec<Prepared>,
    /// Payload bytes the port may have in flight before it stops taking packets.
    max_send_bytes: usize,
}

/// What a port is for.
pub(crate) enum Role {
    /// The server's port: established connections become requests.
    Server { acceptor: Box<Acceptor> },
    /// One client connection's port (its handshake is waited for by
    /// `moqx_runtime::client::Connecting`). It closes once its connection is gone.
    Client,
}

impl Port {
    /// The endpoint's counters.
    pub(crate) fn io_counters(&self) -> &moqx_runtime::endpoint::EndpointCounters {
        &self.io_counters
    }

    /// A port sending with GSO or not, with at most `max_send_bytes` in flight (see
    /// [`flush`](Self::flush)).
    pub(crate) fn new(
        socket: UdpSocket,
        endpoint: Endpoint,
        role: Role,
        gso: bool,
        max_send_bytes: usize,
    ) -> Self {
        Self {
            max_send_bytes,
            io_counters: endpoint.counters(),
            socket,
            endpoint,
            receiver: Receiver::new(),
            armed: false,
            closing: false,
            sends: Sends::new(gso),
            role,
            transmits: Vec::new(),
            prepared: Vec::new(),
        }
    }

    /// Arms the multishot receive if it is not in flight.
    pub(crate) fn arm(
        &mut self,
        queue: &mut Queue<'_>,
        index: u32,
        group: u16,
    ) -> std::io::Result<()> {
        if self.armed || self.closing {
            return Ok(());
        }
        let entry = self.receiver.arm(
            self.socket.as_raw_fd(),
            group,
            UserData::Recv { port: index }.into(),
        );
        queue.push(&entry)?;
        self.armed = true;
        Ok(())
    }

    /// A completion of the port's receive: hands its datagrams to the endpoint, gives its
    /// buffer back when the kernel is done with it.
    pub(crate) fn received(
        &mut self,
        result: i32,
        flags: u32,
        buffers: &mut BufferRing,
        counters: &WorkerCounters,
        now: Instant,
    ) {
        if !io_uring::cqueue::more(flags) {
            self.armed = false;
            tracing::trace!(result, "the receive ended; arming it again");
        }
        if result < 0 {
            if result == -libc::ENOBUFS {
                counters.add(&counters.buffer_exhaustions, 1);
            } else if result != -libc::ECANCELED {
                tracing::debug!(
                    error = %std::io::Error::from_raw_os_error(-result),
                    "a receive failed; re-arming"
                );
            }
            return;
        }
        let Some(buffer) = io_uring::cqueue::buffer_select(flags) else {
            return;
        };
        let Some(received) = buffers.received(buffer, result as u32, flags) else {
            return;
        };
        counters.add(&counters.receives, 1);
        self.io_counters
            .receive_calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Some(datagrams) = self.receiver.parse(buffers.bytes(&received)) {
            if datagrams.truncated {
                counters.add(&counters.truncated, 1);
            }
            let stride = datagrams
                .control
                .segment_size
                .unwrap_or(datagrams.payload.len());
            let mut count = 0;
            for datagram in datagrams.payload.chunks_mut(stride.max(1)) {
                count += 1;
                let _ = self.endpoint.handle_datagram(
                    datagram,
                    datagrams.source,
                    datagrams.control.destination,
                    now,
                );
            }
            counters.add(&counters.datagrams_received, count);
            if count > 1 {
                counters.add(&counters.coalesced_receives, 1);
            }
        }
        if !received.more {
            buffers.give_back(buffer);
        }
    }

    /// A completion of one of the port's sends: a failure is counted and logged (rate
    /// limited) by the endpoint.
    pub(crate) fn sent(&mut self, slot: u32, result: i32, now: Instant) {
        let completion = self.sends.complete(slot, result);
        if let Some(failure) = completion.failure {
            self.endpoint.record_send_failure(
                &failure.error,
                failure.destination,
                failure.datagrams,
                now,
            );
        }
        if let Some(transmit) = completion.finished {
            self.endpoint.reclaim([transmit]);
        }
    }

    /// Runs the endpoint's due timers.
    pub(crate) fn handle_timeouts(&mut self, now: Instant) {
        if self.endpoint.next_timeout().is_some_and(|at| at <= now) {
            self.endpoint.handle_timeouts(now);
        }
    }

    /// Queues a `sendmsg` for everything the endpoint's connections have to send.
    pub(crate) fn flush(
        &mut self,
        queue: &mut Queue<'_>,
        index: u32,
        now: Instant,
    ) -> std::io::Result<()> {
        let counters = queue.counters;
        if self.sends.bytes_in_flight() >= self.max_send_bytes {
            // Backpressure (review finding F8): the kernel has not taken what was queued
            // (egress slower than the offered load). The connections' packets wait in
            // quiche, under its congestion control, not in a queue of ours; their flush
            // stays pending, and the completions that free room wake the next turn.
            counters.add(&counters.send_backpressure, 1);
            return Ok(());
        }
        self.endpoint.poll_transmits(now, &mut self.transmits);
        let fd = types::Fd(self.socket.as_raw_fd());
        for transmit in self.transmits.drain(..) {
            let datagrams = transmit
                .contents
                .len()
                .div_ceil(transmit.segment_size.max(1))
                .max(1);
            counters.add(&counters.datagrams_sent, datagrams as u64);
            self.io_counters
                .datagrams_sent
                .fetch_add(datagrams as u64, std::sync::atomic::Ordering::Relaxed);
            let before = self.prepared.len();
            self.sends.prepare(transmit, &mut self.prepared);
            if self.prepared.len() - before == 1 && datagrams > 1 {
                counters.add(&counters.batched_sendmsgs, 1);
            }
        }
        if !self.prepared.is_empty() {
            tracing::trace!(port = index, sendmsgs = self.prepared.len(), "sending");
        }
        for prepared in self.prepared.drain(..) {
            let entry = opcode::SendMsg::new(fd, prepared.header).build().user_data(
                UserData::Send {
                    port: index,
                    slot: prepared.slot,
                }
                .into(),
            );
            queue.push(&entry)?;
            counters.add(&counters.sendmsgs, 1);
            self.io_counters
                .send_calls
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }

    /// Starts closing: cancels the receive (the port goes once it has ended).
    pub(crate) fn close(&mut self, queue: &mut Queue<'_>, index: u32) -> std::io::Result<()> {
        if self.closing {
            return Ok(());
        }
        self.closing = true;
        tracing::debug!(port = index, local = ?self.socket.local_addr().ok(), "closing a port");
        if self.armed {
            let cancel = opcode::AsyncCancel::new(UserData::Recv { port: index }.into())
                .build()
                .user_data(UserData::Cancel.into());
            queue.push(&cancel)?;
        }
        Ok(())
    }

    /// Whether the port may go: closing, its receive ended, its sends completed.
    pub(crate) fn is_closed(&self) -> bool {
        self.closing && !self.armed && self.sends.in_flight() == 0
    }

    /// A client port whose connection has come and gone (or never came: a connect that
    /// failed at once).
    pub(crate) fn is_spent(&self) -> bool {
        matches!(self.role, Role::Client) && self.endpoint.is_empty()
    }
}
