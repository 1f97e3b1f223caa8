//! # moq-auth: token authorization for MoQ relays
//!
//! Which paths a session may publish and subscribe under. This crate **is** the token
//! format, its keys and the check of a path against a token's grants, with no I/O beyond
//! reading a key file; it **is not** the relay that applies them (`moq-relay`, which
//! re-exports it as `moq_relay::auth`), and has no dependency on a runtime or socket.
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
//! `exp` (optional) is when it stops working. The client presents it as `?jwt=` in its URL
//! (the WebTransport CONNECT, or the raw-QUIC SETUP path). The URL's path must lie under the
//! token's `root`; the session then sees paths relative to the URL's path, and only those
//! its token allows.
//!
//! Keys are JWKs (a JSON object, or base64url of one): `oct` secrets for HS256/384/512, and
//! `OKP` Ed25519 keys for EdDSA (a verify-only one holds just `x`). Signature checking is
//! `jsonwebtoken`'s; Ed25519 key generation is `ring`'s.

use std::path::Path as FilePath;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use moq_net::model::{Origin, Path};
use moq_net::session::Origins;
use serde::{Deserialize, Deserializer, Serialize};

/// The claims of a token.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The prefix `put` and `get` are relative to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub root: String,
    /// What the holder may publish, relative to `root`.
    #[serde(
        default,
        rename = "put",
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub publish: Vec<String>,
    /// What the holder may subscribe to, relative to `root`.
    #[serde(
        default,
        rename = "get",
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub subscribe: Vec<String>,
    /// When the token expires, in seconds since the Unix epoch.
    #[serde(default, rename = "exp", skip_serializing_if = "Option::is_none")]
    pub expires: Option<u64>,
    /// When it was issued, in seconds since the Unix epoch.
    #[serde(default, rename = "iat", skip_serializing_if = "Option::is_none")]
    pub issued: Option<u64>,
    /// When it starts working, in seconds since the Unix epoch.
    #[serde(default, rename = "nbf", skip_serializing_if = "Option::is_none")]
    pub not_before: Option<u64>,
}

/// A string is a list of one.
fn one_or_many<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(deserializer)? {
        OneOrMany::One(one) => vec![one],
        OneOrMany::Many(many) => many,
    })
}

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
    /// The token's signature, format or algorithm is wrong, or it expired.
    #[error("token rejected: {0}")]
    BadToken(String),
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

/// A JWK, as stored in a key file.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Jwk {
    #[serde(default = "oct")]
    kty: String,
    alg: String,
    /// `oct`: the secret, base64url.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    k: Option<String>,
    /// `OKP`: the curve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    crv: Option<String>,
    /// `OKP`: the public key, base64url.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    x: Option<String>,
    /// `OKP`: the private seed, base64url.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    d: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key_ops: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kid: Option<String>,
}

fn oct() -> String {
    "oct".into()
}

/// A key that verifies tokens, and signs them if it holds the private half.
pub struct Key {
    algorithm: Algorithm,
    verify: DecodingKey,
    sign: Option<EncodingKey>,
    jwk: Jwk,
}

impl std::fmt::Debug for Key {
    /// Never prints key material.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("algorithm", &self.algorithm)
            .field("can_sign", &self.sign.is_some())
            .finish_non_exhaustive()
    }
}

/// The algorithms a key may be made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum KeyAlgorithm {
    /// HMAC-SHA256 with a shared secret.
    Hs256,
    /// HMAC-SHA384 with a shared secret.
    Hs384,
    /// HMAC-SHA512 with a shared secret.
    Hs512,
    /// Ed25519 signatures: the relay needs only the public half.
    Eddsa,
}

