//! The QMux drafts this crate speaks, and the names a carrier negotiates them by: a
//! WebSocket subprotocol or TLS ALPN such as `qmux-01.moq-lite-05` (QMux draft 01 carrying
//! moq-lite-05), or a bare `qmux-01` that leaves the application protocol to the peers.

/// A QMux draft.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Version {
    /// draft-ietf-quic-qmux-00: bare frames on the byte stream, no QX_PING.
    Draft00,
    /// draft-ietf-quic-qmux-01: records, QX_PING, `max_record_size`.
    Draft01,
    /// draft-ietf-quic-qmux-02: -01's wire format with stricter rules.
    Draft02,
}

impl Version {
    /// Every draft, newest first: the order this side offers and prefers them.
    pub const ALL: [Version; 3] = [Version::Draft02, Version::Draft01, Version::Draft00];

    /// The bare name (`qmux-01`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Draft00 => "qmux-00",
            Self::Draft01 => "qmux-01",
            Self::Draft02 => "qmux-02",
        }
    }

    /// Whether frames travel in records (draft-01 and later) rather than bare.
    pub fn has_records(self) -> bool {
        self != Self::Draft00
    }

    /// Whether QX_PING exists (draft-01 and later).
    pub fn has_ping(self) -> bool {
        self != Self::Draft00
    }

    /// The draft a bare name (`qmux-01`) names.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|version| version.name() == name)
    }

    /// The carrier's name for this draft carrying `application` (`qmux-01.moq-lite-05`).
    pub fn with_application(self, application: &str) -> String {
        format!("{}.{application}", self.name())
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a negotiated subprotocol or ALPN says: the draft, and the application protocol
/// if it names one (`qmux-01.moq-lite-05`), or `None` for a bare `qmux-01`.
pub fn parse_negotiated(name: &str) -> Option<(Version, Option<&str>)> {
    if let Some(version) = Version::from_name(name) {
        return Some((version, None));
    }
    let (draft, application) = name.split_once('.')?;
    let version = Version::from_name(draft)?;
    match application.is_empty() {
        true => None,
        false => Some((version, Some(application))),
    }
}

/// The names a client offers for `applications` (in its order of preference): each
/// application over every draft, newest first, then the bare drafts.
pub fn offers(applications: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = applications
        .iter()
        .flat_map(|application| {
            Version::ALL
                .into_iter()
                .map(move |version| version.with_application(application))
        })
        .collect();
    names.extend(
        Version::ALL
            .into_iter()
            .map(|version| version.name().to_owned()),
    );
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        assert_eq!(
            parse_negotiated("qmux-01.moq-lite-05"),
            Some((Version::Draft01, Some("moq-lite-05")))
        );
        assert_eq!(parse_negotiated("qmux-00"), Some((Version::Draft00, None)));
        assert_eq!(parse_negotiated("qmux-09.moq-lite-05"), None);
        assert_eq!(parse_negotiated("qmux-01."), None);
        assert_eq!(parse_negotiated("moq-lite-05"), None);
        assert_eq!(parse_negotiated("webtransport"), None);
    }

    #[test]
    fn a_client_offers_every_pair_then_the_bare_drafts() {
        assert_eq!(
            offers(&["moq-lite-05", "moq-lite-04"]),
            [
                "qmux-02.moq-lite-05",
                "qmux-01.moq-lite-05",
                "qmux-00.moq-lite-05",
                "qmux-02.moq-lite-04",
                "qmux-01.moq-lite-04",
                "qmux-00.moq-lite-04",
                "qmux-02",
                "qmux-01",
                "qmux-00",
            ]
        );
    }
}
