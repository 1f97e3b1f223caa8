//! A server: one UDP port, both moq-lite bindings (chosen by ALPN), requests as clients
//! connect.

use std::net::SocketAddr;
use std::time::Duration;

use moq_net::session::{self, Session, SessionConfig};
use moq_runtime::admission::Admission;
use moq_runtime::binding::BindingSession;
use moq_runtime::endpoint::Endpoint;
use moq_runtime::quic::QuicConnection;
use moq_runtime::tls::Certificate;
use moq_runtime::udp::{UdpConfig, UdpSocket};
use moq_runtime::webtransport::{ServerHandshake, StatusCode, WebTransportRequest};
use tokio::sync::mpsc;

use crate::driver::{self, EndpointHandle};
use crate::poll::drive;
use crate::quic_config::{Limits, RAW_QUIC, WEBTRANSPORT, quiche_config};
use crate::{Error, TokioRuntime};

/// How a server listens.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The address to bind.
    pub bind: SocketAddr,
    /// The certificate it presents.
    pub certificate: Certificate,
    /// What every session serves and fills (a relay: both halves on one origin), unless
    /// the application accepts a request with a configuration of its own.
    pub session: SessionConfig,
    /// Who may start a handshake: caps on connections, on handshakes in progress and per
    /// address, and when to ask for address validation (QUIC Retry).
    pub admission: Admission,
    /// Closes a connection silent for this many milliseconds.
    pub idle_timeout_ms: u64,
    /// Streams each direction a peer may open at once.
    pub max_streams: u64,
    /// Flow-control window per stream, in bytes (the most a peer may send unread).
    pub stream_window: u64,
    /// Flow-control window per connection, in bytes.
    pub connection_window: u64,
    /// How long a WebTransport client has to send its CONNECT after the QUIC handshake.
    pub handshake_timeout: Duration,
    /// The most WebTransport clients waiting to send their CONNECT at once; one more is
    /// closed (H3_REQUEST_REJECTED), so that connections that never say what they want
    /// cannot fill the connection table.
    pub max_pending_handshakes: usize,
    /// The UDP socket's setup (GSO, GRO, buffers).
    pub udp: UdpConfig,
}

impl ServerConfig {
    /// A server on `bind` presenting `certificate`, with the defaults: 10,000 connections,
    /// 1,024 handshakes in progress with Retry past 256, no cap per address, 30 s idle
    /// timeout, 1000 streams each way, 1 MiB per stream and 16 MiB per
    /// connection of flow control, 10 s for the WebTransport handshake, GSO and GRO on.
    pub fn new(bind: SocketAddr, certificate: Certificate, session: SessionConfig) -> Self {
        let limits = Limits::default();
        Self {
            bind,
            certificate,
            session,
            admission: Admission::default(),
            idle_timeout_ms: limits.idle_timeout_ms,
            max_streams: limits.max_streams,
            stream_window: limits.stream_window,
            connection_window: limits.connection_window,
            handshake_timeout: Duration::from_secs(10),
            max_pending_handshakes: 1024,
            udp: UdpConfig::default(),
        }
    }
}

/// HTTP/3 H3_REQUEST_REJECTED: a request refused before any processing (RFC 9114 §8.1).
const H3_REQUEST_REJECTED: u64 = 0x10b;

/// A listening server.
#[derive(Debug)]
pub struct Server {
    endpoint: EndpointHandle,
    /// Clients whose handshakes completed: raw QUIC ones, and WebTransport ones with
    /// their CONNECT.
    requests: mpsc::UnboundedReceiver<(QuicConnection, Option<WebTransportRequest>)>,
    session: SessionConfig,
    runtime: TokioRuntime,
}

/// Which moq-lite binding a client connected with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// Raw QUIC, ALPN `moq-lite-05`; the path arrives in the client's SETUP.
    Quic,
    /// WebTransport over HTTP/3, ALPN `h3`; the path is the CONNECT's.
    WebTransport,
}

