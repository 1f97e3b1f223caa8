//! The moq-lite-05 byte vectors (`tests/data/moq-lite-05-vectors.json`, a copy of the spec's
//! `moq-lite-05-vectors.json`, produced by a deployed implementation): every valid vector is
//! encoded byte for byte and decoded back to the same fields; every invalid one fails with
//! the same error; every decode-only one decodes to what the deployed decoder reads.

use std::num::NonZeroU64;
use std::time::Duration;

use bytes::Bytes;
use moqx_net::Error;
use moqx_net::coding::{
    Announce, AnnounceOk, AnnounceRequest, AnnounceStatus, BidiStream, Datagram, DecodeError,
    Fetch, FrameHeader, GoAway, Group, GroupDecoder, GroupItem, Message, Probe, ProbeLevel, Role,
    Setup, Subscribe, SubscribeResponse, SubscribeUpdate, Track, TrackInfo, UniStream, Version,
};
use moqx_net::model::Path;
use serde_json::Value;

const V: Version = Version::Lite05;

fn vectors() -> Value {
    let text = include_str!("data/moq-lite-05-vectors.json");
    serde_json::from_str(text).expect("the vectors file is JSON")
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

fn u64_of(fields: &Value, name: &str) -> u64 {
    fields[name]
        .as_u64()
        .unwrap_or_else(|| panic!("{name} is a u64 in {fields}"))
}

fn opt_u64(fields: &Value, name: &str) -> Option<u64> {
    fields[name].as_u64()
}

fn string(fields: &Value, name: &str) -> String {
    fields[name].as_str().expect("a string").to_owned()
}

fn millis(fields: &Value, name: &str) -> Duration {
    Duration::from_millis(u64_of(fields, name))
}

/// One decoded message of any kind, so that vectors of every kind share one test.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Wire {
    Setup(Setup),
    AnnounceRequest(AnnounceRequest),
    AnnounceOk(AnnounceOk),
    Announce(Announce),
    Track(Track),
    TrackInfo(TrackInfo),
    Subscribe(Subscribe),
    SubscribeUpdate(SubscribeUpdate),
    Response(SubscribeResponse),
    Group(Group),
    /// A FRAME after a frame at `previous`: (previous, timestamp, payload).
    Frame(u64, u64, Bytes),
    Fetch(Fetch),
    Probe(Probe),
    GoAway(GoAway),
    Datagram(Datagram),
    Bidi(BidiStream),
    Uni(UniStream),
}

