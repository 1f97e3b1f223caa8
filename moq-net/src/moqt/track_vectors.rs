//! Byte vectors written from each draft's text for requests about one track:
//! subscriptions, publications, fetches, track status and updates, and which parameters
//! each allows.

use bytes::Bytes;

use super::vectors::{room, vector};
use super::*;
use crate::coding::{DecodeError, EncodeError};

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
