//! A group stream (GROUP header, then frames) arriving in arbitrary chunks: the decoder
//! never panics, never holds more than one frame's worth of bytes beyond what it has not
//! yet been asked to decode, and every frame it yields is within the frame size limit.
//!
//! Input: the first byte sets the chunk size (its low 6 bits: 1 to 64) and the version
//! (the top 2: -05, -04, -03, -06-wip); the rest is the stream.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moqx_net::coding::{GroupDecoder, GroupItem};

/// The frame size limit the decoder is given.
const MAX_FRAME: u64 = 4096;
/// A frame header (two varints) or a GROUP header (a length and three varints) at most.
const MAX_HEADER: usize = 8 + 8 + 8 * 4;

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, stream)) = data.split_first() else {
        return;
    };
    let version = moq_fuzz::version(chunk >> 6);
    let chunk = usize::from(chunk & 63) + 1;
    let mut decoder = GroupDecoder::new(version, MAX_FRAME);
    for piece in stream.chunks(chunk) {
        decoder.push(piece);
        loop {
            match decoder.next_item() {
                Ok(Some(GroupItem::Frame { payload, .. })) => {
                    assert!(payload.len() as u64 <= MAX_FRAME, "a frame over the limit");
                }
                Ok(Some(GroupItem::Header(_))) => {}
                Ok(None) => break,
                Err(_) => return, // malformed: the stream is refused
            }
        }
        // Everything decodable was taken: what is left is one incomplete item.
        assert!(
            decoder.buffered() <= MAX_FRAME as usize + MAX_HEADER,
            "holds {} bytes",
            decoder.buffered()
        );
    }
    let _ = decoder.finish();
});
