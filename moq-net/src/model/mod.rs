//! The model: the in-memory pub/sub of broadcasts, tracks, groups and frames.
//!
//! A publisher writes through producers; subscribers read through consumers; a relay shares
//! one model between all of its sessions, on every core. Everything here is `Send + Sync`,
//! touches no transport and reads no clock. Published data is stored in [`kio::log`]s, so a
//! subscriber reading a frame that is already there takes no lock and does not contend with
//! the publisher or with other subscribers.

mod broadcast;
mod frame;
mod group;
mod hook;
mod origin;
mod path;
mod status;
mod track;

pub use broadcast::{BroadcastConsumer, BroadcastProducer, PendingTrack, TrackRequest};
pub use frame::{Frame, FrameConsumer, FrameProducer};
pub use group::{GroupConsumer, GroupProducer};
pub use origin::{Announced, Announcement, Origin};
pub use path::Path;
pub use track::{Track, TrackConsumer, TrackProducer};

/// Reads the next entry of a log: with a waiter, parks it when caught up; without, only looks.
///
/// The `async` readers try without a waiter first: `kio::wait` allocates one per future, which
/// a subscriber woken because data arrived would otherwise pay on every frame. A loop that
/// waits often should own a [`Waiter`](kio::Waiter) and call the `poll_*` methods instead, as
/// the session machines do.
fn read_log<'a, T>(
    log: &'a mut kio::log::LogReader<T>,
    waiter: Option<&kio::Waiter>,
) -> std::task::Poll<kio::log::Next<&'a T>> {
    match waiter {
        Some(waiter) => log.poll_next(waiter),
        None => log
            .try_next()
            .map_or(std::task::Poll::Pending, std::task::Poll::Ready),
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
