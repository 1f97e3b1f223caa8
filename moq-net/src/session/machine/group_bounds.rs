//! How a session bounds the groups it is sending: groups waiting for stream credit, and
//! group streams open and unfinished (a subscriber that withholds credit loses groups
//! instead of making the session hold every one it is sent).

use std::collections::VecDeque;

use super::{Open, SessionMachine, Task};
use crate::Error;
use crate::runtime::Runtime;
#[cfg(doc)]
use crate::session::SessionLimits;

/// Entries of finished groups the open-group queue may hold beyond twice the open ones
/// before it is swept.
const OPEN_GROUP_SLACK: usize = 64;

impl<R: Runtime> SessionMachine<R> {
    /// Keeps at most [`max_queued_groups`](SessionLimits::max_queued_groups) groups waiting
    /// for stream credit, dropping the oldest (counted): a subscriber that withholds credit
    /// loses groups instead of making the session hold every one it is sent.
    pub(super) fn drop_oldest_groups(&mut self, waiting: &mut VecDeque<Open>) {
        let queued = waiting.iter().filter(|open| open.is_group()).count();
        let max = self.context.config.limits.max_queued_groups;
        if queued <= max {
            return;
        }
        let mut excess = queued - max;
        waiting.retain(|open| {
            if excess > 0 && open.is_group() {
                excess -= 1;
                return false;
            }
            true
        });
        let dropped = (queued - max) as u64;
        self.context.counters.groups_dropped += dropped;
        tracing::debug!(
            dropped,
            waiting = max,
            "the peer gives no stream credit: dropping its oldest groups"
        );
    }

    /// Keeps at most [`max_queued_groups`](SessionLimits::max_queued_groups) group streams
    /// open and unfinished, resetting the oldest (Lagged, counted as dropped): a subscriber
    /// that lets streams open but gives them no data credit would otherwise make the
    /// session hold every group it is sent, each kept alive by its unfinished stream.
    pub(super) fn bound_open_groups(&mut self) {
        // Forget the front entries of groups that finished.
        while let Some(&(index, id, sequence)) = self.open_groups.front() {
            if self.is_open_group(index, id, sequence) {
                break;
            }
            self.open_groups.pop_front();
        }
        // And those further back once they outnumber the open groups: one group that
        // stays open at the front must not keep an entry for every group sent after it
        // (review finding F2). Amortized O(1) per group.
        if self.open_groups.len() > 2 * self.open_group_count + OPEN_GROUP_SLACK {
            let mut open_groups = std::mem::take(&mut self.open_groups);
            open_groups.retain(|&(index, id, sequence)| self.is_open_group(index, id, sequence));
            self.open_groups = open_groups;
        }
        while self.open_group_count > self.context.config.limits.max_queued_groups {
            let Some((index, id, sequence)) = self.open_groups.pop_front() else {
                break;
            };
            if !self.is_open_group(index, id, sequence) {
                continue;
            }
            if let Some(Task::GroupWrite(mut group)) = self.tasks.remove(index) {
                group.evict(Error::Lagged);
            }
            self.open_group_count -= 1;
            self.context.counters.groups_dropped += 1;
            tracing::debug!(
                id,
                sequence,
                "the peer does not read its group streams: resetting the oldest"
            );
        }
    }

    /// Whether task `index` is the group stream of subscription `id`, group `sequence`.
    fn is_open_group(&mut self, index: usize, id: u64, sequence: u64) -> bool {
        matches!(
            self.tasks.get_mut(index),
            Some((Task::GroupWrite(group), _)) if group.names() == (id, sequence)
        )
    }
}
