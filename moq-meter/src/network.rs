//! The network between the meter's hosts: datagrams in memory, delivered in the order
//! they were sent, none lost, none delayed.
//!
//! A host's endpoint hands out GSO batches ([`Transmit`]); the network splits each into
//! its datagrams, as the kernel would, and queues them for the host at the destination
//! address. Nothing here runs inside the relay's measured turn.

use std::collections::HashMap;
use std::net::SocketAddr;

use moqx_runtime::endpoint::Transmit;

/// One datagram on its way.
#[derive(Debug)]
pub struct Datagram {
    /// The sender's address.
    pub from: SocketAddr,
    /// The datagram's bytes.
    pub bytes: Vec<u8>,
}

/// The datagrams waiting for each host, by the host's address.
#[derive(Debug, Default)]
pub struct Network {
    queues: HashMap<SocketAddr, Vec<Datagram>>,
    in_flight: usize,
    /// Datagrams for an address no host has (none expected: counted to say so).
    undeliverable: u64,
}

impl Network {
    /// Makes `address` a host's: datagrams to it wait in its queue.
    pub fn attach(&mut self, address: SocketAddr) {
        self.queues.entry(address).or_default();
    }

    /// Queues every datagram of `transmits`, sent from `from`.
    pub fn send(&mut self, from: SocketAddr, transmits: &[Transmit]) {
        for transmit in transmits {
            let Some(queue) = self.queues.get_mut(&transmit.destination) else {
                self.undeliverable += 1;
                continue;
            };
            let segment = transmit.segment_size.max(1);
            for bytes in transmit.contents.chunks(segment) {
                queue.push(Datagram {
                    from,
                    bytes: bytes.to_vec(),
                });
                self.in_flight += 1;
            }
        }
    }

    /// Moves the datagrams waiting for `address` into `inbox` (emptied first).
    pub fn take(&mut self, address: SocketAddr, inbox: &mut Vec<Datagram>) {
        inbox.clear();
        if let Some(queue) = self.queues.get_mut(&address) {
            std::mem::swap(queue, inbox);
            self.in_flight -= inbox.len();
        }
    }

    /// How many datagrams wait for a host.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// How many datagrams were sent to an address no host has.
    pub fn undeliverable(&self) -> u64 {
        self.undeliverable
    }
}
