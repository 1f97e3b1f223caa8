//! A server: one UDP port, sessions as clients connect.

use std::net::SocketAddr;

use moq_net::session::{self, Session, SessionConfig};
use moq_runtime::endpoint::Endpoint;
use moq_runtime::quic::QuicConnection;
use moq_runtime::tls::Certificate;
use moq_runtime::udp::{UdpConfig, UdpSocket};
use tokio::sync::mpsc;

use crate::driver::{self, EndpointHandle};
use crate::quic_config::{Limits, quiche_config};
use crate::{Error, TokioRuntime};

/// How a server listens.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The address to bind.
    pub bind: SocketAddr,
    /// The certificate it presents.
    pub certificate: Certificate,
    /// What every session serves and fills (a relay: both halves on one origin).
    pub session: SessionConfig,
    /// The most connections at once.
    pub max_connections: usize,
    /// Closes a connection silent for this many milliseconds.
    pub idle_timeout_ms: u64,
    /// Streams each direction a peer may open at once.
    pub max_streams: u64,
    /// The UDP socket's setup (GSO, GRO, buffers).
    pub udp: UdpConfig,
}

impl ServerConfig {
    /// A server on `bind` presenting `certificate`, with the defaults: 10,000 connections,
    /// 30 s idle timeout, 1000 streams each way, GSO and GRO on.
    pub fn new(bind: SocketAddr, certificate: Certificate, session: SessionConfig) -> Self {
        Self {
            bind,
            certificate,
            session,
            max_connections: 10_000,
            idle_timeout_ms: 30_000,
            max_streams: 1_000,
            udp: UdpConfig::default(),
        }
    }
}

/// A listening server.
#[derive(Debug)]
pub struct Server {
    endpoint: EndpointHandle,
    accepted: mpsc::UnboundedReceiver<QuicConnection>,
    session: SessionConfig,
    runtime: TokioRuntime,
}

impl Server {
    /// Binds the port and starts serving on the current tokio runtime.
    pub async fn bind(config: ServerConfig) -> Result<Self, Error> {
        let limits = Limits {
            idle_timeout_ms: config.idle_timeout_ms,
            max_streams: config.max_streams,
            ..Limits::default()
        };
        let quiche = quiche_config(Some(&config.certificate), false, &limits)?;
        let socket = UdpSocket::bind(config.bind, &config.udp)
            .map_err(Error::io(format!("binding {}", config.bind)))?;
        let local = socket
            .local_addr()
            .map_err(Error::io("reading the bound address"))?;
        let endpoint = Endpoint::new(
            quiche,
            local,
            0,
            config.max_connections,
            std::time::Instant::now(),
        );
        let (sender, accepted) = mpsc::unbounded_channel();
        let endpoint = driver::start(socket, endpoint, Some(sender))?;
        Ok(Self {
            endpoint,
            accepted,
            session: config.session,
            runtime: TokioRuntime::current(),
        })
    }

    /// The bound address (with the port the system chose, if it was 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.endpoint.local_addr()
    }

    /// The next session, once a client's handshake completed; `None` once the endpoint
    /// stopped.
    pub async fn accept(&mut self) -> Option<Session> {
        let connection = self.accepted.recv().await?;
        Some(session::accept(
            self.runtime.clone(),
            connection.session(),
            self.session.clone(),
        ))
    }
}
