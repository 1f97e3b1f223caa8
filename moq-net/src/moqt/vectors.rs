//! Byte vectors written from each draft's text: what a peer built from that text sends.

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
fn vector<M: Control + std::fmt::Debug + PartialEq>(message: &M, draft: Draft, bytes: &[u8]) {
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

fn room() -> Namespace {
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
    // 14 asks for at least one field.
    assert!(
        SubscribeNamespace::decode(&mut &[0x11, 0x00, 0x03, 0x04, 0x00, 0x00][..], Draft::D14)
            .is_err()
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

fn live_chat() -> Subscribe {
    Subscribe {
        request_id: 0,
        namespace: room(),
        name: Bytes::from_static(b"chat"),
        parameters: MessageParameters {
            subscriber_priority: Some(128),
            forward: Some(true),
            filter: Some(Filter::LargestObject),
            ..MessageParameters::default()
        },
    }
}

#[test]
fn subscribe_carries_the_subscription_as_fields_on_14_and_parameters_after() {
    #[rustfmt::skip]
    let d14 = [
        0x03, 0x00, 0x11, 0x00,
        0x01, 0x04, b'r', b'o', b'o', b'm', 0x04, b'c', b'h', b'a', b't',
        0x80,                   // subscriber priority 128
        0x00,                   // group order: the publisher's
        0x01,                   // forward
        0x02,                   // filter: Largest Object
        0x00,                   // no parameters
    ];
    vector(&live_chat(), Draft::D14, &d14);
    #[rustfmt::skip]
    let d16 = [
        0x03, 0x00, 0x15, 0x00,
        0x01, 0x04, b'r', b'o', b'o', b'm', 0x04, b'c', b'h', b'a', b't',
        0x03, 0x10, 0x01, 0x10, 0x40, 0x80, 0x01, 0x01, 0x02,
    ];
    vector(&live_chat(), Draft::D16, &d16);
    #[rustfmt::skip]
    let d18 = [
        0x03, 0x00, 0x14, 0x00,
        0x01, 0x04, b'r', b'o', b'o', b'm', 0x04, b'c', b'h', b'a', b't',
        0x03, 0x10, 0x01, 0x10, 0x80, 0x01, 0x01, 0x02,
    ];
    vector(&live_chat(), Draft::D18, &d18);
    // On 14 a subscription without a filter is sent as AbsoluteStart {0, 0}.
    let mut unfiltered = live_chat();
    unfiltered.parameters.filter = None;
    let bytes = unfiltered.to_vec(Draft::D14).unwrap();
    let read = Subscribe::decode(&mut &bytes[..], Draft::D14).unwrap();
    assert_eq!(
        read.parameters.filter,
        Some(Filter::AbsoluteStart(Location::default()))
    );
}

#[test]
fn subscribe_ok_in_each_draft() {
    let d14 = SubscribeOk {
        request_id: Some(0),
        track_alias: 7,
        group_order: Some(GroupOrder::Ascending),
        parameters: MessageParameters {
            largest_object: Some(Location {
                group: 5,
                object: 2,
            }),
            ..MessageParameters::default()
        },
        properties: Parameters::default(),
    };
    vector(
        &d14,
        Draft::D14,
        &[
            0x04, 0x00, 0x08, 0x00, 0x07, 0x00, 0x01, 0x01, 0x05, 0x02, 0x00,
        ],
    );
    let d16 = SubscribeOk {
        group_order: None,
        ..d14.clone()
    };
    vector(
        &d16,
        Draft::D16,
        &[0x04, 0x00, 0x07, 0x00, 0x07, 0x01, 0x09, 0x02, 0x05, 0x02],
    );
    let d18 = SubscribeOk {
        request_id: None,
        properties: Parameters(vec![Parameter::int(0x0e, 3)]),
        ..d16.clone()
    };
    vector(
        &d18,
        Draft::D18,
        &[0x04, 0x00, 0x07, 0x07, 0x01, 0x09, 0x05, 0x02, 0x0e, 0x03],
    );
    assert_eq!(
        d14.to_vec(Draft::D16),
        Err(EncodeError::NotInVersion("SUBSCRIBE_OK group order"))
    );
    // Content Exists 2 is not a flag.
    assert_eq!(
        SubscribeOk::decode(
            &mut &[0x04, 0x00, 0x05, 0x00, 0x07, 0x00, 0x01, 0x02][..],
            Draft::D14
        ),
        Err(DecodeError::InvalidValue("content exists"))
    );
    vector(
        &Unsubscribe { request_id: 2 },
        Draft::D16,
        &[0x0a, 0x00, 0x01, 0x02],
    );
    assert_eq!(
        Unsubscribe { request_id: 2 }.to_vec(Draft::D18),
        Err(EncodeError::NotInVersion("UNSUBSCRIBE"))
    );
}

fn offer() -> Publish {
    Publish {
        request_id: 1,
        namespace: room(),
        name: Bytes::from_static(b"chat"),
        track_alias: 3,
        group_order: None,
        parameters: MessageParameters {
            forward: Some(true),
            ..MessageParameters::default()
        },
        properties: Parameters::default(),
    }
}

#[test]
fn publish_in_each_draft() {
    let d14 = Publish {
        group_order: Some(GroupOrder::Ascending),
        ..offer()
    };
    #[rustfmt::skip]
    let bytes = [
        0x1d, 0x00, 0x11, 0x01,
        0x01, 0x04, b'r', b'o', b'o', b'm', 0x04, b'c', b'h', b'a', b't',
        0x03,                   // track alias
        0x01,                   // group order: ascending
        0x00,                   // no content yet
        0x01,                   // forward
        0x00,                   // no parameters
    ];
    vector(&d14, Draft::D14, &bytes);
    #[rustfmt::skip]
    let bytes = [
        0x1d, 0x00, 0x10, 0x01,
        0x01, 0x04, b'r', b'o', b'o', b'm', 0x04, b'c', b'h', b'a', b't',
        0x03, 0x01, 0x10, 0x01,
    ];
    vector(&offer(), Draft::D16, &bytes);
    let d18 = Publish {
        properties: Parameters(vec![Parameter::int(0x22, 1)]),
        ..offer()
    };
    #[rustfmt::skip]
    let bytes = [
        0x1d, 0x00, 0x12, 0x01,
        0x01, 0x04, b'r', b'o', b'o', b'm', 0x04, b'c', b'h', b'a', b't',
        0x03, 0x01, 0x10, 0x01,
        0x22, 0x01,             // DEFAULT_PUBLISHER_GROUP_ORDER ascending
    ];
    vector(&d18, Draft::D18, &bytes);
    assert_eq!(
        d18.to_vec(Draft::D14),
        Err(EncodeError::InvalidValue("PUBLISH group order"))
    );
}

#[test]
fn publish_ok_and_publish_done() {
    let accept = PublishOk {
        request_id: 1,
        parameters: MessageParameters {
            forward: Some(true),
            subscriber_priority: Some(128),
            group_order: Some(GroupOrder::Ascending),
            filter: Some(Filter::LargestObject),
            ..MessageParameters::default()
        },
    };
    vector(
        &accept,
        Draft::D14,
        &[0x1e, 0x00, 0x06, 0x01, 0x01, 0x80, 0x01, 0x02, 0x00],
    );
    // 14's PUBLISH_OK has no "publisher's order" (0).
    assert_eq!(
        PublishOk::decode(
            &mut &[0x1e, 0x00, 0x06, 0x01, 0x01, 0x80, 0x00, 0x02, 0x00][..],
            Draft::D14
        ),
        Err(DecodeError::InvalidValue("group order"))
    );
    #[rustfmt::skip]
    let d16 = [
        0x1e, 0x00, 0x0c, 0x01,
        0x04, 0x10, 0x01, 0x10, 0x40, 0x80, 0x01, 0x01, 0x02, 0x01, 0x01,
    ];
    vector(&accept, Draft::D16, &d16);
    // On 18 a PUBLISH is accepted with REQUEST_OK.
    assert_eq!(
        accept.to_vec(Draft::D18),
        Err(EncodeError::NotInVersion("PUBLISH_OK"))
    );
    let done = PublishDone {
        request_id: Some(1),
        status: 0x2,
        stream_count: 5,
        reason: String::new(),
    };
    vector(
        &done,
        Draft::D16,
        &[0x0b, 0x00, 0x04, 0x01, 0x02, 0x05, 0x00],
    );
    let done_18 = PublishDone {
        request_id: None,
        ..done
    };
    vector(&done_18, Draft::D18, &[0x0b, 0x00, 0x03, 0x02, 0x05, 0x00]);
}

#[test]
fn fetch_standalone_and_joining() {
    let standalone = Fetch {
        request_id: 2,
        range: FetchRange::Standalone {
            namespace: room(),
            name: Bytes::from_static(b"chat"),
            start: Location {
                group: 1,
                object: 0,
            },
            end: Location {
                group: 3,
                object: 0,
            },
        },
        parameters: MessageParameters {
            subscriber_priority: Some(128),
            ..MessageParameters::default()
        },
    };
    #[rustfmt::skip]
    let d14 = [
        0x16, 0x00, 0x14, 0x02,
        0x80, 0x00,             // priority 128, the publisher's group order
        0x01,                   // standalone
        0x01, 0x04, b'r', b'o', b'o', b'm', 0x04, b'c', b'h', b'a', b't',
        0x01, 0x00, 0x03, 0x00, // from {1, 0} up to group 3
        0x00,
    ];
    vector(&standalone, Draft::D14, &d14);

    let relative = Fetch {
        request_id: 4,
        range: FetchRange::RelativeJoining {
            request_id: 2,
            groups_back: 1,
        },
        parameters: MessageParameters {
            subscriber_priority: Some(10),
            ..MessageParameters::default()
        },
    };
    vector(
        &relative,
        Draft::D16,
        &[0x16, 0x00, 0x07, 0x04, 0x02, 0x02, 0x01, 0x01, 0x20, 0x0a],
    );
    let absolute = Fetch {
        request_id: 4,
        range: FetchRange::AbsoluteJoining {
            request_id: 2,
            start_group: 5,
        },
        parameters: MessageParameters::default(),
    };
    vector(
        &absolute,
        Draft::D18,
        &[0x16, 0x00, 0x05, 0x04, 0x03, 0x02, 0x05, 0x00],
    );
    assert_eq!(
        Fetch::decode(&mut &[0x16, 0x00, 0x03, 0x04, 0x04, 0x00][..], Draft::D16),
        Err(DecodeError::InvalidValue("fetch type"))
    );
}

#[test]
fn fetch_ok_and_cancel() {
    let d14 = FetchOk {
        request_id: Some(2),
        group_order: Some(GroupOrder::Ascending),
        end_of_track: false,
        end: Location {
            group: 3,
            object: 0,
        },
        ..FetchOk::default()
    };
    vector(
        &d14,
        Draft::D14,
        &[0x18, 0x00, 0x06, 0x02, 0x01, 0x00, 0x03, 0x00, 0x00],
    );
    let d16 = FetchOk {
        group_order: None,
        end_of_track: true,
        ..d14.clone()
    };
    vector(
        &d16,
        Draft::D16,
        &[0x18, 0x00, 0x05, 0x02, 0x01, 0x03, 0x00, 0x00],
    );
    let d18 = FetchOk {
        request_id: None,
        ..d16.clone()
    };
    vector(
        &d18,
        Draft::D18,
        &[0x18, 0x00, 0x04, 0x01, 0x03, 0x00, 0x00],
    );
    vector(
        &FetchCancel { request_id: 2 },
        Draft::D14,
        &[0x17, 0x00, 0x01, 0x02],
    );
    assert_eq!(
        FetchCancel { request_id: 2 }.to_vec(Draft::D18),
        Err(EncodeError::NotInVersion("FETCH_CANCEL"))
    );
}

#[test]
fn track_status_has_subscribe_s_layout() {
    let status = TrackStatus {
        request_id: 2,
        namespace: room(),
        name: Bytes::from_static(b"chat"),
        parameters: MessageParameters::default(),
    };
    vector(
        &status,
        Draft::D16,
        b"\x0d\x00\x0d\x02\x01\x04room\x04chat\x00",
    );
    // It asks for no objects: FORWARD is not a TRACK_STATUS parameter from 16.
    let forward = TrackStatus {
        parameters: MessageParameters {
            forward: Some(true),
            ..MessageParameters::default()
        },
        ..status.clone()
    };
    assert_eq!(
        forward.to_vec(Draft::D16),
        Err(EncodeError::NotInVersion("FORWARD"))
    );
    assert_eq!(
        TrackStatus::decode(
            &mut &b"\x0d\x00\x0f\x02\x01\x04room\x04chat\x01\x10\x01"[..],
            Draft::D18
        ),
        Err(DecodeError::ParameterNotAllowed(0x10))
    );
    let answer = TrackStatusOk {
        request_id: Some(2),
        track_alias: 0,
        group_order: Some(GroupOrder::Ascending),
        parameters: MessageParameters {
            largest_object: Some(Location {
                group: 4,
                object: 1,
            }),
            ..MessageParameters::default()
        },
        properties: Parameters::default(),
    };
    vector(
        &answer,
        Draft::D14,
        &[
            0x0e, 0x00, 0x08, 0x02, 0x00, 0x00, 0x01, 0x01, 0x04, 0x01, 0x00,
        ],
    );
    assert_eq!(
        answer.to_vec(Draft::D16),
        Err(EncodeError::NotInVersion("TRACK_STATUS_OK"))
    );
}

#[test]
fn request_update_and_draft_14_s_subscribe_update() {
    let narrow = RequestUpdate {
        request_id: 2,
        existing_request_id: Some(0),
        parameters: MessageParameters {
            filter: Some(Filter::AbsoluteRange {
                start: Location {
                    group: 5,
                    object: 0,
                },
                end_group: 7,
            }),
            subscriber_priority: Some(10),
            forward: Some(false),
            ..MessageParameters::default()
        },
    };
    // Start {5, 0}, End Group 7 + 1, priority 10, forward 0.
    vector(
        &narrow,
        Draft::D14,
        &[
            0x02, 0x00, 0x08, 0x02, 0x00, 0x05, 0x00, 0x08, 0x0a, 0x00, 0x00,
        ],
    );
    let pause = RequestUpdate {
        request_id: 2,
        existing_request_id: Some(0),
        parameters: MessageParameters {
            forward: Some(false),
            ..MessageParameters::default()
        },
    };
    vector(
        &pause,
        Draft::D16,
        &[0x02, 0x00, 0x05, 0x02, 0x00, 0x01, 0x10, 0x00],
    );
    let pause_18 = RequestUpdate {
        existing_request_id: None,
        ..pause.clone()
    };
    vector(
        &pause_18,
        Draft::D18,
        &[0x02, 0x00, 0x04, 0x02, 0x01, 0x10, 0x00],
    );
    // 14 cannot say "from the largest object" in an update.
    assert_eq!(
        pause.to_vec(Draft::D14),
        Err(EncodeError::InvalidValue("SUBSCRIBE_UPDATE range"))
    );
}

#[test]
fn each_message_allows_the_parameters_its_draft_lists() {
    // A delivery timeout is a PUBLISH parameter on 14 only.
    let timed = Publish {
        group_order: None,
        parameters: MessageParameters {
            delivery_timeout: Some(std::time::Duration::from_secs(1)),
            ..MessageParameters::default()
        },
        ..offer()
    };
    assert_eq!(
        timed.to_vec(Draft::D18),
        Err(EncodeError::NotInVersion("DELIVERY_TIMEOUT"))
    );
    // FORWARD: SUBSCRIBE_NAMESPACE on 16, SUBSCRIBE_TRACKS (not SUBSCRIBE_NAMESPACE) on 18.
    let forward = MessageParameters {
        forward: Some(true),
        ..MessageParameters::default()
    };
    let namespaces = SubscribeNamespace {
        request_id: 4,
        prefix: room(),
        options: None,
        parameters: forward.clone(),
    };
    assert_eq!(
        namespaces.to_vec(Draft::D18),
        Err(EncodeError::NotInVersion("FORWARD"))
    );
    let tracks = SubscribeTracks {
        request_id: 4,
        prefix: room(),
        parameters: forward,
    };
    assert!(tracks.to_vec(Draft::D18).is_ok());
    // 16: a DELIVERY_TIMEOUT of 0 closes the session.
    assert_eq!(
        Subscribe::decode(
            &mut &b"\x03\x00\x0f\x00\x01\x04room\x04chat\x01\x02\x00"[..],
            Draft::D16
        ),
        Err(DecodeError::InvalidValue("DELIVERY_TIMEOUT"))
    );
    // REQUEST_OK on 16 answers no PUBLISH: FORWARD is ignored there.
    let ok = RequestOk::decode(
        &mut &[0x07, 0x00, 0x04, 0x02, 0x01, 0x10, 0x01][..],
        Draft::D16,
    );
    assert_eq!(ok.map(|ok| ok.parameters.forward), Ok(None));
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
