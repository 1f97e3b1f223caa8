//! The codec across versions: byte vectors for -03, -04 and -06-wip written from the spec
//! text (`shared/spec/moq-lite-05.md`, "Version deltas", and the -05 layouts they amend;
//! the -05 vectors are in `vectors.rs`), round trips of every message on every version
//! that has it, and a clear `NotInVersion` for every message a version lacks.

use std::num::NonZeroU64;
use std::time::Duration;

use moqx_net::coding::{
    Announce, AnnounceOk, AnnounceRequest, AnnounceStatus, DecodeError, EncodeError, Fetch,
    FrameHeader, GoAway, Group, GroupDecoder, GroupItem, Message, Probe, Setup, Subscribe,
    SubscribeResponse, SubscribeUpdate, Track, TrackInfo, TypedAnnounce, Version,
    varint::MAX_VARINT,
};
use moqx_net::model::Path;
use proptest::prelude::*;

use Version::{Lite03, Lite04, Lite05, Lite06Wip};

fn hex(text: &str) -> Vec<u8> {
    let text: String = text.split_whitespace().collect();
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// `message` encodes to `bytes` on `version`, and `bytes` decode back to it.
fn vector<M: Message + PartialEq + std::fmt::Debug>(version: Version, message: M, bytes: &str) {
    let bytes = hex(bytes);
    assert_eq!(
        message.to_vec(version).unwrap(),
        bytes,
        "{message:?} on {version}"
    );
    let mut cursor = &bytes[..];
    assert_eq!(M::decode(&mut cursor, version), Ok(message));
    assert!(cursor.is_empty());
}

fn response(version: Version, message: SubscribeResponse, bytes: &str) {
    let bytes = hex(bytes);
    assert_eq!(
        message.to_vec(version).unwrap(),
        bytes,
        "{message:?} on {version}"
    );
    assert_eq!(
        SubscribeResponse::decode(&mut &bytes[..], version),
        Ok(message)
    );
}

fn typed(message: TypedAnnounce, bytes: &str) {
    let bytes = hex(bytes);
    assert_eq!(message.to_vec(Lite06Wip).unwrap(), bytes, "{message:?}");
    assert_eq!(
        TypedAnnounce::decode(&mut &bytes[..], Lite06Wip),
        Ok(message)
    );
}

fn alice(status: AnnounceStatus, hops: Vec<u64>) -> Announce {
    Announce {
        status,
        suffix: Path::new("alice"),
        hops,
    }
}

#[test]
fn announce_request_carries_exclude_hop_on_04_and_05_only() {
    let request = |exclude_hop| AnnounceRequest {
        prefix: Path::new("room/a"),
        exclude_hop,
    };
    // length 11, prefix "room/a", exclude hop 123456789 as a 4-byte varint.
    for version in [Lite04, Lite05] {
        vector(version, request(123_456_789), "0b 06 726f6f6d2f61 875bcd15");
    }
    // -03 has no Exclude Hop yet, -06 has none any more (the SETUP Origin says it).
    for version in [Lite03, Lite06Wip] {
        vector(version, request(0), "07 06 726f6f6d2f61");
        assert_eq!(
            request(123_456_789).to_vec(version).unwrap(),
            hex("07 06 726f6f6d2f61"),
            "not written on {version}"
        );
    }
}

#[test]
fn announce_ok_exists_from_05() {
    let ok = AnnounceOk {
        hop_id: 0x0123_4567_89ab_cdef,
        active_count: 2,
    };
    for version in [Lite05, Lite06Wip] {
        vector(version, ok.clone(), "09 c123456789abcdef 02");
    }
    for version in [Lite03, Lite04] {
        assert_eq!(
            ok.to_vec(version),
            Err(EncodeError::NotInVersion("ANNOUNCE_OK"))
        );
        assert_eq!(
            AnnounceOk::decode(&mut &hex("09 c123456789abcdef 02")[..], version),
            Err(DecodeError::NotInVersion("ANNOUNCE_OK"))
        );
    }
}

#[test]
fn announce_carries_a_hop_count_on_03_and_hop_ids_on_04_and_05() {
    let hops = vec![1, 300, 0x0123_4567_89ab_cdef];
    // -04 and -05: status, suffix, count 3, then 1 (1 byte), 300 (2 bytes), 8 bytes.
    for version in [Lite04, Lite05] {
        vector(
            version,
            alice(AnnounceStatus::Active, hops.clone()),
            "13 01 05 616c696365 03 01 412c c123456789abcdef",
        );
    }
    // -03: the count alone, read back as that many unknown hops.
    assert_eq!(
        alice(AnnounceStatus::Active, hops).to_vec(Lite03).unwrap(),
        hex("08 01 05 616c696365 03")
    );
    vector(
        Lite03,
        alice(AnnounceStatus::Active, vec![0, 0, 0]),
        "08 01 05 616c696365 03",
    );
    // An end carries an empty chain on every untyped version.
    for version in [Lite03, Lite04, Lite05] {
        vector(
            version,
            alice(AnnounceStatus::Ended, vec![]),
            "08 00 05 616c696365 00",
        );
    }
}

#[test]
fn announce_status_2_is_a_restart_on_05_and_invalid_before() {
    let restart = hex("08 02 05 616c696365 00");
    assert_eq!(
        Announce::decode(&mut &restart[..], Lite05),
        Ok(alice(AnnounceStatus::Active, vec![]))
    );
    for version in [Lite03, Lite04] {
        assert_eq!(
            Announce::decode(&mut &restart[..], version),
            Err(DecodeError::InvalidValue("ANNOUNCE status"))
        );
    }
}

#[test]
fn announcements_are_typed_on_06() {
    typed(
        TypedAnnounce::Start {
            suffix: Path::new("alice"),
            hops: vec![1, 300, 0x0123_4567_89ab_cdef],
            cost: 12,
        },
        "00 13 05 616c696365 03 01 412c c123456789abcdef 0c",
    );
    typed(
        TypedAnnounce::Start {
            suffix: Path::new("room/bob"),
            hops: vec![],
            cost: 0,
        },
        "00 0b 08 726f6f6d2f626f62 00 00",
    );
    typed(TypedAnnounce::End { id: 42 }, "01 01 2a");
    typed(
        TypedAnnounce::Restart {
            id: 3,
            hops: vec![7],
            cost: 12,
        },
        "02 04 03 01 07 0c",
    );
    // An unknown type, and the untyped ANNOUNCE, on -06.
    assert_eq!(
        TypedAnnounce::decode(&mut &hex("03 01 00")[..], Lite06Wip),
        Err(DecodeError::InvalidMessage(3))
    );
    assert_eq!(
        alice(AnnounceStatus::Ended, vec![]).to_vec(Lite06Wip),
        Err(EncodeError::NotInVersion("ANNOUNCE (untyped)"))
    );
    // And the typed ones anywhere else.
    for version in [Lite03, Lite04, Lite05] {
        assert_eq!(
            TypedAnnounce::End { id: 1 }.to_vec(version),
            Err(EncodeError::NotInVersion("typed announcements"))
        );
    }
}

#[test]
fn subscribe_and_its_update_are_the_same_on_every_version() {
    let subscribe = Subscribe {
        id: 0,
        broadcast: Path::new("room/alice"),
        track: "video".into(),
        priority: 1,
        ordered: true,
        max_latency: Duration::from_millis(500),
        start: None,
        end: None,
    };
    let update = SubscribeUpdate {
        priority: 2,
        ordered: false,
        max_latency: Duration::from_millis(1000),
        start: Some(12),
        end: None,
    };
    for version in Version::LITE {
        vector(
            version,
            subscribe.clone(),
            "18 00 0a 726f6f6d2f616c696365 05 766964656f 01 01 41f4 00 00",
        );
        vector(version, update.clone(), "06 02 00 43e8 0d 00");
    }
}

#[test]
fn subscribe_replies_are_ok_and_drop_before_05_and_start_end_drop_from_05() {
    for version in [Lite03, Lite04] {
        // As a deployed publisher sends it: the subscriber's priority, then zeros.
        response(
            version,
            SubscribeResponse::Ok {
                priority: 1,
                ordered: false,
                max_latency: Duration::ZERO,
                start: None,
                end: None,
            },
            "00 05 01 00 00 00 00",
        );
        response(
            version,
            SubscribeResponse::Ok {
                priority: 7,
                ordered: true,
                max_latency: Duration::from_millis(250),
                start: Some(3),
                end: None,
            },
            "00 06 07 01 40fa 04 00",
        );
        // SUBSCRIBE_DROP is type 1 before -05.
        response(
            version,
            SubscribeResponse::Drop {
                start: 3,
                end: 5,
                error: 0,
            },
            "01 03 03 05 00",
        );
        assert_eq!(
            SubscribeResponse::Start { group: 1 }.to_vec(version),
            Err(EncodeError::NotInVersion("SUBSCRIBE_START"))
        );
        assert_eq!(
            SubscribeResponse::End { group: 1 }.to_vec(version),
            Err(EncodeError::NotInVersion("SUBSCRIBE_END"))
        );
        assert_eq!(
            SubscribeResponse::decode(&mut &hex("02 03 03 05 00")[..], version),
            Err(DecodeError::InvalidMessage(2))
        );
    }
    for version in [Lite05, Lite06Wip] {
        response(version, SubscribeResponse::Start { group: 5 }, "00 01 05");
        response(version, SubscribeResponse::End { group: 6 }, "01 01 06");
        response(
            version,
            SubscribeResponse::Drop {
                start: 3,
                end: 5,
                error: 0,
            },
            "02 03 03 05 00",
        );
        let ok = SubscribeResponse::Ok {
            priority: 1,
            ordered: false,
            max_latency: Duration::ZERO,
            start: None,
            end: None,
        };
        assert_eq!(
            ok.to_vec(version),
            Err(EncodeError::NotInVersion("SUBSCRIBE_OK"))
        );
    }
}

#[test]
fn track_fetch_setup_and_datagrams_exist_from_05() {
    let track = Track {
        broadcast: Path::new("room"),
        track: "chat".into(),
    };
    let info = TrackInfo {
        priority: 0,
        ordered: false,
        max_latency: Duration::from_secs(5),
        timescale: NonZeroU64::new(1000).unwrap(),
    };
    for version in [Lite05, Lite06Wip] {
        vector(version, info.clone(), "06 00 00 5388 43e8");
        vector(version, Setup::default(), "01 00");
    }
    for version in [Lite03, Lite04] {
        assert_eq!(
            track.to_vec(version),
            Err(EncodeError::NotInVersion("TRACK"))
        );
        assert_eq!(
            info.to_vec(version),
            Err(EncodeError::NotInVersion("TRACK_INFO"))
        );
        assert_eq!(
            TrackInfo::decode(&mut &hex("06 00 00 5388 43e8")[..], version),
            Err(DecodeError::NotInVersion("TRACK_INFO"))
        );
        assert_eq!(
            Setup::default().to_vec(version),
            Err(EncodeError::NotInVersion("SETUP"))
        );
        let fetch = Fetch {
            broadcast: Path::new("room"),
            track: "chat".into(),
            priority: 0,
            group: 1,
        };
        assert_eq!(
            fetch.to_vec(version),
            Err(EncodeError::NotInVersion("FETCH"))
        );
    }
}

#[test]
fn probe_has_an_rtt_from_04_and_goaway_exists_from_04() {
    let probe = Probe {
        bitrate: 1_000_000,
        rtt: Duration::from_millis(40),
    };
    for version in [Lite04, Lite05, Lite06Wip] {
        vector(version, probe, "05 800f4240 28");
        vector(version, GoAway { uri: String::new() }, "01 00");
    }
    assert_eq!(probe.to_vec(Lite03).unwrap(), hex("04 800f4240"));
    vector(
        Lite03,
        Probe {
            bitrate: 1_000_000,
            rtt: Duration::ZERO,
        },
        "04 800f4240",
    );
    assert_eq!(
        GoAway { uri: String::new() }.to_vec(Lite03),
        Err(EncodeError::NotInVersion("GOAWAY"))
    );
}

/// A whole group stream after its type byte: id 3, sequence 42, then three frames.
#[test]
fn frames_carry_no_timestamp_before_05() {
    let without = "02 03 2a 05 68656c6c6f 06 776f726c6421 03 616263";
    for version in [Lite03, Lite04] {
        let mut decoder = GroupDecoder::new(version, 1 << 20);
        decoder.push(&hex(without));
        assert_eq!(
            decoder.next_item(),
            Ok(Some(GroupItem::Header(Group {
                subscribe_id: 3,
                sequence: 42
            })))
        );
        for payload in ["hello", "world!", "abc"] {
            assert_eq!(
                decoder.next_item(),
                Ok(Some(GroupItem::Frame {
                    timestamp: None,
                    payload: payload.as_bytes().to_vec().into()
                }))
            );
        }
        assert_eq!(decoder.next_item(), Ok(None));
        assert_eq!(decoder.finish(), Ok(()));

        // What the encoder writes: the size alone, whatever the timestamp.
        let mut bytes = Vec::new();
        FrameHeader::new(0, 1000, 5)
            .encode(&mut bytes, version)
            .unwrap();
        assert_eq!(bytes, hex("05"));

        // Ending after a whole size is ending inside its payload.
        let mut decoder = GroupDecoder::new(version, 1 << 20);
        decoder.push(&hex("02 03 2a 05"));
        assert!(matches!(
            decoder.next_item(),
            Ok(Some(GroupItem::Header(_)))
        ));
        assert_eq!(decoder.next_item(), Ok(None));
        assert_eq!(decoder.finish(), Err(moqx_net::Error::WrongSize));
    }
    // The same frames on -05 have deltas (1000, +2, -3 as zigzag) before each size.
    let mut decoder = GroupDecoder::new(Lite05, 1 << 20);
    decoder.push(&hex(
        "02 03 2a 47d0 05 68656c6c6f 04 06 776f726c6421 05 03 616263",
    ));
    let mut timestamps = Vec::new();
    while let Ok(Some(item)) = decoder.next_item() {
        if let GroupItem::Frame { timestamp, .. } = item {
            timestamps.push(timestamp);
        }
    }
    assert_eq!(timestamps, [Some(1000), Some(1002), Some(999)]);
}

fn varint() -> impl Strategy<Value = u64> {
    prop_oneof![0..64u64, 0..16_384u64, 0..=MAX_VARINT]
}

fn path() -> impl Strategy<Value = Path> {
    proptest::collection::vec("[a-z0-9_.-]{1,8}", 0..=32)
        .prop_map(|parts| Path::new(parts.join("/")))
}

fn version() -> impl Strategy<Value = Version> {
    proptest::sample::select(Version::LITE.to_vec())
}

/// `message` round-trips on `version` to `expected`, and every strict prefix is `Short`.
fn round_trip_as<M: Message + PartialEq + std::fmt::Debug>(
    message: &M,
    expected: &M,
    version: Version,
) -> Result<(), TestCaseError> {
    let bytes = message.to_vec(version).expect("encodes");
    prop_assert_eq!(
        &M::decode(&mut &bytes[..], version).expect("decodes"),
        expected
    );
    for len in 0..bytes.len() {
        prop_assert_eq!(
            M::decode(&mut &bytes[..len], version).err(),
            Some(DecodeError::Short)
        );
    }
    Ok(())
}

proptest! {
    #[test]
    fn announce_messages_round_trip_on_every_version(
        version in version(),
        prefix in path(),
        exclude_hop in varint(),
        suffix in path(),
        hops in proptest::collection::vec(varint(), 0..=32),
        active in any::<bool>(),
        id in varint(),
        cost in varint(),
    ) {
        let request = AnnounceRequest { prefix: prefix.clone(), exclude_hop };
        let expected = AnnounceRequest {
            prefix,
            exclude_hop: if version.has_exclude_hop() { exclude_hop } else { 0 },
        };
        round_trip_as(&request, &expected, version)?;
        if version.has_announce_ok() {
            let ok = AnnounceOk { hop_id: exclude_hop, active_count: id };
            round_trip_as(&ok, &ok, version)?;
        }
        if version.has_typed_announce() {
            for message in [
                TypedAnnounce::Start { suffix, hops: hops.clone(), cost },
                TypedAnnounce::End { id },
                TypedAnnounce::Restart { id, hops, cost },
            ] {
                let bytes = message.to_vec(version).unwrap();
                prop_assert_eq!(TypedAnnounce::decode(&mut &bytes[..], version), Ok(message));
                for len in 0..bytes.len() {
                    prop_assert_eq!(TypedAnnounce::decode(&mut &bytes[..len], version), Err(DecodeError::Short));
                }
            }
        } else {
            let status = if active { AnnounceStatus::Active } else { AnnounceStatus::Ended };
            let announce = Announce { status, suffix, hops };
            let expected = Announce {
                hops: if version.has_hop_ids() { announce.hops.clone() } else { vec![0; announce.hops.len()] },
                ..announce.clone()
            };
            round_trip_as(&announce, &expected, version)?;
        }
    }

    #[test]
    fn subscribe_replies_round_trip_on_every_version(
        version in version(),
        priority in any::<u8>(),
        ordered in any::<bool>(),
        millis in 0..(1u64 << 40),
        start in proptest::option::of(0..MAX_VARINT),
        groups in (varint(), varint(), varint()),
    ) {
        let mut replies = vec![SubscribeResponse::Drop { start: groups.0, end: groups.1, error: groups.2 }];
        if version.has_track_stream() {
            replies.push(SubscribeResponse::Start { group: groups.0 });
            replies.push(SubscribeResponse::End { group: groups.1 });
        } else {
            replies.push(SubscribeResponse::Ok {
                priority, ordered, max_latency: Duration::from_millis(millis), start, end: start,
            });
        }
        for reply in replies {
            let bytes = reply.to_vec(version).unwrap();
            prop_assert_eq!(SubscribeResponse::decode(&mut &bytes[..], version), Ok(reply));
            for len in 0..bytes.len() {
                prop_assert_eq!(SubscribeResponse::decode(&mut &bytes[..len], version), Err(DecodeError::Short));
            }
        }
    }

    #[test]
    fn group_streams_round_trip_on_every_version(
        version in version(),
        frames in proptest::collection::vec((0..1_000_000u64, proptest::collection::vec(any::<u8>(), 0..50)), 0..10),
        split in any::<prop::sample::Index>(),
    ) {
        let mut stream = Vec::new();
        Group { subscribe_id: 1, sequence: 2 }.encode(&mut stream, version).unwrap();
        let mut previous = 0;
        for (timestamp, payload) in &frames {
            FrameHeader::new(previous, *timestamp, payload.len() as u64).encode(&mut stream, version).unwrap();
            stream.extend_from_slice(payload);
            previous = *timestamp;
        }
        let at = split.index(stream.len() + 1);
        let mut decoder = GroupDecoder::new(version, 1 << 20);
        let mut items = Vec::new();
        decoder.push(&stream[..at]);
        while let Some(item) = decoder.next_item().unwrap() { items.push(item); }
        decoder.push(&stream[at..]);
        while let Some(item) = decoder.next_item().unwrap() { items.push(item); }
        prop_assert_eq!(decoder.finish(), Ok(()));
        let expected: Vec<GroupItem> = std::iter::once(GroupItem::Header(Group { subscribe_id: 1, sequence: 2 }))
            .chain(frames.iter().map(|(timestamp, payload)| GroupItem::Frame {
                timestamp: version.has_frame_timestamps().then_some(*timestamp),
                payload: payload.clone().into(),
            }))
            .collect();
        prop_assert_eq!(items, expected);
    }

    /// No decoder of any version panics on arbitrary input.
    #[test]
    fn arbitrary_bytes_never_panic_on_any_version(
        version in version(),
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let input = &bytes[..];
        let _ = Setup::decode(&mut &input[..], version);
        let _ = AnnounceRequest::decode(&mut &input[..], version);
        let _ = AnnounceOk::decode(&mut &input[..], version);
        let _ = Announce::decode(&mut &input[..], version);
        let _ = TypedAnnounce::decode(&mut &input[..], version);
        let _ = Track::decode(&mut &input[..], version);
        let _ = TrackInfo::decode(&mut &input[..], version);
        let _ = Subscribe::decode(&mut &input[..], version);
        let _ = SubscribeUpdate::decode(&mut &input[..], version);
        let _ = SubscribeResponse::decode(&mut &input[..], version);
        let _ = Probe::decode(&mut &input[..], version);
        let _ = GoAway::decode(&mut &input[..], version);
        let mut decoder = GroupDecoder::new(version, 64);
        decoder.push(input);
        while let Ok(Some(_)) = decoder.next_item() {}
        let _ = decoder.finish();
    }
}
