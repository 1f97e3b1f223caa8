//! Connecting a session to a relay from the browser, over WebTransport or QMux over a
//! WebSocket (which one, and the race between them: the `race` module).

use std::time::Duration;

use moqx_net::coding::Version;
use moqx_net::redact::Redacted;
use moqx_net::runtime::Instant;
use moqx_net::session::{self, Session, SessionConfig};
use moqx_qmux::{Connection, QmuxConnection, QmuxSession, Side};
use wasm_bindgen_futures::JsFuture;

use crate::bindings::{WebTransport, WebTransportHash, WebTransportOptions, dictionary};
use crate::runtime::WasmRuntime;
use crate::transport::{WebTransportSession, message};

/// Why a connection could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The fingerprint is not 64 hexadecimal digits (a SHA-256).
    #[error("the certificate fingerprint must be 64 hexadecimal digits (a SHA-256), got {0:?}")]
    Fingerprint(String),
    /// The browser refused to start (a malformed URL, an insecure page, no WebTransport).
    #[error("cannot open WebTransport to {url}: {reason}")]
    Refused {
        /// Where to.
        url: String,
        /// The browser's words.
        reason: String,
    },
    /// The handshake failed: nothing listening, a certificate that is not the pinned one
    /// (or not trusted), a server refusing the session.
    #[error(
        "could not connect to {url}: {reason} (is the relay running, and is the certificate \
         fingerprint the one it serves at /certificate.sha256?)"
    )]
    Handshake {
        /// Where to.
        url: String,
        /// The browser's words (browsers say little, to not reveal which check failed).
        reason: String,
    },
    /// The relay ended the session before answering its SETUP (it refused the client).
    #[error("the relay at {url} refused the session: {error} (code {code})", code = .error.to_code())]
    SessionRefused {
        /// Where to.
        url: String,
        /// The code the session ended with.
        error: moqx_net::Error,
    },
    /// No session was established in time (`timeout`); every attempt was closed.
    #[error("could not connect to {url} within {after:?}")]
    Timeout {
        /// Where to.
        url: String,
        /// The limit.
        after: Duration,
    },
    /// Every transport tried failed: what each said.
    #[error("could not connect to {url}: {}", .failures.join("; "))]
    Failed {
        /// Where to.
        url: String,
        /// Each transport's failure, in the order they were tried.
        failures: Vec<String>,
    },
    /// The session was up and the transport did not take it.
    #[error("the session to {url} failed as it started: {reason}")]
    Transport {
        /// Where to.
        url: String,
        /// What failed.
        reason: String,
    },
}

/// How to reach a relay.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// SHA-256 digests of certificates to accept instead of the Web PKI (the browser's
    /// `serverCertificateHashes`: ECDSA certificates valid for at most 14 days, as a
    /// relay's self-signed one is). Empty: the certificate must be trusted as any site's.
    pub fingerprints: Vec<[u8; 32]>,
    /// The versions offered, in order of preference (the server takes the first it has):
    /// moq-lite's and moq-transport's as WebTransport protocols (moq-transport 14 has no
    /// name: a server that names none is taken to speak the first offered), moq-lite's
    /// alone over a WebSocket (QMux carries no moq-transport).
    pub versions: Vec<Version>,
    /// The session's configuration; its version is replaced by the negotiated one.
    pub session: SessionConfig,
    /// The transports to try, raced: WebTransport (skipped where it is missing or known
    /// broken) and QMux over a WebSocket.
    pub transports: Vec<Transport>,
    /// Where the WebSocket goes; `None`: the URL's host, port and path over `wss://`
    /// (`ws://` for an `http://` URL). A relay with a self-signed certificate needs
    /// `ws://` here: browsers pin certificates for WebTransport only.
    pub websocket_url: Option<String>,
    /// How long WebTransport has alone before the WebSocket starts too (0 once the
    /// WebSocket has won for this URL on this page).
    pub head_start: Duration,
    /// How long connecting may take, every attempt together, until the session is
    /// established; `None`: as long as the browser's own handshakes take.
    pub timeout: Option<Duration>,
}

impl Default for ConnectOptions {
    /// No pinned certificate; offering moq-lite-05, -04 and -03; WebTransport, then a
    /// WebSocket 500 ms later; 10 s to connect.
    fn default() -> Self {
        Self {
            fingerprints: Vec::new(),
            versions: Version::DEFAULT_OFFER.to_vec(),
            session: SessionConfig::default(),
            transports: vec![Transport::WebTransport, Transport::WebSocket],
            websocket_url: None,
            head_start: Duration::from_millis(500),
            timeout: Some(Duration::from_secs(10)),
        }
    }
}

