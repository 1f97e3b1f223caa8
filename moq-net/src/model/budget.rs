//! A memory budget shared by everything a relay holds for its peers: one bound on the
//! whole process, where each session and track bound only their own part.
//!
//! Per-object bounds (a track's cache, a session's unfinished groups) still let many
//! objects together hold more than the machine has: two cooperating sessions can fill a
//! thousand track caches (review finding F13). A [`MemoryBudget`] counts, in one place,
//! the payload bytes of every live group (cached for late joiners, queued for a slow
//! subscriber, or being received) and the announcements waiting for listeners, and
//! answers three questions as it fills:
//!
//! 1. **Pressure** (past three quarters of the limit): a track that starts a group keeps
//!    only that newest group in its cache; older cached groups go first.
//! 2. **Full** (past seven eighths): new subscriptions are refused; the ones running go
//!    on.
//! 3. **The limit**: a received frame that would take the count past it is refused with
//!    its group (the session and the track go on), so the count never passes it.
//! 4. **What it holds**: [`MemoryBudget::stats`], for metrics.
//!
//! The count is payload and bookkeeping bytes, not the allocator's view: a group's frames
//! count from when they are written until the last holder of the group drops it. Checks
//! and charges are separate atomic steps, so threads that check at the same moment may
//! take the count past the limit by at most one frame each.

use moqx_kio::sync::Arc;
use moqx_kio::sync::{AtomicU64, Ordering};

/// A byte budget shared by clones (see the module docs). [`MemoryBudget::unlimited`]
/// counts without ever refusing.
#[derive(Debug, Clone)]
pub struct MemoryBudget {
    shared: Arc<BudgetShared>,
}

#[derive(Debug)]
struct BudgetShared {
    limit: u64,
    used: AtomicU64,
    peak: AtomicU64,
    caches_shed: AtomicU64,
    subscriptions_refused: AtomicU64,
    frames_refused: AtomicU64,
}

/// What a [`MemoryBudget`] holds and has done, read at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BudgetStats {
    /// The limit, in bytes.
    pub limit: u64,
    /// Bytes accounted now.
    pub used: u64,
    /// The most ever accounted at once.
    pub peak: u64,
    /// Times a track's cache was cut to its newest group under pressure.
    pub caches_shed: u64,
    /// Subscriptions refused because the budget was full.
    pub subscriptions_refused: u64,
    /// Received frames refused (with their groups) because the budget was full.
    pub frames_refused: u64,
}

/// Bookkeeping bytes charged for one waiting announcement, besides its path.
pub(crate) const ANNOUNCEMENT_OVERHEAD: u64 = 96;

impl MemoryBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Self {
        Self {
            shared: Arc::new(BudgetShared {
                limit,
                used: AtomicU64::new(0),
                peak: AtomicU64::new(0),
                caches_shed: AtomicU64::new(0),
                subscriptions_refused: AtomicU64::new(0),
                frames_refused: AtomicU64::new(0),
            }),
        }
    }

    /// A budget that counts and never refuses or sheds.
    pub fn unlimited() -> Self {
        Self::new(u64::MAX)
    }

    /// The limit, in bytes.
    pub fn limit(&self) -> u64 {
        self.shared.limit
    }

    /// Bytes accounted now.
    pub fn used(&self) -> u64 {
        self.shared.used.load(Ordering::Relaxed)
    }

    /// Past three quarters of the limit: caches keep only their newest group.
    pub fn under_pressure(&self) -> bool {
        self.used() > self.shared.limit / 4 * 3
    }

    /// Past seven eighths of the limit: no new subscription is taken.
    pub fn is_full(&self) -> bool {
        self.used() > self.shared.limit / 8 * 7
    }

    /// Whether `bytes` more fit under the limit.
    pub fn has_room_for(&self, bytes: u64) -> bool {
        self.used().saturating_add(bytes) <= self.shared.limit
    }

    /// Everything it counts, at one moment.
    pub fn stats(&self) -> BudgetStats {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let shared = &self.shared;
        BudgetStats {
            limit: shared.limit,
            used: read(&shared.used),
            peak: read(&shared.peak),
            caches_shed: read(&shared.caches_shed),
            subscriptions_refused: read(&shared.subscriptions_refused),
            frames_refused: read(&shared.frames_refused),
        }
    }

    /// Counts `bytes` as held.
    pub(crate) fn charge(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let used = self.shared.used.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.shared.peak.fetch_max(used, Ordering::Relaxed);
    }

    /// Counts `bytes` as given back.
    pub(crate) fn release(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        self.shared.used.fetch_sub(bytes, Ordering::Relaxed);
    }

    pub(crate) fn note_cache_shed(&self) {
        self.shared.caches_shed.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn note_subscription_refused(&self) {
        self.shared
            .subscriptions_refused
            .fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn note_frame_refused(&self) {
        self.shared.frames_refused.fetch_add(1, Ordering::Relaxed);
    }
}

impl PartialEq for MemoryBudget {
    /// The same budget (clones of one), not an equal limit.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_and_releases_track_use_peak_and_thresholds() {
        let budget = MemoryBudget::new(1000);
        budget.charge(700);
        assert!(!budget.under_pressure());
        budget.charge(100);
        assert!(budget.under_pressure() && !budget.is_full());
        assert!(budget.has_room_for(200) && !budget.has_room_for(201));
        budget.charge(100);
        assert!(budget.is_full());
        budget.charge(100);
        budget.release(600);
        let stats = budget.stats();
        assert_eq!((stats.used, stats.peak, stats.limit), (400, 1000, 1000));
        assert!(!budget.under_pressure());
    }

    #[test]
    fn an_unlimited_budget_counts_and_never_fills() {
        let budget = MemoryBudget::unlimited();
        budget.charge(u64::MAX / 2);
        assert!(!budget.is_full() && !budget.under_pressure());
        assert_eq!(budget.clone(), budget);
        assert_ne!(MemoryBudget::unlimited(), budget);
    }
}
