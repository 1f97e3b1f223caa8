//! The relay's view of a connection's path and token: any path and any token (well-formed
//! JWTs with arbitrary claims included, signed with the relay's own key) are judged
//! without a panic, and a granted session's validity never ends in the past.
//!
//! Input: a claims JSON (also tried as a raw token) and a request path, split at the first
//! NUL byte.
#![no_main]

use std::sync::OnceLock;
use std::time::{Duration, UNIX_EPOCH};

use libfuzzer_sys::fuzz_target;
use moqx_auth::{Authorizer, Claims, Key, KeyAlgorithm, Keys, Public, request_path};
use moqx_net::model::Origin;

/// A signing key and a relay's authorizer verifying with it, for the whole run (making
/// them per input would be most of the cost).
fn keys() -> &'static (Key, Authorizer) {
    static KEYS: OnceLock<(Key, Authorizer)> = OnceLock::new();
    KEYS.get_or_init(|| {
        let key = Key::generate(KeyAlgorithm::Hs256).expect("a key");
        let verifier = Key::parse(&key.to_json()).expect("its own JSON");
        (
            key,
            Authorizer::new(Keys::from(verifier), Public::both(&["public".into()])),
        )
    })
}

fuzz_target!(|data: &[u8]| {
    let (claims, path) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &b"/"[..]),
    };
    let Ok(path) = std::str::from_utf8(path) else {
        return;
    };
    let _ = request_path(path);
    let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let (key, authorizer) = keys();
    let origin = Origin::new();
    let raw = String::from_utf8_lossy(claims);
    let _ = authorizer.authorize(&origin, &format!("{path}?jwt={raw}"), now);
    let _ = authorizer.authorize(&origin, path, now);
    if let Ok(claims) = serde_json::from_slice::<Claims>(claims) {
        if let Ok(token) = key.sign(&claims) {
            let request = format!("/{}?jwt={token}", claims.root);
            if let Ok(grant) = authorizer.authorize(&origin, &request, now) {
                if let Some(valid_for) = grant.origins.valid_for {
                    // Valid from now on: an expired token is refused, not granted a past.
                    assert!(valid_for > Duration::ZERO || claims.expires.is_some());
                }
            }
        }
    }
});
