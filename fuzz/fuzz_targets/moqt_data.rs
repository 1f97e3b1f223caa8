//! The IETF moq-transport data plane, every draft: a subgroup stream (SUBGROUP_HEADER,
//! then object headers with their payloads), object datagrams, and a fetch stream's items
//! in either group order. Decoding arbitrary bytes never panics, and what decodes encodes
//! to bytes that decode to the same headers.
//!
//! The first byte picks the draft (its low 2 bits, `% 3`: 14, 16, 18) and, in the bits
//! above (`% 4`), a subgroup stream, a datagram, or a fetch stream ascending or descending.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moqx_net::moqt::{
    Draft, FetchItem, FetchObjects, GroupOrder, ObjectDatagram, SubgroupHeader, SubgroupObject,
    SubgroupObjects,
};

/// The most objects read from one input (each needs at least a byte or two).
const MAX_OBJECTS: usize = 1024;

fn stream(bytes: &[u8], draft: Draft) {
    let mut buf = bytes;
    let Ok(header) = SubgroupHeader::decode(&mut buf, draft) else {
        return;
    };
    let mut reader = SubgroupObjects::new(&header, draft);
    let mut objects: Vec<SubgroupObject> = Vec::new();
    while objects.len() < MAX_OBJECTS {
        let Ok(object) = reader.decode(&mut buf) else {
            break;
        };
        // Skip the payload, as a reader would (a short one ends the stream).
        let Ok(len) = usize::try_from(object.payload_len) else {
            break;
        };
        if buf.len() < len {
            break;
        }
        buf = &buf[len..];
        objects.push(object);
    }
    let mut encoded = Vec::new();
    header
        .encode(&mut encoded, draft)
        .expect("a decoded header encodes");
    let mut writer = SubgroupObjects::new(&header, draft);
    for object in &objects {
        writer
            .encode(object, &mut encoded)
            .expect("a decoded object encodes");
        encoded.extend(std::iter::repeat_n(0u8, object.payload_len as usize));
    }
    let mut again = &encoded[..];
    assert_eq!(SubgroupHeader::decode(&mut again, draft), Ok(header));
    let mut reader = SubgroupObjects::new(&header, draft);
    for object in &objects {
        assert_eq!(reader.decode(&mut again).as_ref(), Ok(object), "on {draft}");
        again = &again[object.payload_len as usize..];
    }
}

fn datagram(bytes: &[u8], draft: Draft) {
    let Ok(datagram) = ObjectDatagram::decode(&mut &bytes[..], draft) else {
        return;
    };
    let mut encoded = Vec::new();
    datagram
        .encode(&mut encoded, draft)
        .expect("a decoded datagram encodes");
    assert_eq!(
        ObjectDatagram::decode(&mut &encoded[..], draft),
        Ok(datagram),
        "on {draft}"
    );
}

fn fetch(bytes: &[u8], draft: Draft, order: GroupOrder) {
    let mut buf = bytes;
    let mut reader = FetchObjects::new(draft, order);
    let mut items = Vec::new();
    while items.len() < MAX_OBJECTS {
        let Ok(item) = reader.decode(&mut buf) else {
            break;
        };
        let len = match &item {
            FetchItem::Object(object) => object.payload_len,
            FetchItem::EndOfRange { .. } => 0,
        };
        let Ok(len) = usize::try_from(len) else {
            break;
        };
        if buf.len() < len {
            break;
        }
        buf = &buf[len..];
        items.push(item);
    }
    let mut writer = FetchObjects::new(draft, order);
    let mut encoded = Vec::new();
    for item in &items {
        writer
            .encode(item, &mut encoded)
            .unwrap_or_else(|e| panic!("{item:?} on {draft}, {order:?}: {e}"));
        if let FetchItem::Object(object) = item {
            encoded.extend(std::iter::repeat_n(0u8, object.payload_len as usize));
        }
    }
    let mut reader = FetchObjects::new(draft, order);
    let mut again = &encoded[..];
    for item in &items {
        assert_eq!(
            reader.decode(&mut again).as_ref(),
            Ok(item),
            "on {draft}, {order:?}"
        );
        if let FetchItem::Object(object) = item {
            again = &again[object.payload_len as usize..];
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else {
        return;
    };
    let draft = Draft::ALL[usize::from(which & 3) % Draft::ALL.len()];
    match (which >> 2) % 4 {
        0 => stream(bytes, draft),
        1 => datagram(bytes, draft),
        2 => fetch(bytes, draft, GroupOrder::Ascending),
        _ => fetch(bytes, draft, GroupOrder::Descending),
    }
});
