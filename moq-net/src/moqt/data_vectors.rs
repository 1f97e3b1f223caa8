//! Byte vectors of the data plane written from each draft's text: subgroup streams and
//! datagrams.

use bytes::Bytes;

use super::*;
use crate::coding::{DecodeError, EncodeError};

fn header(bytes: &[u8], draft: Draft) -> SubgroupHeader {
    let mut buf = bytes;
    let header = SubgroupHeader::decode(&mut buf, draft).unwrap();
    assert!(buf.is_empty());
    let mut out = Vec::new();
    header.encode(&mut out, draft).unwrap();
    assert_eq!(out, bytes, "{header:?} on {draft}");
    header
}

#[test]
fn subgroup_headers_in_each_draft() {
    let d14 = header(&[0x10, 0x03, 0x05, 0x80], Draft::D14);
    assert_eq!(d14.subgroup, SubgroupId::Zero);
    assert_eq!(d14.priority, Some(128));
    // 0x3d: properties, subgroup id field, end of group, default priority.
    let d16 = header(&[0x3d, 0x03, 0x05, 0x02], Draft::D16);
    assert_eq!(
        (d16.subgroup, d16.priority, d16.properties, d16.end_of_group),
        (SubgroupId::Explicit(2), None, true, true)
    );
    let d18 = header(&[0x7d, 0x03, 0x05, 0x02], Draft::D18);
    assert!(d18.first_object);
    // 14 has no default priority, 16 no FIRST_OBJECT.
    assert_eq!(
        d16.encode(&mut Vec::new(), Draft::D14),
        Err(EncodeError::NotInVersion("a subgroup without a priority"))
    );
    assert_eq!(
        d18.encode(&mut Vec::new(), Draft::D16),
        Err(EncodeError::NotInVersion("FIRST_OBJECT"))
    );
    // The reserved subgroup id mode, and a type outside the draft's form.
    assert_eq!(
        SubgroupHeader::decode(&mut &[0x16, 0x03, 0x05, 0x80][..], Draft::D14),
        Err(DecodeError::InvalidValue("subgroup id mode"))
    );
    assert_eq!(
        SubgroupHeader::decode(&mut &[0x30, 0x03, 0x05][..], Draft::D14),
        Err(DecodeError::InvalidMessage(0x30))
    );
    assert!(
        !SubgroupHeader::is_subgroup_type(0x05, Draft::D18),
        "FETCH_HEADER"
    );
}

#[test]
fn subgroup_objects_carry_id_deltas() {
    let header = SubgroupHeader {
        track_alias: 3,
        group: 5,
        subgroup: SubgroupId::Zero,
        priority: None,
        properties: true,
        end_of_group: true,
        first_object: false,
    };
    let objects = [
        SubgroupObject {
            id: 0,
            payload_len: 5,
            ..SubgroupObject::default()
        },
        SubgroupObject {
            id: 3,
            properties: Parameters(vec![Parameter::int(0x3e, 1)]),
            payload_len: 2,
            ..SubgroupObject::default()
        },
        SubgroupObject {
            id: 4,
            status: ObjectStatus::EndOfGroup,
            ..SubgroupObject::default()
        },
    ];
    let mut writer = SubgroupObjects::new(&header, Draft::D16);
    let mut out = Vec::new();
    for object in &objects {
        writer.encode(object, &mut out).unwrap();
    }
    #[rustfmt::skip]
    let expected = [
        0x00, 0x00, 0x05,             // id 0, no properties, 5 bytes
        0x02, 0x02, 0x3e, 0x01, 0x02, // id 0 + 2 + 1, PRIOR_OBJECT_ID_GAP 1, 2 bytes
        0x00, 0x00, 0x00, 0x03,       // id 4, no properties, empty: End of Group
    ];
    assert_eq!(out, expected);
    let mut reader = SubgroupObjects::new(&header, Draft::D16);
    let mut buf = &expected[..];
    for object in &objects {
        assert_eq!(reader.decode(&mut buf).as_ref(), Ok(object));
    }
    // Ids only grow.
    assert_eq!(
        writer.encode(&objects[0], &mut Vec::new()),
        Err(EncodeError::InvalidValue("object id"))
    );
    // Properties on a status object close the session from 16.
    let mut reader = SubgroupObjects::new(&header, Draft::D16);
    assert_eq!(
        reader.decode(&mut &[0x00, 0x02, 0x3e, 0x01, 0x00, 0x03][..]),
        Err(DecodeError::InvalidValue("properties on a status object"))
    );
    // A short object leaves the id sequence where it was.
    let mut reader = SubgroupObjects::new(&header, Draft::D16);
    assert_eq!(
        reader.decode(&mut &[0x07, 0x00][..]),
        Err(DecodeError::Short)
    );
    assert_eq!(
        reader.decode(&mut &[0x07, 0x00, 0x01][..]).map(|o| o.id),
        Ok(7)
    );
}

