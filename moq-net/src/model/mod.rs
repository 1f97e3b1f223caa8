//! The model: the in-memory pub/sub of broadcasts, tracks, groups and frames.
//!
//! A publisher writes through producers; subscribers read through consumers; a relay shares
//! one model between all of its sessions, on every core. Everything here is `Send + Sync`,
//! touches no transport and reads no clock. Published data is stored in [`moqx_kio::log`]s, so a
//! subscriber reading a frame that is already there takes no lock and does not contend with
//! the publisher or with other subscribers.
//!
//! | type | what it is |
//! |---|---|
//! | [`Origin`] | broadcasts by [`Path`]; discovery by prefix through [`Announced`] |
//! | [`BroadcastProducer`] / [`BroadcastConsumer`] | a named collection of tracks, created up front or on demand ([`TrackRequest`]) |
//! | [`TrackProducer`] / [`TrackConsumer`] | a sequence of groups with a cache for late joiners |
//! | [`GroupProducer`] / [`GroupConsumer`] | an append-only sequence of frames (one QUIC stream) |
//! | [`Frame`], [`FrameProducer`] / [`FrameConsumer`] | a timestamped payload, whole or in chunks |
//!
//! Every producer ends in one of three ways that its consumers tell apart: finished (`Ok(None)`
//! after the last item), aborted with an [`Error`](crate::Error), or dropped
//! ([`Error::Dropped`](crate::Error::Dropped)). Nothing a consumer does blocks a producer.
//!
//! # A tour: publish, discover, subscribe, join late
//!
//! ```
//! use moqx_net::model::{Announcement, BroadcastProducer, Origin, Track};
//!
//! # pollster::block_on(async {
//! // The publisher: a broadcast with one track, published at a path.
//! let origin = Origin::new();
//! let broadcast = BroadcastProducer::new();
//! let mut chat = broadcast.create_track(Track::new("chat"));
//! origin.publish("rooms/lobby/alice", &broadcast).unwrap();
//!
//! // A subscriber discovers it by prefix...
//! let mut rooms = origin.announced("rooms/lobby");
//! let Announcement::Active { path, broadcast: alice } = rooms.next().await else {
//!     unreachable!("alice is live");
//! };
//! assert_eq!(path.as_str(), "rooms/lobby/alice");
//!
//! // ...subscribes to her chat track, and receives what she writes next.
//! let mut messages = alice.subscribe_track("chat").await?;
//! let mut group = chat.append_group();
//! group.write(1_000, "hi all");
//! group.finish();
//! let mut received = messages.next_group().await?.expect("a group");
//! assert_eq!(received.read_frame().await?.expect("a frame").payload, "hi all");
//!
//! // A late joiner starts at the latest group and still reads it from its first frame.
//! let mut group = chat.append_group();
//! group.write(2_000, "part 1");
//! let mut late = alice.subscribe_track("chat").await?;
//! group.write(2_001, "part 2");
//! group.finish();
//! let mut joined = late.next_group().await?.expect("the latest group");
//! assert_eq!(joined.sequence(), 1);
//! assert_eq!(joined.read_frame().await?.expect("a frame").payload, "part 1");
//! assert_eq!(joined.read_frame().await?.expect("a frame").payload, "part 2");
//!
//! // When the publisher goes away, subscribers hear about it: the broadcast is unannounced,
//! // and a track dropped without `finish` ends with `Dropped` after its cached groups.
//! drop(chat);
//! drop(broadcast);
//! assert!(matches!(rooms.next().await, Announcement::Ended { .. }));
//! assert_eq!(messages.next_group().await?.map(|g| g.sequence()), Some(1));
//! assert_eq!(messages.next_group().await.err(), Some(moqx_net::Error::Dropped));
//! # Ok::<(), moqx_net::Error>(())
//! # }).unwrap();
//! ```

mod broadcast;
mod budget;
mod follow;
mod frame;
mod frames;
mod group;
mod hook;
mod origin;
mod path;
mod pending;
mod publications;
mod route;
mod scope;
mod status;
mod track;

pub use broadcast::{BroadcastConsumer, BroadcastProducer, PendingTrack, TrackRequest};
pub use budget::{BudgetStats, MemoryBudget};
pub use follow::FollowedTrack;
pub use frame::{Frame, FrameConsumer, FrameProducer};
pub use frames::{OPEN_GROUPS, TrackFrames};
pub use group::{GroupConsumer, GroupProducer};
pub use origin::{
    Announced, Announcement, Lingering, LingeringPath, ListenerStats, Origin, RouteChanges,
};
pub use path::Path;
pub use route::Route;
pub use track::{Track, TrackConsumer, TrackProducer};

/// What a read that finds nothing does: park a waiter (`&Waiter`, the `poll_*` methods) or
/// only look ([`Look`]).
///
/// The `async` readers look first: `moqx_kio::wait` allocates a waiter per future, which a
/// subscriber woken because data arrived would otherwise pay on every frame. The two
/// behaviors are two monomorphized copies of each reader, so neither pays for the other. A
/// loop that waits often should own a [`Waiter`](moqx_kio::Waiter) and call the `poll_*` methods,
/// as the session machines do.
trait Park<'w>: Copy {
    /// Reads the next entry of `log`.
    fn read<T>(
        self,
        log: &mut moqx_kio::log::LogReader<T>,
    ) -> std::task::Poll<moqx_kio::log::Next<&T>>;

    /// The waiter to park, if this read parks.
    fn waiter(self) -> Option<&'w moqx_kio::Waiter>;
}

impl<'w> Park<'w> for &'w moqx_kio::Waiter {
    #[inline]
    fn read<T>(
        self,
        log: &mut moqx_kio::log::LogReader<T>,
    ) -> std::task::Poll<moqx_kio::log::Next<&T>> {
        log.poll_next(self)
    }

    #[inline]
    fn waiter(self) -> Option<&'w moqx_kio::Waiter> {
        Some(self)
    }
}

/// A read that only looks: `Pending` means "nothing yet", and nothing was registered.
#[derive(Debug, Clone, Copy)]
struct Look;

impl<'w> Park<'w> for Look {
    #[inline]
    fn read<T>(
        self,
        log: &mut moqx_kio::log::LogReader<T>,
    ) -> std::task::Poll<moqx_kio::log::Next<&T>> {
        log.try_next()
            .map_or(std::task::Poll::Pending, std::task::Poll::Ready)
    }

    #[inline]
    fn waiter(self) -> Option<&'w moqx_kio::Waiter> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model is shared between sessions on every core: every handle is `Send + Sync`.
    #[test]
    fn every_handle_is_send_and_sync() {
        fn shared<T: Send + Sync>() {}
        shared::<Frame>();
        shared::<FrameProducer>();
        shared::<FrameConsumer>();
        shared::<GroupProducer>();
        shared::<GroupConsumer>();
        shared::<TrackProducer>();
        shared::<TrackConsumer>();
        shared::<BroadcastProducer>();
        shared::<BroadcastConsumer>();
        shared::<PendingTrack>();
        shared::<TrackRequest>();
        shared::<Origin>();
        shared::<Announced>();
        shared::<Announcement>();
    }
}