/// A session, and the transport it runs over.
#[derive(Debug, Clone)]
pub struct Connected {
    /// The session, established.
    pub session: Session,
    /// What it runs over.
    pub transport: Transport,
}

impl AsRef<Session> for Connected {
    /// The session: what [`Reconnect`](crate::Reconnect) keeps up.
    fn as_ref(&self) -> &Session {
        &self.session
    }
}

/// Connects to `url` (`https://host:port/root`) over WebTransport and starts a moq-lite
/// session; resolves once it is established.
pub(crate) async fn connect_webtransport(
    url: &str,
    options: &ConnectOptions,
) -> Result<Session, ConnectError> {
    let transport_options: WebTransportOptions = dictionary();
    if !options.fingerprints.is_empty() {
        let hashes = js_sys::Array::new();
        for fingerprint in &options.fingerprints {
            let hash: WebTransportHash = dictionary();
            hash.set_algorithm("sha-256");
            hash.set_value(&js_sys::Uint8Array::from(&fingerprint[..]));
            hashes.push(&hash);
        }
        transport_options.set_server_certificate_hashes(&hashes);
    }
    let protocols = js_sys::Array::new();
    // moq-transport 14 has no WebTransport protocol name: offered, it is named nowhere.
    for protocol in options
        .versions
        .iter()
        .filter_map(|version| version.webtransport_protocol())
    {
        protocols.push(&protocol.into());
    }
    transport_options.set_protocols(&protocols);

    let transport =
        WebTransport::new(url, &transport_options).map_err(|error| ConnectError::Refused {
            url: Redacted(url).to_string(),
            reason: message(&error),
        })?;
    tracing::debug!(url = %Redacted(url), "WebTransport: connecting");
    // Closed if this future is dropped (the WebSocket won the race) before it is handed on.
    let pending = ClosedUnlessTaken(Some(transport.clone()));
    if let Err(error) = JsFuture::from(transport.ready()).await {
        let reason = message(&error);
        tracing::debug!(url = %Redacted(url), %reason, "WebTransport: the handshake failed");
        return Err(ConnectError::Handshake {
            url: Redacted(url).to_string(),
            reason,
        });
    }
    drop(pending.take());
    let transport =
        WebTransportSession::new(transport).map_err(|error| ConnectError::Transport {
            url: Redacted(url).to_string(),
            reason: error.to_string(),
        })?;
    // The version the server chose. A browser that does not expose it (or a server that
    // names none) leaves the first offered: what a server choosing by the client's
    // preference picks.
    let chosen = moqx_net::transport::Session::protocol(&transport).and_then(Version::from_alpn);
    let version = match (chosen, options.versions.first()) {
        (Some(version), _) if options.versions.contains(&version) => version,
        (None, Some(first)) => *first,
        (_, _) => {
            return Err(ConnectError::Transport {
                url: Redacted(url).to_string(),
                reason: format!(
                    "no version in common: offered {:?}, the server chose {chosen:?}",
                    options
                        .versions
                        .iter()
                        .map(|v| v.alpn())
                        .collect::<Vec<_>>()
                ),
            });
        }
    };
    tracing::debug!(url = %Redacted(url), %version, "WebTransport: connected");
    let session = session::connect(
        WasmRuntime::<WebTransportSession>::new(),
        transport,
        options.session.clone().with_version(version),
    );
    established(url, session).await
}

/// Connects to `url` (`ws://` or `wss://host:port/root`) with QMux over a WebSocket and
/// starts a moq-lite session; resolves once it is established.
pub(crate) async fn connect_websocket(
    url: &str,
    options: &ConnectOptions,
) -> Result<Session, ConnectError> {
    let redacted = || Redacted(url).to_string();
    let versions: Vec<Version> = options
        .versions
        .iter()
        .copied()
        .filter(|version| version.is_lite())
        .collect();
    if versions.is_empty() {
        return Err(ConnectError::Transport {
            url: redacted(),
            reason: "a WebSocket carries moq-lite only, and no moq-lite version was offered"
                .to_owned(),
        });
    }
    tracing::debug!(url = %Redacted(url), "WebSocket: connecting");
    let opened = crate::websocket::open(url, &moqx_qmux::negotiation::client_offers(&versions))
        .await
        .map_err(|reason| ConnectError::Handshake {
            url: redacted(),
            reason,
        })?;
    // What the server chose; none at all: QMux draft 01 and the default version, as
    // deployed relays speak to a client that names nothing.
    let chosen = match opened.protocol().as_str() {
        "" => moqx_qmux::negotiation::chosen("qmux-01", &versions),
        name => moqx_qmux::negotiation::chosen(name, &versions),
    };
    let Some(negotiated) = chosen else {
        return Err(ConnectError::Transport {
            url: redacted(),
            reason: format!(
                "no moq-lite version in common: the server chose the subprotocol {:?}",
                opened.protocol()
            ),
        });
    };
    tracing::debug!(url = %Redacted(url), subprotocol = %negotiated.name, "WebSocket: connected");
    let connection = QmuxConnection::new(Connection::new(
        Side::Client,
        negotiated.draft,
        moqx_qmux::Config::default(),
        Vec::new(),
        Instant::now(),
    ));
    crate::websocket::carry(opened, connection.clone());
    let session = session::connect(
        WasmRuntime::<QmuxSession>::new(),
        connection.session(Some(negotiated.version.alpn().to_owned())),
        options.session.clone().with_version(negotiated.version),
    );
    established(url, session).await
}

