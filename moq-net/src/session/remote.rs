//! The broadcasts the peer announced to this session, with the bounds a peer must not pass:
//! how many, and how many bytes of path they hold together.
//!
//! Each one is an entry in the local origin, a route and a sub-machine, so a peer that
//! announces without end would grow the session without end; past either bound the
//! session closes with [`Error::BoundsExceeded`].

use std::collections::HashMap;

use crate::Error;
use crate::model::{BroadcastProducer, Path};

/// A broadcast the peer announced, published in the local origin while it lives here.
pub(crate) struct Remote {
    pub(crate) broadcast: BroadcastProducer,
    /// Tells a restarted broadcast from the one it replaced.
    pub(crate) generation: u64,
}

/// The peer's announced broadcasts, by full path.
pub(crate) struct RemoteBroadcasts {
    by_path: HashMap<Path, Remote>,
    /// The bytes of every path in `by_path`.
    path_bytes: usize,
    next_generation: u64,
    max_count: usize,
    max_path_bytes: usize,
}

impl RemoteBroadcasts {
    /// None yet; at most `max_count` at once, holding at most `max_path_bytes` of path.
    pub(crate) fn new(max_count: usize, max_path_bytes: usize) -> Self {
        Self {
            by_path: HashMap::new(),
            path_bytes: 0,
            next_generation: 0,
            max_count,
            max_path_bytes,
        }
    }

    /// Publishes `broadcast` with `publish` and records it at `path`, restarting whatever
    /// was there (the one it replaces is dropped only after the new one is published, so
    /// the path never looks ended in between); returns its generation. Fails with
    /// [`Error::BoundsExceeded`] for a new path past either bound, before anything is
    /// published, or with `publish`'s error.
    pub(crate) fn insert(
        &mut self,
        path: Path,
        broadcast: BroadcastProducer,
        publish: impl FnOnce(&Path, &BroadcastProducer) -> Result<(), Error>,
    ) -> Result<u64, Error> {
        let new_path = !self.by_path.contains_key(&path);
        let bytes = self.path_bytes + if new_path { path.as_str().len() } else { 0 };
        let count = self.by_path.len() + usize::from(new_path);
        if new_path && (count > self.max_count || bytes > self.max_path_bytes) {
            tracing::debug!(
                count,
                bytes,
                max_count = self.max_count,
                max_path_bytes = self.max_path_bytes,
                %path,
                "the peer announced past the session's bounds"
            );
            return Err(Error::BoundsExceeded);
        }
        publish(&path, &broadcast)?;
        self.path_bytes = bytes;
        let generation = self.next_generation;
        self.next_generation += 1;
        let replaced = self.by_path.insert(
            path,
            Remote {
                broadcast,
                generation,
            },
        );
        drop(replaced);
        Ok(generation)
    }

    /// Ends the broadcast at `path`, if any.
    pub(crate) fn remove(&mut self, path: &Path) {
        if let Some(removed) = self.by_path.remove(path) {
            self.path_bytes -= path.as_str().len();
            drop(removed);
        }
    }

    /// Ends them all (the announce stream ended, or the session).
    pub(crate) fn clear(&mut self) {
        self.by_path.clear();
        self.path_bytes = 0;
    }

    /// Ends them all as lost: the session's connection was lost, not closed, so an origin
    /// that lingers keeps their paths for the publisher to come back
    /// ([`BroadcastProducer::drop_as_lost`]).
    pub(crate) fn lose_all(&mut self) {
        for (_, remote) in self.by_path.drain() {
            remote.broadcast.drop_as_lost();
        }
        self.path_bytes = 0;
    }

    /// The broadcast at `path`.
    pub(crate) fn get(&self, path: &Path) -> Option<&Remote> {
        self.by_path.get(path)
    }

    /// Every one of them.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Remote> {
        self.by_path.values()
    }

    /// How many there are.
    pub(crate) fn len(&self) -> usize {
        self.by_path.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insert(remote: &mut RemoteBroadcasts, path: &str) -> Result<u64, Error> {
        remote.insert(path.into(), BroadcastProducer::new(), |_, _| Ok(()))
    }

    #[test]
    fn a_new_path_past_either_bound_is_refused_and_a_restart_is_not() {
        let mut remote = RemoteBroadcasts::new(2, 8);
        assert_eq!(insert(&mut remote, "a"), Ok(0));
        assert_eq!(insert(&mut remote, "bcd"), Ok(1));
        // A third path: over the count.
        assert_eq!(insert(&mut remote, "e"), Err(Error::BoundsExceeded));
        // A restart at a known path is no new entry.
        assert_eq!(insert(&mut remote, "a"), Ok(2));
        remote.remove(&"a".into());
        // Room for one more, but not for its bytes: 3 + 6 > 8.
        assert_eq!(insert(&mut remote, "efghij"), Err(Error::BoundsExceeded));
        assert_eq!(insert(&mut remote, "efghi"), Ok(3));
        assert_eq!(remote.len(), 2);
        remote.clear();
        assert_eq!(insert(&mut remote, "12345678"), Ok(4));
    }
}
