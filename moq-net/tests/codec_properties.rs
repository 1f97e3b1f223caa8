//! Property tests of the codec: every message round-trips; every strict prefix of an encoding
//! is `Short` (never a panic, never a wrong message); arbitrary bytes never panic a decoder.

use std::num::NonZeroU64;
use std::time::Duration;

use bytes::Bytes;
use moqx_net::coding::{
    Announce, AnnounceOk, AnnounceRequest, AnnounceStatus, BidiStream, Datagram, DecodeError,
    Fetch, FrameHeader, GoAway, Group, GroupDecoder, Message, Probe, ProbeLevel, Role, Setup,
    Subscribe, SubscribeResponse, SubscribeUpdate, Track, TrackInfo, UniStream, Version,
    varint::MAX_VARINT,
};
use moqx_net::model::Path;
use proptest::prelude::*;

const V: Version = Version::Lite05;

fn varint() -> impl Strategy<Value = u64> {
    prop_oneof![0..64u64, 0..16_384u64, 0..(1u64 << 30), 0..=MAX_VARINT]
}

/// An optional group: the wire carries `g + 1`, so the largest is `MAX_VARINT - 1`.
fn optional_group() -> impl Strategy<Value = Option<u64>> {
    proptest::option::of(0..MAX_VARINT)
}

fn millis() -> impl Strategy<Value = Duration> {
    (0..(1u64 << 40)).prop_map(Duration::from_millis)
}

/// A normalized path of up to 32 parts.
fn path() -> impl Strategy<Value = Path> {
    proptest::collection::vec("[a-z0-9é_.-]{1,8}", 0..=32)
        .prop_map(|parts| Path::new(parts.join("/")))
}

fn text() -> impl Strategy<Value = String> {
    "\\PC{0,40}"
}

fn setup() -> impl Strategy<Value = Setup> {
    (
        prop_oneof![
            Just(ProbeLevel::None),
            Just(ProbeLevel::Report),
            Just(ProbeLevel::Increase)
        ],
        proptest::option::of(text()),
        proptest::option::of(prop_oneof![Just(Role::Publisher), Just(Role::Subscriber)]),
        proptest::option::of(varint()),
        proptest::option::of((1..=MAX_VARINT).prop_map(|v| NonZeroU64::new(v).unwrap())),
    )
        .prop_map(|(probe, path, role, cost, origin)| Setup {
            probe,
            path,
            role,
            cost,
            origin,
        })
}

/// Encodes, decodes, and checks every strict prefix is `Short`.
fn round_trip<M: Message + PartialEq + std::fmt::Debug>(message: &M) -> Result<(), TestCaseError> {
    let bytes = message.to_vec(V).expect("encodes");
    let mut cursor = &bytes[..];
    prop_assert_eq!(&M::decode(&mut cursor, V).expect("decodes"), message);
    prop_assert!(cursor.is_empty());
    for len in 0..bytes.len() {
        prop_assert_eq!(
            M::decode(&mut &bytes[..len], V).err(),
            Some(DecodeError::Short),
            "prefix {}",
            len
        );
    }
    Ok(())
}

