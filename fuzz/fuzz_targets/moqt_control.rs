//! The IETF moq-transport codec, every draft: framing, every control message it has, the
//! message parameters, Key-Value-Pairs and namespaces. Decoding arbitrary bytes never
//! panics, and whatever decodes encodes to bytes that decode and encode to the same bytes
//! again (draft 14 drops the parameters it ignores on the first pass, so bytes, not
//! values, are what must stay the same).
//!
//! The first byte picks the draft (its low 2 bits, `% 3`: 14, 16, 18) and, in the bits
//! above, what the rest decodes as.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moqx_net::moqt::{
    ClientSetup, Control, Draft, Fetch, FetchCancel, FetchOk, Frame, GoAway, MaxRequestId,
    MessageParameters, Namespace, NamespaceAnnounced, Parameters, Publish, PublishBlocked,
    PublishDone, PublishNamespace, PublishNamespaceCancel, PublishNamespaceDone, PublishOk,
    RequestError, RequestOk, RequestUpdate, RequestsBlocked, ServerSetup, Subscribe,
    SubscribeError, SubscribeNamespace, SubscribeOk, SubscribeTracks, TrackStatus, TrackStatusOk,
    Unsubscribe,
};

/// Decodes `bytes` as `M`; if that works and it encodes, checks that its encoding is
/// stable: it decodes, and encodes to the same bytes.
fn round_trip<M: Control + std::fmt::Debug>(bytes: &[u8], draft: Draft) {
    let Ok(message) = M::decode(&mut &bytes[..], draft) else {
        return;
    };
    let Ok(encoded) = message.to_vec(draft) else {
        return;
    };
    let again = M::decode(&mut &encoded[..], draft)
        .unwrap_or_else(|e| panic!("{message:?} on {draft}: {encoded:02x?} does not decode: {e}"));
    assert_eq!(
        again.to_vec(draft).as_ref(),
        Ok(&encoded),
        "{message:?} on {draft}"
    );
}

/// Every message parameter allowed: what the draft defines is read.
const ALL_PARAMETERS: &[moqx_net::moqt::Param] = &[
    moqx_net::moqt::Param::DeliveryTimeout,
    moqx_net::moqt::Param::AuthorizationToken,
    moqx_net::moqt::Param::MaxCacheDuration,
    moqx_net::moqt::Param::RendezvousTimeout,
    moqx_net::moqt::Param::SubgroupDeliveryTimeout,
    moqx_net::moqt::Param::Expires,
    moqx_net::moqt::Param::LargestObject,
    moqx_net::moqt::Param::FillTimeout,
    moqx_net::moqt::Param::Forward,
    moqx_net::moqt::Param::SubscriberPriority,
    moqx_net::moqt::Param::Filter,
    moqx_net::moqt::Param::GroupOrder,
    moqx_net::moqt::Param::NewGroupRequest,
    moqx_net::moqt::Param::NamespacePrefix,
];

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else {
        return;
    };
    let draft = Draft::ALL[usize::from(which & 3) % Draft::ALL.len()];
    match (which >> 2) % 31 {
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
        4 => {
            let Ok(namespace) = Namespace::decode(&mut &bytes[..], draft) else {
                return;
            };
            let mut encoded = Vec::new();
            namespace
                .encode(&mut encoded, draft)
                .expect("a decoded namespace encodes");
            assert_eq!(Namespace::decode(&mut &encoded[..], draft), Ok(namespace));
        }
        5 => {
            let Ok(parameters) = MessageParameters::decode(&mut &bytes[..], draft, ALL_PARAMETERS)
            else {
                return;
            };
            let mut encoded = Vec::new();
            if parameters
                .encode(&mut encoded, draft, ALL_PARAMETERS)
                .is_ok()
            {
                let again = MessageParameters::decode(&mut &encoded[..], draft, ALL_PARAMETERS)
                    .expect("encoded parameters decode");
                let mut twice = Vec::new();
                again.encode(&mut twice, draft, ALL_PARAMETERS).unwrap();
                assert_eq!(twice, encoded, "{parameters:?} on {draft}");
            }
        }
        6 => round_trip::<GoAway>(bytes, draft),
        7 => round_trip::<MaxRequestId>(bytes, draft),
        8 => round_trip::<RequestsBlocked>(bytes, draft),
        9 => round_trip::<RequestOk>(bytes, draft),
        10 => round_trip::<RequestError>(bytes, draft),
        11 => round_trip::<SubscribeError>(bytes, draft),
        12 => round_trip::<PublishNamespace>(bytes, draft),
        13 => round_trip::<PublishNamespaceDone>(bytes, draft),
        14 => round_trip::<PublishNamespaceCancel>(bytes, draft),
        15 => round_trip::<SubscribeNamespace>(bytes, draft),
        16 => round_trip::<SubscribeTracks>(bytes, draft),
        17 => round_trip::<NamespaceAnnounced>(bytes, draft),
        18 => round_trip::<Subscribe>(bytes, draft),
        19 => round_trip::<SubscribeOk>(bytes, draft),
        20 => round_trip::<Unsubscribe>(bytes, draft),
        21 => round_trip::<Publish>(bytes, draft),
        22 => round_trip::<PublishOk>(bytes, draft),
        23 => round_trip::<PublishDone>(bytes, draft),
        24 => round_trip::<Fetch>(bytes, draft),
        25 => round_trip::<FetchOk>(bytes, draft),
        26 => round_trip::<FetchCancel>(bytes, draft),
        27 => round_trip::<TrackStatus>(bytes, draft),
        28 => round_trip::<TrackStatusOk>(bytes, draft),
        29 => round_trip::<RequestUpdate>(bytes, draft),
        _ => round_trip::<PublishBlocked>(bytes, draft),
    }
});
