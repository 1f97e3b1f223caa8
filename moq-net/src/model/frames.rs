//! Reading a track frame by frame across its groups, a newer group never held behind an
//! older one that is still open.
//!
//! Read group after group, a subscriber waits at the end of each group for its end (a
//! FIN) before it sees the next group's first frame. A publisher's end can come well after
//! its last frame: a browser writes a frame and closes its stream in two calls, which
//! leave in two packets, and a relay sends such a lone FIN only once the frame's bytes are
//! acknowledged (quiche could otherwise lose it; `moqx_runtime`'s held FINs), up to a
//! delayed ACK later (25 ms from Chromium). A chat message published in that wait would
//! wait with it. [`TrackFrames`] reads the groups that are open side by side instead:
//! every frame is delivered as it arrives, each group's frames in their order.

use std::collections::VecDeque;
use std::task::Poll;

use moqx_kio::Waiter;

use super::{FollowedTrack, Frame, GroupConsumer};
use crate::Error;

/// Groups read side by side at most: a group is taken from the track only when every
/// group open has nothing to read, and to make room for it the oldest open group that has
/// delivered a frame (and waits for its end, or for frames that are late) is dropped; in
/// live media and chat, the newest matters most. A group that has delivered nothing yet is
/// never dropped.
pub const OPEN_GROUPS: usize = 4;

/// A track's frames as they arrive, from every group open (see the module docs).
#[derive(Debug)]
pub struct TrackFrames {
    track: FollowedTrack,
    /// The groups read now, oldest first, each with whether it has delivered a frame.
    open: VecDeque<(GroupConsumer, bool)>,
    /// The track has no more groups to give: it finished, or failed with this error
    /// (`Some`), which is returned once the groups open are read.
    ended: Option<Option<Error>>,
}

impl TrackFrames {
    /// Reads `track` (a subscribed track, or one followed across routes).
    pub fn new(track: FollowedTrack) -> Self {
        Self {
            track,
            open: VecDeque::new(),
            ended: None,
        }
    }

    /// The track read.
    pub fn track(&self) -> &FollowedTrack {
        &self.track
    }

