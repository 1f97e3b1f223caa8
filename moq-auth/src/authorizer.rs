//! The decision for one connection: its path, its token, the relay's keys and public
//! prefixes, and the views of the origin its session gets.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use moqx_net::model::{Origin, Path};
use moqx_net::session::Origins;

use crate::{AuthError, Claims, Keys, LEEWAY_SECS};

/// Decides what each session may do: the relay's key, and its public prefixes.
#[derive(Debug)]
pub struct Authorizer {
    keys: Keys,
    public: Public,
    /// The audiences a token must name one of (`aud`); empty: not checked.
    audience: Vec<String>,
}

/// The path prefixes anyone may use without a token: to subscribe under, and to publish
/// under. A connection's path is judged as a token's grants are (a prefix above it opens
/// all of it, one below it opens that part).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Public {
    /// Where anyone may publish.
    pub publish: Vec<String>,
    /// What anyone may subscribe to.
    pub subscribe: Vec<String>,
}

impl Public {
    /// The same prefixes for both.
    pub fn both(prefixes: &[String]) -> Self {
        Self {
            publish: prefixes.to_vec(),
            subscribe: prefixes.to_vec(),
        }
    }

    /// Whether nothing is public.
    pub fn is_empty(&self) -> bool {
        self.publish.is_empty() && self.subscribe.is_empty()
    }
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
    /// Verifies tokens with `keys` (none: every token is ignored, and only `public`
    /// decides); paths under `public`'s prefixes need no token.
    pub fn new(keys: Keys, public: Public) -> Self {
        Self {
            keys,
            public,
            audience: Vec::new(),
        }
    }

    /// Tokens must name one of `audience` in their `aud` claim (empty: not checked).
    pub fn with_audience(mut self, audience: Vec<String>) -> Self {
        self.audience = audience;
        self
    }

    /// The keys tokens are verified with.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// Decides for a connection to `path_and_query` (`/room?jwt=…`) at `now`: the views of
    /// `origin` its session gets, or why it is refused. A valid token's grants and the
    /// public prefixes add up; a token that is present but not valid is refused, public
    /// paths or not.
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
        // What it reads (subscribes to) and what it writes (publishes).
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        if let (false, Some(token)) = (self.keys.is_empty(), token) {
            let claims = self.keys.verify(&token, now)?;
            self.check_audience(&claims)?;
            valid_for = claims.expires.map(|expires| remaining(expires, now));
            let token_root = Path::new(&claims.root);
            if !root.has_prefix(&token_root) {
                return Err(AuthError::OutsideRoot {
                    root: claims.root,
                    path: root.to_string(),
                });
            }
            reads = relative_grants(&token_root, &claims.subscribe, &root);
            writes = relative_grants(&token_root, &claims.publish, &root);
            if reads.is_empty() && writes.is_empty() && self.public.is_empty() {
                return Err(AuthError::NothingAllowed(root.to_string()));
            }
            verified = true;
        }
        add_grants(
            &mut reads,
            relative_grants(&Path::root(), &self.public.subscribe, &root),
        );
        add_grants(
            &mut writes,
            relative_grants(&Path::root(), &self.public.publish, &root),
        );
        if reads.is_empty() && writes.is_empty() {
            return Err(match verified {
                true => AuthError::NothingAllowed(root.to_string()),
                false => AuthError::MissingToken(root.to_string()),
            });
        }
        let everything = |grants: &[Path]| grants.iter().any(Path::is_root);
        let peer = root.is_root()
            && everything(&reads)
            && everything(&writes)
            && (verified || self.keys.is_empty());
        Ok(Grant {
            origins: Origins {
                publish: Some(origin.scope(root.clone(), reads)),
                subscribe: Some(origin.scope(root.clone(), writes)),
                valid_for,
                trust_routes: peer,
            },
            root,
            peer,
        })
    }

    /// Whether the token is for this relay, where the relay has an audience.
    fn check_audience(&self, claims: &Claims) -> Result<(), AuthError> {
        if self.audience.is_empty()
            || claims
                .audience
                .iter()
                .any(|audience| self.audience.contains(audience))
        {
            return Ok(());
        }
        Err(AuthError::WrongAudience(claims.audience.clone()))
    }
}

