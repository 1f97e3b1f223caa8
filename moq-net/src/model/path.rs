//! Broadcast paths: normalized names and prefix matching.
//!
//! A path is compared byte by byte (no case folding, no Unicode normalization; spec:
//! moq-lite, "Announce": "Path prefix matching and equality is done on a byte-by-byte
//! basis"). Slashes are normalized when a path is made: leading and trailing ones are
//! trimmed and repeated ones collapse, so `/room//a/` and `room/a` are the same path. A
//! prefix matches on segment boundaries, the way deployed moq-lite-05 peers match and join
//! announce suffixes: `room` is a prefix of `room/a` (suffix `a`), not of `roomba`.

use std::borrow::Borrow;
use std::fmt;

/// A normalized broadcast path, such as `room/alice`. The empty path is the root: every path
/// has it as a prefix.
///
/// ```
/// use moqx_net::model::Path;
///
/// let path = Path::new("/room//alice/");
/// assert_eq!(path.as_str(), "room/alice");
/// assert_eq!(path.strip_prefix(&Path::new("room")), Some("alice"));
/// assert_eq!(Path::new("roomba").strip_prefix(&Path::new("room")), None);
/// assert_eq!(Path::new("room").join("bob"), Path::new("room/bob"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Path(String);

impl Path {
    /// Normalizes `path`: trims leading and trailing slashes and collapses repeated ones.
    pub fn new(path: impl AsRef<str>) -> Self {
        let path = path.as_ref().trim_matches('/');
        if !path.contains("//") {
            return Self(path.to_owned());
        }
        let mut normalized = String::with_capacity(path.len());
        for segment in path.split('/').filter(|segment| !segment.is_empty()) {
            if !normalized.is_empty() {
                normalized.push('/');
            }
            normalized.push_str(segment);
        }
        Self(normalized)
    }

    /// The root path, a prefix of every path.
    pub fn root() -> Self {
        Self::default()
    }

    /// The normalized text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the root (empty) path.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `prefix` is this path or one of its ancestors.
    pub fn has_prefix(&self, prefix: &Path) -> bool {
        self.strip_prefix(prefix).is_some()
    }

    /// What follows `prefix` (without the separating slash), if `prefix` is this path or an
    /// ancestor of it: the suffix an announce carries on the wire.
    pub fn strip_prefix(&self, prefix: &Path) -> Option<&str> {
        if prefix.is_root() {
            return Some(&self.0);
        }
        let rest = self.0.strip_prefix(prefix.as_str())?;
        if rest.is_empty() {
            Some(rest)
        } else {
            rest.strip_prefix('/')
        }
    }

    /// This path followed by `suffix` (normalized), as a receiver rebuilds an announced path.
    pub fn join(&self, suffix: impl AsRef<str>) -> Path {
        let suffix = Path::new(suffix);
        match (self.is_root(), suffix.is_root()) {
            (_, true) => self.clone(),
            (true, false) => suffix,
            (false, false) => Path(format!("{}/{}", self.0, suffix.0)),
        }
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Path {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Path {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Path {
    fn from(path: &str) -> Self {
        Self::new(path)
    }
}

impl From<String> for Path {
    fn from(path: String) -> Self {
        // Already normalized strings are kept without copying.
        if !path.starts_with('/') && !path.ends_with('/') && !path.contains("//") {
            return Self(path);
        }
        Self::new(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slashes_are_normalized() {
        for (input, normalized) in [
            ("", ""),
            ("/", ""),
            ("///", ""),
            ("a", "a"),
            ("/a/", "a"),
            ("a//b", "a/b"),
            ("//a///b//c//", "a/b/c"),
        ] {
            assert_eq!(Path::new(input).as_str(), normalized, "{input:?}");
            assert_eq!(
                Path::from(input.to_owned()).as_str(),
                normalized,
                "{input:?}"
            );
        }
    }

    #[test]
    fn prefixes_match_on_segment_boundaries_byte_by_byte() {
        let path = Path::new("room/alice");
        assert_eq!(path.strip_prefix(&Path::root()), Some("room/alice"));
        assert_eq!(path.strip_prefix(&Path::new("room")), Some("alice"));
        assert_eq!(path.strip_prefix(&Path::new("room/")), Some("alice"));
        assert_eq!(path.strip_prefix(&Path::new("room/alice")), Some(""));
        assert_eq!(path.strip_prefix(&Path::new("roo")), None);
        assert_eq!(path.strip_prefix(&Path::new("room/al")), None);
        assert_eq!(path.strip_prefix(&Path::new("room/alice/x")), None);
        // Byte by byte: no case folding, no Unicode normalization.
        assert!(!path.has_prefix(&Path::new("Room")));
        let composed = Path::new("caf\u{e9}");
        assert!(!composed.has_prefix(&Path::new("cafe\u{301}")));
        assert!(Path::root().has_prefix(&Path::root()));
        assert!(!Path::root().has_prefix(&Path::new("a")));
    }

    #[test]
    fn join_rebuilds_what_strip_prefix_split() {
        for (prefix, path) in [("", "a/b"), ("a", "a/b"), ("a/b", "a/b"), ("a", "a")] {
            let (prefix, path) = (Path::new(prefix), Path::new(path));
            let suffix = path.strip_prefix(&prefix).unwrap();
            assert_eq!(prefix.join(suffix), path, "{prefix:?} + {suffix:?}");
        }
        assert_eq!(Path::new("a").join("/b//c/"), Path::new("a/b/c"));
    }
}
