//! Byte vectors written from each draft's text: what a peer built from that text sends.
//! Here setup, session control, replies and namespace discovery; subscriptions, publications,
//! fetches and track status are in `track_vectors.rs`.

use bytes::Bytes;

use super::*;
use crate::coding::{DecodeError, EncodeError};

fn options(path: &str) -> SetupOptions {
    SetupOptions {
        path: Some(path.into()),
        ..SetupOptions::default()
    }
}

/// Asserts that `message` encodes to `bytes` on `draft` and decodes back.
pub(super) fn vector<M: Control + std::fmt::Debug + PartialEq>(
    message: &M,
    draft: Draft,
    bytes: &[u8],
) {
    assert_eq!(
        message.to_vec(draft).unwrap(),
        bytes,
        "{} on {draft}",
        M::NAME
    );
    assert_eq!(M::decode(&mut &bytes[..], draft).as_ref(), Ok(message));
}

#[test]
fn draft_14_client_setup_offers_its_version() {
    let mut setup = ClientSetup {
        versions: vec![Draft::D14.version_number()],
        options: options("/chat"),
    };
    setup.options.max_request_id = Some(100);
    #[rustfmt::skip]
    let bytes = [
        0x20, 0x00, 0x14,                               // CLIENT_SETUP, length 20
        0x01, 0xc0, 0x00, 0x00, 0x00, 0xff, 0x00, 0x00, 0x0e, // 1 version: 0xff00000e
        0x02,                                           // 2 parameters
        0x01, 0x05, b'/', b'c', b'h', b'a', b't',       // PATH "/chat"
        0x02, 0x40, 0x64,                               // MAX_REQUEST_ID 100
    ];
    vector(&setup, Draft::D14, &bytes);
}

#[test]
fn draft_14_server_setup_names_the_selected_version() {
    let mut setup = ServerSetup {
        version: Some(0xff00_000e),
        options: SetupOptions::default(),
    };
    setup.options.max_request_id = Some(100);
    #[rustfmt::skip]
    let bytes = [
        0x21, 0x00, 0x0c,                                     // SERVER_SETUP, length 12
        0xc0, 0x00, 0x00, 0x00, 0xff, 0x00, 0x00, 0x0e,       // 0xff00000e
        0x01, 0x02, 0x40, 0x64,                               // MAX_REQUEST_ID 100
    ];
    vector(&setup, Draft::D14, &bytes);
    let missing = ServerSetup::default();
    assert_eq!(
        missing.to_vec(Draft::D14),
        Err(EncodeError::InvalidValue("selected version"))
    );
}

#[test]
fn draft_14_reads_type_5_as_authority_and_sends_no_implementation() {
    let mut setup = ClientSetup {
        versions: vec![Draft::D14.version_number()],
        options: SetupOptions::default(),
    };
    setup.options.implementation = Some("moqx".into());
    let bytes = setup.to_vec(Draft::D14).unwrap();
    let decoded = ClientSetup::decode(&mut &bytes[..], Draft::D14).unwrap();
    assert_eq!(decoded.options, SetupOptions::default());

    setup.options.implementation = None;
    setup.options.authority = Some("example.com".into());
    let bytes = setup.to_vec(Draft::D14).unwrap();
    assert_eq!(ClientSetup::decode(&mut &bytes[..], Draft::D14), Ok(setup));
}

#[test]
fn draft_16_client_setup_has_no_versions_and_delta_types() {
    let mut setup = ClientSetup {
        versions: vec![],
        options: options("/chat"),
    };
    setup.options.max_request_id = Some(100);
    setup.options.implementation = Some("moqx/0.1".into());
    #[rustfmt::skip]
    let bytes = [
        0x20, 0x00, 0x15,                               // CLIENT_SETUP, length 21
        0x03,                                           // 3 parameters
        0x01, 0x05, b'/', b'c', b'h', b'a', b't',       // +1 = PATH "/chat"
        0x01, 0x40, 0x64,                               // +1 = MAX_REQUEST_ID 100
        0x05, 0x08, b'm', b'o', b'q', b'x', b'/', b'0', b'.', b'1', // +5 = MOQT_IMPLEMENTATION
    ];
    vector(&setup, Draft::D16, &bytes);
    let with_versions = ClientSetup {
        versions: vec![1],
        options: SetupOptions::default(),
    };
    assert_eq!(
        with_versions.to_vec(Draft::D16),
        Err(EncodeError::NotInVersion("setup versions"))
    );
}