/// Adds `more` to `grants`, leaving out what they already cover.
fn add_grants(grants: &mut Vec<Path>, more: Vec<Path>) {
    for grant in more {
        if !grants.iter().any(|held| grant.has_prefix(held)) {
            grants.retain(|held| !held.has_prefix(&grant));
            grants.push(grant);
        }
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
    let bad = || AuthError::BadPath(moqx_net::redact::redact(path_and_query).into_owned());
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
    use crate::test_support::{claims, now};
    use crate::{Key, KeyAlgorithm};
    use moqx_net::model::BroadcastProducer;

    #[test]
    fn a_grant_is_scoped_to_the_connection_path_and_the_token() {
        let key = Key::generate(KeyAlgorithm::Hs256).unwrap();
        let token = key
            .sign(&claims("org", &["room/alice"], &["room"]))
            .unwrap();
        let authorizer = Authorizer::new(key.into(), Public::default());
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
        let authorizer = Authorizer::new(key.into(), Public::both(&["anon".into()]));
        assert!(authorizer.authorize(&origin, "/anon/room", now()).is_ok());
        assert!(authorizer.authorize(&origin, "/private", now()).is_err());
        let open = Authorizer::new(Keys::default(), Public::both(&[String::new()]));
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
        let authorizer = Authorizer::new(key.into(), Public::default());
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
        let authorizer = Authorizer::new(key.into(), Public::default());
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

    #[test]
    fn anonymous_viewers_and_signed_in_publishers() {
        let key = Key::generate(KeyAlgorithm::Hs256).unwrap();
        let public = Public {
            publish: vec![],
            subscribe: vec!["live".into()],
        };
        let authorizer = Authorizer::new(Keys::parse(&key.to_json()).unwrap(), public);
        let origin = Origin::new();
        // Anyone reads under `live`, and nothing else, wherever they connect.
        let viewer = authorizer.authorize(&origin, "/live", now()).unwrap();
        assert!(!viewer.peer);
        let broadcast = BroadcastProducer::new();
        assert!(
            viewer
                .origins
                .subscribe
                .unwrap()
                .publish("cam", &broadcast)
                .is_err()
        );
        let at_root = authorizer.authorize(&origin, "/", now()).unwrap();
        assert!(
            at_root
                .origins
                .subscribe
                .unwrap()
                .publish("live/cam", &broadcast)
                .is_err()
        );
        // A publisher's token adds its grants to what is public.
        let token = key.sign(&claims("live", &["alice"], &[])).unwrap();
        let alice = authorizer
            .authorize(&origin, &format!("/live?jwt={token}"), now())
            .unwrap();
        let writes = alice.origins.subscribe.unwrap();
        writes.publish("alice", &broadcast).unwrap();
        assert!(writes.publish("bob", &BroadcastProducer::new()).is_err());
        let reads = alice.origins.publish.unwrap();
        assert!(
            reads.consume_broadcast("alice").is_some(),
            "she reads what is public"
        );
        // A bad token is refused even on a public path.
        assert!(matches!(
            authorizer.authorize(&origin, "/live?jwt=nonsense", now()),
            Err(AuthError::BadToken(_))
        ));
    }

    #[test]
    fn a_relay_with_an_audience_refuses_tokens_for_others() {
        let key = Key::generate(KeyAlgorithm::Hs256).unwrap();
        let authorizer = Authorizer::new(Keys::parse(&key.to_json()).unwrap(), Public::default())
            .with_audience(vec!["eu.relay.example".into()]);
        let sign = |audience: &[&str]| {
            let claims = Claims {
                audience: audience.iter().map(|a| a.to_string()).collect(),
                ..claims("", &[""], &[""])
            };
            format!("/?jwt={}", key.sign(&claims).unwrap())
        };
        let origin = Origin::new();
        assert!(
            authorizer
                .authorize(&origin, &sign(&["eu.relay.example"]), now())
                .is_ok()
        );
        assert!(
            authorizer
                .authorize(
                    &origin,
                    &sign(&["us.relay.example", "eu.relay.example"]),
                    now()
                )
                .is_ok()
        );
        assert!(matches!(
            authorizer.authorize(&origin, &sign(&["us.relay.example"]), now()),
            Err(AuthError::WrongAudience(_))
        ));
        assert!(matches!(
            authorizer.authorize(&origin, &sign(&[]), now()),
            Err(AuthError::WrongAudience(_))
        ));
        // Without an audience configured, `aud` is not looked at.
        let open = Authorizer::new(Keys::parse(&key.to_json()).unwrap(), Public::default());
        assert!(open.authorize(&origin, &sign(&["anyone"]), now()).is_ok());
    }
}
