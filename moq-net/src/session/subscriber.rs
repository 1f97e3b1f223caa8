//! The subscriber half: with the peer's announcements followed into
//! [`SessionConfig::subscribe`](super::SessionConfig::subscribe) (`discover.rs`), asks
//! the peer for tracks when local consumers want them (TRACK, then SUBSCRIBE), and writes
//! the group streams that arrive into those tracks (spec: moq-lite-05, "Subscriber
//! role").

use std::task::Poll;

use moqx_kio::Waiter;

use super::machine::{Context, Ending, Open, Route};
use super::stream::{Reader, Writer, encoded};
use crate::Error;
use crate::coding::{
    BidiStream, GroupDecoder, GroupItem, Message, Subscribe, SubscribeResponse,
    Track as TrackMessage, TrackInfo,
};
use crate::model::{Frame, GroupProducer, Path, Track, TrackProducer, TrackRequest};
use crate::transport::{RecvStream, SendStream};

/// Turns a remote broadcast's track requests into TRACK queries.
pub(crate) struct BroadcastRequests {
    pub(super) path: Path,
    pub(super) generation: u64,
}

/// Asks the peer for a track's properties, then subscribes.
pub(crate) struct TrackQuery<S, R> {
    path: Path,
    request: Option<TrackRequest>,
    streams: Option<(Writer<S>, Reader<R>)>,
    /// The TRACK did not encode: the request fails with this.
    failed: Option<Error>,
}

/// A subscription to open once its stream is: the broadcast and the track it fills.
pub(crate) struct SubscribePlan {
    path: Path,
    track: TrackProducer,
    /// The first group asked for (a subscription moved from another route resumes at its
    /// first missing group); `None` for the latest.
    start: Option<u64>,
}

/// One subscription to the peer: its responses, and cancelling it when nobody wants it.
/// Its track lives in the context's routes, under its id.
pub(crate) struct SubscribeRemote<S, R> {
    id: u64,
    streams: (Writer<S>, Reader<R>),
    /// The SUBSCRIBE, until a local subscription wants the track's groups: a TRACK query
    /// alone does not subscribe, and the SUBSCRIBE that follows it says from which group.
    unsent: Option<Subscribe>,
    /// From SUBSCRIBE_START and SUBSCRIBE_END: which groups the publisher served.
    start: Option<u64>,
    end: Option<u64>,
}

/// Writes one incoming group stream into its subscription's track.
pub(crate) struct GroupRead<R> {
    stream: R,
    decoder: GroupDecoder,
    group: Option<GroupProducer>,
    finished: bool,
    /// This group's frames and bytes so far, and its share of the session's bytes in
    /// unfinished received groups (given back when it ends).
    receiving: ReceivingBytes,
}

/// A received group stream against the session's group bounds: its frames and bytes so
/// far, and its share of the session's bytes in unfinished received groups
/// ([`max_receiving_group_bytes`](super::SessionLimits::max_receiving_group_bytes)).
pub(crate) struct ReceivingBytes {
    total: std::sync::Arc<std::sync::atomic::AtomicU64>,
    mine: u64,
    frames: u64,
    bytes: u64,
}

impl ReceivingBytes {
    /// A group's share of the session's `total`, nothing yet.
    pub(crate) fn new(total: std::sync::Arc<std::sync::atomic::AtomicU64>) -> Self {
        Self {
            total,
            mine: 0,
            frames: 0,
            bytes: 0,
        }
    }

    /// Counts one more received frame of `size` bytes, and says whether the group stays
    /// within the session's bounds (frames and bytes per group, bytes in unfinished groups,
    /// the memory budget). A group is cached whole: one that never ends, or many
    /// unfinished at once, must not grow without bound. Past a bound this group alone is
    /// refused (counted; the caller stops it), and the session and the track go on.
    pub(crate) fn admit(&mut self, cx: &mut Context, size: u64) -> bool {
        cx.counters.frames_received += 1;
        cx.counters.payload_bytes_received += size;
        self.frames += 1;
        self.bytes += size;
        let no_room = cx
            .config
            .memory_budget
            .as_ref()
            .filter(|memory| !memory.has_room_for(size));
        if let Some(memory) = no_room {
            memory.note_frame_refused();
        }
        let admitted = self.frames <= cx.config.limits.max_group_frames
            && self.bytes <= cx.config.limits.max_group_bytes
            && no_room.is_none()
            && self.try_add(size, cx.config.limits.max_receiving_group_bytes);
        if !admitted {
            tracing::debug!(
                frames = self.frames,
                bytes = self.bytes,
                "stopping a group past the session's group bounds"
            );
            cx.counters.groups_refused += 1;
        }
        admitted
    }

