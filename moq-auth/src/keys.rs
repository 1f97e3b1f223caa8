//! The keys a relay verifies tokens with: one JWK, or a JWK Set, chosen by the token's
//! `kid`.
//!
//! Rotation is the reason for a set: the operator adds the new key (with a new id) beside
//! the old, moves the token issuer to it, and removes the old key once the last token it
//! signed has expired. A token naming an id verifies only with that key; a token naming
//! none (issued before keys had ids) is tried with every key of its algorithm.

use std::path::Path as FilePath;
use std::time::SystemTime;

use serde::Deserialize;

use crate::key::{Jwk, key_json, read_key_file};
use crate::{AuthError, Claims, Key};

/// A set of verifying keys; empty means the relay checks no tokens.
#[derive(Debug, Default)]
pub struct Keys {
    keys: Vec<Key>,
}

/// A JWK Set (RFC 7517 §5).
#[derive(Deserialize)]
struct JwkSet {
    keys: Vec<Jwk>,
}

/// The most keys a set may hold: every token without a `kid` is tried with each.
const MAX_KEYS: usize = 64;

impl Keys {
    /// A set of `keys`, refused if two share an id, or if there are more than 64.
    pub fn new(keys: Vec<Key>) -> Result<Self, AuthError> {
        if keys.len() > MAX_KEYS {
            return Err(AuthError::AmbiguousKeys(format!(
                "{} keys; at most {MAX_KEYS}",
                keys.len()
            )));
        }
        for (at, key) in keys.iter().enumerate() {
            if let Some(id) = key.id()
                && keys[..at].iter().any(|other| other.id() == Some(id))
            {
                return Err(AuthError::AmbiguousKeys(format!(
                    "the id {id:?} is used twice"
                )));
            }
        }
        Ok(Self { keys })
    }

    /// Reads a key file: one JWK, or a JWK Set (`{"keys": [...]}`), as JSON or base64url
    /// of the JSON.
    pub fn from_file(path: &FilePath) -> Result<Self, AuthError> {
        Self::parse(&read_key_file(path)?)
    }

