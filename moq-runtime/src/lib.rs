//! # moq-runtime: what every socket-owning MoQ driver shares
//!
//! This crate **is** the driver-independent machinery between `moq-net`'s sans-IO sessions
//! and a real network: today the [`cid`] codec that lets a multi-worker endpoint steer
//! every packet to the worker that owns its connection, the [`timer`] wheel that keeps
//! thousands of connection timeouts behind one park deadline, [`udp`] sockets with GSO
//! sends and GRO receives (each switchable, to measure them), [`tls`] certificates
//! (PEM files, or self-signed at start with a fingerprint to pin), the [`quic`] adapter
//! that runs `moq_net` sessions over a quiche connection (raw QUIC), [`webtransport`] over
//! HTTP/3 on the same connections (the browser binding), one [`binding`] type over both,
//! and the socketless [`endpoint`]: the connection table of one UDP port, accepting with
//! connection IDs of our own under an [`admission`] policy (caps on connections, handshakes
//! and per address; QUIC Retry) and batching sends across connections.
//!
//! It **is not** a driver: it spawns nothing, owns no event loop and depends on no async
//! runtime. `moq-tokio` and `moq-uring` build their loops out of these parts.

pub mod admission;
pub mod binding;
pub mod cid;
pub mod endpoint;
pub mod quic;
pub mod timer;
pub mod tls;
pub mod udp;
mod urgency;
pub mod webtransport;

/// Entry points for the fuzz targets (`fuzz/`): the parsers of a peer's WebTransport bytes
/// that are private to the crate. Not an API; built only with the `fuzzing` feature.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    /// Parses a peer's uni stream header: whether it is complete and how long.
    pub fn parse_uni_header(bytes: &[u8]) -> Option<usize> {
        crate::webtransport::header::parse_uni(bytes).map(|(_, len)| len)
    }

    /// Parses a peer's bidi stream header: whether it is complete and how long.
    pub fn parse_bidi_header(bytes: &[u8]) -> Option<usize> {
        crate::webtransport::header::parse_bidi(bytes).map(|(_, len)| len)
    }

    /// Feeds `chunks` to a CONNECT stream's capsule reader, looking for the close after
    /// each; returns how many bytes it held at most, and its verdict at the end.
    pub fn read_capsules<'a>(
        chunks: impl IntoIterator<Item = &'a [u8]>,
    ) -> (usize, Result<Option<(u32, String)>, String>) {
        let mut reader = crate::webtransport::capsule::CapsuleReader::default();
        let mut held = 0;
        let mut verdict = Ok(None);
        for chunk in chunks {
            reader.push(chunk);
            verdict = reader.close();
            held = held.max(reader.held());
            if verdict.is_err() {
                break;
            }
        }
        (held, verdict)
    }
}