/// A WebTransport being set up: closed if dropped before [`take`](Self::take).
struct ClosedUnlessTaken(Option<WebTransport>);

impl ClosedUnlessTaken {
    fn take(mut self) -> Option<WebTransport> {
        self.0.take()
    }
}

impl Drop for ClosedUnlessTaken {
    fn drop(&mut self) {
        if let Some(transport) = self.0.take() {
            transport.close(&dictionary());
        }
    }
}

/// Like every driver's connect: done once the relay answered SETUP (let us in). A
/// session whose race was lost (this future dropped first) is closed, not left running.
async fn established(url: &str, session: Session) -> Result<Session, ConnectError> {
    let guard = CloseUnlessKept(Some(session.clone()));
    match session.established().await {
        Ok(_) => {
            guard.keep();
            Ok(session)
        }
        Err(error) => Err(ConnectError::SessionRefused {
            url: Redacted(url).to_string(),
            error,
        }),
    }
}

/// A session being established: closed if dropped before [`keep`](Self::keep).
struct CloseUnlessKept(Option<Session>);

impl CloseUnlessKept {
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for CloseUnlessKept {
    fn drop(&mut self) {
        if let Some(session) = self.0.take() {
            session.close(moqx_net::Error::Cancel);
        }
    }
}

/// Parses a certificate fingerprint: 64 hexadecimal digits, with or without `:` between
/// bytes (as `/certificate.sha256` serves it, or as a browser shows it).
pub fn parse_fingerprint(text: &str) -> Result<[u8; 32], ConnectError> {
    let digits: Vec<u8> = text.trim().bytes().filter(|byte| *byte != b':').collect();
    let invalid = || ConnectError::Fingerprint(text.trim().to_owned());
    if digits.len() != 64 {
        return Err(invalid());
    }
    let mut fingerprint = [0u8; 32];
    for (byte, pair) in fingerprint.iter_mut().zip(digits.chunks_exact(2)) {
        let pair = std::str::from_utf8(pair).map_err(|_| invalid())?;
        *byte = u8::from_str_radix(pair, 16).map_err(|_| invalid())?;
    }
    Ok(fingerprint)
}

/// What a session runs over. [`connect`](crate::connect) races them for an `https://`
/// URL: WebTransport first, a WebSocket after [`ConnectOptions::head_start`] (at once if
/// the WebSocket already won for that URL on the page), the WebSocket alone where
/// WebTransport is missing or known broken (every Safari; Firefox before 153); the first
/// session established wins and the other is closed.
///
/// [`ConnectOptions::head_start`]: crate::ConnectOptions::head_start
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// The browser's WebTransport (HTTP/3 over QUIC).
    WebTransport,
    /// QMux over the browser's WebSocket (TCP).
    WebSocket,
}

impl Transport {
    /// `"webtransport"` or `"websocket"`.
    pub fn name(self) -> &'static str {
        match self {
            Self::WebTransport => "webtransport",
            Self::WebSocket => "websocket",
        }
    }

    /// The transport a name names.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "webtransport" => Some(Self::WebTransport),
            "websocket" => Some(Self::WebSocket),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_parse_with_or_without_colons() {
        let plain = "00ff".repeat(16);
        let parsed = parse_fingerprint(&plain).unwrap();
        assert_eq!(parsed[0], 0x00);
        assert_eq!(parsed[1], 0xff);
        let colons: Vec<String> = parsed.iter().map(|byte| format!("{byte:02X}")).collect();
        assert_eq!(parse_fingerprint(&colons.join(":")).unwrap(), parsed);
        assert_eq!(parse_fingerprint(&format!(" {plain}\n")).unwrap(), parsed);
    }

    #[test]
    fn malformed_fingerprints_are_refused_by_name() {
        for bad in ["", "00", &"0".repeat(63), &"zz".repeat(32), &"é".repeat(32)] {
            let error = parse_fingerprint(bad).unwrap_err();
            assert!(matches!(error, ConnectError::Fingerprint(_)), "{bad:?}");
            assert!(error.to_string().contains("64 hexadecimal digits"));
        }
    }
}
