//! `[cluster]`: this relay's place in a network of relays, in the keys and flags deployed
//! moq-lite relays use (so that an operator can move a configuration between them).

use std::path::PathBuf;
use std::time::Duration;

use moqx_runtime::tls::Fingerprint;
use serde::Deserialize;

use crate::config::ConfigError;

/// `[cluster]`
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterSection {
    /// This relay's hop (origin) id: the identity it stamps on every route it forwards,
    /// which lets the relays of a mesh drop announcements that looped back. Non-zero and
    /// below 2^53 (browsers read it as a JavaScript number). Unset: a random one at each
    /// start, fine for a relay nobody needs to recognise across restarts.
    pub id: Option<u64>,
    /// Peers to dial, as full URLs (`moqt://relay-b:4443/` for raw QUIC, `tls://…` for QMux
    /// over TLS to the peer's TCP web port where UDP is blocked, `https://…` for
    /// WebTransport). Query parameters this relay reads and removes: `cost=N` prices
    /// routes through that peer (default 1: routes are ranked by hop count), and
    /// `fingerprint=HEX` pins the peer's certificate (a self-signed one) instead of
    /// verifying it. `jwt=TOKEN` is kept: it is the token the peer checks.
    pub connect: Vec<String>,
    /// A file holding the token (JWT) presented to peers whose URL carries none. The
    /// peer must grant it everything: publish and subscribe at the root.
    pub token: Option<PathBuf>,
    /// How long a peer link may go without hearing from the other side before it is
    /// declared dead (its routes withdrawn, the peer redialed), in seconds. Peer links
    /// send a keep-alive three times per period; QUIC restarts the idle timer at the
    /// first keep-alive after the last packet heard, so a dead relay is noticed within
    /// 4/3 of this. Applies to links this relay dials (QUIC takes the smaller of both
    /// sides' idle timeouts, so the peer's end of the link notices as fast).
    pub peer_timeout_secs: f64,
    /// Skip verifying peers' certificates. For a private network of relays with
    /// self-signed certificates only: anyone on the path can then pose as a peer.
    pub insecure_skip_verify: bool,
    /// This relay's own URL, as its peers dial it (`moqt://relay-a:4443/`), for gossip
    /// ([`mesh`](Self::mesh)). It is advertised to every relay and client that can read
    /// the origin's root, so it carries no query: the token for dials is
    /// [`token`](Self::token).
    pub node: Option<String>,
    /// Gossip discovery: advertise [`node`](Self::node) as an empty broadcast at
    /// `.internal/origins/<node>`, and dial every node advertised there whose URL sorts
    /// after this one's (so that each pair opens one link). A relay with `node` and
    /// `mesh` and no `connect` is a rendezvous the others dial first. Requires `node`.
    pub mesh: bool,
    /// How long a broadcast whose last route was lost (a link or its publisher's session
    /// died, rather than closed) stays announced, in seconds, for its publisher to come
    /// back by any route: subscriptions to it wait and carry on at their first missing
    /// group. 0 ends it at once. Applies to a relay in a cluster (one with an `id`, peers
    /// or gossip).
    pub linger_secs: f64,
}

impl Default for ClusterSection {
    /// No peers, a random id, a dead peer noticed within 2⅔ s (2 s of silence).
    fn default() -> Self {
        Self {
            id: None,
            connect: Vec::new(),
            token: None,
            peer_timeout_secs: 2.0,
            insecure_skip_verify: false,
            node: None,
            mesh: false,
            linger_secs: 5.0,
        }
    }
}

/// The largest hop id a relay may take: what a JavaScript number holds exactly.
pub const MAX_CLUSTER_ID: u64 = (1 << 53) - 1;

/// A peer URL, with what this relay reads from its query taken out.
#[derive(Clone, PartialEq, Eq)]
pub struct PeerUrl {
    /// What to dial (the `jwt` parameter kept, or the cluster token added).
    pub dial: String,
    /// The URL with its credentials redacted: what logs, `/metrics` and `/cluster` show.
    pub display: String,
    /// The cost of routes through this peer, if set.
    pub cost: Option<u64>,
    /// The pinned certificate, if set.
    pub fingerprint: Option<Fingerprint>,
}

