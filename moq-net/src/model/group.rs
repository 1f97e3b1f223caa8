//! Groups: append-only sequences of frames.
//!
//! A group is what one QUIC stream carries: its frames arrive reliably and in order. Every
//! consumer reads every frame from the first, whenever it joins. Frames are stored in a
//! [`moqx_kio::log`], so reading a published frame takes no lock and writes no shared cache line
//! besides the payload's reference count.

use moqx_kio::sync::Arc;
use moqx_kio::sync::{AtomicU64, Ordering};
use std::task::Poll;

use bytes::Bytes;
use moqx_kio::Waiter;
use moqx_kio::log::{LogConfig, LogReader, LogWriter, Next, Start};

use super::budget::MemoryBudget;
use super::frame::{Frame, FrameConsumer, FrameEntry, FrameProducer};
use super::status::Status;
use super::{Look, Park};
use crate::Error;

/// Writes one group. Finish it with [`finish`](Self::finish) or [`abort`](Self::abort);
/// dropping it unfinished makes consumers see [`Error::Dropped`].
///
/// ```
/// use moqx_net::model::{Frame, GroupProducer};
///
/// let mut group = GroupProducer::new(7);
/// group.write_frame(Frame { timestamp: 0, payload: "hello".into() });
/// let mut reader = group.consume();
/// group.finish();
///
/// pollster::block_on(async {
///     let frame = reader.read_frame().await.unwrap().unwrap();
///     assert_eq!(frame.payload, "hello");
///     assert_eq!(reader.read_frame().await, Ok(None), "finished");
/// });
/// ```
#[derive(Debug)]
pub struct GroupProducer {
    frames: LogWriter<FrameEntry>,
    shared: Arc<GroupShared>,
}

/// Reads one group's frames in order, from the first.
#[derive(Debug)]
pub struct GroupConsumer {
    frames: LogReader<FrameEntry>,
    shared: Arc<GroupShared>,
    /// A chunked frame being gathered by `poll_read_frame`.
    partial: Option<FrameConsumer>,
}

#[derive(Debug)]
struct GroupShared {
    sequence: u64,
    status: Status,
    /// The first frame's timestamp, or `NO_TIMESTAMP`: the group's timestamp age.
    first_timestamp: AtomicU64,
    /// The track's newest first timestamp plus one, raised by this group's first frame.
    track_newest: Option<Arc<AtomicU64>>,
    /// Payload bytes written so far, counted only for a track with a byte budget for its
    /// cache ([`Track::cache_bytes`](super::Track::cache_bytes)) or under a memory budget.
    bytes: Option<AtomicU64>,
    /// The memory budget the bytes are charged to, given back when the last holder of
    /// the group drops it.
    memory: Option<MemoryBudget>,
}

impl Drop for GroupShared {
    fn drop(&mut self) {
        if let (Some(memory), Some(bytes)) = (&self.memory, &self.bytes) {
            memory.release(bytes.load(Ordering::Relaxed));
        }
    }
}

/// Reads how many payload bytes a group holds, without holding its frames.
#[derive(Debug, Clone)]
pub(crate) struct GroupSize(Arc<GroupShared>);

impl GroupSize {
    /// Payload bytes written so far (0 for a group that does not count them).
    pub(crate) fn bytes(&self) -> u64 {
        self.0
            .bytes
            .as_ref()
            .map_or(0, |bytes| bytes.load(Ordering::Relaxed))
    }
}

const NO_TIMESTAMP: u64 = u64::MAX;

/// Groups are short: start with one slot (a chat message) and grow to 64.
const GROUP_LOG: LogConfig = LogConfig {
    first_chunk: 1,
    max_chunk: 64,
    retain: None,
};

impl GroupProducer {
    /// A new open group with this sequence number.
    pub fn new(sequence: u64) -> Self {
        Self::with_track_clock(sequence, None, false, None)
    }

    /// A group of a track, whose first frame raises the track's newest timestamp, and which
    /// counts its bytes if `sized` (the track's cache has a byte budget) or it is charged
    /// to a `memory` budget.
    pub(crate) fn new_in_track(
        sequence: u64,
        track_newest: Arc<AtomicU64>,
        sized: bool,
        memory: Option<MemoryBudget>,
    ) -> Self {
        Self::with_track_clock(sequence, Some(track_newest), sized, memory)
    }