/// A client that connected: accept it (with the server's session configuration or one
/// chosen for this client, e.g. after checking its path) or reject it.
#[derive(Debug)]
pub struct Request {
    connection: QuicConnection,
    webtransport: Option<WebTransportRequest>,
    session: SessionConfig,
    runtime: TokioRuntime,
}

impl Server {
    /// Binds the port and starts serving on the current tokio runtime.
    pub async fn bind(config: ServerConfig) -> Result<Self, Error> {
        let limits = Limits {
            idle_timeout_ms: config.idle_timeout_ms,
            max_streams: config.max_streams,
            stream_window: config.stream_window,
            connection_window: config.connection_window,
        };
        let quiche = quiche_config(
            Some(&config.certificate),
            false,
            &limits,
            &[RAW_QUIC, WEBTRANSPORT],
        )?;
        let socket = UdpSocket::bind(config.bind, &config.udp)
            .map_err(Error::io(format!("binding {}", config.bind)))?;
        let local = socket
            .local_addr()
            .map_err(Error::io("reading the bound address"))?;
        let mut endpoint = Endpoint::new(
            quiche,
            local,
            0,
            config.admission.max_connections,
            std::time::Instant::now(),
        );
        endpoint.set_admission(config.admission.clone());
        let (sender, accepted) = mpsc::unbounded_channel();
        let endpoint = driver::start(socket, endpoint, Some(sender), driver::RECV_BATCH)?;
        let (requests_sender, requests) = mpsc::unbounded_channel();
        tokio::spawn(sort_connections(
            accepted,
            requests_sender,
            Handshakes {
                timeout: config.handshake_timeout,
                slots: std::sync::Arc::new(tokio::sync::Semaphore::new(
                    config.max_pending_handshakes,
                )),
            },
            config.session.version.alpn(),
        ));
        Ok(Self {
            endpoint,
            requests,
            session: config.session,
            runtime: TokioRuntime::current(),
        })
    }

    /// The bound address (with the port the system chose, if it was 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.endpoint.local_addr()
    }

    /// The next client whose handshake completed (QUIC, and for WebTransport the HTTP/3
    /// CONNECT); `None` once the endpoint stopped. WebTransport handshakes run in tasks of
    /// their own, whether or not the application is waiting here, so one slow client
    /// holds up no other; one that fails (a malformed CONNECT, a timeout, no version in
    /// common) closes its own connection and is not returned.
    pub async fn accept(&mut self) -> Option<Request> {
        let (connection, webtransport) = self.requests.recv().await?;
        Some(Request {
            connection,
            webtransport,
            session: self.session.clone(),
            runtime: self.runtime.clone(),
        })
    }
}

type RequestSender = mpsc::UnboundedSender<(QuicConnection, Option<WebTransportRequest>)>;

/// Sorts established connections by ALPN: raw QUIC ones are requests already; `h3` ones
/// get a WebTransport handshake task first.
/// How WebTransport handshakes are bounded: in time each, and in number at once.
struct Handshakes {
    timeout: Duration,
    slots: std::sync::Arc<tokio::sync::Semaphore>,
}

async fn sort_connections(
    mut accepted: mpsc::UnboundedReceiver<QuicConnection>,
    requests: RequestSender,
    handshakes: Handshakes,
    version: &'static str,
) {
    while let Some(connection) = accepted.recv().await {
        match connection.application_protocol().as_deref() {
            Some(WEBTRANSPORT) => {
                let Ok(slot) = handshakes.slots.clone().try_acquire_owned() else {
                    tracing::debug!(
                        peer = ?connection.peer_address(),
                        "refusing a WebTransport client: too many waiting for their CONNECT"
                    );
                    connection.close(H3_REQUEST_REJECTED, "too many pending handshakes");
                    continue;
                };
                let (requests, timeout) = (requests.clone(), handshakes.timeout);
                tokio::spawn(async move {
                    webtransport_handshake(connection, requests, timeout, version).await;
                    drop(slot);
                });
            }
            _ => {
                let _ = requests.send((connection, None));
            }
        }
    }
}

