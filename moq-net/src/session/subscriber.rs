//! The subscriber half: follows the peer's announcements into
//! [`SessionConfig::subscribe`](super::SessionConfig::subscribe), asks the peer for tracks
//! when local consumers want them (TRACK, then SUBSCRIBE), and writes the group streams
//! that arrive into those tracks (spec: moq-lite-05, "Subscriber role").

use std::task::Poll;

use kio::Waiter;

use super::machine::{Context, Ending, Linger, Open, Route, Spawn};
use super::stream::{Reader, Writer, encoded};
use crate::Error;
use crate::coding::{
    Announce, AnnounceOk, AnnounceRequest, AnnounceStatus, BidiStream, GroupDecoder, GroupItem,
    Message, Subscribe, SubscribeResponse, Track as TrackMessage, TrackInfo, TypedAnnounce,
};
use crate::model::{
    self as model, BroadcastProducer, GroupProducer, Path, Track, TrackProducer, TrackRequest,
};
use crate::transport::{RecvStream, SendStream};

/// Follows the peer's broadcasts under a prefix.
pub(crate) struct AnnounceDiscover<S, R> {
    prefix: Path,
    streams: Option<(Writer<S>, Reader<R>)>,
    /// ANNOUNCE_OK arrived (or the version has none).
    acknowledged: bool,
    /// The publisher's origin id from ANNOUNCE_OK: the last hop of every route it offers.
    publisher_hop: u64,
    /// -06: the path of each START not yet ended, by its implicit id, and whether this
    /// side published it (it drops one whose route loops, or that it cannot ask for); and
    /// the next id.
    ids: std::collections::HashMap<u64, (Path, bool)>,
    /// The paths in `ids` (a second START for one of them is a duplicate).
    open_paths: std::collections::HashSet<Path>,
    next_id: u64,
    /// The bytes of path the dropped ones hold (the published ones count in the session's
    /// remote broadcasts), against the same bound.
    dropped_bytes: usize,
}

/// Turns a remote broadcast's track requests into TRACK queries.
pub(crate) struct BroadcastRequests {
    path: Path,
    generation: u64,
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
    /// Frames and payload bytes received on this stream so far (against the session's
    /// group bounds).
    frames: u64,
    bytes: u64,
    /// This group's bytes in the session's count of bytes in unfinished received groups,
    /// given back when it ends.
    receiving: ReceivingBytes,
}

/// A group stream's share of the session's bytes in unfinished received groups
/// ([`max_receiving_group_bytes`](super::SessionConfig::max_receiving_group_bytes)).
pub(crate) struct ReceivingBytes {
    total: std::sync::Arc<std::sync::atomic::AtomicU64>,
    mine: u64,
}

impl ReceivingBytes {
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

impl AnnounceDiscover<(), ()> {
    pub(crate) fn new(prefix: Path) -> Self {
        Self {
            prefix,
            streams: None,
            acknowledged: false,
            publisher_hop: 0,
            ids: std::collections::HashMap::new(),
            open_paths: std::collections::HashSet::new(),
            next_id: 0,
            dropped_bytes: 0,
        }
    }

