//! The WebTransport-over-HTTP/3 bytes a MoQ peer sends before its data, parsed without
//! I/O: what a peer-opened stream is ([`header`]), and the close on a session's CONNECT
//! stream ([`capsule`]), with what is held bounded by [`MAX_HEADER_BYTES`].
//!
//! What it is not: a WebTransport implementation. The handshake, the streams and the
//! session run in `moqx-runtime` over quiche; the frames, varints and capsules themselves
//! are `web-transport-proto`'s. This crate is the part of it a peer's bytes reach first,
//! kept apart so that it can be fuzzed (and read) without a QUIC stack or TLS.
//!
//! ```
//! use moqx_webtransport_wire::header::{UniKind, parse_uni, uni_header};
//!
//! // The header a WebTransport stream of session 4 starts with, and what a peer reads.
//! let header = uni_header(4);
//! assert_eq!(parse_uni(&header), Some((UniKind::WebTransport { session: 4 }, header.len())));
//! // One byte is not enough to know: more is needed.
//! assert_eq!(parse_uni(&header[..1]), None);
//! ```

pub mod capsule;
pub mod header;

/// The most bytes held for one HTTP/3 frame or capsule before it is whole (and for the
/// CONNECT request and SETTINGS in `moqx-runtime`): a peer that declares more is refused
/// rather than buffered.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
