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

/// The version `bits` select (taken modulo four).
pub fn version(bits: u8) -> Version {
    VERSIONS[usize::from(bits) % VERSIONS.len()]
}
