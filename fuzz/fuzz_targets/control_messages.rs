//! Every control message and stream type of moq-lite-05 (SETUP with its parameters
//! included): decoding arbitrary bytes never panics, and whatever decodes re-encodes to
//! bytes that decode to the same message.
//!
//! The first byte picks the message; the rest is its bytes on the wire.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moq_net::coding::{
    Announce, AnnounceOk, AnnounceRequest, BidiStream, DecodeError, Fetch, GoAway, Message, Probe,
    Setup, Subscribe, SubscribeResponse, SubscribeUpdate, Track, TrackInfo, UniStream, Version,
};

const V: Version = Version::Lite05;

/// Decodes `bytes` as `M`; if that works, checks the round trip.
fn round_trip<M: Message + PartialEq + std::fmt::Debug>(bytes: &[u8]) {
    let Ok(message) = M::decode(&mut &bytes[..], V) else {
        return;
    };
    // A decoded message may still not encode (a value the encoder refuses): that is an
    // error, not a panic. When it encodes, it must read back the same.
    if let Ok(encoded) = message.to_vec(V) {
        let again = M::decode(&mut &encoded[..], V);
        assert_eq!(
            again.as_ref(),
            Ok(&message),
            "{message:?} -> {encoded:02x?}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else {
        return;
    };
    match which % 14 {
        0 => round_trip::<Setup>(bytes),
        1 => round_trip::<AnnounceRequest>(bytes),
        2 => round_trip::<AnnounceOk>(bytes),
        3 => round_trip::<Announce>(bytes),
        4 => round_trip::<Track>(bytes),
        5 => round_trip::<TrackInfo>(bytes),
        6 => round_trip::<Subscribe>(bytes),
        7 => round_trip::<SubscribeUpdate>(bytes),
        8 => {
            let _: Result<SubscribeResponse, DecodeError> =
                SubscribeResponse::decode(&mut &bytes[..], V);
        }
        9 => round_trip::<Fetch>(bytes),
        10 => round_trip::<GoAway>(bytes),
        11 => round_trip::<Probe>(bytes),
        12 => {
            let _ = BidiStream::decode(&mut &bytes[..], V);
        }
        _ => {
            let _ = UniStream::decode(&mut &bytes[..], V);
        }
    }
});
