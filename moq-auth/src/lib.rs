//! # moqx-auth: token authorization for MoQ relays
//!
//! Which paths a session may publish and subscribe under. This crate **is** the token
//! format, its keys and the check of a path against a token's grants, with no I/O beyond
//! reading a key file; it **is not** the relay that applies them (`moqx-relay`, which
//! re-exports it as `moqx_relay::auth`), and has no dependency on a runtime or socket.
//!
//! Tokens are JWTs with the claims deployed moq relays use, so operators can bring the
//! tokens (and keys) they already issue:
//!
//! ```json
//! { "root": "room", "put": ["alice"], "get": [""], "exp": 1767225600, "iat": 1767222000 }
//! ```
//!
//! `root` is a path prefix; `put` lists what the holder may publish and `get` what it may
//! subscribe to, relative to `root` (a single string is one entry; `""` is all of `root`);
//! `exp` (optional) is when it stops working; `aud` (optional, a string or a list) names the
//! relays it is for, checked where the relay is given an audience. The client presents it
//! as `?jwt=` in its URL
//! (the WebTransport CONNECT, or the raw-QUIC SETUP path). The URL's path must lie under the
//! token's `root`; the session then sees paths relative to the URL's path, and only those
//! its token allows.
//!
//! Keys are JWKs (a JSON object, or base64url of one): `oct` secrets for HS256/384/512, and
//! `OKP` Ed25519 keys for EdDSA (a verify-only one holds just `x`). A relay verifies with
//! a set of them ([`Keys`]: a JWK, or a JWK Set `{"keys": [...]}`), choosing by the
//! token's `kid` header, so that a key is rotated by adding the new one beside the old and
//! removing the old once its tokens have expired. Public prefixes ([`Public`]) let anyone
//! subscribe, or publish, under them without a token. Signature checking is
//! `jsonwebtoken`'s; Ed25519 key generation is `ring`'s.
//!
//! A backend signs a token; a relay checks a client's URL against it:
//!
//! ```
//! use std::time::SystemTime;
//! use moqx_auth::{Authorizer, Claims, Key, KeyAlgorithm, Keys, Public};
//! use moqx_net::model::Origin;
//!
//! let key = Key::generate(KeyAlgorithm::Eddsa)?.with_id("2026-12");
//! let claims = Claims {
//!     root: "room".into(),
//!     publish: vec!["alice".into()],
//!     subscribe: vec!["".into()],
//!     ..Claims::default()
//! };
//! let token = key.sign(&claims)?;
//!
//! let authorizer = Authorizer::new(Keys::new(vec![key])?, Public::default());
//! let grant = authorizer.authorize(&Origin::new(), &format!("/room?jwt={token}"), SystemTime::now())?;
//! assert_eq!(grant.root.as_str(), "room");
//! assert!(authorizer.authorize(&Origin::new(), "/room", SystemTime::now()).is_err(), "no token");
//! # Ok::<(), moqx_auth::AuthError>(())
//! ```

mod authorizer;
mod claims;
mod key;
mod keys;

pub use authorizer::{Authorizer, Grant, Public, request_path};
pub use claims::Claims;
pub use key::{Key, KeyAlgorithm};
pub use keys::Keys;

/// Why a key could not be loaded or a token not be made or accepted.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The key file could not be read.
    #[error("reading the key {path}: {source}")]
    ReadKey {
        /// The file.
        path: std::path::PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The key is not a JWK this relay uses.
    #[error("the key is not a usable JWK: {0}")]
    BadKey(String),
    /// A key set names one key id twice, or mixes keys with and without ids in a way that
    /// would make a token's key ambiguous.
    #[error("the key set is ambiguous: {0}")]
    AmbiguousKeys(String),
    /// The token's signature, format or algorithm is wrong, or it expired.
    #[error("token rejected: {0}")]
    BadToken(String),
    /// The token names a key (`kid`) the relay does not have: one removed by a rotation,
    /// or one the relay was never given.
    #[error("token rejected: no key with id {0:?}")]
    UnknownKey(String),
    /// The relay checks audiences and the token's `aud` names none of them.
    #[error("token rejected: its audience {0:?} is not this relay's")]
    WrongAudience(Vec<String>),
    /// The token is fine but does not cover the connection's path.
    #[error("the token's root {root:?} does not cover the path {path:?}")]
    OutsideRoot {
        /// The token's root.
        root: String,
        /// The connection's path.
        path: String,
    },
    /// The token allows neither publishing nor subscribing at this path.
    #[error("the token allows nothing under {0:?}")]
    NothingAllowed(String),
    /// No token, and the path is not public.
    #[error("no token, and {0:?} is not under a public prefix")]
    MissingToken(String),
    /// The request's path is not a URL path. It holds the path with its credentials
    /// redacted: errors are logged.
    #[error("the path {0:?} is not a valid URL path")]
    BadPath(String),
}

/// How far past its `exp` (and before its `nbf`) a token is still accepted, in seconds,
/// for clocks that disagree.
const LEEWAY_SECS: u64 = 60;

#[cfg(test)]
mod test_support {
    use std::time::{SystemTime, UNIX_EPOCH};

    use crate::Claims;

    /// The tests' clock: a fixed instant.
    pub(crate) fn now() -> SystemTime {
        UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000)
    }

    /// Claims rooted at `root` that expire an hour after [`now`].
    pub(crate) fn claims(root: &str, put: &[&str], get: &[&str]) -> Claims {
        Claims {
            root: root.into(),
            publish: put.iter().map(|s| s.to_string()).collect(),
            subscribe: get.iter().map(|s| s.to_string()).collect(),
            expires: Some(1_800_000_000 + 3600),
            issued: Some(1_800_000_000),
            ..Claims::default()
        }
    }
}
