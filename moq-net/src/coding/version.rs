//! The moq-lite versions this codec speaks, and what each carries (spec: moq-lite-05,
//! "Version deltas"; `issue-18` research from the deployed code).
//!
//! Every difference between versions is a question asked of the [`Version`] here (`has_*`),
//! never a version compared by number at the call site: a reader sees *what* a message
//! depends on, and a new version is one table to fill in.

use std::fmt;
use std::str::FromStr;

/// A moq-lite version: what the codec speaks on a session. Chosen once per connection, by
/// ALPN on raw QUIC and by `wt-protocol` on WebTransport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[non_exhaustive]
pub enum Version {
    /// moq-lite-03 (ALPN `moq-lite-03`): no SETUP, hop *counts*, SUBSCRIBE_OK replies, no
    /// TRACK stream and no frame timestamps.
    Lite03,
    /// moq-lite-04 (ALPN `moq-lite-04`): -03 plus hop id lists (the sender appends itself),
    /// Exclude Hop, GOAWAY and the PROBE RTT.
    Lite04,
    /// moq-lite-05 (ALPN `moq-lite-05`): what deployed peers prefer. SETUP, ANNOUNCE_OK,
    /// TRACK/TRACK_INFO, FETCH, frame timestamps, datagrams, SUBSCRIBE_START/END.
    #[default]
    Lite05,
    /// moq-lite-06-wip (ALPN `moq-lite-06-wip`): -05 with typed announcements (START, END,
    /// RESTART, implicit ids, a route cost) and no Exclude Hop. A work in progress upstream:
    /// offered and accepted only when configured.
    Lite06Wip,
}

impl Version {
    /// Every version, oldest first.
    pub const ALL: [Version; 4] = [
        Version::Lite03,
        Version::Lite04,
        Version::Lite05,
        Version::Lite06Wip,
    ];

    /// What a client offers and a server accepts unless configured otherwise, in order of
    /// preference: the released versions, newest first, as deployed peers do.
    pub const DEFAULT_OFFER: [Version; 3] = [Version::Lite05, Version::Lite04, Version::Lite03];

    /// The ALPN (raw QUIC) and WebTransport protocol string of this version.
    pub fn alpn(self) -> &'static str {
        match self {
            Version::Lite03 => "moq-lite-03",
            Version::Lite04 => "moq-lite-04",
            Version::Lite05 => "moq-lite-05",
            Version::Lite06Wip => "moq-lite-06-wip",
        }
    }

    /// The version an ALPN or WebTransport protocol string names, if this codec speaks it.
    pub fn from_alpn(alpn: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|version| version.alpn() == alpn)
    }

    /// The version two sides agree on: the first of `preference` that `offered` also has.
    /// A raw QUIC server selects by its own preference among the client's ALPNs; a
    /// WebTransport server by the client's preference (its `wt-available-protocols` order)
    /// among what it supports.
    pub fn select(preference: &[Version], offered: &[Version]) -> Option<Version> {
        preference
            .iter()
            .copied()
            .find(|version| offered.contains(version))
    }

    /// Each side opens a Setup stream (uni `0x01`) with one SETUP (-05 on). Before it, a
    /// session starts the moment the connection does, and raw QUIC carries no path.
    pub fn has_setup_stream(self) -> bool {
        self >= Version::Lite05
    }

    /// The announce stream opens with ANNOUNCE_OK (the publisher's hop id and the size of
    /// the initial set), and a sender leaves its own id out of an announce's hops (-05 on).
    /// Before it, announcements start at once and the sender appends its own id.
    pub fn has_announce_ok(self) -> bool {
        self >= Version::Lite05
    }

    /// ANNOUNCE carries hop ids (-04 on); -03 carries only their count.
    pub fn has_hop_ids(self) -> bool {
        self >= Version::Lite04
    }

    /// ANNOUNCE_REQUEST ends with the requester's origin id, Exclude Hop (-04 and -05 only;
    /// -06 takes it from the SETUP Origin parameter).
    pub fn has_exclude_hop(self) -> bool {
        matches!(self, Version::Lite04 | Version::Lite05)
    }

    /// A second *active* ANNOUNCE for a path already active is a restart, the route
    /// replaced (-05 only). On -03 and -04 a deployed receiver closes the session on it
    /// (Duplicate); -06 has a RESTART message instead.
    pub fn has_restart_by_duplicate(self) -> bool {
        self == Version::Lite05
    }

    /// Announcements are typed, START / END / RESTART with implicit per-stream ids and a
    /// route cost (-06).
    pub fn has_typed_announce(self) -> bool {
        self >= Version::Lite06Wip
    }

    /// The Track stream (TRACK answered by TRACK_INFO), FETCH, and SUBSCRIBE_START /
    /// SUBSCRIBE_END in place of SUBSCRIBE_OK (-05 on). Before it, a subscription is
    /// answered by one SUBSCRIBE_OK and a track's properties are the defaults.
    pub fn has_track_stream(self) -> bool {
        self >= Version::Lite05
    }

    /// Frames carry a zigzag timestamp delta (-05 on).
    pub fn has_frame_timestamps(self) -> bool {
        self >= Version::Lite05
    }

    /// Groups may travel in QUIC datagrams (-05 on).
    pub fn has_datagrams(self) -> bool {
        self >= Version::Lite05
    }

    /// PROBE carries an RTT after the bitrate (-04 on).
    pub fn has_probe_rtt(self) -> bool {
        self >= Version::Lite04
    }

    /// The GOAWAY message exists (-04 on).
    pub fn has_goaway(self) -> bool {
        self >= Version::Lite04
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.alpn())
    }
}

/// A string that names no version this codec speaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown moq-lite version {0:?} (known: moq-lite-03, moq-lite-04, moq-lite-05, moq-lite-06-wip)"
)]
pub struct UnknownVersion(pub String);

impl FromStr for Version {
    type Err = UnknownVersion;

    /// The ALPN string (`moq-lite-04`), or its short form (`04`, `lite-04`, `06-wip`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let alpn = if text.starts_with("moq-lite-") {
            text.to_owned()
        } else {
            format!("moq-lite-{}", text.trim_start_matches("lite-"))
        };
        Self::from_alpn(&alpn).ok_or_else(|| UnknownVersion(text.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_version_round_trips_through_its_alpn_and_its_short_name() {
        for version in Version::ALL {
            assert_eq!(Version::from_alpn(version.alpn()), Some(version));
            assert_eq!(version.alpn().parse::<Version>(), Ok(version));
            let short = version.alpn().trim_start_matches("moq-lite-");
            assert_eq!(short.parse::<Version>(), Ok(version));
        }
        assert_eq!(
            Version::from_alpn("moq-lite-06"),
            None,
            "-06 is only on the wire as -wip"
        );
        assert!("moq-lite-02".parse::<Version>().is_err());
        assert!("h3".parse::<Version>().is_err());
    }

    #[test]
    fn the_preferred_side_decides_among_what_both_have() {
        let server = [Version::Lite05, Version::Lite04, Version::Lite03];
        let client = [Version::Lite03, Version::Lite04];
        assert_eq!(Version::select(&server, &client), Some(Version::Lite04));
        assert_eq!(Version::select(&client, &server), Some(Version::Lite03));
        assert_eq!(Version::select(&server, &[Version::Lite06Wip]), None);
    }

    #[test]
    fn the_default_offer_is_the_released_versions_newest_first() {
        assert_eq!(
            Version::DEFAULT_OFFER.map(Version::alpn),
            ["moq-lite-05", "moq-lite-04", "moq-lite-03"]
        );
    }
}