#[test]
fn draft_18_setup_is_one_type_with_options_to_the_end() {
    let mut setup = ClientSetup {
        versions: vec![],
        options: options("/chat"),
    };
    setup.options.authority = Some("example.com".into());
    setup.options.implementation = Some("moqx/0.1".into());
    #[rustfmt::skip]
    let bytes = [
        0xaf, 0x00, 0x00, 0x1e,                         // SETUP (vi64 0x2F00), length 30
        0x01, 0x05, b'/', b'c', b'h', b'a', b't',       // +1 = PATH "/chat"
        0x04, 0x0b, b'e', b'x', b'a', b'm', b'p', b'l', b'e', b'.', b'c', b'o', b'm', // +4 = AUTHORITY
        0x02, 0x08, b'm', b'o', b'q', b'x', b'/', b'0', b'.', b'1', // +2 = MOQT_IMPLEMENTATION
    ];
    vector(&setup, Draft::D18, &bytes);
    // The server's SETUP is the same message type.
    let server = ServerSetup::default();
    assert_eq!(server.to_vec(Draft::D18).unwrap(), [0xaf, 0x00, 0x00, 0x00]);
    // Draft 18 has no MAX_REQUEST_ID.
    let mut old = ClientSetup::default();
    old.options.max_request_id = Some(1);
    assert_eq!(
        old.to_vec(Draft::D18),
        Err(EncodeError::NotInVersion("MAX_REQUEST_ID"))
    );
}

#[test]
fn unknown_options_are_kept_and_known_ones_may_not_repeat() {
    // A grease option (0x9D: odd, bytes) and a repeated AUTHORIZATION TOKEN are fine.
    let mut setup = ClientSetup::default();
    setup.options.authorization_tokens = vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")];
    setup.options.unknown = Parameters(vec![Parameter::bytes(0x9d, "grease")]);
    let bytes = setup.to_vec(Draft::D16).unwrap();
    assert_eq!(ClientSetup::decode(&mut &bytes[..], Draft::D16), Ok(setup));

    // PATH twice: delta 1, then delta 0.
    #[rustfmt::skip]
    let twice = [0x20, 0x00, 0x07, 0x02, 0x01, 0x01, b'a', 0x00, 0x01, b'b'];
    assert_eq!(
        ClientSetup::decode(&mut &twice[..], Draft::D16),
        Err(DecodeError::Duplicate(1))
    );
}

#[test]
fn a_payload_that_does_not_match_its_length_is_refused() {
    // SERVER_SETUP (16) with zero parameters but a length of 2: one byte left over.
    assert_eq!(
        ServerSetup::decode(&mut &[0x21, 0x00, 0x02, 0x00, 0x00][..], Draft::D16),
        Err(DecodeError::Long)
    );
    // A length of 1 but two parameters announced: they run past the payload.
    assert_eq!(
        ServerSetup::decode(&mut &[0x21, 0x00, 0x01, 0x02, 0x01, 0x00][..], Draft::D16),
        Err(DecodeError::Short)
    );
    // The wrong message type.
    assert_eq!(
        ServerSetup::decode(&mut &[0x20, 0x00, 0x01, 0x00][..], Draft::D16),
        Err(DecodeError::InvalidMessage(0x20))
    );
}

#[test]
fn goaway_gains_a_timeout_and_request_id_in_draft_18() {
    let to = GoAway {
        uri: "moqt://b.example/chat".into(),
        ..GoAway::default()
    };
    let mut bytes = vec![0x10, 0x00, 0x16, 0x15];
    bytes.extend_from_slice(b"moqt://b.example/chat");
    vector(&to, Draft::D14, &bytes);
    vector(&to, Draft::D16, &bytes);

    // Draft 18, on the control stream: empty URI, 5,000 ms (vi64 0x9388), request id 4.
    let control = GoAway {
        uri: String::new(),
        timeout: Some(std::time::Duration::from_secs(5)),
        request_id: Some(4),
    };
    vector(
        &control,
        Draft::D18,
        &[0x10, 0x00, 0x04, 0x00, 0x93, 0x88, 0x04],
    );
    // On a request stream: no request id.
    let request = GoAway {
        request_id: None,
        ..control.clone()
    };
    vector(&request, Draft::D18, &[0x10, 0x00, 0x03, 0x00, 0x93, 0x88]);
    assert_eq!(
        control.to_vec(Draft::D16),
        Err(EncodeError::NotInVersion("GOAWAY timeout and request id"))
    );
    // A URI over 8,192 bytes: length 8,193 (0x6001).
    assert_eq!(
        GoAway::decode(&mut &[0x10, 0x00, 0x02, 0x60, 0x01][..], Draft::D16),
        Err(DecodeError::BoundsExceeded("GOAWAY URI"))
    );
}

