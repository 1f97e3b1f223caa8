//! The protocol versions a session speaks: the moq-lite versions (spec: moq-lite-05,
//! "Version deltas"; `issue-18` research from the deployed code) and the IETF
//! moq-transport drafts ([`crate::moqt::Draft`]).
//!
//! Every difference between versions is a question asked of the [`Version`] here (`has_*`),
//! never a version compared by number at the call site: a reader sees *what* a message
//! depends on, and a new version is one table to fill in. The moq-lite questions answer no
//! for every moq-transport draft: those sessions run machines of their own
//! ([`Version::draft`]).

use std::fmt;
use std::str::FromStr;

/// A protocol version: what a session speaks, moq-lite or IETF moq-transport (MOQT). Chosen
/// once per connection, by ALPN on raw QUIC and by `wt-protocol` on WebTransport (draft 14
/// shares the ALPN `moq-00` with every draft before it and confirms its number in SETUP).
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
    /// IETF moq-transport draft 14 (ALPN `moq-00`, version `0xff00000e` in CLIENT_SETUP):
    /// what most deployed MOQT peers speak.
    Moqt14,
    /// IETF moq-transport draft 16 (ALPN `moqt-16`).
    Moqt16,
    /// IETF moq-transport draft 18 (ALPN `moqt-18`): what the WG's interop runner tests.
    Moqt18,
}

impl Version {
    /// Every version: moq-lite oldest first, then the moq-transport drafts oldest first.
    pub const ALL: [Version; 7] = [
        Version::Lite03,
        Version::Lite04,
        Version::Lite05,
        Version::Lite06Wip,
        Version::Moqt14,
        Version::Moqt16,
        Version::Moqt18,
    ];

    /// Every moq-lite version, oldest first.
    pub const LITE: [Version; 4] = [
        Version::Lite03,
        Version::Lite04,
        Version::Lite05,
        Version::Lite06Wip,
    ];

    /// Every IETF moq-transport draft, oldest first.
    pub const MOQT: [Version; 3] = [Version::Moqt14, Version::Moqt16, Version::Moqt18];

    /// What a client offers and a server accepts unless configured otherwise, in order of
    /// preference: the released moq-lite versions, newest first, as deployed peers do.
    /// The moq-transport drafts are offered and accepted only when configured.
    pub const DEFAULT_OFFER: [Version; 3] = [Version::Lite05, Version::Lite04, Version::Lite03];

    /// The ALPN (raw QUIC) and WebTransport protocol string of this version.
    pub fn alpn(self) -> &'static str {
        match self {
            Version::Lite03 => "moq-lite-03",
            Version::Lite04 => "moq-lite-04",
            Version::Lite05 => "moq-lite-05",
            Version::Lite06Wip => "moq-lite-06-wip",
            Version::Moqt14 => "moq-00",
            Version::Moqt16 => "moqt-16",
            Version::Moqt18 => "moqt-18",
        }
    }

    /// The name people use for this version: its ALPN for moq-lite (`moq-lite-05`), and
    /// `moqt-14`, `moqt-16`, `moqt-18` for the moq-transport drafts (14's ALPN, `moq-00`,
    /// names no draft).
    pub fn name(self) -> &'static str {
        match self {
            Version::Moqt14 => "moqt-14",
            other => other.alpn(),
        }
    }

    /// The moq-transport draft this version is, or `None` for moq-lite.
    pub fn draft(self) -> Option<crate::moqt::Draft> {
        use crate::moqt::Draft;
        match self {
            Version::Moqt14 => Some(Draft::D14),
            Version::Moqt16 => Some(Draft::D16),
            Version::Moqt18 => Some(Draft::D18),
            Version::Lite03 | Version::Lite04 | Version::Lite05 | Version::Lite06Wip => None,
        }
    }

    /// Whether this is a moq-lite version (not a moq-transport draft).
    pub fn is_lite(self) -> bool {
        self.draft().is_none()
    }

    /// The protocol string this version is offered under on WebTransport
    /// (`WT-Available-Protocols`): its ALPN, but for moq-transport 14, which defines none
    /// (a WebTransport session that names no protocol speaks 14).
    pub fn webtransport_protocol(self) -> Option<&'static str> {
        match self {
            Version::Moqt14 => None,
            other => Some(other.alpn()),
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
        matches!(self, Version::Lite05 | Version::Lite06Wip)
    }

    /// The announce stream opens with ANNOUNCE_OK (the publisher's hop id and the size of
    /// the initial set), and a sender leaves its own id out of an announce's hops (-05 on).
    /// Before it, announcements start at once and the sender appends its own id.
    pub fn has_announce_ok(self) -> bool {
        matches!(self, Version::Lite05 | Version::Lite06Wip)
    }

    /// ANNOUNCE carries hop ids (-04 on); -03 carries only their count.
    pub fn has_hop_ids(self) -> bool {
        matches!(self, Version::Lite04 | Version::Lite05 | Version::Lite06Wip)
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
        self == Version::Lite06Wip
    }

    /// The Track stream (TRACK answered by TRACK_INFO), FETCH, and SUBSCRIBE_START /
    /// SUBSCRIBE_END in place of SUBSCRIBE_OK (-05 on). Before it, a subscription is
    /// answered by one SUBSCRIBE_OK and a track's properties are the defaults.
    pub fn has_track_stream(self) -> bool {
        matches!(self, Version::Lite05 | Version::Lite06Wip)
    }

    /// Frames carry a zigzag timestamp delta (-05 on).
    pub fn has_frame_timestamps(self) -> bool {
        matches!(self, Version::Lite05 | Version::Lite06Wip)
    }

    /// Groups may travel in QUIC datagrams (-05 on).
    pub fn has_datagrams(self) -> bool {
        matches!(self, Version::Lite05 | Version::Lite06Wip)
    }

    /// PROBE carries an RTT after the bitrate (-04 on).
    pub fn has_probe_rtt(self) -> bool {
        matches!(self, Version::Lite04 | Version::Lite05 | Version::Lite06Wip)
    }

    /// The GOAWAY message exists (-04 on).
    pub fn has_goaway(self) -> bool {
        matches!(self, Version::Lite04 | Version::Lite05 | Version::Lite06Wip)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A string that names no version this codec speaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown protocol version {0:?} (known: moq-lite-03, moq-lite-04, moq-lite-05, moq-lite-06-wip, moqt-14, moqt-16, moqt-18)"
)]
pub struct UnknownVersion(pub String);