impl Key {
    /// Reads a key file: a JWK as JSON, or base64url of the JSON.
    pub fn from_file(path: &FilePath) -> Result<Self, AuthError> {
        let text = std::fs::read_to_string(path).map_err(|source| AuthError::ReadKey {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text)
    }

    /// Parses a JWK (JSON, or base64url of the JSON).
    pub fn parse(text: &str) -> Result<Self, AuthError> {
        let text = text.trim();
        let json = if text.starts_with('{') {
            text.to_owned()
        } else {
            let bytes = URL_SAFE_NO_PAD
                .decode(text)
                .map_err(|e| AuthError::BadKey(format!("neither JSON nor base64url: {e}")))?;
            String::from_utf8(bytes).map_err(|e| AuthError::BadKey(e.to_string()))?
        };
        let jwk: Jwk = serde_json::from_str(&json).map_err(|e| AuthError::BadKey(e.to_string()))?;
        Self::from_jwk(jwk)
    }

    fn from_jwk(jwk: Jwk) -> Result<Self, AuthError> {
        let bad = |problem: &str| AuthError::BadKey(problem.to_owned());
        let decode = |field: &Option<String>, name: &str| {
            let text = field
                .as_deref()
                .ok_or_else(|| bad(&format!("`{name}` is missing")))?;
            URL_SAFE_NO_PAD
                .decode(text)
                .map_err(|e| bad(&format!("`{name}` is not base64url: {e}")))
        };
        let algorithm = match jwk.alg.as_str() {
            "HS256" => Algorithm::HS256,
            "HS384" => Algorithm::HS384,
            "HS512" => Algorithm::HS512,
            "EdDSA" => Algorithm::EdDSA,
            other => {
                return Err(bad(&format!(
                    "algorithm {other:?} is not HS256/384/512 or EdDSA"
                )));
            }
        };
        let (verify, sign) = match (jwk.kty.as_str(), algorithm) {
            ("oct", Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512) => {
                let secret = decode(&jwk.k, "k")?;
                if secret.len() < 16 {
                    return Err(bad("the secret is shorter than 16 bytes"));
                }
                (
                    DecodingKey::from_secret(&secret),
                    Some(EncodingKey::from_secret(&secret)),
                )
            }
            ("OKP", Algorithm::EdDSA) => {
                if jwk.crv.as_deref() != Some("Ed25519") {
                    return Err(bad("an OKP key must have crv Ed25519"));
                }
                let public = decode(&jwk.x, "x")?;
                let verify = DecodingKey::from_ed_components(jwk.x.as_deref().unwrap_or_default())
                    .map_err(|e| bad(&e.to_string()))?;
                let sign = match &jwk.d {
                    None => None,
                    Some(_) => {
                        let seed = decode(&jwk.d, "d")?;
                        ring::signature::Ed25519KeyPair::from_seed_and_public_key(&seed, &public)
                            .map_err(|_| bad("`d` and `x` are not one Ed25519 key pair"))?;
                        Some(EncodingKey::from_ed_der(&ed25519_pkcs8(&seed)))
                    }
                };
                (verify, sign)
            }
            (kty, _) => {
                return Err(bad(&format!(
                    "key type {kty:?} does not go with algorithm {}",
                    jwk.alg
                )));
            }
        };
        Ok(Self {
            algorithm,
            verify,
            sign,
            jwk,
        })
    }

    /// A new random key.
    pub fn generate(algorithm: KeyAlgorithm) -> Result<Self, AuthError> {
        use ring::rand::{SecureRandom, SystemRandom};
        let random = SystemRandom::new();
        let failed = |_| AuthError::BadKey("the system's random source failed".into());
        let jwk = match algorithm {
            KeyAlgorithm::Hs256 | KeyAlgorithm::Hs384 | KeyAlgorithm::Hs512 => {
                let (alg, len) = match algorithm {
                    KeyAlgorithm::Hs256 => ("HS256", 32),
                    KeyAlgorithm::Hs384 => ("HS384", 48),
                    _ => ("HS512", 64),
                };
                let mut secret = vec![0u8; len];
                random.fill(&mut secret).map_err(failed)?;
                Jwk {
                    kty: "oct".into(),
                    alg: alg.into(),
                    k: Some(URL_SAFE_NO_PAD.encode(&secret)),
                    crv: None,
                    x: None,
                    d: None,
                    key_ops: Some(vec!["sign".into(), "verify".into()]),
                    kid: None,
                }
            }
            KeyAlgorithm::Eddsa => {
                let mut seed = [0u8; 32];
                random.fill(&mut seed).map_err(failed)?;
                let pair = ring::signature::Ed25519KeyPair::from_seed_unchecked(&seed)
                    .map_err(|_| AuthError::BadKey("could not make an Ed25519 key".into()))?;
                use ring::signature::KeyPair;
                Jwk {
                    kty: "OKP".into(),
                    alg: "EdDSA".into(),
                    k: None,
                    crv: Some("Ed25519".into()),
                    x: Some(URL_SAFE_NO_PAD.encode(pair.public_key().as_ref())),
                    d: Some(URL_SAFE_NO_PAD.encode(seed)),
                    key_ops: Some(vec!["sign".into(), "verify".into()]),
                    kid: None,
                }
            }
        };
        Self::from_jwk(jwk)
    }

    /// The key as JWK JSON (with its private half, if it has one).
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.jwk).unwrap_or_default()
    }

    /// The verify-only half of an Ed25519 key, as JWK JSON: what a relay needs. `None`
    /// for an HMAC secret, which has no public half.
    pub fn public_json(&self) -> Option<String> {
        if self.jwk.kty != "OKP" {
            return None;
        }
        let public = Jwk {
            d: None,
            key_ops: Some(vec!["verify".into()]),
            ..self.jwk.clone()
        };
        serde_json::to_string(&public).ok()
    }

    /// Signs `claims` into a token.
    pub fn sign(&self, claims: &Claims) -> Result<String, AuthError> {
        let key = self.sign.as_ref().ok_or_else(|| {
            AuthError::BadKey("this key has no private half (`d`) and cannot sign".into())
        })?;
        jsonwebtoken::encode(&Header::new(self.algorithm), claims, key)
            .map_err(|e| AuthError::BadKey(e.to_string()))
    }

    /// Checks a token's signature, expiry and start (`exp` and `nbf`, at `now`, with 60 s
    /// of leeway for clock skew) and returns its claims. Any claim value is handled: a time
    /// beyond the clock's range is simply never (or always) reached.
    pub fn verify(&self, token: &str, now: SystemTime) -> Result<Claims, AuthError> {
        let mut validation = Validation::new(self.algorithm);
        validation.required_spec_claims.clear();
        // Expiry is checked below against `now`, not the library's own clock read.
        validation.validate_exp = false;
        validation.validate_aud = false;
        let data = jsonwebtoken::decode::<Claims>(token, &self.verify, &validation)
            .map_err(|e| AuthError::BadToken(e.to_string()))?;
        let claims = data.claims;
        let now = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        if let Some(expires) = claims.expires {
            if now > expires.saturating_add(LEEWAY_SECS) {
                return Err(AuthError::BadToken("expired".into()));
            }
        }
        if let Some(not_before) = claims.not_before {
            if now.saturating_add(LEEWAY_SECS) < not_before {
                return Err(AuthError::BadToken("not valid yet (nbf)".into()));
            }
        }
        Ok(claims)
    }
}