#[test]
fn request_id_flow_control_exists_before_draft_18() {
    vector(
        &MaxRequestId { request_id: 200 },
        Draft::D14,
        &[0x15, 0x00, 0x02, 0x40, 0xc8],
    );
    vector(
        &RequestsBlocked { maximum: 10 },
        Draft::D16,
        &[0x1a, 0x00, 0x01, 0x0a],
    );
    assert_eq!(
        MaxRequestId { request_id: 1 }.to_vec(Draft::D18),
        Err(EncodeError::NotInVersion("MAX_REQUEST_ID"))
    );
    assert_eq!(
        RequestsBlocked::decode(&mut &[0x1a, 0x00, 0x01, 0x0a][..], Draft::D18),
        Err(DecodeError::InvalidMessage(0x1a))
    );
}

pub(super) fn room() -> Namespace {
    Namespace::from_strs(["room"])
}

#[test]
fn publish_namespace_and_its_draft_14_replies() {
    let publish = PublishNamespace {
        request_id: 2,
        namespace: room(),
        parameters: MessageParameters::default(),
    };
    vector(&publish, Draft::D14, b"\x06\x00\x08\x02\x01\x04room\x00");
    vector(
        &PublishNamespaceOk { request_id: 2 },
        Draft::D14,
        &[0x07, 0x00, 0x01, 0x02],
    );
    let refused = PublishNamespaceError {
        request_id: 2,
        code: 0x10,
        reason: "no".into(),
    };
    vector(&refused, Draft::D14, b"\x08\x00\x05\x02\x10\x02no");
    // Those replies are REQUEST_OK and REQUEST_ERROR from 16.
    assert_eq!(
        PublishNamespaceOk { request_id: 2 }.to_vec(Draft::D16),
        Err(EncodeError::NotInVersion("PUBLISH_NAMESPACE_OK"))
    );
}

#[test]
fn publish_namespace_on_18_carries_its_token_as_a_typed_parameter() {
    let publish = PublishNamespace {
        request_id: 0,
        namespace: room(),
        parameters: MessageParameters {
            authorization_tokens: vec![Bytes::from_static(b"tok")],
            ..MessageParameters::default()
        },
    };
    vector(
        &publish,
        Draft::D18,
        b"\x06\x00\x0d\x00\x01\x04room\x01\x03\x03tok",
    );
    // A parameter PUBLISH_NAMESPACE does not allow (FORWARD) closes the session on 18.
    assert_eq!(
        PublishNamespace::decode(
            &mut &b"\x06\x00\x0a\x00\x01\x04room\x01\x10\x01"[..],
            Draft::D18
        ),
        Err(DecodeError::ParameterNotAllowed(0x10))
    );
}

#[test]
fn request_ok_and_request_error() {
    let ok = RequestOk {
        request_id: Some(2),
        ..RequestOk::default()
    };
    vector(&ok, Draft::D16, &[0x07, 0x00, 0x02, 0x02, 0x00]);
    vector(&RequestOk::default(), Draft::D18, &[0x07, 0x00, 0x01, 0x00]);
    assert_eq!(
        ok.to_vec(Draft::D18),
        Err(EncodeError::NotInVersion("a reply's request id"))
    );

    let refused = RequestError {
        request_id: Some(4),
        code: 0x1,
        retry_after: None,
        reason: String::new(),
        redirect: None,
    };
    vector(
        &refused,
        Draft::D16,
        &[0x05, 0x00, 0x04, 0x04, 0x01, 0x00, 0x00],
    );
    // Retry at once: 0 ms, 1 on the wire.
    let retry = RequestError {
        retry_after: Some(std::time::Duration::ZERO),
        ..refused
    };
    vector(
        &retry,
        Draft::D16,
        &[0x05, 0x00, 0x04, 0x04, 0x01, 0x01, 0x00],
    );

    // Draft 18: REDIRECT to the same names on this session.
    let redirect = RequestError {
        request_id: None,
        code: REDIRECT,
        retry_after: Some(std::time::Duration::ZERO),
        reason: String::new(),
        redirect: Some(Redirect::default()),
    };
    vector(
        &redirect,
        Draft::D18,
        &[0x05, 0x00, 0x06, 0x34, 0x01, 0x00, 0x00, 0x00, 0x00],
    );
}