    /// Parses one JWK, or a JWK Set, as JSON or base64url of the JSON.
    pub fn parse(text: &str) -> Result<Self, AuthError> {
        let json = key_json(text)?;
        let value: serde_json::Value =
            serde_json::from_str(&json).map_err(|e| AuthError::BadKey(e.to_string()))?;
        if value.get("keys").is_some() {
            let set: JwkSet =
                serde_json::from_value(value).map_err(|e| AuthError::BadKey(e.to_string()))?;
            if set.keys.is_empty() {
                return Err(AuthError::BadKey("the key set holds no key".into()));
            }
            let keys = set
                .keys
                .into_iter()
                .enumerate()
                .map(|(at, jwk)| {
                    Key::from_jwk(jwk).map_err(|error| match error {
                        AuthError::BadKey(problem) => {
                            AuthError::BadKey(format!("key {at}: {problem}"))
                        }
                        other => other,
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Self::new(keys)
        } else {
            Self::new(vec![Key::parse(&json)?])
        }
    }

    /// Whether there are no keys (the relay checks no tokens).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// How many keys there are.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// The keys' ids, `None` for a key without one: for a log line saying what a reload
    /// loaded.
    pub fn ids(&self) -> Vec<Option<&str>> {
        self.keys.iter().map(Key::id).collect()
    }

    /// Checks a token with the key its `kid` names (or, naming none, with each key of its
    /// algorithm until one accepts it) and returns its claims: see [`Key::verify`].
    pub fn verify(&self, token: &str, now: SystemTime) -> Result<Claims, AuthError> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| AuthError::BadToken(e.to_string()))?;
        if let Some(id) = header.kid {
            let key = self
                .keys
                .iter()
                .find(|key| key.id() == Some(id.as_str()))
                .ok_or(AuthError::UnknownKey(id))?;
            return key.verify(token, now);
        }
        let mut last = None;
        for key in self.keys.iter().filter(|key| key.algorithm() == header.alg) {
            match key.verify(token, now) {
                Ok(claims) => return Ok(claims),
                Err(error) => last = Some(error),
            }
        }
        Err(last.unwrap_or_else(|| {
            AuthError::BadToken(format!("no key for the algorithm {:?}", header.alg))
        }))
    }
}

impl From<Key> for Keys {
    fn from(key: Key) -> Self {
        Self { keys: vec![key] }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KeyAlgorithm;
    use crate::test_support::{claims, now};

    fn set(keys: &[&Key]) -> String {
        let keys: Vec<serde_json::Value> = keys
            .iter()
            .map(|key| serde_json::from_str(&key.to_json()).unwrap())
            .collect();
        serde_json::json!({ "keys": keys }).to_string()
    }

    #[test]
    fn a_token_is_verified_with_the_key_its_id_names() {
        let old = Key::generate(KeyAlgorithm::Hs256).unwrap().with_id("old");
        let new = Key::generate(KeyAlgorithm::Eddsa).unwrap().with_id("new");
        let keys = Keys::parse(&set(&[&old, &new])).unwrap();
        assert_eq!(keys.ids(), [Some("old"), Some("new")]);
        for key in [&old, &new] {
            let token = key.sign(&claims("", &["a"], &[])).unwrap();
            assert!(keys.verify(&token, now()).is_ok(), "{:?}", key.id());
        }
        // The old key removed: its tokens are refused, naming the id.
        let rotated = Keys::parse(&set(&[&new])).unwrap();
        let token = old.sign(&claims("", &["a"], &[])).unwrap();
        assert!(matches!(
            rotated.verify(&token, now()),
            Err(AuthError::UnknownKey(id)) if id == "old"
        ));
    }

    #[test]
    fn a_token_without_an_id_is_tried_with_every_key_of_its_algorithm() {
        let first = Key::generate(KeyAlgorithm::Hs256).unwrap();
        let second = Key::generate(KeyAlgorithm::Hs256).unwrap();
        let keys = Keys::parse(&set(&[&first, &second])).unwrap();
        let token = second.sign(&claims("", &["a"], &[])).unwrap();
        assert!(keys.verify(&token, now()).is_ok());
        let stranger = Key::generate(KeyAlgorithm::Hs256).unwrap();
        let token = stranger.sign(&claims("", &["a"], &[])).unwrap();
        assert!(matches!(
            keys.verify(&token, now()),
            Err(AuthError::BadToken(_))
        ));
        let eddsa = Key::generate(KeyAlgorithm::Eddsa).unwrap();
        let token = eddsa.sign(&claims("", &["a"], &[])).unwrap();
        assert!(matches!(
            keys.verify(&token, now()),
            Err(AuthError::BadToken(_))
        ));
    }

    #[test]
    fn one_jwk_is_a_set_of_one_and_ambiguous_sets_are_refused() {
        let key = Key::generate(KeyAlgorithm::Hs256).unwrap();
        assert_eq!(Keys::parse(&key.to_json()).unwrap().len(), 1);
        let twin = Key::generate(KeyAlgorithm::Hs256).unwrap().with_id("a");
        let same_id = Key::generate(KeyAlgorithm::Hs256).unwrap().with_id("a");
        assert!(matches!(
            Keys::parse(&set(&[&twin, &same_id])),
            Err(AuthError::AmbiguousKeys(_))
        ));
        assert!(matches!(
            Keys::parse(r#"{"keys": []}"#),
            Err(AuthError::BadKey(_))
        ));
        assert!(matches!(
            Keys::parse(r#"{"keys": [{"kty": "oct", "alg": "HS256", "k": "c2hvcnQ"}]}"#),
            Err(AuthError::BadKey(problem)) if problem.starts_with("key 0:")
        ));
    }
}
