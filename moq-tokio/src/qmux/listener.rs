//! Serving QMux clients on a TCP port: WebSocket upgrades (`ws://`), QMux over TLS
//! (`tls://`) or plain QMux (`tcp://`). Each client's handshake runs on a task of its own, within a deadline and a
//! bound on how many wait at once, and becomes a [`Request`] to accept or refuse.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use moqx_net::coding::Version;
use moqx_net::session::SessionConfig;
use moqx_qmux::Side;
use moqx_runtime::binding::Binding;
use moqx_runtime::qmux::{self, Negotiated};
use moqx_runtime::quiche_config::QuicLimits;
use moqx_runtime::server::Request;
use moqx_runtime::tcp_tls;
use moqx_runtime::tls::Certificate;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_tungstenite::tungstenite::handshake::server::{
    ErrorResponse, Request as HttpRequest, Response,
};
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode};

use super::driver::{InBandError, in_band, over_byte_stream};
use super::websocket_config;
use crate::{Error, TokioRuntime};

/// How a [`QmuxListener`] serves.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct QmuxServerConfig {
    /// What every session serves and fills, unless the application accepts one with its
    /// own.
    pub session: SessionConfig,
    /// The moq-lite versions accepted, in order of preference.
    pub versions: Vec<Version>,
    /// Streams, credit and the idle timeout, as for QUIC clients.
    pub limits: QuicLimits,
    /// How long a client has from its TCP connection to a finished handshake.
    pub handshake_timeout: Duration,
    /// The most clients in their handshake at once; more wait in the kernel's backlog.
    pub max_pending_handshakes: usize,
    /// The certificate a `tls://` listener presents; a WebSocket listener with one serves
    /// `wss://`.
    pub certificate: Option<Certificate>,
}

impl QmuxServerConfig {
    /// Serving `session`, the released versions, the default limits, 10 s and 256
    /// pending handshakes.
    pub fn new(session: SessionConfig) -> Self {
        Self {
            session,
            versions: Version::DEFAULT_OFFER.to_vec(),
            limits: QuicLimits::default(),
            handshake_timeout: Duration::from_secs(10),
            max_pending_handshakes: 256,
            certificate: None,
        }
    }
}

/// A TCP port serving QMux clients of one binding.
#[derive(Debug)]
pub struct QmuxListener {
    local: SocketAddr,
    requests: mpsc::Receiver<Request<TokioRuntime>>,
    task: tokio::task::JoinHandle<()>,
}

impl QmuxListener {
    /// Binds `address` (TCP) for `binding` ([`Binding::WebSocket`], [`Binding::Tls`],
    /// which needs `config.certificate`, or [`Binding::Tcp`]), on the current tokio
    /// runtime.
    pub async fn bind(
        address: SocketAddr,
        binding: Binding,
        config: QmuxServerConfig,
    ) -> Result<Self, Error> {
        let tls = match (binding, &config.certificate) {
            // `tls://`, and `wss://` when a WebSocket listener has a certificate.
            (Binding::Tls | Binding::WebSocket, Some(certificate)) => Some(Arc::new(
                tcp_tls::server_context(certificate, &config.versions)?,
            )),
            (Binding::Tls, None) => {
                return Err(Error::Io {
                    context: "a tls:// listener".to_owned(),
                    source: std::io::Error::other("no certificate configured"),
                });
            }
            _ => None,
        };
        let listener = TcpListener::bind(address)
            .await
            .map_err(Error::io(format!("binding {address} (TCP)")))?;
        let local = listener
            .local_addr()
            .map_err(Error::io("reading the bound address"))?;
        let (sender, requests) = mpsc::channel(64);
        let task = tokio::spawn(accept_loop(
            listener,
            binding,
            tls,
            Arc::new(config),
            sender,
        ));
        Ok(Self {
            local,
            requests,
            task,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The next client whose handshake completed; `None` once the listener failed.
    pub async fn accept(&mut self) -> Option<Request<TokioRuntime>> {
        self.requests.recv().await
    }
}

impl Drop for QmuxListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    binding: Binding,
    tls: Option<Arc<boring::ssl::SslAcceptor>>,
    config: Arc<QmuxServerConfig>,
    requests: mpsc::Sender<Request<TokioRuntime>>,
) {
    let pending = Arc::new(Semaphore::new(config.max_pending_handshakes.max(1)));
    loop {
        let Ok(slot) = pending.clone().acquire_owned().await else {
            return;
        };
        let (stream, remote) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors, say: try again shortly rather than spin.
                tracing::warn!(%error, "accepting a QMux client");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let config = config.clone();
        let requests = requests.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let handshake = async {
                match (binding, tls) {
                    (Binding::WebSocket, None) => websocket(stream, remote, &config).await,
                    (Binding::WebSocket, Some(tls)) => {
                        match tokio_boring::accept(&tls, stream).await {
                            Ok(stream) => websocket(stream, remote, &config).await,
                            Err(error) => Err(format!("TLS: {error}")),
                        }
                    }
                    (Binding::Tls, Some(tls)) => tls_handshake(&tls, stream, remote, &config).await,
                    _ => tcp(stream, remote, &config).await,
                }
            };
            let result = tokio::time::timeout(config.handshake_timeout, handshake).await;
            drop(slot);
            match result {
                Ok(Ok(request)) => {
                    let _ = requests.send(request).await;
                }
                Ok(Err(error)) => {
                    tracing::debug!(%remote, %binding, %error, "QMux handshake failed")
                }
                Err(_) => tracing::debug!(%remote, %binding, "no QMux handshake in time"),
            }
        });
    }
}