#[test]
fn object_datagrams_in_each_draft() {
    let check = |datagram: &ObjectDatagram, draft: Draft, bytes: &[u8]| {
        let mut out = Vec::new();
        datagram.encode(&mut out, draft).unwrap();
        assert_eq!(out, bytes, "{datagram:?} on {draft}");
        assert_eq!(
            ObjectDatagram::decode(&mut &bytes[..], draft).as_ref(),
            Ok(datagram)
        );
    };
    let hello = ObjectDatagram {
        track_alias: 3,
        group: 5,
        object: 0,
        priority: Some(128),
        payload: Bytes::from_static(b"hi"),
        ..ObjectDatagram::default()
    };
    check(&hello, Draft::D14, &[0x04, 0x03, 0x05, 0x80, b'h', b'i']);
    let gap = ObjectDatagram {
        object: 7,
        priority: None,
        properties: Parameters(vec![Parameter::int(0x3c, 2)]),
        ..hello.clone()
    };
    check(
        &gap,
        Draft::D16,
        &[0x09, 0x03, 0x05, 0x07, 0x02, 0x3c, 0x02, b'h', b'i'],
    );
    let end = ObjectDatagram {
        priority: Some(1),
        status: Some(ObjectStatus::EndOfTrack),
        payload: Bytes::new(),
        ..hello.clone()
    };
    check(&end, Draft::D18, &[0x24, 0x03, 0x05, 0x01, 0x04]);
    // 14's status datagrams always carry the object id.
    check(&end, Draft::D14, &[0x20, 0x03, 0x05, 0x00, 0x01, 0x04]);
    // Status with end of group is not a type from 16; properties flagged but empty.
    assert_eq!(
        ObjectDatagram::decode(&mut &[0x22, 0x03, 0x05, 0x00, 0x80, 0x04][..], Draft::D16),
        Err(DecodeError::InvalidMessage(0x22))
    );
    assert_eq!(
        ObjectDatagram::decode(&mut &[0x05, 0x03, 0x05, 0x80, 0x00][..], Draft::D16),
        Err(DecodeError::InvalidValue("empty datagram properties"))
    );
    assert!(!ObjectDatagram::is_datagram_type(
        PADDING_DATAGRAM,
        Draft::D18
    ));
}

fn fetched(group: u64, object: u64, subgroup: Option<u64>, priority: u8, len: u64) -> FetchItem {
    FetchItem::Object(FetchObject {
        location: Location { group, object },
        subgroup,
        priority,
        payload_len: len,
        ..FetchObject::default()
    })
}

/// Encodes `items` on a fresh stream, checks the bytes, and reads them back.
fn fetch_vector(items: &[FetchItem], draft: Draft, order: GroupOrder, bytes: &[u8]) {
    let mut writer = FetchObjects::new(draft, order);
    let mut out = Vec::new();
    for item in items {
        writer.encode(item, &mut out).unwrap();
    }
    assert_eq!(out, bytes, "on {draft}");
    let mut reader = FetchObjects::new(draft, order);
    let mut buf = bytes;
    for item in items {
        assert_eq!(reader.decode(&mut buf).as_ref(), Ok(item), "on {draft}");
    }
    assert!(buf.is_empty());
}

#[test]
fn draft_14_spells_out_each_fetched_object() {
    let mut header = Vec::new();
    FetchHeader { request_id: 2 }
        .encode(&mut header, Draft::D14)
        .unwrap();
    assert_eq!(header, [0x05, 0x02]);
    fetch_vector(
        &[fetched(1, 0, Some(0), 128, 2)],
        Draft::D14,
        GroupOrder::Ascending,
        &[0x01, 0x00, 0x00, 0x80, 0x00, 0x02],
    );
}

