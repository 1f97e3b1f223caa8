//! The relay under measurement: a server endpoint serving one origin to every session, as
//! `moqx-relay` configures it by default, and the one function whose instructions count.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Instant;

use moqx_net::model::{MemoryBudget, Origin};
use moqx_net::session::{Session, SessionConfig};
use moqx_runtime::server::{Acceptor, Admitted, Request, ServerConfig};
use moqx_runtime::tls::Certificate;

use crate::host::Host;
use crate::local::LocalRuntime;
use crate::network::Datagram;

/// The relay's memory budget: one the load never reaches (`moqx-relay` takes half the
/// machine's memory by default), so that the budget's accounting is counted, never its refusals.
const MEMORY_BUDGET: u64 = 1 << 30;

/// The relay: one host, one origin that every session publishes into and serves from.
#[derive(Debug)]
pub struct Relay {
    /// Its endpoint and runtime.
    pub host: Host,
    acceptor: Acceptor,
    /// WebTransport clients whose CONNECT came, waiting to be accepted.
    requests: Rc<RefCell<Vec<Request<LocalRuntime>>>>,
    /// The sessions it accepted (a dropped handle would close its session).
    sessions: Vec<Session>,
}

/// Why the relay could not start.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// The self-signed certificate could not be made.
    #[error("the relay's certificate: {0}")]
    Certificate(#[from] moqx_runtime::tls::TlsError),
    /// The QUIC configuration was refused.
    #[error("the relay's QUIC configuration: {0}")]
    Config(#[from] moqx_runtime::quiche_config::ConfigError),
}

impl Relay {
    /// A relay at `address`, its clock starting at `now`.
    pub fn new(address: SocketAddr, now: Instant) -> Result<Self, RelayError> {
        let certificate = Certificate::self_signed(&["localhost".to_owned()])?;
        let origin = Origin::new();
        let mut session = SessionConfig::default();
        session.publish = Some(origin.clone());
        session.subscribe = Some(origin);
        session.memory_budget = Some(MemoryBudget::new(MEMORY_BUDGET));
        // As moqx-relay: clients' routes are whatever they claim.
        session.trust_peer_routes = false;
        let config = ServerConfig::new(address, certificate, session);
        let endpoint = config.endpoint(address, 0, &config.gate(now), now)?;
        Ok(Self {
            host: Host::new(address, endpoint, LocalRuntime::new(now)),
            acceptor: config.acceptor(),
            requests: Rc::default(),
            sessions: Vec::new(),
        })
    }

    /// How many sessions it accepted.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// One turn of the relay's loop: `inbox` in, timers, the woken session machines, the
    /// connections established meanwhile to sessions, everything to send out (left in
    /// [`Host::transmits`]). Returns how many tasks ran.
    ///
    /// This is the function the meter counts (`callgrind --toggle-collect`): everything the
    /// relay does for a delivery happens inside it, and nothing a client does. Never
    /// inlined, so that it stays a function callgrind can name.
    #[inline(never)]
    pub fn relay_turn_measured(&mut self, inbox: &mut [Datagram], now: Instant) -> usize {
        self.host.receive(inbox, now);
        self.host.runtime.expire(now);
        let ran = self.host.runtime.run();
        self.accept();
        self.host.send(now);
        ran
    }

    /// Established connections to sessions, every one accepted.
    fn accept(&mut self) {
        while let Some(connection) = self.host.endpoint.accept() {
            match self.acceptor.admit(&self.host.runtime, connection) {
                Admitted::Request(request) => self.sessions.push(request.accept()),
                Admitted::Handshake(handshaking) => {
                    let requests = self.requests.clone();
                    self.host.runtime.spawn_task(async move {
                        if let Some(request) = handshaking.await {
                            requests.borrow_mut().push(request);
                        }
                    });
                }
                Admitted::Refused => tracing::warn!("the relay refused a connection"),
            }
        }
        let waiting = std::mem::take(&mut *self.requests.borrow_mut());
        self.sessions
            .extend(waiting.into_iter().map(|request| request.accept()));
    }
}
