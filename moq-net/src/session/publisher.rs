//! The publisher half: serves the peer's track, subscribe and fetch streams from
//! [`SessionConfig::publish`](super::SessionConfig::publish) (its announce streams:
//! `announce.rs`), and writes one uni stream per group (spec: moq-lite-05, "Publisher
//! role").

use std::num::NonZeroU64;
use std::task::Poll;

use moqx_kio::Waiter;

pub(crate) use super::group_write::{Control, GroupWrite};
use super::machine::{Context, Open};
use super::stream::{ReadError, Reader, Writer, encoded};
use crate::Error;
use crate::coding::{
    Fetch, FrameHeader, Message, Subscribe, SubscribeResponse, SubscribeUpdate,
    Track as TrackMessage, TrackInfo,
};
use crate::model::{BroadcastConsumer, FollowedTrack, GroupConsumer, PendingTrack, TrackConsumer};
use crate::transport::{RecvStream, SendStream};

/// Answers one TRACK with TRACK_INFO.
pub(crate) struct TrackServe<S, R> {
    writer: Writer<S>,
    reader: Reader<R>,
    lookup: Lookup<TrackMessage>,
    answered: bool,
    /// Counts this request against the session's bound while it lives.
    _slot: RequestSlot,
}

/// The first half of serving TRACK, SUBSCRIBE or FETCH: read the request, find the track
/// in the published origin (waiting for an on-demand one), or refuse the stream.
enum Lookup<M> {
    Reading,
    Resolving {
        request: M,
        broadcast: BroadcastConsumer,
        pending: PendingTrack,
    },
}

/// A request's track, found: the request, the track, and the broadcast it is a track of.
type Found<M> = (M, TrackConsumer, BroadcastConsumer);

/// A request naming a broadcast and a track.
trait TrackRequestMessage: Message + Clone {
    fn names(&self) -> (&crate::model::Path, &str);

    /// The first group asked for, passed on to an on-demand track's producer (a relay
    /// asking upstream), so that the groups are there to serve; `None` for the latest.
    fn start(&self) -> Option<u64> {
        None
    }

    /// Whether the request wants the track's groups (SUBSCRIBE, FETCH), not only its
    /// properties (TRACK): an on-demand track is subscribed upstream only for those.
    fn subscribes(&self) -> bool {
        true
    }
}

impl TrackRequestMessage for TrackMessage {
    fn names(&self) -> (&crate::model::Path, &str) {
        (&self.broadcast, &self.track)
    }

    fn subscribes(&self) -> bool {
        false
    }
}

impl TrackRequestMessage for Subscribe {
    fn names(&self) -> (&crate::model::Path, &str) {
        (&self.broadcast, &self.track)
    }

    fn start(&self) -> Option<u64> {
        self.start
    }
}

impl TrackRequestMessage for Fetch {
    fn names(&self) -> (&crate::model::Path, &str) {
        (&self.broadcast, &self.track)
    }
}

impl<M: TrackRequestMessage> Lookup<M> {
    /// The request and its track once found; `Ready(Ok(None))` when the stream ended or
    /// was refused (the sub-machine is done); `Ready(Err)` for a malformed request.
    fn poll<S: SendStream, R: RecvStream>(
        &mut self,
        waiter: &Waiter,
        cx: &Context,
        writer: &mut Writer<S>,
        reader: &mut Reader<R>,
    ) -> Poll<Result<Option<Found<M>>, Error>> {
        loop {
            match self {
                Lookup::Reading => {
                    let version = cx.version;
                    let request = match reader.poll_message(waiter, |buf| M::decode(buf, version)) {
                        Poll::Ready(Ok(Some(request))) => request,
                        Poll::Ready(Ok(None)) => return Poll::Ready(Ok(None)),
                        Poll::Ready(Err(error)) => {
                            return Poll::Ready(error.outcome().map(|()| None));
                        }
                        Poll::Pending => return Poll::Pending,
                    };
                    let (broadcast, track) = request.names();
                    tracing::debug!(%broadcast, track, "the peer asks for a track");
                    match resolve(cx, broadcast, track, request.start(), request.subscribes()) {
                        Ok((broadcast, pending)) => {
                            *self = Lookup::Resolving {
                                request,
                                broadcast,
                                pending,
                            }
                        }
                        Err(error) => {
                            refuse(writer, reader, error);
                            return Poll::Ready(Ok(None));
                        }
                    }
                }
                Lookup::Resolving {
                    request,
                    broadcast,
                    pending,
                } => {
                    return match pending.poll_track(waiter) {
                        Poll::Ready(Ok(track)) => {
                            let found = (request.clone(), track, broadcast.clone());
                            *self = Lookup::Reading;
                            Poll::Ready(Ok(Some(found)))
                        }
                        Poll::Ready(Err(error)) => {
                            refuse(writer, reader, error);
                            Poll::Ready(Ok(None))
                        }
                        Poll::Pending => Poll::Pending,
                    };
                }
            }
        }
    }
}