    /// The next frame of any group open, with its group's sequence number: the oldest
    /// group's first where several have one. `Ok(None)` once the track finished and every
    /// group has been read; the track's error once it failed and every group has been
    /// read. A group cut short (too old, dropped upstream) is left for the next.
    pub fn poll_read_frame(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<Option<(u64, Frame)>, Error>> {
        loop {
            // What the open groups have first, so that a burst of groups is read through
            // one at a time (none dropped for room while it still has frames coming in).
            let mut index = 0;
            while let Some((group, delivered)) = self.open.get_mut(index) {
                match group.poll_read_frame(waiter) {
                    Poll::Ready(Ok(Some(frame))) => {
                        *delivered = true;
                        return Poll::Ready(Ok(Some((group.sequence(), frame))));
                    }
                    Poll::Ready(Ok(None) | Err(_)) => {
                        self.open.remove(index);
                    }
                    Poll::Pending => index += 1,
                }
            }
            // Nothing ready: the next group, if one has come and there is room for it.
            // Room is made only by dropping a group that has delivered a frame (what is
            // left of it is late, or only its end): a group whose first frame is still on
            // its way is never dropped, so nothing is lost to a burst; with every place
            // taken by such groups, the next waits.
            let full = self.open.len() >= OPEN_GROUPS;
            let evictable = self.open.iter().position(|(_, delivered)| *delivered);
            if self.ended.is_none() && (!full || evictable.is_some()) {
                match self.track.poll_next_group(waiter) {
                    Poll::Ready(Ok(Some(group))) => {
                        if let (true, Some(oldest)) = (full, evictable) {
                            self.open.remove(oldest);
                        }
                        self.open.push_back((group, false));
                        continue;
                    }
                    Poll::Ready(Ok(None)) => self.ended = Some(None),
                    Poll::Ready(Err(error)) => self.ended = Some(Some(error)),
                    Poll::Pending => {}
                }
            }
            return match &mut self.ended {
                Some(ended) if self.open.is_empty() => {
                    Poll::Ready(ended.take().map_or(Ok(None), Err))
                }
                _ => Poll::Pending,
            };
        }
    }

    /// Waits for [`poll_read_frame`](Self::poll_read_frame).
    pub async fn read_frame(&mut self) -> Result<Option<(u64, Frame)>, Error> {
        moqx_kio::wait(|waiter| self.poll_read_frame(waiter)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Track, TrackProducer};

    fn frames_of(track: &TrackProducer) -> TrackFrames {
        TrackFrames::new(FollowedTrack::fixed(track.consume()))
    }

    fn read(frames: &mut TrackFrames) -> Poll<Result<Option<(u64, Frame)>, Error>> {
        frames.poll_read_frame(&Waiter::new(std::task::Waker::noop()))
    }

    fn text(result: Poll<Result<Option<(u64, Frame)>, Error>>) -> (u64, String) {
        match result {
            Poll::Ready(Ok(Some((sequence, frame)))) => (
                sequence,
                String::from_utf8_lossy(&frame.payload).into_owned(),
            ),
            other => panic!("no frame: {other:?}"),
        }
    }

    #[test]
    fn a_newer_groups_frame_is_not_held_behind_an_older_group_still_open() {
        let mut track = TrackProducer::new(Track::new("chat"));
        let mut frames = frames_of(&track);
        let mut first = track.append_group();
        first.write(0, "one");
        assert_eq!(text(read(&mut frames)), (0, "one".into()));
        // The first group's end has not come (its FIN held); the second's frame has.
        let mut second = track.append_group();
        second.write(0, "two");
        second.finish();
        assert_eq!(text(read(&mut frames)), (1, "two".into()));
        // The first group is still read: a late frame of it comes through, then its end.
        first.write(0, "late");
        assert_eq!(text(read(&mut frames)), (0, "late".into()));
        first.finish();
        assert!(read(&mut frames).is_pending());
        drop(track);
        assert!(matches!(read(&mut frames), Poll::Ready(Err(_) | Ok(None))));
    }

    #[test]
    fn room_is_made_only_by_dropping_a_group_that_has_delivered_a_frame() {
        let mut track = TrackProducer::new(Track::new("chat"));
        let mut frames = frames_of(&track);
        // One more group than there is room for, none with a frame yet (their streams
        // opened before their bytes came, as in a burst): none is dropped.
        let mut groups: Vec<_> = (0..=OPEN_GROUPS).map(|_| track.append_group()).collect();
        assert!(read(&mut frames).is_pending());
        for (sequence, group) in groups.iter_mut().enumerate() {
            group.write(0, format!("{sequence}"));
        }
        for sequence in 0..=OPEN_GROUPS as u64 {
            assert_eq!(text(read(&mut frames)), (sequence, sequence.to_string()));
        }
        assert!(read(&mut frames).is_pending());
        // Every place is now held by a group that delivered its frame and waits for its
        // end: a late frame of one is still read, and the oldest makes room for the next.
        groups[1].write(0, "late");
        let mut next = track.append_group();
        next.write(0, "next");
        assert_eq!(text(read(&mut frames)), (1, "late".into()));
        assert_eq!(
            text(read(&mut frames)),
            (OPEN_GROUPS as u64 + 1, "next".into())
        );
    }

    #[test]
    fn a_burst_of_groups_is_read_through_with_none_dropped() {
        let mut track = TrackProducer::new(Track::new("chat"));
        let mut frames = frames_of(&track);
        for n in 0..20u64 {
            track.write_group(0, n.to_string());
        }
        for n in 0..20u64 {
            assert_eq!(text(read(&mut frames)), (n, n.to_string()));
        }
        assert!(read(&mut frames).is_pending());
    }

    #[test]
    fn a_finished_track_ends_once_its_open_groups_are_read() {
        let mut track = TrackProducer::new(Track::new("chat"));
        let mut frames = frames_of(&track);
        let mut group = track.append_group();
        group.write(0, "last");
        track.finish();
        assert_eq!(text(read(&mut frames)), (0, "last".into()));
        assert!(read(&mut frames).is_pending(), "the group is still open");
        group.finish();
        assert!(matches!(read(&mut frames), Poll::Ready(Ok(None))));
    }
}