    fn with_track_clock(
        sequence: u64,
        track_newest: Option<Arc<AtomicU64>>,
        sized: bool,
        memory: Option<MemoryBudget>,
    ) -> Self {
        Self {
            frames: LogWriter::with_config(GROUP_LOG),
            shared: Arc::new(GroupShared {
                sequence,
                status: Status::default(),
                first_timestamp: AtomicU64::new(NO_TIMESTAMP),
                track_newest,
                bytes: (sized || memory.is_some()).then(|| AtomicU64::new(0)),
                memory,
            }),
        }
    }

    /// The group's sequence number.
    pub fn sequence(&self) -> u64 {
        self.shared.sequence
    }

    /// Appends a whole frame.
    pub fn write_frame(&mut self, frame: Frame) {
        self.note_timestamp(frame.timestamp);
        self.note_bytes(frame.payload.len() as u64);
        self.append(FrameEntry::whole(frame));
    }

    /// Appends a whole frame from a timestamp and a payload.
    pub fn write(&mut self, timestamp: u64, payload: impl Into<Bytes>) {
        self.write_frame(Frame {
            timestamp,
            payload: payload.into(),
        });
    }

    /// Appends a frame of `size` bytes whose payload is written in chunks through the returned
    /// producer. Readers see the frame at once and its chunks as they are written.
    pub fn create_frame(&mut self, timestamp: u64, size: u64) -> FrameProducer {
        self.note_timestamp(timestamp);
        self.note_bytes(size);
        let (entry, producer) = FrameEntry::chunked(timestamp, size);
        self.append(entry);
        producer
    }

    /// How many frames were appended.
    pub fn frame_count(&self) -> u64 {
        self.frames.len()
    }

    /// A consumer that reads from the first frame.
    pub fn consume(&self) -> GroupConsumer {
        GroupConsumer::new(self.frames.reader(Start::Oldest), self.shared.clone())
    }

    /// Appends a whole frame and completes the group: consumers woken by it see the frame
    /// and the end at once (a relay that forwards the group writes them in one go, the
    /// end riding with the frame's bytes).
    pub fn finish_with(mut self, frame: Frame) {
        self.note_timestamp(frame.timestamp);
        self.note_bytes(frame.payload.len() as u64);
        self.shared.status.set(Ok(()));
        // `self` drops next: the frame log closes and wakes the readers.
        self.frames.append_before_close(FrameEntry::whole(frame));
    }

    /// Completes the group: consumers see the end after the last frame. A group's last
    /// frame and its end written apart may reach the wire apart: a session on another
    /// thread can send the frame before the end is written, and the end then goes alone,
    /// a round trip later over QUIC. Where the last frame is at hand, prefer
    /// [`finish_with`](Self::finish_with).
    pub fn finish(self) {
        // The status is published before the frame log closes (when `self` drops), so a
        // reader that sees the end sees the outcome.
        self.shared.status.set(Ok(()));
    }

    /// Aborts the group: consumers see `error` after the frames already written.
    pub fn abort(self, error: Error) {
        self.shared.status.set(Err(error));
    }

    fn note_timestamp(&self, timestamp: u64) {
        // Only the first frame counts; readers use it to judge the group's age.
        let timestamp = timestamp.min(NO_TIMESTAMP - 1);
        let first = self.shared.first_timestamp.compare_exchange(
            NO_TIMESTAMP,
            timestamp,
            Ordering::Release,
            Ordering::Relaxed,
        );
        if first.is_ok()
            && let Some(newest) = &self.shared.track_newest
        {
            newest.fetch_max(timestamp + 1, Ordering::AcqRel);
        }
    }

    fn note_bytes(&self, bytes: u64) {
        if let Some(total) = &self.shared.bytes {
            total.fetch_add(bytes, Ordering::Relaxed);
        }
        if let Some(memory) = &self.shared.memory {
            memory.charge(bytes);
        }
    }