/// How far past its `exp` (and before its `nbf`) a token is still accepted, in seconds,
/// for clocks that disagree.
const LEEWAY_SECS: u64 = 60;

/// The PKCS#8 v1 document of an Ed25519 seed (RFC 8410), the form `jsonwebtoken` signs
/// with: a fixed 16-byte header, then the 32-byte seed.
fn ed25519_pkcs8(seed: &[u8]) -> Vec<u8> {
    const HEADER: [u8; 16] = [
        0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04,
        0x20,
    ];
    let mut der = HEADER.to_vec();
    der.extend_from_slice(seed);
    der
}

/// Decides what each session may do: the relay's key, and its public prefixes.
#[derive(Debug)]
pub struct Authorizer {
    key: Option<Key>,
    public: Vec<Path>,
}

/// What one session may do, as scoped views of the relay's origin.
#[derive(Debug, Clone)]
pub struct Grant {
    /// The connection's path: the root its session's paths are relative to.
    pub root: Path,
    /// The views: what it reads (`publish`, served to it) and what it fills (`subscribe`).
    /// `origins.trust_routes` is [`peer`](Self::peer), for the caller to confirm.
    pub origins: Origins,
    /// The session may be another relay of this one's cluster: connected at the root,
    /// it may publish and subscribe to everything, on a token this relay's key signed
    /// (or on a relay with no key, where everything is open). It is one if its SETUP
    /// names its hop id, as relays do; then its announced routes rank its broadcasts
    /// (a client's never do).
    pub peer: bool,
}

impl Authorizer {
    /// Verifies tokens with `key`; paths under `public` need none.
    pub fn new(key: Option<Key>, public: &[String]) -> Self {
        Self {
            key,
            public: public.iter().map(Path::new).collect(),
        }
    }

