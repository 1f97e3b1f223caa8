//! The IETF moq-transport data plane, every draft: a subgroup stream (SUBGROUP_HEADER,
//! then object headers with their payloads) and object datagrams. Decoding arbitrary bytes
//! never panics, and what decodes encodes to bytes that decode to the same headers.
//!
//! The first byte picks the draft (its low 2 bits, `% 3`: 14, 16, 18) and, in bit 2,
//! a stream or a datagram.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moqx_net::moqt::{Draft, ObjectDatagram, SubgroupHeader, SubgroupObject, SubgroupObjects};

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

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else {
        return;
    };
    let draft = Draft::ALL[usize::from(which & 3) % Draft::ALL.len()];
    if which & 4 == 0 {
        stream(bytes, draft);
    } else {
        datagram(bytes, draft);
    }
});