/// A WebSocket upgrade: the subprotocol chosen among the client's offers, the path kept.
async fn websocket<S>(
    stream: S,
    remote: SocketAddr,
    config: &QmuxServerConfig,
) -> Result<Request<TokioRuntime>, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let mut chosen: Option<Negotiated> = None;
    let mut path = String::new();
    // tungstenite's callback type returns its HTTP response as the error: not ours to size.
    #[allow(clippy::result_large_err)]
    let callback = |request: &HttpRequest, mut response: Response| {
        path = request
            .uri()
            .path_and_query()
            .map_or_else(|| "/".to_owned(), |path| path.as_str().to_owned());
        let offered = offered_subprotocols(request);
        match qmux::choose(&offered, &config.versions) {
            Some(negotiated) => {
                if let Ok(name) = HeaderValue::from_str(&negotiated.name) {
                    response
                        .headers_mut()
                        .insert("sec-websocket-protocol", name);
                }
                chosen = Some(negotiated);
                Ok(response)
            }
            // A client that offers nothing gets the default, as deployed relays do.
            None if offered.is_empty() => Ok(response),
            None => {
                let mut refusal = ErrorResponse::new(Some("no subprotocol in common".to_owned()));
                *refusal.status_mut() = StatusCode::BAD_REQUEST;
                Err(refusal)
            }
        }
    };
    let socket =
        tokio_tungstenite::accept_hdr_async_with_config(stream, callback, Some(websocket_config()))
            .await
            .map_err(|error| format!("WebSocket upgrade: {error}"))?;
    let negotiated = match chosen {
        Some(negotiated) => negotiated,
        None => {
            qmux::choose(&["qmux-01".to_owned()], &config.versions).ok_or("no version to speak")?
        }
    };
    Ok(super::upgrade::start(
        std::future::ready(socket),
        negotiated,
        path,
        Some(remote),
        config,
    ))
}

/// Every subprotocol a WebSocket request offers, in its order.
fn offered_subprotocols(request: &HttpRequest) -> Vec<String> {
    request
        .headers()
        .get_all("sec-websocket-protocol")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .collect()
}

/// QMux over TLS: the version chosen by ALPN in the handshake.
async fn tls_handshake(
    acceptor: &boring::ssl::SslAcceptor,
    stream: TcpStream,
    remote: SocketAddr,
    config: &QmuxServerConfig,
) -> Result<Request<TokioRuntime>, String> {
    let stream = tokio_boring::accept(acceptor, stream)
        .await
        .map_err(|error| format!("TLS: {error}"))?;
    let negotiated = tcp_tls::negotiated(stream.ssl(), &config.versions)
        .ok_or("the client offered no QMux protocol in common (ALPN)")?;
    Ok(accept_tls(stream, remote, negotiated, config))
}

/// A client over QMux on a TLS stream whose handshake chose `negotiated`, as a request
/// (the relay's web port hands its `tls://` clients here).
pub fn accept_tls<S>(
    stream: S,
    remote: SocketAddr,
    negotiated: qmux::Negotiated,
    config: &QmuxServerConfig,
) -> Request<TokioRuntime>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let connection = over_byte_stream(
        stream,
        Side::Server,
        negotiated.draft,
        Vec::new(),
        &config.limits,
    );
    Request::qmux(
        TokioRuntime::current(),
        connection.session(Some(negotiated.version.alpn().to_owned())),
        Binding::Tls,
        negotiated.version,
        None,
        Some(remote),
        config.session.clone(),
    )
}

/// Plain TCP: the version chosen from the client's transport parameters.
async fn tcp(
    stream: TcpStream,
    remote: SocketAddr,
    config: &QmuxServerConfig,
) -> Result<Request<TokioRuntime>, String> {
    let (connection, version) = in_band(stream, Side::Server, &config.versions, &config.limits)
        .await
        .map_err(|error| match error {
            InBandError::Handshake(reason) => reason,
            InBandError::NoCommonVersion { theirs } => {
                format!("no moq-lite version in common: the client offered {theirs:?}")
            }
        })?;
    Ok(Request::qmux(
        TokioRuntime::current(),
        connection.session(Some(version.alpn().to_owned())),
        Binding::Tcp,
        version,
        None,
        Some(remote),
        config.session.clone(),
    ))
}