    /// A handle on the group's byte count.
    pub(crate) fn size(&self) -> GroupSize {
        GroupSize(self.shared.clone())
    }

    fn append(&mut self, entry: FrameEntry) {
        self.frames.append(entry);
    }
}

impl Drop for GroupProducer {
    fn drop(&mut self) {
        // The first outcome wins: after `finish` or `abort` this does nothing. The frame log
        // closes right after, when the fields drop.
        self.shared.status.set(Err(Error::Dropped));
    }
}

impl GroupConsumer {
    fn new(frames: LogReader<FrameEntry>, shared: Arc<GroupShared>) -> Self {
        Self {
            frames,
            shared,
            partial: None,
        }
    }

    /// The group's sequence number.
    pub fn sequence(&self) -> u64 {
        self.shared.sequence
    }

    /// The first frame's timestamp, once a frame was written.
    pub fn first_timestamp(&self) -> Option<u64> {
        match self.shared.first_timestamp.load(Ordering::Acquire) {
            NO_TIMESTAMP => None,
            timestamp => Some(timestamp),
        }
    }

    /// The next frame as a [`FrameConsumer`] (for chunk-by-chunk reading); `Ok(None)` at the
    /// end of a finished group; the abort error of an aborted or dropped one.
    pub fn poll_next_frame(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<Option<FrameConsumer>, Error>> {
        self.next_frame_with(waiter)
    }

    fn next_frame_with<'w>(
        &mut self,
        park: impl Park<'w>,
    ) -> Poll<Result<Option<FrameConsumer>, Error>> {
        match park.read(&mut self.frames) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Next::Item(entry)) => Poll::Ready(Ok(Some(entry.consume()))),
            Poll::Ready(Next::Lagged(_)) => Poll::Ready(Err(Error::Lagged)),
            Poll::Ready(Next::Closed) => Poll::Ready(self.end()),
        }
    }

    /// The next whole frame; `Ok(None)` at the end of a finished group. A chunked frame is
    /// gathered into one buffer first.
    pub fn poll_read_frame(&mut self, waiter: &Waiter) -> Poll<Result<Option<Frame>, Error>> {
        self.read_frame_with(waiter)
    }

    /// `poll_read_frame`, or with [`Look`] a look that registers nothing (and leaves a
    /// chunked frame to the waiting path).
    fn read_frame_with<'w>(&mut self, park: impl Park<'w>) -> Poll<Result<Option<Frame>, Error>> {
        loop {
            if let Some(partial) = self.partial.as_mut() {
                let Some(waiter) = park.waiter() else {
                    return Poll::Pending;
                };
                let payload = match partial.poll_read_all(waiter) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(result) => result?,
                };
                let timestamp = partial.timestamp();
                self.partial = None;
                return Poll::Ready(Ok(Some(Frame { timestamp, payload })));
            }
            // Straight from the log: a whole frame (every chat message) is one payload clone,
            // with no per-frame consumer in between.
            match park.read(&mut self.frames) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Next::Item(entry)) => match entry.whole_frame() {
                    Some(frame) => return Poll::Ready(Ok(Some(frame))),
                    None => self.partial = Some(entry.consume()),
                },
                Poll::Ready(Next::Lagged(_)) => return Poll::Ready(Err(Error::Lagged)),
                Poll::Ready(Next::Closed) => return Poll::Ready(self.end()),
            }
        }
    }

    /// How a group whose frame log closed ended: the status is published before the log
    /// closes, so a missing one means the producer vanished without saying.
    fn end<T>(&self) -> Result<Option<T>, Error> {
        match self.shared.status.get() {
            Some(Ok(())) => Ok(None),
            Some(Err(error)) => Err(error),
            None => Err(Error::Dropped),
        }
    }

    /// Waits for the next frame as a [`FrameConsumer`].
    pub async fn next_frame(&mut self) -> Result<Option<FrameConsumer>, Error> {
        // A frame that is already there costs no waiter (an allocation); see `Park`.
        if let Poll::Ready(result) = self.next_frame_with(Look) {
            return result;
        }
        moqx_kio::wait(|waiter| self.poll_next_frame(waiter)).await
    }

    /// Waits for the next whole frame.
    pub async fn read_frame(&mut self) -> Result<Option<Frame>, Error> {
        if let Poll::Ready(result) = self.read_frame_with(Look) {
            return result;
        }
        moqx_kio::wait(|waiter| self.poll_read_frame(waiter)).await
    }
}