#[test]
fn later_drafts_say_what_changed_from_the_prior_object() {
    let items = [
        fetched(1, 0, Some(0), 128, 2),
        fetched(1, 1, Some(0), 128, 3),
        fetched(3, 0, None, 64, 1),
        FetchItem::EndOfRange {
            end: Location {
                group: 5,
                object: 2,
            },
            missing: true,
        },
    ];
    #[rustfmt::skip]
    let d16 = [
        0x1c, 0x01, 0x00, 0x80, 0x02, // group, object, priority present; subgroup 0
        0x00, 0x03,                   // the next object, all else as before
        0x40, 0x5c, 0x03, 0x00, 0x40, 0x01, // a datagram object in group 3 (flags 0x5c)
        0x40, 0x8c, 0x05, 0x02,       // End of Non-Existent Range at {5, 2}
    ];
    fetch_vector(&items, Draft::D16, GroupOrder::Ascending, &d16);
    #[rustfmt::skip]
    let d18 = [
        0x1c, 0x01, 0x00, 0x80, 0x02,
        0x00, 0x03,
        0x5c, 0x01, 0x00, 0x40, 0x01, // group 1 + 1 + 1
        0x80, 0x8c, 0x01, 0x02,       // group 3 + 1 + 1, object 2
    ];
    fetch_vector(&items, Draft::D18, GroupOrder::Ascending, &d18);
    // Descending: group 5, then 3 (delta 1 the other way).
    let descending = [fetched(5, 0, Some(1), 1, 1), fetched(3, 0, Some(2), 1, 1)];
    fetch_vector(
        &descending,
        Draft::D18,
        GroupOrder::Descending,
        &[0x1f, 0x05, 0x00, 0x01, 0x01, 0x01, 0x0e, 0x01, 0x00, 0x01],
    );
}

#[test]
fn fetch_flags_that_refer_to_nothing_are_refused() {
    // The first object without its location.
    let mut reader = FetchObjects::new(Draft::D16, GroupOrder::Ascending);
    assert_eq!(
        reader.decode(&mut &[0x10, 0x80, 0x00][..]),
        Err(DecodeError::InvalidValue(
            "the first fetch object's location"
        ))
    );
    // The prior subgroup, with no prior object.
    let mut reader = FetchObjects::new(Draft::D16, GroupOrder::Ascending);
    assert_eq!(
        reader.decode(&mut &[0x1d, 0x01, 0x00, 0x80, 0x00][..]),
        Err(DecodeError::InvalidValue("prior subgroup"))
    );
    // Flags of 128 and up that are no End of Range; and a range on 14.
    let mut reader = FetchObjects::new(Draft::D18, GroupOrder::Ascending);
    assert_eq!(
        reader.decode(&mut &[0x80, 0x80][..]),
        Err(DecodeError::InvalidValue("serialization flags"))
    );
    let end = FetchItem::EndOfRange {
        end: Location::default(),
        missing: false,
    };
    assert_eq!(
        FetchObjects::new(Draft::D14, GroupOrder::Ascending).encode(&end, &mut Vec::new()),
        Err(EncodeError::NotInVersion("End of Range"))
    );
    // Descending below group 0.
    let mut reader = FetchObjects::new(Draft::D18, GroupOrder::Descending);
    let mut buf = &[0x1c, 0x01, 0x00, 0x80, 0x00, 0x0c, 0x05, 0x00, 0x00][..];
    assert!(reader.decode(&mut buf).is_ok());
    assert_eq!(
        reader.decode(&mut buf),
        Err(DecodeError::InvalidValue("fetch location"))
    );
}

#[test]
fn an_id_past_what_the_draft_can_carry_is_refused() {
    // Draft 16: object 2^62 − 1, then "the next object".
    let mut reader = FetchObjects::new(Draft::D16, GroupOrder::Ascending);
    let mut first = vec![0x1c, 0x01];
    first.extend_from_slice(&[0xff; 8]);
    first.extend_from_slice(&[0x80, 0x00]);
    assert!(reader.decode(&mut &first[..]).is_ok());
    assert_eq!(
        reader.decode(&mut &[0x00, 0x00][..]),
        Err(DecodeError::InvalidValue("fetch location"))
    );
    // The same on a subgroup stream.
    let header = SubgroupHeader::decode(&mut &[0x10, 0x03, 0x05, 0x80][..], Draft::D16).unwrap();
    let mut objects = SubgroupObjects::new(&header, Draft::D16);
    let mut first = vec![0xff; 8];
    first.push(0x01);
    assert!(objects.decode(&mut &first[..]).is_ok());
    assert_eq!(
        objects.decode(&mut &[0x00, 0x01][..]),
        Err(DecodeError::InvalidValue("object id"))
    );
}
