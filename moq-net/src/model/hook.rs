//! A callback that runs once, when its owner drops.
//!
//! Registries (a broadcast's tracks, an origin's broadcasts) hold only non-counting handles
//! to what they list, so the producer has to tell them when it goes away. The producer owns
//! a `DropHook` that does exactly that; the hook runs after the producer's own `Drop` (fields
//! drop after the body), so consumers already see the producer's final status.

use std::fmt;

/// Runs its callback when dropped. The callback must not be run under a lock its target
/// takes; a hook is always dropped by a producer, outside any model lock.
pub(crate) struct DropHook(Option<Box<dyn FnOnce() + Send + Sync>>);

impl DropHook {
    pub(crate) fn new(callback: impl FnOnce() + Send + Sync + 'static) -> Self {
        Self(Some(Box::new(callback)))
    }
}

impl Drop for DropHook {
    fn drop(&mut self) {
        if let Some(callback) = self.0.take() {
            callback();
        }
    }
}

impl fmt::Debug for DropHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DropHook")
    }
}

/// A callback run every time a broadcast's route changes, with the new route and its
/// version: the origins it is published in re-ranking its path. Shared, so that it is
/// called outside the broadcast's lock.
#[derive(Clone)]
pub(crate) struct RouteHook(std::sync::Arc<RouteCallback>);

/// What a [`RouteHook`] runs.
type RouteCallback = dyn Fn(&super::route::Route, u64) + Send + Sync;

impl RouteHook {
    pub(crate) fn new(
        callback: impl Fn(&super::route::Route, u64) + Send + Sync + 'static,
    ) -> Self {
        Self(std::sync::Arc::new(callback))
    }

    /// Runs the callback.
    pub(crate) fn call(&self, route: &super::route::Route, version: u64) {
        (self.0)(route, version)
    }
}

impl fmt::Debug for RouteHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RouteHook")
    }
}
