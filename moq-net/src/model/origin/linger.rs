//! Lingering (see [`Origin::linger`] and the origin's module docs): a path whose last
//! publication was lost stays announced, with its followers waiting, until the holder of
//! the [`Lingering`] handle ends it, or a publication comes back first.

use std::task::Poll;

use moqx_kio::Waiter;
use moqx_kio::sync::Arc;

use super::{Origin, OriginShared, OriginState};
use crate::model::path::Path;

/// A path that lost its last publication while lingering is on: it stays announced, and
/// the tracks following it wait, until [`Lingering::end`] ends it (unless a publication
/// came back first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LingeringPath {
    pub(super) path: Path,
    /// Which time the path lingers (a publication that came back and went again makes
    /// another).
    pub(super) ticket: u64,
}

/// The holder's side of lingering ([`Origin::linger`]): the paths that lose their last
/// publication, each to end once its linger is over. Dropping it turns lingering off and
/// ends every lingering path at once.
#[derive(Debug)]
pub struct Lingering {
    origin: Arc<OriginShared>,
    queue: Arc<moqx_kio::Queue<LingeringPath>>,
}

impl Origin {
    /// Turns lingering on (see the module docs): from now on a path whose last
    /// publication goes stays announced, with its followers waiting, until the returned
    /// handle's holder [ends](Lingering::end) it, or a publication comes back to it first.
    /// A relay takes each path from [`Lingering::next`] and ends it after its linger (5 s
    /// by default). Only one handle is live: a second call replaces the first.
    pub fn linger(&self) -> Lingering {
        let queue = Arc::new(moqx_kio::Queue::unbounded());
        self.shared.state.lock().linger = Some(queue.clone());
        Lingering {
            origin: self.shared.clone(),
            queue,
        }
    }
}

impl LingeringPath {
    /// The path (absolute).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Lingering {
    /// The next path that lost its last publication, or `Pending` until one does.
    pub fn poll_next(&self, waiter: &Waiter) -> Poll<LingeringPath> {
        match self.queue.poll_pop(waiter) {
            Poll::Ready(Some(path)) => Poll::Ready(path),
            // The queue is closed only by this handle's drop.
            Poll::Ready(None) | Poll::Pending => Poll::Pending,
        }
    }

    /// Waits for the next path that loses its last publication.
    pub async fn next(&self) -> LingeringPath {
        moqx_kio::wait(|waiter| self.poll_next(waiter)).await
    }

    /// Ends `lingering` now, unless a publication came back to it meanwhile: its
    /// listeners hear it end, and the tracks following it end.
    pub fn end(&self, lingering: &LingeringPath) {
        let mut state = self.origin.state.lock();
        let still = state
            .broadcasts
            .get(&lingering.path)
            .is_some_and(|entry| entry.lingering == Some(lingering.ticket));
        if still {
            state.end_lingering(&lingering.path);
        }
    }
}

impl Drop for Lingering {
    fn drop(&mut self) {
        self.queue.close();
        let mut state = self.origin.state.lock();
        if state
            .linger
            .as_ref()
            .is_some_and(|queue| Arc::ptr_eq(queue, &self.queue))
        {
            state.linger = None;
            let lingering: Vec<Path> = state
                .broadcasts
                .iter()
                .filter(|(_, entry)| entry.lingering.is_some())
                .map(|(path, _)| path.clone())
                .collect();
            for path in lingering {
                state.end_lingering(&path);
            }
        }
    }
}

impl OriginState {
    /// Ends the lingering `path`: every listener that follows it hears it end, and its
    /// followers see its changes closed.
    fn end_lingering(&mut self, path: &Path) {
        let Some(entry) = self.broadcasts.get(path) else {
            return;
        };
        if entry.lingering.is_none() || !entry.publications.is_empty() {
            return;
        }
        tracing::debug!(%path, "the linger is over: the path ends");
        for listener in self.listeners.iter().filter(|l| l.wants(path)) {
            listener.events.push(path, true, None);
        }
        self.broadcasts.remove(path);
        self.lingering_paths -= 1;
    }
}
