//! The publisher half's announcements: serves the peer's announce streams from
//! [`SessionConfig::publish`](super::SessionConfig::publish), the snapshot and then every
//! change, each path by its best route not through the peer (spec: moq-lite-05,
//! "Publisher role"; -06, "Routing").

use std::task::Poll;

use moqx_kio::Waiter;

use super::machine::Context;
use super::publisher::{RequestSlot, from_peer};
use super::stream::{Reader, Writer, encoded};
use crate::Error;
use crate::coding::{
    Announce, AnnounceOk, AnnounceRequest, AnnounceStatus, Message, TypedAnnounce,
};
use crate::model::{Announced, Announcement};
use crate::transport::{RecvStream, SendStream};

/// The most announcements an announce stream encodes ahead of what its stream accepted.
const ANNOUNCE_BATCH: usize = 64;

/// Serves one announce stream: the snapshot, then every change under the prefix.
pub(crate) struct AnnounceServe<S, R> {
    writer: Writer<S>,
    reader: Reader<R>,
    announced: Option<Announced>,
    /// The subscriber's origin id: broadcasts whose route went through it are not offered.
    exclude_hop: u64,
    /// Paths announced active on this stream (an end is sent only for these), with the
    /// id -06 gives each START (the count of STARTs before it on the stream) and the
    /// original publisher's relay as the subscriber sees it (the route's first hop, or
    /// this side's id for a broadcast published here), and, when that publisher is
    /// unknown (0), the hops it was announced with.
    active: std::collections::HashMap<crate::model::Path, AnnouncedPath>,
    /// The id of the next START (-06).
    next_id: u64,
    /// Counts this stream against the session's bound while it lives.
    _slot: RequestSlot,
}

impl<S: SendStream, R: RecvStream> AnnounceServe<S, R> {
    pub(crate) fn new(writer: Writer<S>, reader: Reader<R>, slot: RequestSlot) -> Self {
        Self {
            writer,
            reader,
            announced: None,
            exclude_hop: 0,
            active: std::collections::HashMap::new(),
            next_id: 0,
            _slot: slot,
        }
    }

