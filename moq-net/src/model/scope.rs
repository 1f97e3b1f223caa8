//! Scopes: what a view of an origin sees (a root its paths are relative to, and the
//! prefixes it may touch).
//!
//! A relay gives each session a scoped view of its one shared [`Origin`](super::Origin):
//! a client connected at `/room` with the right to publish `room/alice` and read all of
//! `room` sees paths relative to `room`, publishes `alice` (and under it) only, and
//! discovers and subscribes to nothing outside `room`. The view is the enforcement point:
//! a session machine handed a scoped origin cannot reach past it, whatever the peer asks.

use super::path::Path;

/// The root and the allowed prefixes of a view, both absolute (relative to the origin
/// itself, not to the view).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scope {
    root: Path,
    allowed: Vec<Path>,
}

impl Scope {
    /// The view at `root` allowed the prefixes `allowed` (relative to `root`), inside
    /// `outer` (the scope of the view it is made from, if that is scoped too).
    pub(crate) fn new(outer: Option<&Scope>, root: &Path, allowed: &[Path]) -> Self {
        let root = match outer {
            Some(outer) => outer.absolute(root),
            None => root.clone(),
        };
        let mut scope = Scope {
            allowed: Vec::new(),
            root,
        };
        for prefix in allowed {
            let prefix = scope.root.join(prefix.as_str());
            match outer {
                None => scope.push(prefix),
                // The intersection of two prefix sets: whichever of two nested prefixes
                // is the longer; nothing for two disjoint ones.
                Some(outer) => {
                    for limit in &outer.allowed {
                        if prefix.has_prefix(limit) {
                            scope.push(prefix.clone());
                        } else if limit.has_prefix(&prefix) {
                            scope.push(limit.clone());
                        }
                    }
                }
            }
        }
        scope
    }

    /// The absolute path of a path relative to the view.
    pub(crate) fn absolute(&self, relative: &Path) -> Path {
        self.root.join(relative.as_str())
    }

    /// The path relative to the view of an absolute path under its root.
    pub(crate) fn relative(&self, absolute: &Path) -> Option<Path> {
        absolute.strip_prefix(&self.root).map(Path::new)
    }

    /// Whether the view may touch the absolute path `absolute`.
    pub(crate) fn allows(&self, absolute: &Path) -> bool {
        self.allowed
            .iter()
            .any(|prefix| absolute.has_prefix(prefix))
    }

    /// Whether everything under the absolute `prefix` is allowed, so that a listener there
    /// needs no filtering.
    pub(crate) fn covers(&self, prefix: &Path) -> bool {
        self.allows(prefix)
    }

    /// Adds an allowed prefix, keeping the list free of prefixes another one covers.
    fn push(&mut self, prefix: Path) {
        if self.allows(&prefix) {
            return;
        }
        self.allowed
            .retain(|existing| !existing.has_prefix(&prefix));
        self.allowed.push(prefix);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(list: &[&str]) -> Vec<Path> {
        list.iter().map(Path::new).collect()
    }

    #[test]
    fn a_scope_maps_paths_under_its_root_and_allows_only_its_prefixes() {
        let scope = Scope::new(None, &Path::new("room"), &paths(&["alice", "bob/cam"]));
        assert_eq!(scope.absolute(&Path::new("alice")), Path::new("room/alice"));
        assert_eq!(
            scope.relative(&Path::new("room/alice")),
            Some(Path::new("alice"))
        );
        assert_eq!(scope.relative(&Path::new("roomba/x")), None);
        assert!(scope.allows(&Path::new("room/alice")));
        assert!(scope.allows(&Path::new("room/alice/video")));
        assert!(scope.allows(&Path::new("room/bob/cam")));
        assert!(!scope.allows(&Path::new("room/bob")));
        assert!(!scope.allows(&Path::new("room/alicex")));
        assert!(!scope.allows(&Path::new("lobby/alice")));
    }

    #[test]
    fn nested_scopes_allow_only_what_both_allow() {
        let outer = Scope::new(None, &Path::new("org"), &paths(&["room/alice", "lobby"]));
        // Asks for all of `room` and part of `lobby`: gets alice, and lobby/cam.
        let inner = Scope::new(Some(&outer), &Path::new(""), &paths(&["room", "lobby/cam"]));
        assert_eq!(inner.root, Path::new("org"));
        assert_eq!(inner.allowed, paths(&["org/room/alice", "org/lobby/cam"]));
        let nothing = Scope::new(Some(&outer), &Path::new("other"), &paths(&[""]));
        assert!(nothing.allowed.is_empty());
    }

    #[test]
    fn a_covered_prefix_is_not_listed_twice() {
        let scope = Scope::new(None, &Path::root(), &paths(&["a/b", "a", "a/c"]));
        assert_eq!(scope.allowed, paths(&["a"]));
    }
}