/// Runs the server side of a WebTransport handshake; a client whose CONNECT is fine
/// becomes a request.
async fn webtransport_handshake(
    connection: QuicConnection,
    requests: RequestSender,
    timeout: Duration,
    version: &'static str,
) {
    let mut handshake = ServerHandshake::new(connection.session());
    let outcome = tokio::time::timeout(timeout, drive(|waiter| handshake.poll(waiter))).await;
    match outcome {
        Ok(Ok(request)) => {
            // A client offering versions, none of them ours, is refused here.
            let offered = request.protocols();
            if !offered.is_empty() && !offered.iter().any(|p| p == version) {
                tracing::debug!(
                    peer = ?connection.peer_address(),
                    ?offered,
                    "refusing a WebTransport client: no moq-lite version in common"
                );
                request.reject(StatusCode::BAD_REQUEST);
                linger_then_close(connection, "no common moq-lite version");
                return;
            }
            let _ = requests.send((connection, Some(request)));
        }
        // The handshake closed the connection itself, with the HTTP/3 code.
        Ok(Err(error)) => {
            tracing::debug!(peer = ?connection.peer_address(), %error, "WebTransport handshake failed");
        }
        Err(_elapsed) => {
            tracing::debug!(peer = ?connection.peer_address(), "no WebTransport CONNECT in time");
            connection.close(0x10c, "no WebTransport CONNECT in time");
        }
    }
}

impl Request {
    /// The binding the client chose.
    pub fn binding(&self) -> Binding {
        match self.webtransport {
            Some(_) => Binding::WebTransport,
            None => Binding::Quic,
        }
    }

    /// The request path and query (`/room?jwt=…`) of a WebTransport client. A raw QUIC
    /// client sends its path in SETUP, after the session starts:
    /// [`Session::peer_setup`] has it.
    pub fn path(&self) -> Option<String> {
        self.webtransport.as_ref().map(WebTransportRequest::path)
    }

    /// The subprotocols a WebTransport client offered.
    pub fn protocols(&self) -> &[String] {
        self.webtransport
            .as_ref()
            .map_or(&[], WebTransportRequest::protocols)
    }

    /// Where the client connects from.
    pub fn remote_addr(&self) -> Option<SocketAddr> {
        self.connection.peer_address()
    }

    /// Starts the session with the server's configuration.
    pub fn accept(self) -> Session {
        let config = self.session.clone();
        self.accept_with(config)
    }

    /// Starts the session with `config` (e.g. origins scoped to what this client may
    /// publish and subscribe to). A WebTransport client gets its session's version
    /// selected in `wt-protocol`.
    pub fn accept_with(self, config: SessionConfig) -> Session {
        // The session logs inside this span: which peer, over which binding.
        let span = tracing::debug_span!(
            "moq_connection",
            peer = ?self.connection.peer_address(),
            binding = ?self.binding()
        );
        let _entered = span.enter();
        let transport = match self.webtransport {
            None => BindingSession::from(self.connection.session()),
            Some(request) => BindingSession::from(request.accept(Some(config.version.alpn()))),
        };
        session::accept(self.runtime, transport, config)
    }

    /// Refuses the client: a WebTransport client gets `status` (403 for "not allowed");
    /// a raw QUIC connection is closed with moq-lite's `error` code.
    pub fn reject(self, status: StatusCode, error: moq_net::Error) {
        tracing::debug!(
            peer = ?self.connection.peer_address(),
            status = status.as_u16(),
            %error,
            "refusing a client"
        );
        match self.webtransport {
            Some(request) => {
                request.reject(status);
                linger_then_close(self.connection, status.as_str());
            }
            None => self.connection.close(error.to_code(), &error.to_string()),
        }
    }
}

/// Gives a refused WebTransport client a moment to read the response (it closes the
/// connection itself when it does), then closes the connection anyway.
fn linger_then_close(connection: QuicConnection, reason: &str) {
    let reason = reason.to_owned();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        connection.close(0x10b, &reason);
    });
}