    /// Adds `bytes` to this group's share, unless the session's total would pass `max`.
    fn try_add(&mut self, bytes: u64, max: u64) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        // Only the session machine adds (one thread at a time): load and add need not be
        // one step.
        if self.total.load(Relaxed).saturating_add(bytes) > max {
            return false;
        }
        self.total.fetch_add(bytes, Relaxed);
        self.mine += bytes;
        true
    }
}

impl Drop for ReceivingBytes {
    fn drop(&mut self) {
        self.total
            .fetch_sub(self.mine, std::sync::atomic::Ordering::Relaxed);
    }
}

impl BroadcastRequests {
    pub(crate) fn poll(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        loop {
            let Some(remote) = cx.remote.get(&self.path) else {
                return Poll::Ready(Ok(()));
            };
            if remote.generation != self.generation {
                return Poll::Ready(Ok(())); // replaced by a restart; its own task serves it
            }
            match remote.broadcast.poll_requested_track(waiter) {
                // Before -05 there is no TRACK to ask: the track has the defaults (spec:
                // "What a version cannot carry gets the defaults"), and is subscribed to
                // at once. A track that is not there fails when the SUBSCRIBE is refused.
                Poll::Ready(Some(request)) if !cx.version.has_track_stream() => {
                    let track = Track::new(request.name());
                    subscribe_upstream(&self.path, request, track, cx);
                }
                // A subscription moved from another route of the same publisher knows
                // the track: no TRACK round trip, SUBSCRIBE from its first missing group
                // at once (spec: a subscriber may subscribe before TRACK_INFO arrives).
                Poll::Ready(Some(request)) if request.properties().is_some() => {
                    let track = request
                        .properties()
                        .cloned()
                        .unwrap_or_else(|| Track::new(request.name()));
                    subscribe_upstream(&self.path, request, track, cx);
                }
                Poll::Ready(Some(request)) => {
                    cx.opens.push_back(Open::TrackQuery(TrackQuery::plan(
                        self.path.clone(),
                        request,
                    )));
                }
                Poll::Ready(None) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl TrackQuery<(), ()> {
    pub(crate) fn plan(path: Path, request: TrackRequest) -> Self {
        Self {
            path,
            request: Some(request),
            streams: None,
            failed: None,
        }
    }

    pub(crate) fn with_streams<S: SendStream, R: RecvStream>(
        self,
        send: S,
        recv: R,
        cx: &Context,
    ) -> TrackQuery<S, R> {
        let mut writer = Writer::new(send);
        let name = self
            .request
            .as_ref()
            .map(|request| request.name().to_owned())
            .unwrap_or_default();
        let query = TrackMessage {
            broadcast: self.path.clone(),
            track: name,
        };
        let version = cx.version;
        let failed = match encoded(|buf| {
            BidiStream::Track.encode(buf, version)?;
            query.encode(buf, version)
        }) {
            Ok(bytes) => {
                writer.queue(bytes);
                None
            }
            Err(error) => Some(error),
        };
        TrackQuery {
            path: self.path,
            request: self.request,
            streams: Some((
                writer,
                Reader::new(recv, cx.config.limits.max_message_bytes),
            )),
            failed,
        }
    }
}

impl<S: SendStream, R: RecvStream> TrackQuery<S, R> {
    pub(crate) fn poll(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        let Some((writer, reader)) = self.streams.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        if let Some(error) = self.failed.take() {
            writer.stream_mut().reset(error.to_code());
            reader.stream_mut().stop(error.to_code());
            self.reject(error);
            return Poll::Ready(Ok(()));
        }
        if let Poll::Ready(Err(error)) = writer.poll_flush(waiter) {
            self.reject(error);
            return Poll::Ready(Ok(()));
        }
        let version = cx.version;
        let info = match reader.poll_message(waiter, |buf| TrackInfo::decode(buf, version)) {
            Poll::Ready(Ok(Some(info))) => info,
            Poll::Ready(Ok(None)) => {
                tracing::debug!("the peer ended a TRACK stream without TRACK_INFO");
                self.reject(Error::NotFound);
                return Poll::Ready(Ok(()));
            }
            Poll::Ready(Err(error)) => {
                tracing::debug!(error = %error.error(), "the peer refused a TRACK request");
                self.reject(error.error());
                return Poll::Ready(error.outcome());
            }
            Poll::Pending => return Poll::Pending,
        };
        let _ = writer.stream_mut().finish();
        let Some(request) = self.request.take() else {
            return Poll::Ready(Ok(()));
        };
        let mut track = Track::new(request.name());
        track.priority = info.priority;
        track.ordered = info.ordered;
        track.max_latency = info.max_latency;
        track.timescale = info.timescale.get();
        subscribe_upstream(&self.path, request, track, cx);
        Poll::Ready(Ok(()))
    }

    fn reject(&mut self, error: Error) {
        if let Some(request) = self.request.take() {
            request.reject(error);
        }
    }
}

/// Answers `request` with `track` (served from what the peer sends) and queues the
/// SUBSCRIBE for it, from the group the request starts at.
fn subscribe_upstream(
    path: &Path,
    request: crate::model::TrackRequest,
    track: Track,
    cx: &mut Context,
) {
    let start = request.start();
    let producer = serve_received(request, track, cx);
    if cx.moqt.is_some() {
        super::moqt::subscribe_upstream(path, producer, start, cx);
        return;
    }
    cx.opens.push_back(Open::Subscribe(SubscribePlan {
        path: path.clone(),
        track: producer,
        start,
    }));
}

/// Serves `request` with a track received from the peer, cached as the session is
/// configured to and charged to its memory budget.
fn serve_received(
    request: crate::model::TrackRequest,
    mut track: Track,
    cx: &Context,
) -> crate::model::TrackProducer {
    track.cache_groups = cx.config.cache.groups;
    track.cache_bytes = cx.config.cache.bytes;
    let mut producer = request.serve(track);
    if let Some(memory) = &cx.config.memory_budget {
        producer.set_memory_budget(memory.clone());
    }
    producer
}

impl SubscribePlan {
    /// Registers the subscription's route (before SUBSCRIBE is written, so that a group
    /// arriving first is not lost) and queues the SUBSCRIBE.
    pub(crate) fn with_streams<S: SendStream, R: RecvStream>(
        self,
        send: S,
        recv: R,
        cx: &mut Context,
    ) -> SubscribeRemote<S, R> {
        let id = cx.next_subscribe_id;
        cx.next_subscribe_id += 1;
        let writer = Writer::new(send);
        let properties = self.track.track();
        let subscribe = Subscribe {
            id,
            broadcast: self.path,
            track: properties.name.clone(),
            priority: properties.priority,
            ordered: properties.ordered,
            max_latency: properties.max_latency,
            start: self.start,
            end: None,
        };
        cx.routes.insert(id, Route::new(self.track));
        SubscribeRemote {
            id,
            streams: (
                writer,
                Reader::new(recv, cx.config.limits.max_message_bytes),
            ),
            unsent: Some(subscribe),
            start: None,
            end: None,
        }
    }
}

impl<S: SendStream, R: RecvStream> SubscribeRemote<S, R> {
    /// Writes the SUBSCRIBE once a local subscription wants the track's groups, from the
    /// earliest group any asked for; `Pending` until then.
    fn poll_send(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<()> {
        let Some(subscribe) = &mut self.unsent else {
            return Poll::Ready(());
        };
        let Some(route) = cx.routes.get(&self.id) else {
            return Poll::Ready(());
        };
        let Poll::Ready(start) = route.track.poll_wanted(waiter) else {
            return Poll::Pending;
        };
        subscribe.start = start;
        let version = cx.version;
        match encoded(|buf| {
            BidiStream::Subscribe.encode(buf, version)?;
            subscribe.encode(buf, version)
        }) {
            Ok(bytes) => self.streams.0.queue(bytes),
            Err(error) => {
                self.streams.0.stream_mut().reset(error.to_code());
                self.abort(cx, error);
            }
        }
        self.unsent = None;
        Poll::Ready(())
    }
}

impl<S: SendStream, R: RecvStream> SubscribeRemote<S, R> {
    pub(crate) fn poll(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        let (writer, reader) = &mut self.streams;
        if !cx.routes.contains_key(&self.id) {
            return Poll::Ready(Ok(()));
        }
        // Nobody wants the track any more: after the linger, cancel upstream (FIN) and end
        // it locally.
        if cx.poll_route_unused(self.id, waiter).is_ready() {
            if self.unsent.is_some() {
                // Never subscribed (a TRACK query that no SUBSCRIBE followed): the peer
                // has seen nothing of this stream.
                writer.stream_mut().reset(Error::Cancel.to_code());
            } else {
                let _ = writer.stream_mut().finish();
            }
            reader.stream_mut().stop(Error::Cancel.to_code());
            if let Some(route) = cx.routes.remove(&self.id) {
                route.track.abort(Error::Cancel);
            }
            return Poll::Ready(Ok(()));
        }
        if self.poll_send(waiter, cx).is_pending() {
            return Poll::Pending;
        }
        let (writer, reader) = &mut self.streams;
        if let Poll::Ready(Err(error)) = writer.poll_flush(waiter) {
            self.abort(cx, error);
            return Poll::Ready(Ok(()));
        }
        let version = cx.version;
        loop {
            match reader.poll_message(waiter, |buf| SubscribeResponse::decode(buf, version)) {
                Poll::Ready(Ok(Some(SubscribeResponse::Start { group }))) => {
                    self.start.get_or_insert(group);
                }
                // Before -05: the subscription is accepted. What it says is what was asked.
                Poll::Ready(Ok(Some(SubscribeResponse::Ok { .. }))) => {}
                Poll::Ready(Ok(Some(SubscribeResponse::End { group }))) => self.end = Some(group),
                // Groups the publisher will not deliver are simply not there.
                Poll::Ready(Ok(Some(SubscribeResponse::Drop { .. }))) => {}
                Poll::Ready(Ok(None)) => {
                    // The track ended. Its last groups may still be on their way: the route
                    // stays until they all arrived, or until the wait is over.
                    // Without SUBSCRIBE_START (it is optional) the count of served groups is
                    // unknown: if any were served (END > 0), wait out the timeout.
                    // Without SUBSCRIBE_END (before -05, or a publisher that sent none) the
                    // number of groups is unknown: the wait is the timeout.
                    let expected = match (self.start, self.end) {
                        _ if !version.has_track_stream() => u64::MAX,
                        (_, Some(0)) => 0,
                        (Some(start), Some(end)) => end.saturating_sub(start),
                        (None, Some(_)) | (_, None) => u64::MAX,
                    };
                    let until = cx.now + cx.config.trailing_groups_timeout;
                    if let Some(route) = cx.routes.get_mut(&self.id) {
                        route.ending = Some(Ending { expected, until });
                        // This sub-machine ends here: no one is left to act on a linger.
                        // The route lasts only as long as the trailing wait.
                        route.linger = None;
                    }
                    let _ = writer.stream_mut().finish();
                    return Poll::Ready(Ok(()));
                }
                Poll::Ready(Err(error)) => {
                    tracing::debug!(id = self.id, error = %error.error(), "the peer ended a subscription");
                    self.abort(cx, error.error());
                    return Poll::Ready(error.outcome());
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn abort(&self, cx: &mut Context, error: Error) {
        if let Some(route) = cx.routes.remove(&self.id) {
            route.track.abort(error);
        }
    }
}

impl<R: RecvStream> GroupRead<R> {
    pub(crate) fn new(reader: Reader<R>, cx: &Context) -> Self {
        let (stream, buffered) = reader.into_parts();
        let mut decoder = GroupDecoder::new(cx.version, cx.config.limits.max_frame_size);
        decoder.push(&buffered);
        Self {
            stream,
            decoder,
            group: None,
            finished: false,
            receiving: ReceivingBytes::new(cx.receiving_group_bytes.clone()),
        }
    }

    pub(crate) fn poll(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        loop {
            match self.decoder.next_item() {
                Ok(Some(GroupItem::Header(header))) => {
                    // A group at the largest sequence leaves no room for the exclusive end
                    // a SUBSCRIBE_END carries: refused here, alone (a peer that sends one
                    // must not fail every session that serves the track onward).
                    if header.sequence >= crate::coding::varint::MAX_VARINT {
                        tracing::debug!(
                            sequence = header.sequence,
                            "stopping a group at the largest sequence"
                        );
                        self.stream.stop(Error::BoundsExceeded.to_code());
                        return Poll::Ready(Ok(()));
                    }
                    let Some(route) = cx.routes.get_mut(&header.subscribe_id) else {
                        // spec: a GROUP with an unknown subscribe id is stopped with code 0.
                        tracing::debug!(
                            id = header.subscribe_id,
                            "stopping a group for no subscription of ours"
                        );
                        self.stream.stop(Error::Cancel.to_code());
                        return Poll::Ready(Ok(()));
                    };
                    self.group = Some(route.track.create_group(header.sequence));
                    route.arrived += 1;
                }
                Ok(Some(GroupItem::Frame { timestamp, payload })) => {
                    if !self.receiving.admit(cx, payload.len() as u64) {
                        // A group is cached whole: one that never ends, or many unfinished
                        // at once, must not grow without bound. This group alone is
                        // refused; the session and the track go on.
                        self.stream.stop(Error::BoundsExceeded.to_code());
                        if let Some(group) = self.group.take() {
                            group.abort(Error::BoundsExceeded);
                        }
                        return Poll::Ready(Ok(()));
                    }
                    // Before -05 a frame carries no timestamp: it gets the time it arrived,
                    // in milliseconds (the timescale of the default track those versions
                    // have), as deployed peers stamp theirs.
                    let timestamp = timestamp.unwrap_or_else(|| {
                        let since = cx.now.saturating_duration_since(cx.epoch);
                        u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
                    });
                    let frame = Frame { timestamp, payload };
                    // The group's last frame, with the stream's end already here (a chat
                    // message: one frame, then the FIN, in one packet): the frame and the
                    // end go to the group at once, and a relay forwarding it writes them
                    // in one go, its FIN riding with the bytes rather than alone after them
                    // (which quiche can lose; `moq-runtime/src/quic/fins.rs`).
                    if self.decoder.buffered() == 0 && self.stream.at_end() {
                        if let Some(group) = self.group.take() {
                            group.finish_with(frame);
                        }
                    } else if let Some(group) = self.group.as_mut() {
                        group.write_frame(frame);
                    }
                }
                Ok(None) if self.finished => {
                    return Poll::Ready(match self.decoder.finish() {
                        Ok(()) => {
                            if let Some(group) = self.group.take() {
                                group.finish();
                            }
                            Ok(())
                        }
                        Err(error) => self.fail(error),
                    });
                }
                Ok(None) => match self.stream.poll_read(waiter) {
                    Poll::Ready(Ok(Some(chunk))) => self.decoder.push(&chunk),
                    Poll::Ready(Ok(None)) => self.finished = true,
                    Poll::Ready(Err(error)) => {
                        // A reset is normal truncation (Old, Lagged, Evicted, …).
                        if let Some(group) = self.group.take() {
                            group.abort(error.into());
                        }
                        return Poll::Ready(Ok(()));
                    }
                    Poll::Pending => return Poll::Pending,
                },
                Err(error) => return Poll::Ready(self.fail(error)),
            }
        }
    }

    /// Malformed group bytes: the group is aborted and the session closes with the error.
    fn fail(&mut self, error: Error) -> Result<(), Error> {
        tracing::debug!(%error, "a malformed group stream");
        self.stream.stop(error.to_code());
        if let Some(group) = self.group.take() {
            group.abort(error);
        }
        Err(error)
    }
}