impl Wire {
    /// The message a vector describes, built from its fields.
    fn from_fields(message: &str, fields: &Value) -> Self {
        match message {
            "SETUP" => Wire::Setup(Setup {
                probe: match u64_of(fields, "probe") {
                    0 => ProbeLevel::None,
                    1 => ProbeLevel::Report,
                    _ => ProbeLevel::Increase,
                },
                path: fields["path"].as_str().map(str::to_owned),
                role: opt_u64(fields, "role").map(|role| match role {
                    1 => Role::Publisher,
                    _ => Role::Subscriber,
                }),
                cost: opt_u64(fields, "cost"),
                origin: opt_u64(fields, "origin").and_then(NonZeroU64::new),
            }),
            "ANNOUNCE_REQUEST" => Wire::AnnounceRequest(AnnounceRequest {
                prefix: Path::new(string(fields, "prefix")),
                exclude_hop: u64_of(fields, "exclude_hop"),
            }),
            "ANNOUNCE_OK" => Wire::AnnounceOk(AnnounceOk {
                hop_id: u64_of(fields, "hop_id"),
                active_count: u64_of(fields, "active_count"),
            }),
            "ANNOUNCE" => Wire::Announce(Announce {
                status: match u64_of(fields, "status") {
                    0 => AnnounceStatus::Ended,
                    _ => AnnounceStatus::Active,
                },
                suffix: Path::new(string(fields, "suffix")),
                hops: fields["hops"]
                    .as_array()
                    .expect("hops")
                    .iter()
                    .map(|hop| hop.as_u64().expect("a hop id"))
                    .collect(),
            }),
            "TRACK" => Wire::Track(Track {
                broadcast: Path::new(string(fields, "broadcast")),
                track: string(fields, "track"),
            }),
            "TRACK_INFO" => Wire::TrackInfo(TrackInfo {
                priority: u64_of(fields, "priority") as u8,
                ordered: fields["ordered"].as_bool().expect("ordered"),
                max_latency: millis(fields, "max_latency_ms"),
                timescale: NonZeroU64::new(u64_of(fields, "timescale")).expect("non-zero"),
            }),
            "SUBSCRIBE" => Wire::Subscribe(Subscribe {
                id: u64_of(fields, "subscribe_id"),
                broadcast: Path::new(string(fields, "broadcast")),
                track: string(fields, "track"),
                priority: u64_of(fields, "priority") as u8,
                ordered: fields["ordered"].as_bool().expect("ordered"),
                max_latency: millis(fields, "max_latency_ms"),
                start: opt_u64(fields, "start_group"),
                end: opt_u64(fields, "end_group"),
            }),
            "SUBSCRIBE_UPDATE" => Wire::SubscribeUpdate(SubscribeUpdate {
                priority: u64_of(fields, "priority") as u8,
                ordered: fields["ordered"].as_bool().expect("ordered"),
                max_latency: millis(fields, "max_latency_ms"),
                start: opt_u64(fields, "start_group"),
                end: opt_u64(fields, "end_group"),
            }),
            "SUBSCRIBE_START" => Wire::Response(SubscribeResponse::Start {
                group: u64_of(fields, "group"),
            }),
            "SUBSCRIBE_END" => Wire::Response(SubscribeResponse::End {
                group: u64_of(fields, "group"),
            }),
            "SUBSCRIBE_DROP" => Wire::Response(SubscribeResponse::Drop {
                start: u64_of(fields, "start_group"),
                end: u64_of(fields, "end_group"),
                error: u64_of(fields, "error_code"),
            }),
            "GROUP" => Wire::Group(Group {
                subscribe_id: u64_of(fields, "subscribe_id"),
                sequence: u64_of(fields, "sequence"),
            }),
            "FRAME" => Wire::Frame(
                u64_of(fields, "prev_timestamp"),
                u64_of(fields, "timestamp"),
                Bytes::from(hex(fields["payload_hex"].as_str().expect("payload"))),
            ),
            "FETCH" => Wire::Fetch(Fetch {
                broadcast: Path::new(string(fields, "broadcast")),
                track: string(fields, "track"),
                priority: u64_of(fields, "priority") as u8,
                group: u64_of(fields, "group"),
            }),
            "PROBE" => Wire::Probe(Probe {
                bitrate: u64_of(fields, "bitrate"),
                rtt: millis(fields, "rtt_ms"),
            }),
            "GOAWAY" => Wire::GoAway(GoAway {
                uri: string(fields, "uri"),
            }),
            "DATAGRAM" => Wire::Datagram(Datagram {
                subscribe_id: u64_of(fields, "subscribe_id"),
                sequence: u64_of(fields, "sequence"),
                timestamp: u64_of(fields, "timestamp"),
                payload: Bytes::from(hex(fields["payload_hex"].as_str().expect("payload"))),
            }),
            "STREAM_TYPE" => {
                let mut bytes = &[u64_of(fields, "stream_type") as u8][..];
                match fields["direction"].as_str() {
                    Some("bidi") => Wire::Bidi(BidiStream::decode(&mut bytes, V).expect("known")),
                    _ => Wire::Uni(UniStream::decode(&mut bytes, V).expect("known")),
                }
            }
            other => panic!("no builder for {other}"),
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        match self {
            Wire::Setup(m) => m.encode(&mut buf, V),
            Wire::AnnounceRequest(m) => m.encode(&mut buf, V),
            Wire::AnnounceOk(m) => m.encode(&mut buf, V),
            Wire::Announce(m) => m.encode(&mut buf, V),
            Wire::Track(m) => m.encode(&mut buf, V),
            Wire::TrackInfo(m) => m.encode(&mut buf, V),
            Wire::Subscribe(m) => m.encode(&mut buf, V),
            Wire::SubscribeUpdate(m) => m.encode(&mut buf, V),
            Wire::Response(m) => m.encode(&mut buf, V),
            Wire::Group(m) => m.encode(&mut buf, V),
            Wire::Frame(previous, timestamp, payload) => {
                let header = FrameHeader::new(*previous, *timestamp, payload.len() as u64);
                let result = header.encode(&mut buf, V);
                buf.extend_from_slice(payload);
                result
            }
            Wire::Fetch(m) => m.encode(&mut buf, V),
            Wire::Probe(m) => m.encode(&mut buf, V),
            Wire::GoAway(m) => m.encode(&mut buf, V),
            Wire::Datagram(m) => m.encode(&mut buf, V),
            Wire::Bidi(m) => m.encode(&mut buf, V),
            Wire::Uni(m) => m.encode(&mut buf, V),
        }
        .expect("encodes");
        buf
    }

    /// Decodes `bytes` as the same kind of message as `self`, consuming all of them.
    fn decode_like(&self, bytes: &[u8]) -> Result<Wire, DecodeError> {
        let mut cursor = bytes;
        let decoded = match self {
            Wire::Setup(_) => Wire::Setup(Setup::decode(&mut cursor, V)?),
            Wire::AnnounceRequest(_) => {
                Wire::AnnounceRequest(AnnounceRequest::decode(&mut cursor, V)?)
            }
            Wire::AnnounceOk(_) => Wire::AnnounceOk(AnnounceOk::decode(&mut cursor, V)?),
            Wire::Announce(_) => Wire::Announce(Announce::decode(&mut cursor, V)?),
            Wire::Track(_) => Wire::Track(Track::decode(&mut cursor, V)?),
            Wire::TrackInfo(_) => Wire::TrackInfo(TrackInfo::decode(&mut cursor, V)?),
            Wire::Subscribe(_) => Wire::Subscribe(Subscribe::decode(&mut cursor, V)?),
            Wire::SubscribeUpdate(_) => {
                Wire::SubscribeUpdate(SubscribeUpdate::decode(&mut cursor, V)?)
            }
            Wire::Response(_) => Wire::Response(SubscribeResponse::decode(&mut cursor, V)?),
            Wire::Group(_) => Wire::Group(Group::decode(&mut cursor, V)?),
            Wire::Frame(previous, ..) => {
                let header = FrameHeader::decode(&mut cursor, V)?;
                let payload = Bytes::copy_from_slice(&cursor[..header.size as usize]);
                cursor = &cursor[header.size as usize..];
                Wire::Frame(*previous, header.timestamp(*previous)?, payload)
            }
            Wire::Fetch(_) => Wire::Fetch(Fetch::decode(&mut cursor, V)?),
            Wire::Probe(_) => Wire::Probe(Probe::decode(&mut cursor, V)?),
            Wire::GoAway(_) => Wire::GoAway(GoAway::decode(&mut cursor, V)?),
            Wire::Datagram(_) => {
                Wire::Datagram(Datagram::decode(&mut Bytes::copy_from_slice(cursor), V)?)
            }
            Wire::Bidi(_) => Wire::Bidi(BidiStream::decode(&mut cursor, V)?),
            Wire::Uni(_) => Wire::Uni(UniStream::decode(&mut cursor, V)?),
        };
        if matches!(decoded, Wire::Datagram(_)) {
            cursor = &[];
        }
        assert!(cursor.is_empty(), "trailing bytes after {decoded:?}");
        Ok(decoded)
    }
}

/// A whole group stream, after its stream type: the header and frames, or the error at FIN.
fn decode_group_stream(bytes: &[u8]) -> Result<(Group, Vec<(u64, Bytes)>), Error> {
    let mut decoder = GroupDecoder::new(V, 1 << 20);
    decoder.push(bytes);
    let mut header = None;
    let mut frames = Vec::new();
    while let Some(item) = decoder.next_item()? {
        match item {
            GroupItem::Header(group) => header = Some(group),
            GroupItem::Frame { timestamp, payload } => {
                frames.push((timestamp.expect("-05 frames carry timestamps"), payload))
            }
        }
    }
    decoder.finish()?;
    Ok((header.ok_or(Error::Decode)?, frames))
}

/// A message name in the vectors file, mapped to a sample of the same kind (for decoding
/// invalid and decode-only vectors, which have no fields to build from).
fn sample(message: &str) -> Wire {
    let fields: Value = match message {
        "SETUP" => {
            serde_json::json!({"probe": 0, "path": null, "role": null, "cost": null, "origin": null})
        }
        "ANNOUNCE_REQUEST" => serde_json::json!({"prefix": "", "exclude_hop": 0}),
        "ANNOUNCE" => serde_json::json!({"status": 1, "suffix": "", "hops": []}),
        "TRACK" => serde_json::json!({"broadcast": "", "track": ""}),
        "TRACK_INFO" => {
            serde_json::json!({"priority": 0, "ordered": false, "max_latency_ms": 0, "timescale": 1})
        }
        "SUBSCRIBE" => {
            serde_json::json!({"subscribe_id": 0, "broadcast": "", "track": "", "priority": 0, "ordered": false, "max_latency_ms": 0, "start_group": null, "end_group": null})
        }
        "SUBSCRIBE_START" | "SUBSCRIBE_END" | "SUBSCRIBE_RESPONSE" => {
            serde_json::json!({"group": 0})
        }
        "GROUP" => serde_json::json!({"subscribe_id": 0, "sequence": 0}),
        other => panic!("no sample for {other}"),
    };
    let message = if message == "SUBSCRIBE_RESPONSE" {
        "SUBSCRIBE_START"
    } else {
        message
    };
    Wire::from_fields(message, &fields)
}

#[test]
fn every_valid_vector_encodes_byte_for_byte_and_decodes_back() {
    let vectors = vectors();
    let mut checked = 0;
    for vector in vectors["vectors"].as_array().expect("vectors") {
        let name = vector["name"].as_str().expect("name");
        let message = vector["message"].as_str().expect("message");
        let bytes = hex(vector["hex"].as_str().expect("hex"));
        let fields = &vector["fields"];
        match message {
            "GROUP_STREAM" => {
                let mut cursor = &bytes[..];
                assert_eq!(
                    UniStream::decode(&mut cursor, V),
                    Ok(UniStream::Group),
                    "{name}"
                );
                let (header, frames) = decode_group_stream(cursor).expect(name);
                assert_eq!(
                    header.subscribe_id,
                    u64_of(fields, "subscribe_id"),
                    "{name}"
                );
                assert_eq!(header.sequence, u64_of(fields, "sequence"), "{name}");
                let expected: Vec<(u64, Bytes)> = fields["frames"]
                    .as_array()
                    .expect("frames")
                    .iter()
                    .map(|f| {
                        (
                            u64_of(f, "timestamp"),
                            Bytes::from(hex(f["payload_hex"].as_str().expect("hex"))),
                        )
                    })
                    .collect();
                assert_eq!(frames, expected, "{name}");
                // And the publisher side writes the same bytes.
                let mut written = Vec::new();
                UniStream::Group.encode(&mut written, V).unwrap();
                header.encode(&mut written, V).unwrap();
                let mut previous = 0;
                for (timestamp, payload) in &frames {
                    FrameHeader::new(previous, *timestamp, payload.len() as u64)
                        .encode(&mut written, V)
                        .unwrap();
                    written.extend_from_slice(payload);
                    previous = *timestamp;
                }
                assert_eq!(written, bytes, "{name}");
            }
            "FETCH_RESPONSE" => {
                // Bare frames, timestamps from 0: the group stream without its header.
                let mut stream = hex("020000");
                stream.extend_from_slice(&bytes);
                let (_, frames) = decode_group_stream(&stream).expect(name);
                let timestamps: Vec<u64> = frames.iter().map(|(t, _)| *t).collect();
                let expected: Vec<u64> = fields["frames"]
                    .as_array()
                    .expect("frames")
                    .iter()
                    .map(|f| u64_of(f, "timestamp"))
                    .collect();
                assert_eq!(timestamps, expected, "{name}");
            }
            _ => {
                let wire = Wire::from_fields(message, fields);
                assert_eq!(wire.encode(), bytes, "{name}: encoding");
                assert_eq!(
                    wire.decode_like(&bytes),
                    Ok(wire.clone()),
                    "{name}: decoding"
                );
            }
        }
        checked += 1;
    }
    assert_eq!(checked, 65, "every valid vector was checked");
}

#[test]
fn every_invalid_vector_fails_as_deployed_peers_fail() {
    let vectors = vectors();
    for vector in vectors["invalid"].as_array().expect("invalid") {
        let name = vector["name"].as_str().expect("name");
        let message = vector["message"].as_str().expect("message");
        let stream = vector["stream"].as_str().expect("stream");
        let bytes = hex(vector["hex"].as_str().expect("hex"));
        let expected = vector["error"].as_str().expect("error");
        let actual = match message {
            "GROUP_STREAM" => match decode_group_stream(&bytes[1..]) {
                Ok(_) => "Ok".to_owned(),
                Err(Error::BoundsExceeded) => "Error::BoundsExceeded(BoundsExceeded)".to_owned(),
                Err(Error::WrongSize) => "Error::WrongSize".to_owned(),
                Err(Error::Decode) => "Error::Decode(Short)".to_owned(),
                Err(other) => format!("{other:?}"),
            },
            "STREAM_TYPE" => {
                let result = if stream == "bidi" {
                    BidiStream::decode(&mut &bytes[..], V).map(|_| ())
                } else {
                    UniStream::decode(&mut &bytes[..], V).map(|_| ())
                };
                kind(result.err())
            }
            _ => kind(sample(message).decode_like(&bytes).err()),
        };
        assert_eq!(actual, expected, "{name}");
    }
}

/// A decode error's name as the vectors file writes it.
fn kind(error: Option<DecodeError>) -> String {
    match error {
        None => "Ok".to_owned(),
        Some(DecodeError::Short) => "DecodeError::Short".to_owned(),
        Some(DecodeError::Long) => "DecodeError::Long".to_owned(),
        Some(DecodeError::InvalidString) => "DecodeError::InvalidString".to_owned(),
        Some(DecodeError::InvalidMessage(kind)) => format!("DecodeError::InvalidMessage({kind})"),
        Some(DecodeError::InvalidValue(_)) => "DecodeError::InvalidValue".to_owned(),
        Some(DecodeError::TooMany(_)) => "DecodeError::TooMany".to_owned(),
        Some(DecodeError::BoundsExceeded(_)) => "DecodeError::BoundsExceeded".to_owned(),
        Some(DecodeError::Duplicate(_)) => "DecodeError::Duplicate".to_owned(),
        Some(other) => format!("{other:?}"),
    }
}

#[test]
fn every_decode_only_vector_decodes_as_deployed_peers_read_it() {
    let vectors = vectors();
    for vector in vectors["decode_only"].as_array().expect("decode_only") {
        let name = vector["name"].as_str().expect("name");
        let message = vector["message"].as_str().expect("message");
        let bytes = hex(vector["hex"].as_str().expect("hex"));
        let expected = &vector["decodes_as"];
        if message == "GROUP_STREAM" {
            let (header, frames) = decode_group_stream(&bytes[1..]).expect(name);
            assert_eq!(
                header.subscribe_id,
                u64_of(expected, "subscribe_id"),
                "{name}"
            );
            assert_eq!(
                frames.len() as u64,
                u64_of(expected, "frame_count"),
                "{name}"
            );
            continue;
        }
        let mut fields = expected.clone();
        if let Some(kind) = fields.get("type").and_then(Value::as_u64) {
            let message = ["SUBSCRIBE_START", "SUBSCRIBE_END", "SUBSCRIBE_DROP"][kind as usize];
            let wire = Wire::from_fields(message, &fields);
            assert_eq!(wire.decode_like(&bytes), Ok(wire.clone()), "{name}");
            continue;
        }
        if message == "ANNOUNCE" {
            fields["hops"] = serde_json::json!([]);
        }
        let wire = Wire::from_fields(message, &fields);
        assert_eq!(wire.decode_like(&bytes), Ok(wire.clone()), "{name}");
    }
}
