//! What a WebTransport peer's bytes reach before a session exists: uni and bidi stream
//! headers, the CONNECT request (its HEADERS frame and QPACK), SETTINGS, and the capsules
//! on the CONNECT stream, which must stay within their bound whatever arrives.
//!
//! The first byte picks the parser; for capsules the second sets the chunk size.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moqx_webtransport_wire::capsule::CapsuleReader;
use moqx_webtransport_wire::header::{parse_bidi, parse_uni};

/// What the capsule reader may hold: one 64 KiB frame and one 64 KiB capsule, with their
/// headers.
const MAX_HELD: usize = 2 * (64 * 1024 + 16);

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else {
        return;
    };
    match which % 5 {
        0 => {
            if let Some((_, len)) = parse_uni(bytes) {
                assert!(len <= bytes.len());
            }
        }
        1 => {
            if let Some((_, len)) = parse_bidi(bytes) {
                assert!(len <= bytes.len());
            }
        }
        2 => {
            let _ = web_transport_proto::ConnectRequest::decode(&mut &bytes[..]);
        }
        3 => {
            let _ = web_transport_proto::Settings::decode(&mut &bytes[..]);
        }
        _ => {
            let Some((&chunk, stream)) = bytes.split_first() else {
                return;
            };
            let chunk = usize::from(chunk) + 1;
            let (held, _) = read_capsules(stream.chunks(chunk));
            assert!(held <= MAX_HELD + chunk, "held {held} bytes");
        }
    }
});

/// Feeds `chunks` to a CONNECT stream's capsule reader, looking for the close after each;
/// returns how many bytes it held at most, and its verdict at the end.
fn read_capsules<'a>(
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> (usize, Result<Option<(u32, String)>, String>) {
    let mut reader = CapsuleReader::default();
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