impl std::fmt::Debug for PeerUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `dial` carries the token: never printed.
        f.debug_struct("PeerUrl")
            .field("url", &self.display)
            .field("cost", &self.cost)
            .finish_non_exhaustive()
    }
}

impl ClusterSection {
    /// Checks the section's values (the peers' URLs parse, the id is in range).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(id) = self.id
            && (id == 0 || id > MAX_CLUSTER_ID)
        {
            return Err(ConfigError::Invalid {
                key: "cluster.id",
                problem: format!("must be between 1 and {MAX_CLUSTER_ID} (2^53 - 1)"),
            });
        }
        if !(self.peer_timeout_secs.is_finite() && self.peer_timeout_secs >= 0.1) {
            return Err(ConfigError::Invalid {
                key: "cluster.peer_timeout_secs",
                problem: "must be a number of seconds, at least 0.1".to_owned(),
            });
        }
        for url in &self.connect {
            PeerUrl::parse(url, None).map_err(|problem| ConfigError::Invalid {
                key: "cluster.connect",
                problem,
            })?;
        }
        if let Some(node) = &self.node {
            NodeUrl::parse(node).map_err(|problem| ConfigError::Invalid {
                key: "cluster.node",
                problem,
            })?;
        }
        if !(self.linger_secs.is_finite() && self.linger_secs >= 0.0) {
            return Err(ConfigError::Invalid {
                key: "cluster.linger_secs",
                problem: "must be a number of seconds, 0 or more".to_owned(),
            });
        }
        if self.mesh && self.node.is_none() {
            return Err(ConfigError::Invalid {
                key: "cluster.mesh",
                problem: "gossip needs this relay's own URL: set cluster.node (--cluster-node)"
                    .to_owned(),
            });
        }
        Ok(())
    }

    /// This relay's node URL, when it gossips.
    pub fn gossip_node(&self) -> Option<NodeUrl> {
        let node = self.node.as_deref().filter(|_| self.mesh)?;
        NodeUrl::parse(node).ok()
    }

    /// Whether this relay takes part in a cluster: it dials peers, or gossips.
    pub fn dials(&self) -> bool {
        !self.connect.is_empty() || self.mesh
    }

    /// How long a broadcast whose last route was lost lingers: `linger_secs` for a relay
    /// in a cluster (an id, peers or gossip), else zero.
    pub fn linger(&self) -> Duration {
        match self.id.is_some() || self.dials() {
            true => Duration::from_secs_f64(self.linger_secs.max(0.0)),
            false => Duration::ZERO,
        }
    }

    /// How long a peer link may stay silent.
    pub fn peer_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.peer_timeout_secs.max(0.1))
    }

    /// The peers' URLs, parsed, each dialed with `token` unless it carries its own.
    pub fn peers(&self, token: Option<&str>) -> Result<Vec<PeerUrl>, ConfigError> {
        self.connect
            .iter()
            .map(|url| {
                PeerUrl::parse(url, token).map_err(|problem| ConfigError::Invalid {
                    key: "cluster.connect",
                    problem,
                })
            })
            .collect()
    }
}

/// Where gossip advertisements live: an empty broadcast per node, at
/// `.internal/origins/<node URL>` (the prefix and the layout deployed relays use).
pub const MESH_PREFIX: &str = ".internal/origins";

/// A relay's own URL as gossip carries it: a scheme, a host, a port, no query.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeUrl(String);