impl Clone for GroupConsumer {
    /// A consumer of the same group, at the same frame. A frame being gathered is restarted
    /// by the clone.
    fn clone(&self) -> Self {
        Self::new(self.frames.clone(), self.shared.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    fn waiter() -> Waiter {
        Waiter::new(Waker::noop())
    }

    fn read_all(consumer: &mut GroupConsumer) -> (Vec<Frame>, Result<(), Error>) {
        let waiter = waiter();
        let mut frames = Vec::new();
        loop {
            match consumer.poll_read_frame(&waiter) {
                Poll::Ready(Ok(Some(frame))) => frames.push(frame),
                Poll::Ready(Ok(None)) => return (frames, Ok(())),
                Poll::Ready(Err(error)) => return (frames, Err(error)),
                Poll::Pending => panic!("read_all on an open group"),
            }
        }
    }

    #[test]
    fn every_consumer_reads_every_frame_from_the_start_whenever_it_joins() {
        let mut group = GroupProducer::new(3);
        let mut early = group.consume();
        for i in 0..100u64 {
            group.write(i, format!("frame {i}"));
        }
        let mut late = group.consume();
        group.finish();
        let (early_frames, early_end) = read_all(&mut early);
        let (late_frames, late_end) = read_all(&mut late);
        assert_eq!(early_frames.len(), 100);
        assert_eq!(early_frames, late_frames);
        assert_eq!(early_frames[42].payload, "frame 42");
        assert_eq!((early_end, late_end), (Ok(()), Ok(())));
        assert_eq!(late.sequence(), 3);
    }

    #[test]
    fn abort_is_seen_after_the_frames_already_written() {
        let mut group = GroupProducer::new(0);
        group.write(0, "a");
        let mut consumer = group.consume();
        group.abort(Error::App(5));
        let (frames, end) = read_all(&mut consumer);
        assert_eq!(frames.len(), 1);
        assert_eq!(end, Err(Error::App(5)));
    }

    #[test]
    fn a_dropped_producer_is_a_distinct_error() {
        let mut group = GroupProducer::new(0);
        group.write(0, "a");
        let mut consumer = group.consume();
        drop(group);
        assert_eq!(read_all(&mut consumer).1, Err(Error::Dropped));
    }

    #[test]
    fn a_parked_consumer_is_woken_by_a_frame_and_by_finish() {
        let mut group = GroupProducer::new(0);
        let mut consumer = group.consume();
        let handle = std::thread::spawn(move || {
            pollster::block_on(async {
                let first = consumer.read_frame().await;
                let end = consumer.read_frame().await;
                (first, end)
            })
        });
        group.write(9, "late");
        group.finish();
        let (first, end) = handle.join().unwrap();
        assert_eq!(first.unwrap().unwrap().timestamp, 9);
        assert_eq!(end, Ok(None));
    }

    /// What a relay forwarding a group relies on to write its last frame and its FIN in one
    /// go: a consumer woken by `finish_with` finds the frame and the end together, where
    /// `write` then `finish` woke it with the frame alone first.
    #[test]
    fn finish_with_shows_the_last_frame_and_the_end_at_once() {
        let mut group = GroupProducer::new(0);
        group.write(1, "first");
        let mut consumer = group.consume();
        let mut whole = group.consume();
        // std's types, not kio's (which are loom's in the loom build): a waker needs them.
        let wakes = std::sync::Arc::new(Wakes(std::sync::atomic::AtomicU64::new(0)));
        let waker = Waker::from(wakes.clone());
        let waiter = Waiter::new(&waker);
        assert!(matches!(
            consumer.poll_read_frame(&waiter),
            Poll::Ready(Ok(Some(_)))
        ));
        assert!(consumer.poll_read_frame(&waiter).is_pending());
        group.finish_with(Frame {
            timestamp: 2,
            payload: "last".into(),
        });
        assert_eq!(
            wakes.0.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "one wake, at the end"
        );
        let last = consumer.poll_read_frame(&waiter);
        assert!(matches!(&last, Poll::Ready(Ok(Some(frame))) if frame.payload == "last"));
        assert_eq!(consumer.poll_read_frame(&waiter), Poll::Ready(Ok(None)));
        let (frames, end) = read_all(&mut whole);
        assert_eq!((frames.len(), end), (2, Ok(())));
    }

    /// A waker that counts its wakes.
    struct Wakes(std::sync::atomic::AtomicU64);

    impl std::task::Wake for Wakes {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn chunked_frames_stream_to_readers_and_gather_whole() {
        let mut group = GroupProducer::new(0);
        let mut streaming = group.consume();
        let mut gathering = group.consume();
        let mut frame = group.create_frame(5, 6);
        group.finish();

        let waiter = waiter();
        let Poll::Ready(Ok(Some(mut chunks))) = streaming.poll_next_frame(&waiter) else {
            panic!("the frame is visible before its payload");
        };
        assert_eq!(chunks.size(), 6);
        assert!(chunks.poll_chunk(&waiter).is_pending());
        assert!(gathering.poll_read_frame(&waiter).is_pending());

        frame.write("abc").unwrap();
        assert_eq!(
            chunks.poll_chunk(&waiter),
            Poll::Ready(Ok(Some("abc".into())))
        );
        frame.write("def").unwrap();
        frame.finish().unwrap();
        assert_eq!(
            chunks.poll_chunk(&waiter),
            Poll::Ready(Ok(Some("def".into())))
        );
        assert_eq!(chunks.poll_chunk(&waiter), Poll::Ready(Ok(None)));

        let (frames, end) = read_all(&mut gathering);
        assert_eq!(
            frames,
            [Frame {
                timestamp: 5,
                payload: "abcdef".into()
            }]
        );
        assert_eq!(end, Ok(()));
    }

    #[test]
    fn a_chunked_frame_of_the_wrong_size_is_refused_and_aborted() {
        let mut group = GroupProducer::new(0);
        let mut too_long = group.create_frame(0, 2);
        assert_eq!(too_long.write("abc"), Err(Error::WrongSize));
        let too_short = group.create_frame(0, 2);
        let mut consumer = group.consume();
        group.finish();
        assert_eq!(consumer.read_frame_now(), Err(Error::WrongSize));
        let mut short = too_short;
        short.write("a").unwrap();
        assert_eq!(short.finish(), Err(Error::WrongSize));
        assert_eq!(consumer.read_frame_now(), Err(Error::WrongSize));
    }

    #[test]
    fn awaiting_reads_whole_frames_at_once_and_chunked_ones_as_they_complete() {
        let mut group = GroupProducer::new(0);
        let mut reader = group.consume();
        group.write(1, "whole");
        let mut chunked = group.create_frame(2, 6);
        chunked.write("abc").unwrap();
        let handle = std::thread::spawn(move || {
            pollster::block_on(async {
                let mut frames = Vec::new();
                while let Some(frame) = reader.read_frame().await.unwrap() {
                    frames.push((frame.timestamp, frame.payload));
                }
                frames
            })
        });
        chunked.write("def").unwrap();
        chunked.finish().unwrap();
        group.finish();
        assert_eq!(
            handle.join().unwrap(),
            [(1, Bytes::from("whole")), (2, Bytes::from("abcdef"))]
        );
    }

    #[test]
    fn first_timestamp_is_the_first_frames() {
        let mut group = GroupProducer::new(0);
        let consumer = group.consume();
        assert_eq!(consumer.first_timestamp(), None);
        group.write(100, "a");
        group.write(50, "b");
        assert_eq!(consumer.first_timestamp(), Some(100));
    }

    impl GroupConsumer {
        fn read_frame_now(&mut self) -> Result<Option<Frame>, Error> {
            match self.poll_read_frame(&waiter()) {
                Poll::Ready(result) => result,
                Poll::Pending => panic!("expected a ready frame"),
            }
        }
    }
}