    /// Decides for a connection to `path_and_query` (`/room?jwt=…`) at `now`: the views of
    /// `origin` its session gets, or why it is refused.
    pub fn authorize(
        &self,
        origin: &Origin,
        path_and_query: &str,
        now: SystemTime,
    ) -> Result<Grant, AuthError> {
        let normalized = request_path(path_and_query)?;
        let (path, query) = normalized.split_once('?').unwrap_or((&normalized, ""));
        let root = Path::new(path);
        let token = url::form_urlencoded::parse(query.as_bytes())
            .find(|(name, _)| name == "jwt")
            .map(|(_, value)| value.into_owned());
        let mut valid_for = None;
        let mut verified = false;
        let (publish, subscribe) = match (&self.key, token) {
            (Some(key), Some(token)) => {
                let claims = key.verify(&token, now)?;
                valid_for = claims.expires.map(|expires| remaining(expires, now));
                let token_root = Path::new(&claims.root);
                if !root.has_prefix(&token_root) {
                    return Err(AuthError::OutsideRoot {
                        root: claims.root,
                        path: root.to_string(),
                    });
                }
                let reads = relative_grants(&token_root, &claims.subscribe, &root);
                let writes = relative_grants(&token_root, &claims.publish, &root);
                if reads.is_empty() && writes.is_empty() {
                    return Err(AuthError::NothingAllowed(root.to_string()));
                }
                verified = true;
                (reads, writes)
            }
            _ if self.public.iter().any(|prefix| root.has_prefix(prefix)) => {
                (vec![Path::root()], vec![Path::root()])
            }
            (_, _) => return Err(AuthError::MissingToken(root.to_string())),
        };
        let everything = |grants: &[Path]| grants.iter().any(Path::is_root);
        let peer = root.is_root()
            && everything(&publish)
            && everything(&subscribe)
            && (verified || self.key.is_none());
        Ok(Grant {
            origins: Origins {
                publish: Some(origin.scope(root.clone(), publish)),
                subscribe: Some(origin.scope(root.clone(), subscribe)),
                valid_for,
                trust_routes: peer,
            },
            root,
            peer,
        })
    }
}

/// How long from `now` a token expiring at `expires` (Unix seconds) stays valid, with the
/// same leeway `verify` gives.
fn remaining(expires: u64, now: SystemTime) -> Duration {
    let until = UNIX_EPOCH
        .checked_add(Duration::from_secs(expires.saturating_add(LEEWAY_SECS)))
        // Beyond the clock's range: never in this process's life.
        .unwrap_or(now + Duration::from_secs(u32::MAX.into()));
    until.duration_since(now).unwrap_or_default()
}

/// The one form of a request's path and query, whichever binding carried it: the path as
/// a WebTransport CONNECT's URL has it (WHATWG URL rules: `.` and `..` segments resolved,
/// characters percent-encoded the same way), so that one path names the same broadcasts
/// over raw QUIC, whose SETUP carries the client's bytes as they are, and over
/// WebTransport, whose request went through those rules on its way in.
pub fn request_path(path_and_query: &str) -> Result<String, AuthError> {
    let bad = || AuthError::BadPath(moq_net::redact::redact(path_and_query).into_owned());
    // A raw QUIC client may leave out the leading slash; a URL path always has one.
    let slash = if path_and_query.starts_with('/') {
        ""
    } else {
        "/"
    };
    // The same construction a WebTransport server applies to a CONNECT (scheme,
    // authority, then the request's path and query).
    let url = url::Url::parse(&format!("https://relay.invalid{slash}{path_and_query}"))
        .map_err(|_| bad())?;
    if url.host_str() != Some("relay.invalid") {
        return Err(bad());
    }
    Ok(match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    })
}

/// The prefixes `grants` (relative to `token_root`) allow, relative to `root` (which is
/// under `token_root`): a grant covering all of `root` allows everything there; one under
/// `root` allows its own part; one beside it nothing.
fn relative_grants(token_root: &Path, grants: &[String], root: &Path) -> Vec<Path> {
    let mut allowed = Vec::new();
    for grant in grants {
        let absolute = token_root.join(grant);
        if root.has_prefix(&absolute) {
            allowed.push(Path::root());
        } else if let Some(rest) = absolute.strip_prefix(root) {
            allowed.push(Path::new(rest));
        }
    }
    allowed
}

#[cfg(test)]
mod tests {
    use super::*;
    use moq_net::model::BroadcastProducer;