    pub(crate) fn poll(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        let version = cx.version;
        if self.announced.is_none() {
            let request = match self
                .reader
                .poll_message(waiter, |buf| AnnounceRequest::decode(buf, version))
            {
                Poll::Ready(Ok(Some(request))) => request,
                Poll::Ready(Ok(None)) => return Poll::Ready(Ok(())),
                Poll::Ready(Err(error)) => return Poll::Ready(error.outcome()),
                Poll::Pending => return Poll::Pending,
            };
            // A session with nothing to publish still answers, with an empty set, and keeps
            // the stream open: a deployed relay asks every client right after SETUP and
            // closes the whole session if this stream fails in any way (spec:
            // moq-lite-05.md, "What a deployed relay treats as fatal").
            let nothing = crate::model::Origin::new();
            let origin = cx.config.publish.as_ref().unwrap_or(&nothing);
            // -06 names the subscriber's origin in its SETUP, not in the request (this
            // side serves no bidi stream before that SETUP on -06).
            self.exclude_hop = match version.has_exclude_hop() {
                true => request.exclude_hop,
                false => cx.peer_origin,
            };
            if cx.peer_origin == 0 {
                // A -05 peer that named no origin in SETUP names it here: its
                // subscriptions are served by the same exclusion.
                cx.peer_origin = self.exclude_hop;
            }
            // The best route not through the subscriber, for each path (spec: -06,
            // "Routing": a subscriber the serving route flows through hears of the best
            // standby).
            let mut announced = origin.announced_excluding(request.prefix, self.exclude_hop);
            // The snapshot goes out right behind ANNOUNCE_OK, whose count must be exactly
            // the number of ANNOUNCEs that follow as the initial set (a deployed receiver
            // waits for that many): encode it first, filtered, then count.
            let mut initial = Vec::new();
            let mut count = 0u64;
            let own = cx.config.origin_id;
            for _ in 0..announced.initial_len() {
                let Some(announcement) = announced.try_next() else {
                    break;
                };
                if let Some(bytes) =
                    self.encode_announcement(announcement, announced.prefix(), version, own)
                {
                    initial.push(bytes);
                    count += 1;
                    cx.counters.announcements_sent += 1;
                }
            }
            // Before -05 there is no ANNOUNCE_OK: the initial set is just the first
            // announcements.
            if version.has_announce_ok() {
                let ok = AnnounceOk {
                    hop_id: own,
                    active_count: count,
                };
                match encoded(|buf| ok.encode(buf, version)) {
                    Ok(bytes) => self.writer.queue(bytes),
                    Err(error) => return Poll::Ready(Err(error)),
                }
            }
            for bytes in initial {
                self.writer.queue(bytes);
            }
            self.announced = Some(announced);
        }
        let Some(mut announced) = self.announced.take() else {
            return Poll::Ready(Ok(()));
        };
        // Changes are taken from the origin only once what was taken before went out: a
        // subscriber that does not read leaves them coalescing in the origin (one per
        // path), not piling up here as bytes.
        loop {
            match self.writer.poll_flush(waiter) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(error)) => return Poll::Ready(from_peer(error)),
                Poll::Pending => break,
            }
            let mut taken = false;
            while self.writer.queued() < ANNOUNCE_BATCH {
                let Poll::Ready(announcement) = announced.poll_next(waiter) else {
                    break;
                };
                taken = true;
                let own = cx.config.origin_id;
                if let Some(bytes) =
                    self.encode_announcement(announcement, announced.prefix(), version, own)
                {
                    self.writer.queue(bytes);
                    cx.counters.announcements_sent += 1;
                }
            }
            if !taken {
                break;
            }
        }
        self.announced = Some(announced);
        // The subscriber ends the stream with FIN (or a reset); it sends nothing else.
        match self.reader.poll_fill(waiter) {
            Poll::Ready(Ok(())) if self.reader.is_finished() => {
                let _ = self.writer.stream_mut().finish();
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Ok(())) => Poll::Ready(Err(Error::UnexpectedMessage)),
            Poll::Ready(Err(_)) => Poll::Ready(Ok(())),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: SendStream, R: RecvStream> AnnounceServe<S, R> {
    /// What to send for an announcement, if this subscriber should hear of it: not for a
    /// route through the subscriber itself (spec: never offer a route through the
    /// subscriber), not for one longer than the wire carries, and an end only for a path
    /// it was told is active. `own` is this side's origin id.
    ///
    /// Per version: before -05 the sender appends its own id to the hops; -05 and -06
    /// leave it out (it is in ANNOUNCE_OK). A path announced again is either the same
    /// publisher's broadcast by another route (the same first hop), which -05 and -06
    /// receivers take in place (a second ANNOUNCE on -05, RESTART with the same id on
    /// -06) and keep their subscriptions, or another broadcast taking the path, which goes
    /// out as an end and then the new one (END and START on -06), as deployed peers send
    /// a replacement. Before -05 a second active is fatal: always a replacement.
    fn encode_announcement(
        &mut self,
        announcement: Announcement,
        prefix: &crate::model::Path,
        version: crate::coding::Version,
        own: u64,
    ) -> Option<bytes::Bytes> {
        let (path, route) = match announcement {
            Announcement::Active { path, broadcast } => {
                let crate::model::Route { mut hops, cost } = broadcast.route();
                let through_subscriber = self.exclude_hop != 0 && hops.contains(&self.exclude_hop);
                let publisher = hops.first().copied().unwrap_or(own);
                if !version.has_announce_ok() && own != 0 {
                    hops.push(own);
                }
                if through_subscriber || hops.len() > crate::coding::MAX_HOPS {
                    // A route it had is now one it must not use: withdraw it.
                    (path, None)
                } else {
                    (path, Some((hops, cost, publisher)))
                }
            }
            Announcement::Ended { path } => (path, None),
        };
        let suffix: crate::model::Path = path.strip_prefix(prefix)?.into();
        let previous = self.active.get(&path).map(|announced| {
            // The same route as announced, from a publisher nobody named (a deployed
            // relay's clients have no id): the same broadcast re-priced, as a deployed
            // relay re-announces one that turned warm, not another taking the path.
            let same_unknown_chain = announced.publisher == 0
                && route.as_ref().is_some_and(|(hops, _, _)| {
                    !hops.is_empty() && announced.unknown_publisher_hops == *hops
                });
            (announced.id, announced.publisher, same_unknown_chain)
        });
        let mut messages = Vec::with_capacity(2);
        let mut id = self.next_id;
        match (&route, previous) {
            (None, None) => return None,
            (None, Some((previous, _, _))) => messages.push(ended(&suffix, previous, version)),
            // The same publisher by another route, or the same unnamed publisher's route
            // re-priced: in place.
            (Some((hops, cost, publisher)), Some((previous, previous_publisher, same_chain)))
                if version.has_announce_ok()
                    && ((*publisher != 0 && *publisher == previous_publisher) || same_chain) =>
            {
                id = previous;
                messages.push(rerouted(&suffix, previous, hops, *cost, version));
            }
            (Some((hops, cost, _)), previous) => {
                if let Some((previous, _, _)) = previous {
                    messages.push(ended(&suffix, previous, version));
                }
                messages.push(active(&suffix, hops, *cost, version));
            }
        }
        // A path that does not encode (over the part limit) is not offered.
        let bytes = encoded(|buf| {
            for message in &messages {
                message.encode(buf, version)?;
            }
            Ok(())
        })
        .ok()?;
        match route {
            None => {
                self.active.remove(&path);
            }
            Some((hops, _, publisher)) => {
                if id == self.next_id {
                    self.next_id += 1;
                }
                let unknown_publisher_hops = match publisher {
                    0 => hops,
                    _ => Vec::new(),
                };
                self.active.insert(
                    path,
                    AnnouncedPath {
                        id,
                        publisher,
                        unknown_publisher_hops,
                    },
                );
            }
        }
        Some(bytes)
    }
}

/// What an announce stream told its subscriber of one active path.
struct AnnouncedPath {
    /// The id of its START (-06).
    id: u64,
    /// The original publisher's relay (0: unknown).
    publisher: u64,
    /// The hops announced, kept only for an unknown publisher (else empty).
    unknown_publisher_hops: Vec<u64>,
}

/// One message of an announce stream, untyped (-03 to -05) or typed (-06).
enum AnnounceMessage {
    Untyped(Announce),
    Typed(TypedAnnounce),
}

impl AnnounceMessage {
    fn encode(
        &self,
        buf: &mut Vec<u8>,
        version: crate::coding::Version,
    ) -> Result<(), crate::coding::EncodeError> {
        match self {
            Self::Untyped(message) => message.encode(buf, version),
            Self::Typed(message) => message.encode(buf, version),
        }
    }
}

/// The end of the announcement of `suffix`, whose id (on -06) is `id`.
fn ended(suffix: &crate::model::Path, id: u64, version: crate::coding::Version) -> AnnounceMessage {
    match version.has_typed_announce() {
        true => AnnounceMessage::Typed(TypedAnnounce::End { id }),
        false => AnnounceMessage::Untyped(Announce {
            status: AnnounceStatus::Ended,
            suffix: suffix.clone(),
            hops: Vec::new(),
        }),
    }
}

/// A new announcement of `suffix` reached through `hops` at `cost` (what reaching it
/// through this side costs: -06 carries it, and the receiver adds its link's price).
fn active(
    suffix: &crate::model::Path,
    hops: &[u64],
    cost: u64,
    version: crate::coding::Version,
) -> AnnounceMessage {
    match version.has_typed_announce() {
        true => AnnounceMessage::Typed(TypedAnnounce::Start {
            suffix: suffix.clone(),
            hops: hops.to_vec(),
            cost,
        }),
        false => AnnounceMessage::Untyped(Announce {
            status: AnnounceStatus::Active,
            suffix: suffix.clone(),
            hops: hops.to_vec(),
        }),
    }
}

/// The announcement `id` of `suffix`, now reached by another route of the same publisher:
/// RESTART on -06, a second ANNOUNCE on -05 (which a receiver takes in place).
fn rerouted(
    suffix: &crate::model::Path,
    id: u64,
    hops: &[u64],
    cost: u64,
    version: crate::coding::Version,
) -> AnnounceMessage {
    match version.has_typed_announce() {
        true => AnnounceMessage::Typed(TypedAnnounce::Restart {
            id,
            hops: hops.to_vec(),
            cost,
        }),
        false => active(suffix, hops, cost, version),
    }
}