impl FromStr for Version {
    type Err = UnknownVersion;

    /// A version's name or ALPN (`moq-lite-04`, `moqt-18`, `moq-00`), or a moq-lite
    /// version's short form (`04`, `lite-04`, `06-wip`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if let Some(version) = Self::ALL
            .into_iter()
            .find(|version| version.name() == text || version.alpn() == text)
        {
            return Ok(version);
        }
        let alpn = if text.starts_with("moq-lite-") {
            text.to_owned()
        } else {
            format!("moq-lite-{}", text.trim_start_matches("lite-"))
        };
        Self::from_alpn(&alpn)
            .filter(|version| version.is_lite())
            .ok_or_else(|| UnknownVersion(text.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_version_round_trips_through_its_alpn_and_its_short_name() {
        for version in Version::LITE {
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
    fn the_moqt_drafts_are_named_by_draft_and_found_by_alpn() {
        for version in Version::MOQT {
            assert_eq!(Version::from_alpn(version.alpn()), Some(version));
            assert_eq!(version.name().parse::<Version>(), Ok(version));
            assert_eq!(version.alpn().parse::<Version>(), Ok(version));
            assert_eq!(version.to_string(), version.name());
            assert!(!version.is_lite());
            let draft = version.draft().expect("a moq-transport draft");
            assert_eq!(draft.alpn(), version.alpn(), "one ALPN table");
        }
        assert_eq!(Version::Moqt14.name(), "moqt-14");
        assert_eq!(Version::Moqt14.alpn(), "moq-00");
        assert_eq!("moqt-18".parse::<Version>(), Ok(Version::Moqt18));
        assert!("moqt-15".parse::<Version>().is_err());
        assert!(
            "00".parse::<Version>().is_err(),
            "no short form for the drafts"
        );
    }

    #[test]
    fn no_moq_lite_feature_is_claimed_for_a_moqt_draft() {
        for version in Version::MOQT {
            assert!(!version.has_setup_stream());
            assert!(!version.has_announce_ok());
            assert!(!version.has_hop_ids());
            assert!(!version.has_exclude_hop());
            assert!(!version.has_restart_by_duplicate());
            assert!(!version.has_typed_announce());
            assert!(!version.has_track_stream());
            assert!(!version.has_frame_timestamps());
            assert!(!version.has_datagrams());
            assert!(!version.has_probe_rtt());
            assert!(!version.has_goaway());
        }
        for version in Version::LITE {
            assert!(version.is_lite());
            assert_eq!(version.name(), version.alpn());
        }
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
