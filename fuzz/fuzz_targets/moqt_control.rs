//! The IETF moq-transport codec, every draft: framing, CLIENT_SETUP / SERVER_SETUP / SETUP
//! with their options, Key-Value-Pairs and namespaces. Decoding arbitrary bytes never
//! panics, and whatever decodes re-encodes to bytes that decode to the same value.
//!
//! The first byte picks the draft (its low 2 bits, `% 3`: 14, 16, 18) and, in the bits
//! above (`% 5`), what the rest decodes as.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moqx_net::moqt::{ClientSetup, Control, Draft, Frame, Namespace, Parameters, ServerSetup};

/// Decodes `bytes` as `M`; if that works and it encodes again, checks the round trip.
fn round_trip<M: Control + PartialEq + std::fmt::Debug>(bytes: &[u8], draft: Draft) {
    let Ok(message) = M::decode(&mut &bytes[..], draft) else {
        return;
    };
    if let Ok(encoded) = message.to_vec(draft) {
        let again = M::decode(&mut &encoded[..], draft);
        assert_eq!(again.as_ref(), Ok(&message), "{message:?} on {draft}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else {
        return;
    };
    let draft = Draft::ALL[usize::from(which & 3) % Draft::ALL.len()];
    match (which >> 2) % 5 {
        0 => round_trip::<ClientSetup>(bytes, draft),
        1 => round_trip::<ServerSetup>(bytes, draft),
        2 => {
            let _ = Frame::decode(&mut &bytes[..], draft);
        }
        3 => {
            let Ok(parameters) = Parameters::decode_counted(&mut &bytes[..], draft) else {
                return;
            };
            let mut encoded = Vec::new();
            if parameters.encode_counted(&mut encoded, draft).is_ok() {
                let mut sorted = parameters.clone();
                if draft.has_delta_types() {
                    sorted.0.sort_by_key(|p| p.kind);
                }
                let again = Parameters::decode_counted(&mut &encoded[..], draft);
                assert_eq!(again.as_ref(), Ok(&sorted), "{parameters:?} on {draft}");
            }
        }
        _ => {
            let Ok(namespace) = Namespace::decode(&mut &bytes[..], draft) else {
                return;
            };
            let mut encoded = Vec::new();
            namespace.encode(&mut encoded, draft).expect("a decoded namespace encodes");
            assert_eq!(Namespace::decode(&mut &encoded[..], draft), Ok(namespace));
        }
    }
});
