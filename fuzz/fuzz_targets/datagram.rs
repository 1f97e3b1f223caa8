//! A QUIC datagram's DATAGRAM message, on every moq-lite version: decoding never panics,
//! what decodes round-trips, and a version without datagrams (before -05) decodes none.
//!
//! Input: the first byte picks the version (-05, -04, -03, -06-wip), the rest is the
//! datagram.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moqx_net::coding::Datagram;

fuzz_target!(|data: &[u8]| {
    let Some((&version, data)) = data.split_first() else {
        return;
    };
    let version = moq_fuzz::version(version);
    let decoded = Datagram::decode(&mut &data[..], version);
    if !version.has_datagrams() {
        assert!(decoded.is_err(), "{version:?} has no datagrams");
        return;
    }
    if let Ok(datagram) = decoded {
        let mut encoded = Vec::new();
        if datagram.encode(&mut encoded, version).is_ok() {
            let again = Datagram::decode(&mut &encoded[..], version);
            assert_eq!(again.as_ref(), Ok(&datagram));
        }
    }
});
