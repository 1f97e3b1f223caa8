//! One key: a JWK that verifies tokens, and signs them if it holds the private half.

use std::path::Path as FilePath;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::{AuthError, Claims, LEEWAY_SECS};

/// A JWK, as stored in a key file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Jwk {
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
    /// The key's id, which tokens signed with it name in their header.
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
        Self::parse(&read_key_file(path)?)
    }

    /// Parses a JWK (JSON, or base64url of the JSON).
    pub fn parse(text: &str) -> Result<Self, AuthError> {
        let json = key_json(text)?;
        let jwk: Jwk = serde_json::from_str(&json).map_err(|e| AuthError::BadKey(e.to_string()))?;
        Self::from_jwk(jwk)
    }

    pub(crate) fn from_jwk(jwk: Jwk) -> Result<Self, AuthError> {
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

    /// The key's id (`kid`), if it has one: tokens it signs name it in their header, and
    /// a relay holding several keys verifies each token with the one it names.
    pub fn id(&self) -> Option<&str> {
        self.jwk.kid.as_deref()
    }

    /// The same key under the id `id`.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.jwk.kid = Some(id.into());
        self
    }

    /// The algorithm it signs and verifies with.
    pub(crate) fn algorithm(&self) -> Algorithm {
        self.algorithm
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
        let mut header = Header::new(self.algorithm);
        header.kid = self.jwk.kid.clone();
        jsonwebtoken::encode(&header, claims, key).map_err(|e| AuthError::BadKey(e.to_string()))
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
        if let Some(expires) = claims.expires
            && now > expires.saturating_add(LEEWAY_SECS)
        {
            return Err(AuthError::BadToken("expired".into()));
        }
        if let Some(not_before) = claims.not_before
            && now.saturating_add(LEEWAY_SECS) < not_before
        {
            return Err(AuthError::BadToken("not valid yet (nbf)".into()));
        }
        Ok(claims)
    }
}

/// A key file's text.
pub(crate) fn read_key_file(path: &FilePath) -> Result<String, AuthError> {
    std::fs::read_to_string(path).map_err(|source| AuthError::ReadKey {
        path: path.to_owned(),
        source,
    })
}

/// A key file's JSON: the text itself, or what its base64url decodes to.
pub(crate) fn key_json(text: &str) -> Result<String, AuthError> {
    let text = text.trim();
    if text.starts_with('{') {
        return Ok(text.to_owned());
    }
    let bytes = URL_SAFE_NO_PAD
        .decode(text)
        .map_err(|e| AuthError::BadKey(format!("neither JSON nor base64url: {e}")))?;
    String::from_utf8(bytes).map_err(|e| AuthError::BadKey(e.to_string()))
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{claims, now};

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
    fn a_key_with_an_id_names_it_in_the_tokens_it_signs() {
        let key = Key::generate(KeyAlgorithm::Hs256)
            .unwrap()
            .with_id("2026-12");
        let token = key.sign(&claims("", &["a"], &[])).unwrap();
        let header = jsonwebtoken::decode_header(&token).unwrap();
        assert_eq!(header.kid.as_deref(), Some("2026-12"));
        assert_eq!(Key::parse(&key.to_json()).unwrap().id(), Some("2026-12"));
    }
}
