//! Connecting over a QMux binding: `ws://` and `wss://` (a WebSocket upgrade offering
//! every version over every QMux draft as a subprotocol), `tls://` (the same names as TLS
//! ALPNs) and `tcp://` (the versions in the QMux transport parameters). The names and
//! choices are `moqx_runtime::qmux`'s, the TLS contexts `moqx_runtime::tcp_tls`'s.

use std::time::Instant;

use moqx_net::session::Session;
use moqx_qmux::{Connection, QmuxConnection, Side};
use moqx_runtime::binding::Binding;
use moqx_runtime::client::{ClientConfig, ClientSetup, ConnectError, Target};
use moqx_runtime::{qmux, tcp_tls};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use super::carrier::WebSocket;
use super::driver::{InBandError, drive as drive_connection, in_band, over_byte_stream};
use super::websocket_config;
use crate::{Error, TokioRuntime};

/// Connects to `target` over its QMux binding and starts the session.
pub(crate) async fn connect(target: Target, config: ClientConfig) -> Result<Session, Error> {
    let handshake = async {
        let stream = TcpStream::connect((target.host.as_str(), target.port))
            .await
            .map_err(Error::io(format!(
                "connecting to {}:{}",
                target.host, target.port
            )))?;
        // Records are written whole: Nagle's delay would only hold the last one back.
        let _ = stream.set_nodelay(true);
        match (target.binding, target.tls_over_tcp()) {
            (Binding::WebSocket, false) => websocket(stream, &target, &config).await,
            (Binding::WebSocket, true) => {
                let stream = tls(stream, &target, &config, &[tcp_tls::HTTP1.to_owned()]).await?;
                websocket(stream, &target, &config).await
            }
            (Binding::Tls, _) => {
                let offers = qmux::client_offers(&config.versions);
                let stream = tls(stream, &target, &config, &offers).await?;
                let Some(negotiated) = tcp_tls::negotiated(stream.ssl(), &config.versions) else {
                    return Err(ConnectError::NoCommonVersion {
                        offered: config.versions.clone(),
                        detail: "the server chose no QMux protocol in the TLS handshake".to_owned(),
                    }
                    .into());
                };
                let connection = over_byte_stream(
                    stream,
                    Side::Client,
                    negotiated.draft,
                    Vec::new(),
                    &config.limits,
                );
                Ok((connection, negotiated.version))
            }
            _ => tcp(stream, &config).await,
        }
    };
    let (connection, version) = tokio::time::timeout(config.handshake_timeout, handshake)
        .await
        .map_err(|_| {
            ConnectError::Handshake(format!(
                "no answer from {} within {:?}",
                target.url, config.handshake_timeout
            ))
        })??;
    let session = connection.session(Some(version.alpn().to_owned()));
    let mut setup = ClientSetup::qmux(
        TokioRuntime::current(),
        session,
        target.binding,
        version,
        &target,
        &config,
    );
    Ok(moqx_kio::wait(|waiter| setup.poll(waiter)).await?)
}

/// The TLS handshake offering `alpns`, the server's certificate checked as configured.
async fn tls(
    stream: TcpStream,
    target: &Target,
    config: &ClientConfig,
    alpns: &[String],
) -> Result<tokio_boring::SslStream<TcpStream>, Error> {
    let connector = tcp_tls::client_context(config, alpns)?;
    let mut configuration = connector
        .configure()
        .map_err(moqx_runtime::quiche_config::ConfigError::from)?;
    configuration.set_verify_hostname(tcp_tls::verifies_name(config));
    let stream = tokio_boring::connect(configuration, &target.host, stream)
        .await
        .map_err(|error| ConnectError::Handshake(format!("TLS: {error}")))?;
    if let Some(expected) = config.fingerprint {
        let presented = tcp_tls::presented(stream.ssl());
        if presented != Some(expected) {
            return Err(ConnectError::CertificateRejected {
                expected,
                presented,
            }
            .into());
        }
    }
    Ok(stream)
}

/// The WebSocket upgrade, then the connection over it.
async fn websocket<S>(
    stream: S,
    target: &Target,
    config: &ClientConfig,
) -> Result<(QmuxConnection, moqx_net::coding::Version), Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let mut request = target
        .url
        .as_str()
        .into_client_request()
        .map_err(|e| bad_url(target, &e.to_string()))?;
    let offers = qmux::client_offers(&config.versions).join(", ");
    let offers = HeaderValue::from_str(&offers).map_err(|e| bad_url(target, &e.to_string()))?;
    request
        .headers_mut()
        .insert("sec-websocket-protocol", offers);
    let (socket, response) =
        tokio_tungstenite::client_async_with_config(request, stream, Some(websocket_config()))
            .await
            .map_err(|error| ConnectError::Handshake(format!("WebSocket upgrade: {error}")))?;
    let name = response
        .headers()
        .get("sec-websocket-protocol")
        .and_then(|name| name.to_str().ok())
        .unwrap_or_default();
    let Some(negotiated) = qmux::chosen(name, &config.versions) else {
        return Err(ConnectError::NoCommonVersion {
            offered: config.versions.clone(),
            detail: format!("the server chose the subprotocol {name:?}"),
        }
        .into());
    };
    tracing::debug!(subprotocol = %negotiated.name, "WebSocket upgraded");
    let connection = QmuxConnection::new(Connection::new(
        Side::Client,
        negotiated.draft,
        qmux::config(&config.limits),
        Vec::new(),
        Instant::now(),
    ));
    tokio::spawn(drive_connection(
        WebSocket::new(socket),
        connection.clone(),
        Some(qmux::KEEP_ALIVE),
    ));
    Ok((connection, negotiated.version))
}

/// Plain TCP: the versions go in the transport parameters; the server's answer picks.
async fn tcp(
    stream: TcpStream,
    config: &ClientConfig,
) -> Result<(QmuxConnection, moqx_net::coding::Version), Error> {
    in_band(stream, Side::Client, &config.versions, &config.limits)
        .await
        .map_err(|error| match error {
            InBandError::Handshake(reason) => ConnectError::Handshake(reason).into(),
            InBandError::NoCommonVersion { theirs } => ConnectError::NoCommonVersion {
                offered: config.versions.clone(),
                detail: format!("the server speaks {theirs:?}"),
            }
            .into(),
        })
}

fn bad_url(target: &Target, problem: &str) -> ConnectError {
    ConnectError::Url {
        url: target.url.to_string(),
        problem: problem.to_owned(),
    }
}
