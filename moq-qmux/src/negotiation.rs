//! The names moq-lite over QMux is negotiated by (spec: draft-lcurley-moq-lite
//! §Transports), for every carrier and every driver (native and browser): which names a
//! client offers, which one a server picks, what the server's pick says.
//!
//! The names are the deployed ones: `qmux-01.moq-lite-05` is QMux draft 01 carrying
//! moq-lite-05, as a WebSocket subprotocol or a TLS ALPN; a bare `qmux-01` leaves the
//! moq-lite version unsaid (the server then speaks its default). Plain TCP has neither:
//! the moq-lite versions travel in the QMux transport parameters
//! (`application_protocols`), and the server's first choice the client lists wins.

use moqx_net::coding::Version;

use crate::version::{offers, parse_negotiated};

/// What a QMux carrier's negotiation settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// The QMux draft.
    pub draft: crate::Version,
    /// The moq-lite version.
    pub version: Version,
    /// The name that said so (the subprotocol or ALPN), to echo back.
    pub name: String,
}

/// The names a client offers for `versions` (its order of preference): each version over
/// every QMux draft, newest first, then the bare drafts.
pub fn client_offers(versions: &[Version]) -> Vec<String> {
    let alpns: Vec<&str> = versions.iter().map(|version| version.alpn()).collect();
    offers(&alpns)
}

/// The server's pick among the names a client `offered`: its first moq-lite version of
/// `versions` (its order of preference) that the client offered, over the newest QMux
/// draft the client offered it with; failing that, a bare draft, speaking the server's
/// default. `None` when nothing offered is ours.
pub fn choose(offered: &[String], versions: &[Version]) -> Option<Negotiated> {
    let parsed: Vec<_> = offered
        .iter()
        .filter_map(|name| Some((name, parse_negotiated(name)?)))
        .collect();
    for version in versions {
        for draft in crate::Version::ALL {
            let found = parsed.iter().find(|(_, (offered_draft, application))| {
                *offered_draft == draft && *application == Some(version.alpn())
            });
            if let Some((name, _)) = found {
                return Some(Negotiated {
                    draft,
                    version: *version,
                    name: (*name).clone(),
                });
            }
        }
    }
    let (name, (draft, _)) = parsed
        .iter()
        .filter(|(_, (_, application))| application.is_none())
        .max_by_key(|(_, (draft, _))| *draft)?;
    Some(Negotiated {
        draft: *draft,
        version: default_version(versions)?,
        name: (*name).clone(),
    })
}

/// What the server's chosen name says, on the client: `None` when it is not one the
/// client could have offered for `versions`.
pub fn chosen(name: &str, versions: &[Version]) -> Option<Negotiated> {
    let (draft, application) = parse_negotiated(name)?;
    let version = match application {
        Some(alpn) => Version::from_alpn(alpn).filter(|version| versions.contains(version))?,
        None => default_version(versions)?,
    };
    Some(Negotiated {
        draft,
        version,
        name: name.to_owned(),
    })
}

/// On plain TCP: the server's first version (of `server`, in its order) that the client
/// listed in its transport parameters.
pub fn choose_in_band(server: &[String], client: &[String]) -> Option<Version> {
    server
        .iter()
        .find(|name| client.contains(name))
        .and_then(|name| Version::from_alpn(name))
}

/// The version a bare draft name speaks: -05 if accepted, else the first accepted.
fn default_version(versions: &[Version]) -> Option<Version> {
    Version::DEFAULT_OFFER
        .into_iter()
        .find(|version| versions.contains(version))
        .or_else(|| versions.first().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn the_server_picks_its_preferred_version_over_the_newest_draft_offered() {
        let offered = client_offers(&[Version::Lite04, Version::Lite05]);
        let chosen = choose(&offered, &[Version::Lite05, Version::Lite04]).unwrap();
        assert_eq!(chosen.name, "qmux-02.moq-lite-05");
        assert_eq!(chosen.version, Version::Lite05);

        // A deployed client's list: -01 pairs, then bare drafts.
        let offered = names(&["qmux-01.moq-lite-04", "qmux-01", "qmux-00"]);
        let chosen = choose(&offered, &[Version::Lite05, Version::Lite04]).unwrap();
        assert_eq!(
            (chosen.name.as_str(), chosen.version),
            ("qmux-01.moq-lite-04", Version::Lite04)
        );
    }

    #[test]
    fn bare_drafts_speak_the_default_and_unknown_names_nothing() {
        let chosen = choose(
            &names(&["qmux-00", "qmux-01"]),
            &[Version::Lite04, Version::Lite05],
        )
        .unwrap();
        assert_eq!(
            (chosen.name.as_str(), chosen.version),
            ("qmux-01", Version::Lite05)
        );
        assert_eq!(
            choose(&names(&["webtransport", "moq-lite-05"]), &[Version::Lite05]),
            None
        );
        assert_eq!(
            choose(&names(&["qmux-01.moq-lite-03"]), &[Version::Lite05]),
            None
        );
    }

    #[test]
    fn the_client_reads_the_servers_choice() {
        let versions = [Version::Lite05];
        assert_eq!(
            chosen("qmux-01.moq-lite-05", &versions).unwrap().version,
            Version::Lite05
        );
        assert_eq!(
            chosen("qmux-01.moq-lite-04", &versions),
            None,
            "not offered"
        );
    }

    #[test]
    fn plain_tcp_takes_the_servers_first_choice_the_client_lists() {
        let server = names(&["moq-lite-05", "moq-lite-04"]);
        assert_eq!(
            choose_in_band(&server, &names(&["moq-lite-04", "moq-lite-05"])),
            Some(Version::Lite05)
        );
        assert_eq!(choose_in_band(&server, &names(&["moq-lite-03"])), None);
    }
}