proptest! {
    #[test]
    fn setup_round_trips(message in setup()) {
        round_trip(&message)?;
    }

    #[test]
    fn announce_messages_round_trip(
        prefix in path(),
        exclude_hop in varint(),
        hop_id in varint(),
        active_count in varint(),
        active in any::<bool>(),
        suffix in path(),
        hops in proptest::collection::vec(varint(), 0..=32),
    ) {
        round_trip(&AnnounceRequest { prefix, exclude_hop })?;
        round_trip(&AnnounceOk { hop_id, active_count })?;
        let status = if active { AnnounceStatus::Active } else { AnnounceStatus::Ended };
        round_trip(&Announce { status, suffix, hops })?;
    }

    #[test]
    fn track_messages_round_trip(
        broadcast in path(),
        track in text(),
        priority in any::<u8>(),
        ordered in any::<bool>(),
        max_latency in millis(),
        timescale in (1..=MAX_VARINT).prop_map(|v| NonZeroU64::new(v).unwrap()),
    ) {
        round_trip(&Track { broadcast, track })?;
        round_trip(&TrackInfo { priority, ordered, max_latency, timescale })?;
    }

    #[test]
    fn subscribe_messages_round_trip(
        id in varint(),
        broadcast in path(),
        track in text(),
        priority in any::<u8>(),
        ordered in any::<bool>(),
        max_latency in millis(),
        start in optional_group(),
        end in optional_group(),
        groups in (varint(), varint(), varint()),
    ) {
        round_trip(&Subscribe { id, broadcast, track, priority, ordered, max_latency, start, end })?;
        round_trip(&SubscribeUpdate { priority, ordered, max_latency, start, end })?;
        for response in [
            SubscribeResponse::Start { group: groups.0 },
            SubscribeResponse::End { group: groups.1 },
            SubscribeResponse::Drop { start: groups.0, end: groups.1, error: groups.2 },
        ] {
            let bytes = response.to_vec(V).unwrap();
            prop_assert_eq!(SubscribeResponse::decode(&mut &bytes[..], V), Ok(response));
            for len in 0..bytes.len() {
                prop_assert_eq!(SubscribeResponse::decode(&mut &bytes[..len], V), Err(DecodeError::Short));
            }
        }
    }

    #[test]
    fn group_fetch_probe_goaway_round_trip(
        subscribe_id in varint(),
        sequence in varint(),
        broadcast in path(),
        track in text(),
        priority in any::<u8>(),
        bitrate in varint(),
        rtt in millis(),
        uri in text(),
    ) {
        round_trip(&Group { subscribe_id, sequence })?;
        round_trip(&Fetch { broadcast, track, priority, group: sequence })?;
        round_trip(&Probe { bitrate, rtt })?;
        round_trip(&GoAway { uri })?;
    }

    #[test]
    fn frames_and_datagrams_round_trip(
        previous in 0..(1u64 << 61),
        timestamp in 0..(1u64 << 61),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        subscribe_id in varint(),
        sequence in varint(),
    ) {
        let header = FrameHeader::new(previous, timestamp, payload.len() as u64);
        let mut bytes = Vec::new();
        header.encode(&mut bytes, V).unwrap();
        let decoded = FrameHeader::decode(&mut &bytes[..], V).unwrap();
        prop_assert_eq!(decoded.timestamp(previous), Ok(timestamp));
        prop_assert_eq!(decoded.size, payload.len() as u64);

        let datagram = Datagram { subscribe_id, sequence, timestamp, payload: Bytes::from(payload) };
        let mut bytes = Vec::new();
        datagram.encode(&mut bytes, V).unwrap();
        prop_assert_eq!(Datagram::decode(&mut Bytes::from(bytes), V), Ok(datagram));
    }

    /// No decoder panics on arbitrary input; each returns a message or an error.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let input = &bytes[..];
        let _ = Setup::decode(&mut &input[..], V);
        let _ = AnnounceRequest::decode(&mut &input[..], V);
        let _ = AnnounceOk::decode(&mut &input[..], V);
        let _ = Announce::decode(&mut &input[..], V);
        let _ = Track::decode(&mut &input[..], V);
        let _ = TrackInfo::decode(&mut &input[..], V);
        let _ = Subscribe::decode(&mut &input[..], V);
        let _ = SubscribeUpdate::decode(&mut &input[..], V);
        let _ = SubscribeResponse::decode(&mut &input[..], V);
        let _ = Group::decode(&mut &input[..], V);
        let _ = FrameHeader::decode(&mut &input[..], V);
        let _ = Fetch::decode(&mut &input[..], V);
        let _ = Probe::decode(&mut &input[..], V);
        let _ = GoAway::decode(&mut &input[..], V);
        let _ = Datagram::decode(&mut Bytes::copy_from_slice(input), V);
        let _ = BidiStream::decode(&mut &input[..], V);
        let _ = UniStream::decode(&mut &input[..], V);
        let mut decoder = GroupDecoder::new(V, 64);
        decoder.push(input);
        while let Ok(Some(_)) = decoder.next_item() {}
        let _ = decoder.finish();
    }
}

#[test]
fn oversized_values_are_refused_when_encoding() {
    let too_far = Subscribe {
        id: 0,
        broadcast: Path::new("a"),
        track: "t".into(),
        priority: 0,
        ordered: false,
        max_latency: Duration::ZERO,
        start: Some(MAX_VARINT),
        end: None,
    };
    assert!(
        too_far.to_vec(V).is_err(),
        "start + 1 does not fit a varint"
    );
    let hops = Announce {
        status: AnnounceStatus::Active,
        suffix: Path::new("a"),
        hops: vec![1; 33],
    };
    assert!(hops.to_vec(V).is_err(), "33 hops");
    let parts = Track {
        broadcast: Path::new(vec!["a"; 33].join("/")),
        track: "t".into(),
    };
    assert!(parts.to_vec(V).is_err(), "33 path parts");
}

#[test]
fn a_frame_larger_than_the_limit_is_refused_before_its_payload_arrives() {
    let mut decoder = GroupDecoder::new(V, 100);
    let mut stream = Vec::new();
    Group {
        subscribe_id: 0,
        sequence: 0,
    }
    .encode(&mut stream, V)
    .unwrap();
    FrameHeader::new(0, 0, 101).encode(&mut stream, V).unwrap();
    decoder.push(&stream);
    assert!(decoder.next_item().unwrap().is_some(), "the header");
    assert_eq!(decoder.next_item(), Err(moqx_net::Error::FrameTooLarge));
}
