//! WebTransport over HTTP/3 on quiche: the second moq-lite binding.
//!
//! A browser (or any WebTransport client) reaches a MoQ server with ALPN `h3`: both sides
//! send HTTP/3 SETTINGS enabling extended CONNECT, datagrams and WebTransport; the client
//! sends an extended CONNECT (`:protocol webtransport`, the path, and the versions it
//! offers, `wt-available-protocols: "moq-lite-05", "moq-lite-04"`); the server answers 200
//! with the first of them it speaks, `wt-protocol: "moq-lite-05"`. From then on every MoQ stream is a WebTransport stream:
//! a uni stream starts with `0x54` and the session id, a bidi stream with `0x41` and the
//! session id, a datagram with the quarter session id; stream and close codes travel in
//! HTTP/3's WebTransport code range.
//!
//! The HTTP/3 pieces (SETTINGS, CONNECT, capsules, the code mapping) are
//! `web-transport-proto`'s; this module runs them over [`QuicSession`] streams, as poll
//! state machines any driver can drive:
//!
//! - [`ClientHandshake`] → [`WebTransportSession`];
//! - [`ServerHandshake`] → [`WebTransportRequest`] (the URL and offered protocols, for the
//!   application to authorize) → [`WebTransportRequest::accept`] → [`WebTransportSession`].
//!
//! [`WebTransportSession`] implements `moqx_net::transport::Session`, hiding the stream
//! headers: a `moqx_net` session runs over it exactly as over raw QUIC.
//!
//! One session per connection, which is what browsers open for MoQ. No QPACK dynamic
//! table (we advertise none), so header blocks are static-table and literal only.
//!
//! [`QuicSession`]: crate::quic::QuicSession

mod control;
mod demux;
mod handshake;
pub(crate) mod header;
mod session;
mod stream;

pub use handshake::{ClientHandshake, ServerHandshake, WebTransportRequest};
pub use session::WebTransportSession;
pub use stream::{WebTransportRecvStream, WebTransportSendStream};
pub use web_transport_proto::http::StatusCode;

use moqx_net::transport::TransportError;

/// The ALPN of HTTP/3, which carries WebTransport.
pub const ALPN: &str = "h3";

// HTTP/3 error codes (RFC 9114 §8.1): what a connection carrying WebTransport closes with.
/// No error: the connection closes cleanly.
pub const H3_NO_ERROR: u64 = 0x100;
/// A stream of a type the peer may not open.
pub const H3_STREAM_CREATION_ERROR: u64 = 0x103;
/// A critical stream (control) closed.
pub const H3_CLOSED_CRITICAL_STREAM: u64 = 0x104;
/// A stream or push id used wrongly.
pub const H3_ID_ERROR: u64 = 0x108;
/// Bad SETTINGS.
pub const H3_SETTINGS_ERROR: u64 = 0x109;
/// A request refused before any processing: the server is at a limit, or refused the
/// request (after its response).
pub const H3_REQUEST_REJECTED: u64 = 0x10b;
/// A request abandoned: it did not come in time.
pub const H3_REQUEST_CANCELLED: u64 = 0x10c;
/// A malformed request.
pub const H3_MESSAGE_ERROR: u64 = 0x10e;

/// The most bytes buffered for one HTTP/3 header block, SETTINGS frame or capsule frame
/// (web-transport-proto's own frame limit): a peer cannot make us buffer more.
pub(crate) use moqx_webtransport_wire::MAX_HEADER_BYTES;

/// Why a WebTransport handshake failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WebTransportError {
    /// The connection closed (or failed) during the handshake.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The server's HTTP/3 SETTINGS do not enable WebTransport.
    #[error("the server does not support WebTransport (its HTTP/3 SETTINGS do not enable it)")]
    NotSupported,
    /// The peer broke HTTP/3; the connection was closed with `code`.
    #[error("HTTP/3 error {code:#x}: {reason}")]
    Protocol {
        /// The HTTP/3 error code the connection closed with.
        code: u64,
        /// What was wrong.
        reason: String,
    },
    /// The server refused the CONNECT with this HTTP status.
    #[error("the server refused the WebTransport session with HTTP status {status}")]
    Rejected {
        /// The HTTP status.
        status: u16,
    },
    /// The client's CONNECT was malformed; it was answered with 400 and the connection
    /// closed.
    #[error("{0}")]
    BadRequest(String),
    /// The server selected no subprotocol the client offered.
    #[error("the server selected protocol {selected:?}, not one of {offered:?}")]
    ProtocolMismatch {
        /// What the client offered.
        offered: Vec<String>,
        /// What the server's `wt-protocol` said (`None`: no header).
        selected: Option<String>,
    },
}

impl WebTransportError {
    /// The code and reason the connection closes with after this error, when this side
    /// closes it.
    fn close_code(&self) -> Option<(u64, String)> {
        match self {
            Self::Transport(_) | Self::BadRequest(_) => None,
            Self::Protocol { code, reason } => Some((*code, reason.clone())),
            Self::NotSupported | Self::Rejected { .. } | Self::ProtocolMismatch { .. } => {
                Some((H3_NO_ERROR, self.to_string()))
            }
        }
    }
}

/// A WebTransport application code in HTTP/3's code space.
pub(crate) fn to_http3(code: u32) -> u64 {
    web_transport_proto::error_to_http3(code)
}

/// An HTTP/3 code back in WebTransport's space; codes outside that range stay as they are.
pub(crate) fn from_http3(code: u64) -> u64 {
    web_transport_proto::error_from_http3(code).map_or(code, u64::from)
}
