//! One simulated host: an endpoint, the runtime its sessions run on, and one turn of the
//! loop a driver runs around them.

use std::net::SocketAddr;
use std::time::Instant;

use moqx_runtime::endpoint::{Endpoint, Transmit};

use crate::local::LocalRuntime;
use crate::network::Datagram;

/// An endpoint at an address, and the runtime its sessions run on.
#[derive(Debug)]
pub struct Host {
    /// Where its datagrams come from.
    pub address: SocketAddr,
    /// Its connections.
    pub endpoint: Endpoint,
    /// Its tasks and deadlines.
    pub runtime: LocalRuntime,
    /// What the last turn sent.
    pub transmits: Vec<Transmit>,
}

impl Host {
    /// A host at `address` running `endpoint`'s connections on `runtime`.
    pub fn new(address: SocketAddr, endpoint: Endpoint, runtime: LocalRuntime) -> Self {
        Self {
            address,
            endpoint,
            runtime,
            transmits: Vec::new(),
        }
    }

    /// The received half of a turn: `inbox` into the endpoint, then its connections' due
    /// timers. (The host's runtime runs after: several hosts may share one.)
    pub fn receive(&mut self, inbox: &mut [Datagram], now: Instant) {
        for datagram in inbox.iter_mut() {
            // A refused packet is quiche's business (and logged by the endpoint).
            let _ = self
                .endpoint
                .handle_datagram(&mut datagram.bytes, datagram.from, None, now);
        }
        self.endpoint.handle_timeouts(now);
    }

    /// The sending half of a turn: the buffers of the last turn's transmits back to the
    /// endpoint, then everything its connections have to send now into
    /// [`transmits`](Self::transmits).
    pub fn send(&mut self, now: Instant) {
        self.endpoint.reclaim(self.transmits.drain(..));
        self.endpoint.poll_transmits(now, &mut self.transmits);
    }
}
