//! `[auth]`: the keys tokens are checked with, what is public, and whom tokens must be for.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::auth::{AuthError, Authorizer, Keys, Public};
use crate::config::ConfigError;

/// `[auth]`
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AuthSection {
    /// The keys tokens are verified with: a JWK file, or a JWK Set file (`{"keys":
    /// [...]}`) whose keys carry ids (`kid`) that tokens name; JSON, or base64url of the
    /// JSON. HMAC (`oct`, HS256/384/512) or Ed25519 (`OKP`, EdDSA). Reread on SIGHUP, so
    /// a key is rotated by adding the new one to the set, reloading, and removing the old
    /// one once its tokens have expired. Without one, tokens are not checked and what is
    /// public decides alone.
    pub key: Option<PathBuf>,
    /// A URL serving the JWK Set instead of `key` (an identity provider's JWKS endpoint;
    /// `https://`, or `http://` on a trusted network): fetched at start (the relay does not
    /// start without it), every `key_refresh_secs` and on SIGHUP; a fetch that fails or a
    /// set that does not load keeps the keys in force.
    pub key_url: Option<String>,
    /// How often `key_url` is fetched again, in seconds.
    pub key_refresh_secs: u64,
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

impl Default for AuthSection {
    /// No key, everything public; a key URL fetched every 5 minutes once set.
    fn default() -> Self {
        Self {
            key: None,
            key_url: None,
            key_refresh_secs: 300,
            public: None,
            public_subscribe: Vec::new(),
            public_publish: Vec::new(),
            audience: Vec::new(),
        }
    }
}

impl AuthSection {
    /// Whether tokens are checked (a key file or a key URL is set).
    pub fn has_keys(&self) -> bool {
        self.key.is_some() || self.key_url.is_some()
    }

    /// Checks the values that parse but cannot work.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key, problem: &str| {
            Err(ConfigError::Invalid {
                key,
                problem: problem.to_owned(),
            })
        };
        if self.key.is_some() && self.key_url.is_some() {
            return invalid("auth.key_url", "set `auth.key` or `auth.key_url`, not both");
        }
        if let Some(url) = &self.key_url {
            match url::Url::parse(url) {
                Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {}
                _ => return invalid("auth.key_url", "must be an http:// or https:// URL"),
            }
        }
        if self.key_refresh_secs == 0 {
            return invalid("auth.key_refresh_secs", "must be at least 1 second");
        }
        Ok(())
    }

    /// The public prefixes in effect: the configured ones, or everything when there is no
    /// key and none is configured.
    pub fn public_prefixes(&self) -> Public {
        let configured = self.public.is_some()
            || !self.public_subscribe.is_empty()
            || !self.public_publish.is_empty();
        if !self.has_keys() && !configured {
            return Public::both(&[String::new()]);
        }
        let mut public = Public::both(self.public.as_deref().unwrap_or_default());
        public
            .subscribe
            .extend(self.public_subscribe.iter().cloned());
        public.publish.extend(self.public_publish.iter().cloned());
        public
    }

    /// The authorizer these settings make: the key file read now, or the set `fetched`
    /// from `key_url`.
    pub fn authorizer(&self, fetched: Option<&str>) -> Result<Authorizer, AuthError> {
        let keys = match (&self.key, &self.key_url, fetched) {
            (Some(path), _, _) => Keys::from_file(path)?,
            (None, Some(_), Some(text)) => Keys::parse(text)?,
            (None, Some(url), None) => {
                return Err(AuthError::BadKey(format!("{url} was not fetched")));
            }
            (None, None, _) => Keys::default(),
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
