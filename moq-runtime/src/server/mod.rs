//! The server side every driver shares: from an established QUIC connection to a
//! [`Request`] the application accepts or refuses.
//!
//! A driver hands each connection its endpoint established to [`Acceptor::admit`]: a raw
//! QUIC client is a [`Request`] at once, a WebTransport client a [`Handshaking`] future
//! the driver spawns where the connection lives, which yields the request once its
//! CONNECT came. Everything in between is here, once: the dispatch by ALPN
//! (raw QUIC is a request at once; `h3` runs the WebTransport handshake), the cap on
//! WebTransport clients that have not sent their CONNECT, the deadline for it, the choice
//! of version, and the refusals, each closed with its named HTTP/3 or moq-lite code.
//!
//! ```text
//! endpoint.accept() ─▶ Acceptor::admit ─▶ (Handshaking …) ─▶ Request ─▶ accept / reject
//! ```

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use moqx_net::coding::Version;
use moqx_net::session::SessionConfig;

mod accept;
mod request;

pub use accept::{Acceptor, Admitted, Handshaking, Incoming};
pub use request::Request;

use crate::admission::{Admission, Gate};
use crate::certificates::Certificates;
use crate::endpoint::Endpoint;
use crate::quic_trace::QuicTrace;
use crate::quiche_config::{ConfigError, QuicLimits, server_config};
use crate::reset::StatelessResetKey;
use crate::tls::Certificate;
use crate::udp::UdpConfig;

/// How long a refused WebTransport client has to read its refusal before its connection
/// is closed anyway (it normally closes it itself on reading the status).
pub const REFUSAL_LINGER: Duration = Duration::from_secs(2);

/// How a server listens, on any driver.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The address to bind.
    pub bind: SocketAddr,
    /// The certificate it presents: replace it ([`Certificates::replace`]) while the
    /// server runs and new handshakes get the new one.
    pub certificates: Certificates,
    /// What every session serves and fills (a relay: both halves on one origin), unless
    /// the application accepts a request with a configuration of its own. Its `version`
    /// is replaced by each connection's negotiated one.
    pub session: SessionConfig,
    /// The moq-lite versions it accepts, in its order of preference: a raw QUIC client
    /// gets the first of them it offered (ALPN), a WebTransport client the first of its
    /// own offer (`wt-available-protocols`) that is here.
    pub versions: Vec<Version>,
    /// Who may start a handshake: caps on connections, on handshakes in progress and per
    /// address, and when to ask for address validation (QUIC Retry).
    pub admission: Admission,
    /// Each connection's QUIC limits: idle timeout, streams, flow-control windows.
    pub limits: QuicLimits,
    /// How long a WebTransport client has to send its CONNECT after the QUIC handshake.
    pub handshake_timeout: Duration,
    /// The most WebTransport clients waiting to send their CONNECT at once; one more is
    /// closed (H3_REQUEST_REJECTED), so that connections that never say what they want
    /// cannot fill the connection table.
    pub max_pending_handshakes: usize,
    /// The UDP socket's setup (GSO, GRO, buffers).
    pub udp: UdpConfig,
    /// What its stateless reset tokens are derived from ([`crate::reset`]); `None`: a key
    /// derived from the certificate's private key, so that the server restarted with the
    /// same certificate resets the connections it lost at once, at their peers' next
    /// packet.
    pub stateless_reset_key: Option<StatelessResetKey>,
    /// What is traced of each connection: a qlog per connection, the TLS keys (both off
    /// by default).
    pub trace: QuicTrace,
}

impl ServerConfig {
    /// A server on `bind` presenting `certificate`, with the defaults: the released
    /// versions (moq-lite-05, -04, -03, in that order), 10,000 connections,
    /// 1,024 handshakes in progress with Retry past 256, no cap per address, the default
    /// [`QuicLimits`], 10 s and 1,024 pending for the WebTransport handshake, GSO and GRO
    /// on.
    pub fn new(bind: SocketAddr, certificate: Certificate, session: SessionConfig) -> Self {
        Self {
            bind,
            certificates: Certificates::new(certificate),
            session,
            versions: Version::DEFAULT_OFFER.to_vec(),
            admission: Admission::default(),
            limits: QuicLimits::default(),
            handshake_timeout: Duration::from_secs(10),
            max_pending_handshakes: 1024,
            udp: UdpConfig::default(),
            stateless_reset_key: None,
            trace: QuicTrace::default(),
        }
    }

    /// The admission gate of this server: make one and give it to every worker's
    /// endpoint, so that the caps are server-wide and a Retry token from one worker is
    /// good on another.
    pub fn gate(&self, now: Instant) -> Gate {
        Gate::new(self.admission.clone(), now)
    }

    /// The endpoint of worker `worker` (its index in every connection ID it issues),
    /// serving this configuration on a socket bound to `local`, admitting through `gate`.
    pub fn endpoint(
        &self,
        local: SocketAddr,
        worker: u8,
        gate: &Gate,
        now: Instant,
    ) -> Result<Endpoint, ConfigError> {
        let certificate = self.certificates.current();
        let keylog = self.trace.keylog.is_some();
        let build = {
            let (limits, versions) = (self.limits.clone(), self.versions.clone());
            move |certificate: &Certificate| {
                let mut config = server_config(certificate, &limits, &versions)?;
                if keylog {
                    config.log_keys();
                }
                Ok(config)
            }
        };
        let quiche = build(&certificate)?;
        let mut endpoint =
            Endpoint::new(quiche, local, worker, self.admission.max_connections, now);
        endpoint.follow_certificates(self.certificates.clone(), build);
        endpoint.set_trace(self.trace.clone());
        endpoint.set_gate(gate.clone());
        endpoint.set_stateless_reset_key(
            self.stateless_reset_key
                .clone()
                .unwrap_or_else(|| StatelessResetKey::for_certificate(&certificate)),
        );
        Ok(endpoint)
    }

    /// What turns this server's established connections into requests. Make one per
    /// server and share it between its workers: the cap on pending handshakes is
    /// server-wide.
    pub fn acceptor(&self) -> Acceptor {
        Acceptor::new(
            self.session.clone(),
            self.versions.clone(),
            self.handshake_timeout,
            self.max_pending_handshakes,
        )
    }
}