    pub(crate) fn with_streams<S: SendStream, R: RecvStream>(
        self,
        send: S,
        recv: R,
        cx: &Context,
    ) -> AnnounceDiscover<S, R> {
        let mut writer = Writer::new(send);
        let request = AnnounceRequest {
            prefix: self.prefix.clone(),
            exclude_hop: cx.config.origin_id,
        };
        let version = cx.version;
        let mut reader = Reader::new(recv, cx.config.max_message_bytes);
        match encoded(|buf| {
            BidiStream::Announce.encode(buf, version)?;
            request.encode(buf, version)
        }) {
            Ok(bytes) => writer.queue(bytes),
            Err(error) => {
                // The configured prefix cannot be asked for: give the stream up, and with it
                // discovery (the sub-machine ends when it sees the reset below).
                writer.stream_mut().reset(error.to_code());
                reader.stream_mut().stop(error.to_code());
            }
        }
        AnnounceDiscover {
            prefix: self.prefix,
            streams: Some((writer, reader)),
            // Before -05 announcements start at once, with no ANNOUNCE_OK.
            acknowledged: !version.has_announce_ok(),
            publisher_hop: 0,
            ids: std::collections::HashMap::new(),
            open_paths: std::collections::HashSet::new(),
            next_id: 0,
            dropped_bytes: 0,
        }
    }
}

impl<S: SendStream, R: RecvStream> AnnounceDiscover<S, R> {
    pub(crate) fn poll(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        let Some((writer, reader)) = self.streams.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        if let Poll::Ready(Err(_)) = writer.poll_flush(waiter) {
            cx.remote.clear();
            return Poll::Ready(Ok(()));
        }
        let version = cx.version;
        if !self.acknowledged {
            match reader.poll_message(waiter, |buf| AnnounceOk::decode(buf, version)) {
                Poll::Ready(Ok(Some(ok))) => {
                    self.acknowledged = true;
                    self.publisher_hop = ok.hop_id;
                }
                Poll::Ready(Ok(None)) => return Poll::Ready(Ok(())),
                // Refused (reset): this peer publishes nothing to us.
                Poll::Ready(Err(error)) => {
                    tracing::debug!(error = %error.error(), "the peer refused our announce request");
                    return Poll::Ready(error.outcome());
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        loop {
            let decoded = match version.has_typed_announce() {
                true => reader
                    .poll_message(waiter, |buf| TypedAnnounce::decode(buf, version))
                    .map_ok(|typed| typed.map(Incoming::Typed)),
                false => reader
                    .poll_message(waiter, |buf| Announce::decode(buf, version))
                    .map_ok(|announce| announce.map(Incoming::Untyped)),
            };
            let incoming = match decoded {
                Poll::Ready(Ok(Some(incoming))) => incoming,
                Poll::Ready(Ok(None)) => {
                    // The publisher ended the stream: everything it announced is gone.
                    tracing::debug!("the peer ended its announcements");
                    cx.remote.clear();
                    return Poll::Ready(Ok(()));
                }
                Poll::Ready(Err(error)) => {
                    tracing::debug!(error = %error.error(), "the peer's announcements failed");
                    cx.remote.clear();
                    return Poll::Ready(error.outcome());
                }
                Poll::Pending => return Poll::Pending,
            };
            match incoming {
                Incoming::Untyped(announce) => {
                    let path = self.prefix.join(announce.suffix.as_str());
                    match announce.status {
                        AnnounceStatus::Active => {
                            // Active again at an active path: the same publisher's
                            // broadcast by another route is taken in place (its
                            // subscriptions go on); another publisher's replaces it.
                            activate(cx, self.publisher_hop, path, announce.hops, None, false)?;
                        }
                        AnnounceStatus::Ended => cx.remote.remove(&path),
                    }
                }
                Incoming::Typed(TypedAnnounce::Start { suffix, hops, cost }) => {
                    // Every START takes the next id, the ones this side drops too: the
                    // sender counts them.
                    let id = self.next_id;
                    self.next_id += 1;
                    if self.ids.len() >= cx.config.max_announces {
                        tracing::debug!("the peer keeps more announcements open than allowed");
                        return Poll::Ready(Err(Error::BoundsExceeded));
                    }
                    let path = self.prefix.join(suffix.as_str());
                    if !self.open_paths.insert(path.clone()) {
                        // A new route is a RESTART on -06: a second START for a path not
                        // yet ended is fatal to deployed peers, and so it is here.
                        tracing::debug!(%path, "the peer started an announcement twice");
                        return Poll::Ready(Err(Error::Duplicate));
                    }
                    let kept = activate(
                        cx,
                        self.publisher_hop,
                        path.clone(),
                        hops,
                        Some(cost),
                        false,
                    )?;
                    track_dropped(&mut self.dropped_bytes, &path, None, kept, cx)?;
                    self.ids.insert(id, (path, kept));
                }
                Incoming::Typed(TypedAnnounce::End { id }) => match self.ids.remove(&id) {
                    Some((path, true)) => {
                        self.open_paths.remove(&path);
                        cx.remote.remove(&path);
                    }
                    Some((path, false)) => {
                        self.open_paths.remove(&path);
                        self.dropped_bytes = self.dropped_bytes.saturating_sub(path.as_str().len())
                    }
                    None => {
                        tracing::debug!(id, "the peer ended an announcement it never started");
                        return Poll::Ready(Err(Error::ProtocolViolation));
                    }
                },
                Incoming::Typed(TypedAnnounce::Restart { id, hops, cost }) => {
                    // One this side dropped (its route looped) may be good now: it starts.
                    let (path, was_kept) = match self.ids.get(&id) {
                        Some((path, kept)) => (path.clone(), *kept),
                        None => {
                            tracing::debug!(
                                id,
                                "the peer restarted an announcement it never started"
                            );
                            return Poll::Ready(Err(Error::ProtocolViolation));
                        }
                    };
                    // The same broadcast by another route: its hops change in place, and
                    // its subscriptions go on.
                    let kept = activate(
                        cx,
                        self.publisher_hop,
                        path.clone(),
                        hops,
                        Some(cost),
                        was_kept,
                    )?;
                    if was_kept && !kept {
                        // The new route loops: what was announced is gone.
                        cx.remote.remove(&path);
                    }
                    track_dropped(&mut self.dropped_bytes, &path, Some(was_kept), kept, cx)?;
                    self.ids.insert(id, (path, kept));
                }
            }
        }
    }
}

/// Counts `path` in `dropped_bytes` (the bytes of path an announce stream's dropped
/// announcements hold) as it goes from `before` (published or not; `None` for a new
/// START) to `kept` or not; past the session's bound on announced path bytes the session
/// closes, as it does for published ones.
fn track_dropped(
    dropped_bytes: &mut usize,
    path: &Path,
    before: Option<bool>,
    kept: bool,
    cx: &Context,
) -> Result<(), Error> {
    let len = path.as_str().len();
    match (before, kept) {
        (None | Some(true), false) => *dropped_bytes += len,
        (Some(false), true) => *dropped_bytes = dropped_bytes.saturating_sub(len),
        _ => {}
    }
    if *dropped_bytes > cx.config.max_announce_path_bytes {
        tracing::debug!("the peer's dropped announcements hold too much path");
        return Err(Error::BoundsExceeded);
    }
    Ok(())
}

/// Publishes the peer's broadcast at `path`, reached through `hops` as the peer wrote them
/// (and `publisher_hop`, its ANNOUNCE_OK's id) at the cost it announced (-06; before it,
/// one per hop behind the peer), plus the link's price; false if this side drops it
/// instead (its route loops through this side, it cannot be asked for, or this side
/// subscribes to nothing). An active path announced again is a restart: the new broadcast
/// replaces the old one, unless `in_place` (-06's RESTART) or, on a re-announcement
/// before -06, the route's first hop is the live one's (the same publisher by another
/// route), which only changes the live one's route.
fn activate(
    cx: &mut Context,
    publisher_hop: u64,
    path: Path,
    hops: Vec<u64>,
    announced_cost: Option<u64>,
    in_place: bool,
) -> Result<bool, Error> {
    if path.as_str().split('/').count() > crate::coding::MAX_PATH_PARTS {
        return Ok(false); // could not be asked for on the wire: ignore it
    }
    // spec: the route is the announced hops plus the publisher's own id (before -05
    // the publisher appended it itself, and -03 sends only how many there are); a
    // route through this endpoint has looped back and is dropped.
    let behind = announced_cost.unwrap_or(hops.len() as u64);
    let mut route = hops;
    if publisher_hop != 0 {
        route.push(publisher_hop);
    }
    let own = cx.config.origin_id;
    if own != 0 && route.contains(&own) {
        return Ok(false);
    }
    let Some(origin) = cx.config.subscribe.clone() else {
        return Ok(false);
    };
    // An untrusted peer's claimed route does not rank its broadcast: every
    // announcement of it counts as direct, published by the peer itself (its own id,
    // from ANNOUNCE_OK, if it gave one: a client that reconnects elsewhere with the same
    // id is recognised downstream as the same publisher, and its subscribers carry on).
    let route = match cx.config.trust_peer_routes {
        true => model::Route {
            hops: route,
            // A peer going away is the costliest route there is.
            cost: match cx.goaway {
                true => u64::MAX,
                false => behind.saturating_add(cx.config.link_cost),
            },
        },
        false => model::Route {
            hops: match publisher_hop {
                0 => Vec::new(),
                id => vec![id],
            },
            cost: 0,
        },
    };
    if let Some(live) = cx.remote.get(&path) {
        let untyped_same_publisher =
            !cx.version.has_typed_announce() && live.broadcast.route().same_publisher(&route);
        if in_place || untyped_same_publisher {
            live.broadcast.set_route(route);
            return Ok(true);
        }
    }
    let broadcast = BroadcastProducer::on_demand();
    broadcast.set_route(route);
    // Past the session's bounds on announcements, or at a path outside what this
    // session may publish (a relay hands it a scoped origin: spec, Unauthorized), the
    // whole session closes.
    let generation = cx.remote.insert(path.clone(), broadcast, |path, b| {
        origin.publish(path.clone(), b)
    })?;
    cx.spawned.push(Spawn::BroadcastRequests(BroadcastRequests {
        path,
        generation,
    }));
    Ok(true)
}

/// An announcement as the stream's version carries it.
enum Incoming {
    Untyped(Announce),
    Typed(TypedAnnounce),
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
                    let start = request.start();
                    let producer = serve_received(request, track, cx);
                    cx.opens.push_back(Open::Subscribe(SubscribePlan {
                        path: self.path.clone(),
                        track: producer,
                        start,
                    }));
                }
                // A subscription moved from another route of the same publisher knows
                // the track: no TRACK round trip, SUBSCRIBE from its first missing group
                // at once (spec: a subscriber may subscribe before TRACK_INFO arrives).
                Poll::Ready(Some(request)) if request.properties().is_some() => {
                    let track = request
                        .properties()
                        .cloned()
                        .unwrap_or_else(|| Track::new(request.name()));
                    let start = request.start();
                    let producer = serve_received(request, track, cx);
                    cx.opens.push_back(Open::Subscribe(SubscribePlan {
                        path: self.path.clone(),
                        track: producer,
                        start,
                    }));
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
            streams: Some((writer, Reader::new(recv, cx.config.max_message_bytes))),
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
        let start = request.start();
        let producer = serve_received(request, track, cx);
        cx.opens.push_back(Open::Subscribe(SubscribePlan {
            path: self.path.clone(),
            track: producer,
            start,
        }));
        Poll::Ready(Ok(()))
    }

    fn reject(&mut self, error: Error) {
        if let Some(request) = self.request.take() {
            request.reject(error);
        }
    }
}

/// Serves `request` with a track received from the peer, cached as the session is
/// configured to and charged to its memory budget.
fn serve_received(
    request: crate::model::TrackRequest,
    mut track: Track,
    cx: &Context,
) -> crate::model::TrackProducer {
    track.cache_groups = cx.config.cache_groups;
    track.cache_bytes = cx.config.cache_bytes;
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
            streams: (writer, Reader::new(recv, cx.config.max_message_bytes)),
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
        let Some(route) = cx.routes.get_mut(&self.id) else {
            return Poll::Ready(Ok(()));
        };
        // Nobody wants the track any more: after the linger, cancel upstream (FIN) and end
        // it locally. Only once it is retired: a subscriber may have taken the listed track
        // just now, and then the subscription goes on.
        loop {
            if route.track.poll_unused(waiter).is_pending() {
                route.linger = None;
                break;
            }
            let until = match &route.linger {
                Some(linger) => linger.until,
                None => {
                    let until = cx.now + cx.config.unused_track_linger;
                    route.linger = Some(Linger {
                        until,
                        wake: waiter.waker(),
                    });
                    until
                }
            };
            if cx.now < until {
                break; // the machine wakes this sub-machine then (`settle_routes`)
            }
            if !route.track.retire_if_unused() {
                route.linger = None;
                continue; // someone came back: watch for them leaving
            }
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
        let mut decoder = GroupDecoder::new(cx.version, cx.config.max_frame_size);
        decoder.push(&buffered);
        Self {
            stream,
            decoder,
            group: None,
            finished: false,
            frames: 0,
            bytes: 0,
            receiving: ReceivingBytes {
                total: cx.receiving_group_bytes.clone(),
                mine: 0,
            },
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
                    cx.counters.frames_received += 1;
                    cx.counters.payload_bytes_received += payload.len() as u64;
                    self.frames += 1;
                    self.bytes += payload.len() as u64;
                    let no_room = cx
                        .config
                        .memory_budget
                        .as_ref()
                        .filter(|memory| !memory.has_room_for(payload.len() as u64));
                    if let Some(memory) = no_room {
                        memory.note_frame_refused();
                    }
                    if self.frames > cx.config.max_group_frames
                        || self.bytes > cx.config.max_group_bytes
                        || no_room.is_some()
                        || !self
                            .receiving
                            .try_add(payload.len() as u64, cx.config.max_receiving_group_bytes)
                    {
                        // A group is cached whole: one that never ends, or many unfinished
                        // at once, must not grow without bound. This group alone is
                        // refused; the session and the track go on.
                        tracing::debug!(
                            frames = self.frames,
                            bytes = self.bytes,
                            "stopping a group past the session's group bounds"
                        );
                        cx.counters.groups_refused += 1;
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
                    if let Some(group) = self.group.as_mut() {
                        group.write(timestamp, payload);
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
