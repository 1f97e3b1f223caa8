//! A QUIC datagram's DATAGRAM message: decoding never panics, and what decodes round-trips.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moq_net::coding::{Datagram, Version};

fuzz_target!(|data: &[u8]| {
    if let Ok(datagram) = Datagram::decode(&mut &data[..], Version::Lite05) {
        let mut encoded = Vec::new();
        if datagram.encode(&mut encoded, Version::Lite05).is_ok() {
            let again = Datagram::decode(&mut &encoded[..], Version::Lite05);
            assert_eq!(again.as_ref(), Ok(&datagram));
        }
    }
});
