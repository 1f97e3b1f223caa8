//! What the fuzz targets share: how an input's bits pick the moq-lite version.

use moqx_net::coding::Version;

/// The versions, in the order an input's version bits select them (and `make_seeds.py`
/// writes them): -05, -04, -03, -06-wip.
pub const VERSIONS: [Version; 4] = [
    Version::Lite05,
    Version::Lite04,
    Version::Lite03,
    Version::Lite06Wip,
];

/// Every version a session speaks, in the order a session input's version byte selects
/// them: the moq-lite versions as [`VERSIONS`], then moq-transport 14, 16 and 18.
pub const SESSION_VERSIONS: [Version; 7] = [
    Version::Lite05,
    Version::Lite04,
    Version::Lite03,
    Version::Lite06Wip,
    Version::Moqt14,
    Version::Moqt16,
    Version::Moqt18,
];

/// The session version `bits` select (taken modulo seven: the seeds' 0 to 3 stay the
/// moq-lite versions they were written for).
pub fn session_version(bits: u8) -> Version {
    SESSION_VERSIONS[usize::from(bits) % SESSION_VERSIONS.len()]
}

/// The version `bits` select (taken modulo four).
pub fn version(bits: u8) -> Version {
    VERSIONS[usize::from(bits) % VERSIONS.len()]
}