    fn now() -> SystemTime {
        UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000)
    }

    fn claims(root: &str, put: &[&str], get: &[&str]) -> Claims {
        Claims {
            root: root.into(),
            publish: put.iter().map(|s| s.to_string()).collect(),
            subscribe: get.iter().map(|s| s.to_string()).collect(),
            expires: Some(1_800_000_000 + 3600),
            issued: Some(1_800_000_000),
            not_before: None,
        }
    }

    /// Regression: `Duration::from_secs(exp) + LEEWAY` panicked on overflow for a huge
    /// `exp`, inside the relay's task.
    #[test]
    fn any_exp_or_nbf_value_is_judged_without_a_panic() {
        let key = Key::generate(KeyAlgorithm::Hs256).unwrap();
        let sign = |expires, not_before| {
            key.sign(&Claims {
                expires,
                not_before,
                ..claims("room", &["a"], &[])
            })
            .unwrap()
        };
        assert!(key.verify(&sign(Some(u64::MAX), None), now()).is_ok());
        assert!(key.verify(&sign(Some(0), None), now()).is_err(), "expired");
        assert!(
            key.verify(&sign(None, Some(u64::MAX)), now()).is_err(),
            "never valid"
        );
        assert!(
            key.verify(&sign(None, Some(1_800_000_000 + 3600)), now())
                .is_err(),
            "not valid for another hour"
        );
        assert!(
            key.verify(&sign(None, Some(1_800_000_000 + 30)), now())
                .is_ok(),
            "30 s ahead is within the leeway"
        );
        assert!(key.verify(&sign(None, Some(0)), now()).is_ok());
    }

    #[test]
    fn an_hmac_and_an_ed25519_key_sign_what_they_verify() {
        for algorithm in [
            KeyAlgorithm::Hs256,
            KeyAlgorithm::Hs512,
            KeyAlgorithm::Eddsa,
        ] {
            let key = Key::generate(algorithm).unwrap();
            let token = key.sign(&claims("room", &["alice"], &[""])).unwrap();
            let reloaded = Key::parse(&key.to_json()).unwrap();
            assert_eq!(
                reloaded.verify(&token, now()).unwrap(),
                claims("room", &["alice"], &[""])
            );
        }
    }

    #[test]
    fn a_verify_only_ed25519_key_verifies_but_cannot_sign() {
        let key = Key::generate(KeyAlgorithm::Eddsa).unwrap();
        let token = key.sign(&claims("", &[], &["x"])).unwrap();
        let public = Key::parse(&key.public_json().unwrap()).unwrap();
        assert!(public.verify(&token, now()).is_ok());
        assert!(public.sign(&claims("", &[], &["x"])).is_err());
        assert!(
            Key::generate(KeyAlgorithm::Hs256)
                .unwrap()
                .public_json()
                .is_none()
        );
    }

    #[test]
    fn a_base64url_key_file_is_read_like_a_json_one() {
        let key = Key::generate(KeyAlgorithm::Hs256).unwrap();
        let encoded = URL_SAFE_NO_PAD.encode(key.to_json());
        let token = key.sign(&claims("", &["a"], &[])).unwrap();
        assert!(Key::parse(&encoded).unwrap().verify(&token, now()).is_ok());
    }

    #[test]
    fn expired_forged_and_foreign_tokens_are_rejected() {
        let key = Key::generate(KeyAlgorithm::Hs256).unwrap();
        let mut expired = claims("room", &["a"], &[]);
        expired.expires = Some(1_800_000_000 - 3600);
        assert!(key.verify(&key.sign(&expired).unwrap(), now()).is_err());

        let token = key.sign(&claims("room", &["a"], &[])).unwrap();
        let other = Key::generate(KeyAlgorithm::Hs256).unwrap();
        assert!(
            other.verify(&token, now()).is_err(),
            "signed by another key"
        );
        let mut forged = token.clone();
        forged.pop();
        forged.push(if token.ends_with('A') { 'B' } else { 'A' });
        assert!(key.verify(&forged, now()).is_err(), "a changed signature");
        let eddsa = Key::generate(KeyAlgorithm::Eddsa).unwrap();
        assert!(eddsa.verify(&token, now()).is_err(), "the wrong algorithm");
    }

    #[test]
    fn deployed_claims_parse_with_a_string_or_a_list() {
        let one: Claims =
            serde_json::from_str(r#"{"root":"r","put":"a","get":["b","c"]}"#).unwrap();
        assert_eq!(one.publish, ["a"]);
        assert_eq!(one.subscribe, ["b", "c"]);
        assert_eq!(one.expires, None);
    }

    #[test]
    fn a_grant_is_scoped_to_the_connection_path_and_the_token() {
        let key = Key::generate(KeyAlgorithm::Hs256).unwrap();
        let token = key
            .sign(&claims("org", &["room/alice"], &["room"]))
            .unwrap();
        let authorizer = Authorizer::new(Some(key), &[]);
        let origin = Origin::new();
        let grant = authorizer
            .authorize(&origin, &format!("/org/room?jwt={token}"), now())
            .unwrap();
        assert_eq!(grant.root, Path::new("org/room"));
        let writes = grant.origins.subscribe.unwrap();
        let alice = BroadcastProducer::new();
        writes.publish("alice/cam", &alice).unwrap();
        assert!(writes.publish("bob", &BroadcastProducer::new()).is_err());
        assert!(origin.consume_broadcast("org/room/alice/cam").is_some());
        let reads = grant.origins.publish.unwrap();
        assert!(reads.consume_broadcast("alice/cam").is_some());

        // A path outside the token's root, and no token on a private path.
        assert!(matches!(
            authorizer.authorize(&origin, &format!("/other?jwt={token}"), now()),
            Err(AuthError::OutsideRoot { .. })
        ));
        assert!(matches!(
            authorizer.authorize(&origin, "/org/room", now()),
            Err(AuthError::MissingToken(_))
        ));
        // A path the token grants nothing under.
        assert!(matches!(
            authorizer.authorize(&origin, &format!("/org/lobby?jwt={token}"), now()),
            Err(AuthError::NothingAllowed(_))
        ));
    }

    #[test]
    fn public_prefixes_need_no_token_and_no_key_makes_everything_public() {
        let origin = Origin::new();
        let key = Key::generate(KeyAlgorithm::Hs256).unwrap();
        let authorizer = Authorizer::new(Some(key), &["anon".into()]);
        assert!(authorizer.authorize(&origin, "/anon/room", now()).is_ok());
        assert!(authorizer.authorize(&origin, "/private", now()).is_err());
        let open = Authorizer::new(None, &[String::new()]);
        assert!(
            open.authorize(&origin, "/anything?jwt=ignored", now())
                .is_ok()
        );
    }

    /// Regression: raw QUIC took the SETUP path as it came while WebTransport's went
    /// through URL rules, so `/org/room/../lobby` named `org/room/../lobby` on one binding
    /// and `org/lobby` on the other. Both now take the URL form.
    #[test]
    fn one_path_names_the_same_root_on_both_bindings() {
        let cases = [
            ("/org/room/../lobby?jwt=x", "/org/lobby?jwt=x"),
            ("/org/./room", "/org/room"),
            ("/org/%2e%2E/x", "/x"),
            ("org/room", "/org/room"),
            ("/a b", "/a%20b"),
            ("//org", "//org"),
            ("/room#fragment", "/room"),
        ];
        for (raw, expected) in cases {
            assert_eq!(request_path(raw).unwrap(), expected, "{raw}");
            // What a WebTransport CONNECT of the same path carries.
            let connect = url::Url::parse(&format!(
                "https://example.com{}{raw}",
                if raw.starts_with('/') { "" } else { "/" }
            ))
            .unwrap();
            let wt = match connect.query() {
                Some(query) => format!("{}?{query}", connect.path()),
                None => connect.path().to_owned(),
            };
            assert_eq!(wt, expected, "{raw} over WebTransport");
        }
        let key = Key::generate(KeyAlgorithm::Hs256).unwrap();
        let token = key.sign(&claims("org", &["room"], &["room"])).unwrap();
        let authorizer = Authorizer::new(Some(key), &[]);
        let origin = Origin::new();
        // A path that climbs out of the token's root is judged where it lands.
        assert!(matches!(
            authorizer.authorize(
                &origin,
                &format!("/org/room/../../admin?jwt={token}"),
                now()
            ),
            Err(AuthError::OutsideRoot { .. })
        ));
    }

    #[test]
    fn a_grant_is_valid_until_its_token_expires_with_the_leeway() {
        let key = Key::generate(KeyAlgorithm::Hs256).unwrap();
        let token = key.sign(&claims("", &[""], &[""])).unwrap();
        let mut forever = claims("", &[""], &[""]);
        forever.expires = None;
        let forever = key.sign(&forever).unwrap();
        let authorizer = Authorizer::new(Some(key), &[]);
        let grant = authorizer
            .authorize(&Origin::new(), &format!("/?jwt={token}"), now())
            .unwrap();
        assert_eq!(
            grant.origins.valid_for,
            Some(Duration::from_secs(3600 + LEEWAY_SECS))
        );
        let token = forever;
        let grant = authorizer
            .authorize(&Origin::new(), &format!("/?jwt={token}"), now())
            .unwrap();
        assert_eq!(grant.origins.valid_for, None);
        assert_eq!(
            remaining(u64::MAX, now()),
            Duration::from_secs(u32::MAX.into())
        );
    }
}
