//! Track namespaces and broadcast paths: one origin serves both protocols, so a namespace
//! is a broadcast path split at its `/` (`("chat", "room")` is `chat/room`), and a track
//! name is the track's name.
//!
//! What one side can say and the other cannot: a namespace field that is not UTF-8, or
//! that holds a `/` or nothing, names no broadcast path (a request for it finds nothing);
//! a track name that is not UTF-8 names no track.

use crate::model::Path;
use crate::moqt::Namespace;

/// The broadcast path a namespace names, if it names one.
pub(crate) fn path_of(namespace: &Namespace) -> Option<Path> {
    let mut fields = Vec::with_capacity(namespace.0.len());
    for field in &namespace.0 {
        let field = std::str::from_utf8(field).ok()?;
        if field.is_empty() || field.contains('/') {
            return None;
        }
        fields.push(field);
    }
    Some(Path::new(fields.join("/")))
}

/// The namespace of a broadcast path: its `/`-separated parts.
pub(crate) fn namespace_of(path: &Path) -> Namespace {
    if path.is_root() {
        return Namespace::default();
    }
    Namespace::from_strs(path.as_str().split('/'))
}

/// The track a track name names, if it is text.
pub(crate) fn track_of(name: &[u8]) -> Option<&str> {
    std::str::from_utf8(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_is_a_path_split_at_its_slashes() {
        let namespace = Namespace::from_strs(["chat", "room"]);
        let path = path_of(&namespace).expect("a path");
        assert_eq!(path.as_str(), "chat/room");
        assert_eq!(namespace_of(&path), namespace);
        assert_eq!(namespace_of(&Path::root()), Namespace::default());
    }

    #[test]
    fn fields_a_path_cannot_hold_name_no_broadcast() {
        assert_eq!(path_of(&Namespace::from_strs(["a/b"])), None);
        assert_eq!(path_of(&Namespace::from_strs(["a", ""])), None);
        assert_eq!(
            path_of(&Namespace(vec![bytes::Bytes::from_static(&[0xff])])),
            None
        );
        assert_eq!(track_of(&[0xff]), None);
    }
}
