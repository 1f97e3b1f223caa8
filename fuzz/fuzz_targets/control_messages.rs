//! Every control message and stream type of every moq-lite version (SETUP with its
//! parameters included, -06's typed announcements): decoding arbitrary bytes never
//! panics, and whatever decodes re-encodes to bytes that decode to the same message.
//!
//! The first byte picks the message (its low 4 bits) and the version (the next 2: -05,
//! -04, -03, -06-wip, so that a byte below 16 is -05); the rest is its bytes on the wire.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moqx_net::coding::{
    Announce, AnnounceOk, AnnounceRequest, BidiStream, DecodeError, Fetch, GoAway, Message, Probe,
    Setup, Subscribe, SubscribeResponse, SubscribeUpdate, Track, TrackInfo, TypedAnnounce,
    UniStream, Version,
};

/// Decodes `bytes` as `M`; if that works, checks the round trip.
fn round_trip<M: Message + PartialEq + std::fmt::Debug>(bytes: &[u8], version: Version) {
    let Ok(message) = M::decode(&mut &bytes[..], version) else {
        return;
    };
    // A decoded message may still not encode (a value the encoder refuses): that is an
    // error, not a panic. When it encodes, it must read back the same.
    if let Ok(encoded) = message.to_vec(version) {
        let again = M::decode(&mut &encoded[..], version);
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
    let v = moq_fuzz::version(which >> 4);
    match which % 16 {
        0 => round_trip::<Setup>(bytes, v),
        1 => round_trip::<AnnounceRequest>(bytes, v),
        2 => round_trip::<AnnounceOk>(bytes, v),
        3 => round_trip::<Announce>(bytes, v),
        4 => round_trip::<Track>(bytes, v),
        5 => round_trip::<TrackInfo>(bytes, v),
        6 => round_trip::<Subscribe>(bytes, v),
        7 => round_trip::<SubscribeUpdate>(bytes, v),
        8 => {
            let Ok(response) = SubscribeResponse::decode(&mut &bytes[..], v) else {
                return;
            };
            if let Ok(encoded) = response.to_vec(v) {
                let again: Result<SubscribeResponse, DecodeError> =
                    SubscribeResponse::decode(&mut &encoded[..], v);
                assert_eq!(again.as_ref(), Ok(&response), "{response:?} on {v}");
            }
        }
        9 => round_trip::<Fetch>(bytes, v),
        10 => round_trip::<GoAway>(bytes, v),
        11 => round_trip::<Probe>(bytes, v),
        12 => {
            let _ = BidiStream::decode(&mut &bytes[..], v);
        }
        13 => {
            let _ = UniStream::decode(&mut &bytes[..], v);
        }
        _ => {
            let Ok(announce) = TypedAnnounce::decode(&mut &bytes[..], v) else {
                return;
            };
            if let Ok(encoded) = announce.to_vec(v) {
                let again = TypedAnnounce::decode(&mut &encoded[..], v);
                assert_eq!(again.as_ref(), Ok(&announce), "{announce:?} on {v}");
            }
        }
    }
});
