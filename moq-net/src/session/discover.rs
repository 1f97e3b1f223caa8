//! The subscriber half's discovery: follows the peer's announcements under a prefix into
//! [`SessionConfig::subscribe`](super::SessionConfig::subscribe), publishing each broadcast
//! with its route (spec: moq-lite-05, "Subscriber role"; -06, "Routing").

use std::task::Poll;

use moqx_kio::Waiter;

use super::machine::{Context, Spawn};
use super::stream::{Reader, Writer, encoded};
use super::subscriber::BroadcastRequests;
use crate::Error;
use crate::coding::{
    Announce, AnnounceOk, AnnounceRequest, AnnounceStatus, BidiStream, Message, TypedAnnounce,
};
use crate::model::{self as model, BroadcastProducer, Path};
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
        let mut reader = Reader::new(recv, cx.config.limits.max_message_bytes);
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
                    tracing::debug!(%path, status = ?announce.status, hops = ?announce.hops, "the peer announced");
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
                    tracing::debug!(%suffix, ?hops, cost, id = self.next_id, "the peer started an announcement");
                    // Every START takes the next id, the ones this side drops too: the
                    // sender counts them.
                    let id = self.next_id;
                    self.next_id += 1;
                    if self.ids.len() >= cx.config.limits.max_announces {
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
                        tracing::debug!(id, %path, "the peer ended an announcement");
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
                    tracing::debug!(id, ?hops, cost, "the peer restarted an announcement");
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
                        tracing::debug!(%path, "a restarted announcement's route loops: dropped");
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
    if *dropped_bytes > cx.config.limits.max_announce_path_bytes {
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
        let live_route = live.broadcast.route();
        // Before -06 a re-announcement is in place when it is the same publisher by
        // another route, or the same route of a publisher nobody named (a deployed
        // relay re-announces a broadcast it re-priced, and its clients have no id).
        let same_unnamed_chain =
            live_route.publisher() == 0 && !route.hops.is_empty() && live_route.hops == route.hops;
        let untyped_same_publisher = !cx.version.has_typed_announce()
            && (live_route.same_publisher(&route) || same_unnamed_chain);
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
