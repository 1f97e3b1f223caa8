//! `[auth]`: the keys tokens are checked with, what is public, and whom tokens must be for.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::auth::{AuthError, Authorizer, Keys, Public};

/// `[auth]`
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AuthSection {
    /// The keys tokens are verified with: a JWK file, or a JWK Set file (`{"keys":
    /// [...]}`) whose keys carry ids (`kid`) that tokens name; JSON, or base64url of the
    /// JSON. HMAC (`oct`, HS256/384/512) or Ed25519 (`OKP`, EdDSA). Reread on SIGHUP, so
    /// a key is rotated by adding the new one to the set, reloading, and removing the old
    /// one once its tokens have expired. Without one, tokens are not checked and what is
    /// public decides alone.
    pub key: Option<PathBuf>,
    /// Path prefixes anyone may publish and subscribe under without a token. Defaults to
    /// everything when no key is set and no public prefix of either kind below is, and
    /// to nothing otherwise.
    pub public: Option<Vec<String>>,
    /// Path prefixes anyone may subscribe to without a token (anonymous viewers), in
    /// addition to `public`.
    pub public_subscribe: Vec<String>,
    /// Path prefixes anyone may publish under without a token, in addition to `public`.
    pub public_publish: Vec<String>,
    /// The audiences a token must name one of in its `aud` claim (this relay's or this
    /// deployment's name); empty: `aud` is not checked.
    pub audience: Vec<String>,
}

impl AuthSection {
    /// The public prefixes in effect: the configured ones, or everything when there is no
    /// key and none is configured.
    pub fn public_prefixes(&self) -> Public {
        let configured = self.public.is_some()
            || !self.public_subscribe.is_empty()
            || !self.public_publish.is_empty();
        if self.key.is_none() && !configured {
            return Public::both(&[String::new()]);
        }
        let mut public = Public::both(self.public.as_deref().unwrap_or_default());
        public
            .subscribe
            .extend(self.public_subscribe.iter().cloned());
        public.publish.extend(self.public_publish.iter().cloned());
        public
    }

    /// The authorizer these settings make: the key file read now.
    pub fn authorizer(&self) -> Result<Authorizer, AuthError> {
        let keys = match &self.key {
            Some(path) => Keys::from_file(path)?,
            None => Keys::default(),
        };
        Ok(Authorizer::new(keys, self.public_prefixes()).with_audience(self.audience.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_key_everything_is_public_unless_something_is_named() {
        let open = AuthSection::default();
        assert_eq!(open.public_prefixes(), Public::both(&[String::new()]));
        let viewers = AuthSection {
            public_subscribe: vec!["live".into()],
            ..AuthSection::default()
        };
        assert_eq!(
            viewers.public_prefixes(),
            Public {
                publish: vec![],
                subscribe: vec!["live".into()]
            }
        );
    }

    #[test]
    fn a_key_without_public_prefixes_makes_nothing_public() {
        let keyed = AuthSection {
            key: Some("root.jwk".into()),
            ..AuthSection::default()
        };
        assert!(keyed.public_prefixes().is_empty());
        let mixed = AuthSection {
            key: Some("root.jwk".into()),
            public: Some(vec!["anon".into()]),
            public_subscribe: vec!["live".into()],
            ..AuthSection::default()
        };
        let public = mixed.public_prefixes();
        assert_eq!(public.publish, ["anon"]);
        assert_eq!(public.subscribe, ["anon", "live"]);
    }
}