/// Serves one subscription: a group stream per group, START and END on the stream.
pub(crate) struct SubscribeServe<S, R> {
    writer: Writer<S>,
    reader: Reader<R>,
    state: SubscribeState,
    /// Counts this request against the session's bound while it lives.
    _slot: RequestSlot,
}

/// One of a bounded number of requests served at once (the session's
/// [`max_subscriptions`](super::SessionLimits::max_subscriptions) or
/// [`max_announce_requests`](super::SessionLimits::max_announce_requests)), held by the
/// request's sub-machine and given back when it drops.
pub(crate) struct RequestSlot {
    count: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl RequestSlot {
    /// A slot, unless `max` are taken. Only the session machine takes slots (one thread at
    /// a time), so the check and the increment need not be one atomic step.
    pub(crate) fn take(
        count: &std::sync::Arc<std::sync::atomic::AtomicUsize>,
        max: usize,
    ) -> Option<Self> {
        use std::sync::atomic::Ordering::Relaxed;
        if count.load(Relaxed) >= max {
            return None;
        }
        count.fetch_add(1, Relaxed);
        Some(Self {
            count: count.clone(),
        })
    }
}

impl Drop for RequestSlot {
    fn drop(&mut self) {
        self.count
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

enum SubscribeState {
    Looking(Lookup<Subscribe>),
    Serving {
        request: Subscribe,
        /// Follows the broadcast to its publisher's other routes, if the one it is read
        /// from fails or is priced out.
        track: FollowedTrack,
        /// What the group writers follow: a cancel (they stop) and the subscriber's
        /// priority (they re-prioritize). Dropped, not cancelled, when the track ends
        /// normally: groups in flight are still written.
        control: moqx_kio::Producer<Control>,
        started: bool,
        /// One past the highest sequence served.
        end: u64,
    },
    /// The track ended: the stream is finished once `groups` (before -05) has no group
    /// writer left. Without SUBSCRIBE_END, a deployed subscriber takes the FIN for the end
    /// of the track at the highest group it has seen: a group whose stream is not open
    /// yet would be lost.
    Ending {
        groups: Option<moqx_kio::Producer<Control>>,
    },
}

/// Answers one FETCH with the cached group's frames.
pub(crate) struct FetchServe<S, R> {
    writer: Writer<S>,
    reader: Reader<R>,
    state: FetchState,
    /// Counts this request against the session's bound while it lives.
    _slot: RequestSlot,
}

enum FetchState {
    Looking(Lookup<Fetch>),
    Writing { group: GroupConsumer, previous: u64 },
    Ending,
}

/// Resets both halves of a request stream with `error`.
fn refuse<S: SendStream, R: RecvStream>(
    writer: &mut Writer<S>,
    reader: &mut Reader<R>,
    error: Error,
) {
    tracing::debug!(code = error.to_code(), %error, "refusing the peer's request");
    writer.stream_mut().reset(error.to_code());
    reader.stream_mut().stop(error.to_code());
}

impl<S: SendStream, R: RecvStream> TrackServe<S, R> {
    pub(crate) fn new(writer: Writer<S>, reader: Reader<R>, slot: RequestSlot) -> Self {
        Self {
            writer,
            reader,
            lookup: Lookup::Reading,
            answered: false,
            _slot: slot,
        }
    }

    pub(crate) fn poll(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        if !self.answered {
            let track = match self
                .lookup
                .poll(waiter, cx, &mut self.writer, &mut self.reader)
            {
                Poll::Ready(Ok(Some((_, track, _)))) => track,
                Poll::Ready(Ok(None)) => return Poll::Ready(Ok(())),
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                Poll::Pending => return Poll::Pending,
            };
            let info = track_info(&track);
            let version = cx.version;
            match encoded(|buf| info.encode(buf, version)) {
                Ok(bytes) => self.writer.queue(bytes),
                // What the track says cannot be said on the wire: this request fails,
                // not the session.
                Err(error) => {
                    refuse(&mut self.writer, &mut self.reader, error);
                    return Poll::Ready(Ok(()));
                }
            }
            self.answered = true;
        }
        self.writer.poll_finish(waiter).map(Ok)
    }
}

/// TRACK_INFO for a track.
fn track_info(track: &TrackConsumer) -> TrackInfo {
    let properties = track.track();
    TrackInfo {
        priority: properties.priority,
        ordered: properties.ordered,
        max_latency: properties.max_latency,
        timescale: NonZeroU64::new(properties.timescale).unwrap_or(NonZeroU64::MIN),
    }
}

/// Finds a track the peer asked for in the published origin. A path outside what the
/// session may read (a relay's scoped origin) is Unauthorized, whether or not something is
/// there: the answer tells nothing about paths outside the session's rights.
pub(crate) fn resolve(
    cx: &Context,
    broadcast: &crate::model::Path,
    track: &str,
    start: Option<u64>,
    subscribes: bool,
) -> Result<(BroadcastConsumer, PendingTrack), Error> {
    let origin = cx.config.publish.as_ref().ok_or(Error::NotFound)?;
    if !origin.allows(broadcast.clone()) {
        return Err(Error::Unauthorized);
    }
    // spec (-06, "Routing"): a subscription is served by the same exclusion as the
    // announcements, so that none goes round through the peer that asked.
    let broadcast = origin
        .consume_broadcast_excluding(broadcast.clone(), cx.peer_origin)
        .ok_or(Error::NotFound)?;
    let pending = match (subscribes, start) {
        (false, _) => broadcast.track_info(track),
        (true, Some(start)) => broadcast.subscribe_track_from(track, start),
        (true, None) => broadcast.subscribe_track(track),
    };
    Ok((broadcast, pending))
}

/// A stream error caused by the peer ends only that stream.
pub(super) fn from_peer(_error: Error) -> Result<(), Error> {
    Ok(())
}

impl<S: SendStream, R: RecvStream> SubscribeServe<S, R> {
    pub(crate) fn new(writer: Writer<S>, reader: Reader<R>, slot: RequestSlot) -> Self {
        Self {
            writer,
            reader,
            state: SubscribeState::Looking(Lookup::Reading),
            _slot: slot,
        }
    }

    pub(crate) fn poll(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        let version = cx.version;
        loop {
            match &mut self.state {
                SubscribeState::Looking(lookup) => {
                    let (request, track, broadcast) =
                        match lookup.poll(waiter, cx, &mut self.writer, &mut self.reader) {
                            Poll::Ready(Ok(Some(found))) => found,
                            Poll::Ready(Ok(None)) => return Poll::Ready(Ok(())),
                            Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                            Poll::Pending => return Poll::Pending,
                        };
                    let track = match request.start {
                        Some(start) => track.consume_from(start),
                        None => track,
                    };
                    let track = match &cx.config.publish {
                        Some(origin) => FollowedTrack::following(
                            origin,
                            request.broadcast.clone(),
                            cx.peer_origin,
                            broadcast,
                            track,
                        ),
                        None => FollowedTrack::fixed(track),
                    };
                    // Before -05 the subscriber waits for one SUBSCRIBE_OK, sent at once
                    // and before any group (as deployed publishers do); it says what the
                    // subscriber asked for, which is what it gets.
                    if !version.has_track_stream() {
                        let ok = SubscribeResponse::Ok {
                            priority: request.priority,
                            ordered: request.ordered,
                            max_latency: request.max_latency,
                            start: request.start,
                            end: request.end,
                        };
                        match encoded(|buf| ok.encode(buf, version)) {
                            Ok(bytes) => self.writer.queue(bytes),
                            Err(error) => {
                                refuse(&mut self.writer, &mut self.reader, error);
                                return Poll::Ready(Ok(()));
                            }
                        }
                    }
                    let subscriber_priority = request.priority;
                    self.state = SubscribeState::Serving {
                        request,
                        track,
                        control: moqx_kio::Producer::new(Control {
                            cancelled: false,
                            priority: subscriber_priority,
                        }),
                        started: false,
                        end: 0,
                    };
                }
                SubscribeState::Serving {
                    request,
                    track,
                    control,
                    started,
                    end,
                } => {
                    // Updates and the subscriber's FIN.
                    loop {
                        match self
                            .reader
                            .poll_message(waiter, |buf| SubscribeUpdate::decode(buf, version))
                        {
                            Poll::Ready(Ok(Some(update))) => {
                                // spec: SUBSCRIBE_UPDATE re-prioritizes groups in flight.
                                request.priority = update.priority;
                                request.end = update.end;
                                control.update(|control| control.priority = update.priority);
                            }
                            Poll::Ready(Ok(None)) | Poll::Ready(Err(ReadError::Stream(_))) => {
                                // Cancelled: stop the group writers, FIN our side.
                                control.update(|control| control.cancelled = true);
                                let _ = self.writer.stream_mut().finish();
                                return Poll::Ready(Ok(()));
                            }
                            Poll::Ready(Err(ReadError::Malformed(error))) => {
                                control.update(|control| control.cancelled = true);
                                return Poll::Ready(Err(error));
                            }
                            Poll::Pending => break,
                        }
                    }
                    // New groups.
                    loop {
                        if request.end.is_some_and(|last| *end > last) {
                            break; // paused at the end bound until an update raises it
                        }
                        let lagged = track.lagged();
                        let next = track.poll_next_group(waiter);
                        cx.counters.groups_skipped += track.lagged() - lagged;
                        match next {
                            Poll::Ready(Ok(Some(group))) => {
                                let sequence = group.sequence();
                                // SUBSCRIBE_START from -05 (before it, the OK said it).
                                if !*started && version.has_track_stream() {
                                    *started = true;
                                    let start = SubscribeResponse::Start { group: sequence };
                                    match encoded(|buf| start.encode(buf, version)) {
                                        Ok(bytes) => self.writer.queue(bytes),
                                        Err(error) => {
                                            control.update(|control| control.cancelled = true);
                                            refuse(&mut self.writer, &mut self.reader, error);
                                            return Poll::Ready(Ok(()));
                                        }
                                    }
                                }
                                *end = (*end).max(sequence.saturating_add(1));
                                cx.opens.push_back(Open::Group(GroupWrite::plan(
                                    request.id,
                                    group,
                                    request.priority,
                                    control.consume(),
                                )));
                            }
                            // Before -05 the end is the FIN alone, once every group went.
                            Poll::Ready(Ok(None)) if !version.has_track_stream() => {
                                self.state = SubscribeState::Ending {
                                    groups: Some(control.clone()),
                                };
                                break;
                            }
                            Poll::Ready(Ok(None)) => {
                                let end_message = SubscribeResponse::End { group: *end };
                                match encoded(|buf| end_message.encode(buf, version)) {
                                    Ok(bytes) => self.writer.queue(bytes),
                                    // Regression: a group at the largest sequence made the
                                    // exclusive end unencodable, and the error closed every
                                    // session serving the track. Only this subscription
                                    // fails now.
                                    Err(error) => {
                                        control.update(|control| control.cancelled = true);
                                        refuse(&mut self.writer, &mut self.reader, error);
                                        return Poll::Ready(Ok(()));
                                    }
                                }
                                self.state = SubscribeState::Ending { groups: None };
                                break;
                            }
                            Poll::Ready(Err(error)) => {
                                refuse(&mut self.writer, &mut self.reader, error);
                                return Poll::Ready(Ok(()));
                            }
                            Poll::Pending => break,
                        }
                    }
                    if let SubscribeState::Serving { control, .. } = &self.state {
                        if let Poll::Ready(Err(_)) = self.writer.poll_flush(waiter) {
                            // The subscriber stopped the stream: that cancels.
                            control.update(|control| control.cancelled = true);
                            return Poll::Ready(Ok(()));
                        }
                        return Poll::Pending;
                    }
                }
                SubscribeState::Ending { groups } => {
                    if groups
                        .as_ref()
                        .is_some_and(|groups| groups.poll_unused(waiter).is_pending())
                    {
                        return match self.writer.poll_flush(waiter) {
                            Poll::Ready(Err(error)) => Poll::Ready(from_peer(error)),
                            _ => Poll::Pending,
                        };
                    }
                    return self.writer.poll_finish(waiter).map(Ok);
                }
            }
        }
    }
}

impl<S: SendStream, R: RecvStream> FetchServe<S, R> {
    pub(crate) fn new(writer: Writer<S>, reader: Reader<R>, slot: RequestSlot) -> Self {
        Self {
            writer,
            reader,
            state: FetchState::Looking(Lookup::Reading),
            _slot: slot,
        }
    }

    pub(crate) fn poll(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        let version = cx.version;
        loop {
            match &mut self.state {
                FetchState::Looking(lookup) => {
                    let (request, track, _) =
                        match lookup.poll(waiter, cx, &mut self.writer, &mut self.reader) {
                            Poll::Ready(Ok(Some(found))) => found,
                            Poll::Ready(Ok(None)) => return Poll::Ready(Ok(())),
                            Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                            Poll::Pending => return Poll::Pending,
                        };
                    // The group, if the cache still holds it: the first cached group at or
                    // after the sequence must be exactly it.
                    let mut from = track.consume_from(request.group);
                    let group = match from.poll_next_group(waiter) {
                        Poll::Ready(Ok(Some(group))) if group.sequence() == request.group => group,
                        _ => {
                            refuse(&mut self.writer, &mut self.reader, Error::NotFound);
                            return Poll::Ready(Ok(()));
                        }
                    };
                    self.state = FetchState::Writing { group, previous: 0 };
                }
                FetchState::Writing { group, previous } => {
                    loop {
                        match group.poll_read_frame(waiter) {
                            Poll::Ready(Ok(Some(frame))) => {
                                let header = FrameHeader::new(
                                    *previous,
                                    frame.timestamp,
                                    frame.payload.len() as u64,
                                );
                                *previous = frame.timestamp;
                                match encoded(|buf| header.encode(buf, version)) {
                                    Ok(bytes) => self.writer.queue(bytes),
                                    Err(error) => {
                                        refuse(&mut self.writer, &mut self.reader, error);
                                        return Poll::Ready(Ok(()));
                                    }
                                }
                                self.writer.queue(frame.payload);
                            }
                            Poll::Ready(Ok(None)) => {
                                self.state = FetchState::Ending;
                                break;
                            }
                            Poll::Ready(Err(error)) => {
                                refuse(&mut self.writer, &mut self.reader, error);
                                return Poll::Ready(Ok(()));
                            }
                            Poll::Pending => break,
                        }
                    }
                    if matches!(self.state, FetchState::Writing { .. }) {
                        if let Poll::Ready(Err(error)) = self.writer.poll_flush(waiter) {
                            return Poll::Ready(from_peer(error));
                        }
                        return Poll::Pending;
                    }
                }
                FetchState::Ending => return self.writer.poll_finish(waiter).map(Ok),
            }
        }
    }
}