impl NodeUrl {
    /// Parses `text` into its one spelling (`moqt://host:port/`), or says what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let display = moqx_net::redact::redact(text).into_owned();
        let url =
            url::Url::parse(text).map_err(|error| format!("{display:?} is not a URL: {error}"))?;
        if !matches!(url.scheme(), "moqt" | "moql" | "https" | "tls") {
            return Err(format!(
                "{display:?}: a node is reached by moqt:// (raw QUIC), https:// (WebTransport) \
                 or tls:// (QMux over TLS, where UDP is blocked)"
            ));
        }
        let Some(host) = url.host_str() else {
            return Err(format!("{display:?} names no host"));
        };
        if url.query().is_some() {
            return Err(format!(
                "{display:?}: a node URL is shown to every peer, so it carries no query \
                 (the token for dials is cluster.token)"
            ));
        }
        if !matches!(url.path(), "" | "/") {
            return Err(format!("{display:?}: a node URL has no path"));
        }
        let port = url
            .port()
            .map(|port| format!(":{port}"))
            .unwrap_or_default();
        Ok(Self(format!("{}://{host}{port}/", url.scheme())))
    }

    /// The node a gossip path names (its part under [`MESH_PREFIX`]): paths collapse
    /// `//`, so `moqt:/relay-a:4443` is `moqt://relay-a:4443/` again. `None` for one that
    /// is not a node URL.
    pub fn from_advertised(suffix: &str) -> Option<Self> {
        let (scheme, rest) = suffix.split_once('/')?;
        let scheme = scheme.strip_suffix(':')?;
        Self::parse(&format!("{scheme}://{rest}/")).ok()
    }

    /// The path this node is advertised at.
    pub fn advertised_path(&self) -> moqx_net::model::Path {
        moqx_net::model::Path::new(MESH_PREFIX).join(self.0.as_str())
    }

    /// The URL.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for NodeUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl PeerUrl {
    /// Parses `text`, adding `token` as its `jwt` unless it has one. The error names the
    /// URL (redacted) and what is wrong with it.
    pub fn parse(text: &str, token: Option<&str>) -> Result<Self, String> {
        let display = moqx_net::redact::redact(text).into_owned();
        if !text.contains("://") {
            return Err(format!(
                "{display:?} is not a URL: a peer is named by a full URL, such as \
                 moqt://{display}/"
            ));
        }
        let mut url =
            url::Url::parse(text).map_err(|error| format!("{display:?} is not a URL: {error}"))?;
        match url.scheme() {
            "moqt" | "moql" | "https" | "tls" => {}
            scheme => {
                return Err(format!(
                    "{display:?}: the scheme {scheme:?} is not one a peer is dialed with \
                     (moqt:// for raw QUIC, https:// for WebTransport, tls:// for QMux over \
                     TLS where UDP is blocked)"
                ));
            }
        }
        if url.host_str().is_none() {
            return Err(format!("{display:?} names no host"));
        }
        let mut cost = None;
        let mut fingerprint = None;
        let mut kept = Vec::new();
        for (name, value) in url.query_pairs() {
            match name.as_ref() {
                "cost" => {
                    cost = Some(value.parse::<u64>().map_err(|_| {
                        format!("{display:?}: cost={value:?} is not a whole number")
                    })?);
                }
                "fingerprint" => {
                    fingerprint = Some(Fingerprint::parse(&value).ok_or_else(|| {
                        format!("{display:?}: fingerprint={value:?} is not a SHA-256 in hex")
                    })?);
                }
                _ => kept.push((name.into_owned(), value.into_owned())),
            }
        }
        if let Some(token) = token
            && !kept.iter().any(|(name, _)| name == "jwt")
        {
            kept.push(("jwt".to_owned(), token.to_owned()));
        }
        if kept.is_empty() {
            url.set_query(None);
        } else {
            url.query_pairs_mut().clear().extend_pairs(&kept);
        }
        let dial = url.to_string();
        Ok(Self {
            display: moqx_net::redact::redact(&dial).into_owned(),
            dial,
            cost,
            fingerprint,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_url_loses_what_the_relay_reads_and_keeps_its_token() {
        let hex = "ab".repeat(32);
        let peer = PeerUrl::parse(
            &format!("moqt://relay-b:4443/?cost=5&jwt=secret&fingerprint={hex}"),
            Some("file-token"),
        )
        .unwrap();
        assert_eq!(peer.cost, Some(5));
        assert_eq!(peer.fingerprint, Fingerprint::parse(&hex));
        assert_eq!(peer.dial, "moqt://relay-b:4443/?jwt=secret");
        assert!(!peer.display.contains("secret"), "{}", peer.display);
        assert!(!format!("{peer:?}").contains("secret"));

        let peer = PeerUrl::parse("https://relay-c:4443/", Some("file-token")).unwrap();
        assert_eq!(peer.dial, "https://relay-c:4443/?jwt=file-token");
        assert_eq!(peer.cost, None);
        let peer = PeerUrl::parse("moqt://relay-d:4443", None).unwrap();
        assert_eq!(peer.dial, "moqt://relay-d:4443");
    }

    #[test]
    fn a_bad_peer_url_says_what_is_wrong_without_its_token() {
        for (url, problem) in [
            ("relay-b:4443", "not a URL"),
            ("http://relay-b:4443/", "scheme \"http\""),
            ("moqt://relay-b:4443/?cost=cheap", "not a whole number"),
            ("moqt://relay-b:4443/?fingerprint=zz", "not a SHA-256"),
        ] {
            let error = PeerUrl::parse(url, None).unwrap_err();
            assert!(error.contains(problem), "{url}: {error}");
        }
        let error = PeerUrl::parse("ftp://relay-b/?jwt=hunter2", None).unwrap_err();
        assert!(!error.contains("hunter2"), "{error}");
    }

    #[test]
    fn a_node_url_round_trips_through_its_gossip_path_and_bad_ones_are_named() {
        for text in [
            "moqt://relay-a:4443/",
            "moqt://relay-a:4443",
            "https://10.0.0.2:443/",
        ] {
            let node = NodeUrl::parse(text).unwrap();
            let path = node.advertised_path();
            let suffix = path
                .strip_prefix(&moqx_net::model::Path::new(MESH_PREFIX))
                .unwrap();
            assert_eq!(
                NodeUrl::from_advertised(suffix),
                Some(node.clone()),
                "{text}"
            );
        }
        assert_eq!(
            NodeUrl::parse("moqt://relay-a:4443").unwrap().as_str(),
            "moqt://relay-a:4443/"
        );
        for (text, problem) in [
            ("relay-a:4443", "moqt://"),
            ("moqt://relay-a:4443/?jwt=hunter2", "no query"),
            ("moqt://relay-a:4443/room", "no path"),
        ] {
            let error = NodeUrl::parse(text).unwrap_err();
            assert!(error.contains(problem), "{text}: {error}");
            assert!(!error.contains("hunter2"), "{error}");
        }
        assert_eq!(NodeUrl::from_advertised("not-a-url"), None);
        assert_eq!(NodeUrl::from_advertised("room/alice"), None);
    }

    #[test]
    fn the_section_names_the_key_at_fault() {
        for (section, key) in [
            (
                ClusterSection {
                    id: Some(0),
                    ..ClusterSection::default()
                },
                "cluster.id",
            ),
            (
                ClusterSection {
                    id: Some(1 << 53),
                    ..ClusterSection::default()
                },
                "cluster.id",
            ),
            (
                ClusterSection {
                    connect: vec!["udp://x".into()],
                    ..ClusterSection::default()
                },
                "cluster.connect",
            ),
            (
                ClusterSection {
                    peer_timeout_secs: 0.0,
                    ..ClusterSection::default()
                },
                "cluster.peer_timeout_secs",
            ),
            (
                ClusterSection {
                    mesh: true,
                    ..ClusterSection::default()
                },
                "cluster.mesh",
            ),
            (
                ClusterSection {
                    node: Some("moqt://a:1/?jwt=x".into()),
                    ..ClusterSection::default()
                },
                "cluster.node",
            ),
        ] {
            let error = section.validate().unwrap_err().to_string();
            assert!(error.starts_with(&format!("`{key}`")), "{error}");
        }
        ClusterSection {
            id: Some(MAX_CLUSTER_ID),
            connect: vec!["moqt://127.0.0.1:4443/".into()],
            ..ClusterSection::default()
        }
        .validate()
        .unwrap();
    }
}
