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