#[test]
fn a_publication_ends_by_namespace_on_14_by_request_on_16_and_by_stream_on_18() {
    let by_namespace = PublishNamespaceDone {
        publication: Publication::Namespace(room()),
    };
    vector(&by_namespace, Draft::D14, b"\x09\x00\x06\x01\x04room");
    let by_request = PublishNamespaceDone {
        publication: Publication::Request(2),
    };
    vector(&by_request, Draft::D16, &[0x09, 0x00, 0x01, 0x02]);
    assert_eq!(
        by_request.to_vec(Draft::D14),
        Err(EncodeError::NotInVersion(
            "this form of the published namespace"
        ))
    );
    assert_eq!(
        by_request.to_vec(Draft::D18),
        Err(EncodeError::NotInVersion("PUBLISH_NAMESPACE_DONE"))
    );
    let cancel = PublishNamespaceCancel {
        publication: Publication::Request(2),
        code: 0x10,
        reason: String::new(),
    };
    vector(&cancel, Draft::D16, &[0x0c, 0x00, 0x03, 0x02, 0x10, 0x00]);
}

#[test]
fn subscribe_namespace_in_each_draft() {
    let every = SubscribeNamespace {
        request_id: 4,
        prefix: Namespace::default(),
        options: Some(SubscribeOptions::Both),
        parameters: MessageParameters::default(),
    };
    vector(
        &every,
        Draft::D16,
        &[0x11, 0x00, 0x04, 0x04, 0x00, 0x02, 0x00],
    );
    let every_18 = SubscribeNamespace {
        options: None,
        ..every.clone()
    };
    vector(&every_18, Draft::D18, &[0x50, 0x00, 0x03, 0x04, 0x00, 0x00]);
    // 14's text asks for at least one field; one with none (every namespace) is read all
    // the same, as deployed relays send it.
    assert_eq!(
        SubscribeNamespace::decode(&mut &[0x11, 0x00, 0x03, 0x04, 0x00, 0x00][..], Draft::D14),
        Ok(SubscribeNamespace {
            options: None,
            ..every.clone()
        })
    );
    vector(
        &UnsubscribeNamespace { prefix: room() },
        Draft::D14,
        b"\x14\x00\x06\x01\x04room",
    );
    let tracks = SubscribeTracks {
        request_id: 6,
        prefix: room(),
        parameters: MessageParameters::default(),
    };
    vector(&tracks, Draft::D18, b"\x51\x00\x08\x06\x01\x04room\x00");
}

#[test]
fn namespace_notices_carry_the_suffix() {
    let announced = NamespaceAnnounced {
        suffix: Namespace::from_strs(["alice"]),
    };
    vector(&announced, Draft::D16, b"\x08\x00\x07\x01\x05alice");
    let done = NamespaceDone {
        suffix: Namespace::from_strs(["alice"]),
    };
    vector(&done, Draft::D18, b"\x0e\x00\x07\x01\x05alice");
    assert_eq!(
        announced.to_vec(Draft::D14),
        Err(EncodeError::NotInVersion("NAMESPACE"))
    );
}

#[test]
fn publish_blocked_names_a_track_under_the_prefix() {
    let blocked = PublishBlocked {
        suffix: Namespace::from_strs(["alice"]),
        name: Bytes::from_static(b"chat"),
    };
    vector(&blocked, Draft::D18, b"\x0f\x00\x0c\x01\x05alice\x04chat");
    assert_eq!(
        blocked.to_vec(Draft::D16),
        Err(EncodeError::NotInVersion("PUBLISH_BLOCKED"))
    );
}
