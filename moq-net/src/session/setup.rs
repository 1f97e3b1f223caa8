//! Session start and stream dispatch: sending and reading SETUP, and reading the type of
//! every stream the peer opens to pick its sub-machine.
//!
//! spec: moq-lite-05, "Session start": each side opens one uni stream, writes `01` and a
//! SETUP, and FINs. A server serves nothing until the client's SETUP arrives; before it, any
//! other uni stream is stopped. A client on raw QUIC sends the Path parameter.

use std::task::Poll;

use moqx_kio::Waiter;

use super::Side;
use super::announce::AnnounceServe;
use super::discover::AnnounceDiscover;
use super::machine::{Context, Open, Step, Task};
use super::publisher::{FetchServe, RequestSlot, SubscribeServe, TrackServe};
use super::stream::{ReadError, Reader, Writer, encoded};
use super::subscriber::GroupRead;
use crate::Error;
use crate::coding::{BidiStream, GoAway, Message, Setup, UniStream};
use crate::transport::{self, RecvStream, SendStream};

/// Writes this side's Setup stream.
pub(crate) struct SetupSend<S> {
    writer: Writer<S>,
    failed: Option<Error>,
}

/// Sends GOAWAY on a bidi stream of its own, then FIN.
pub(crate) struct GoAwaySend<S, R> {
    writer: Writer<S>,
    _reader: Reader<R>,
    failed: Option<Error>,
}

/// Reads the peer's GOAWAY: where it asks to be reconnected to.
pub(crate) struct GoAwayRecv<R> {
    reader: Reader<R>,
}

/// Reads the peer's SETUP.
pub(crate) struct SetupRead<R> {
    reader: Reader<R>,
    received: bool,
}

/// A uni stream the peer opened, until its type is read.
pub(crate) struct UniIncoming<R> {
    reader: Option<Reader<R>>,
}

/// A bidi stream the peer opened, until its type is read.
pub(crate) struct BidiIncoming<S, R> {
    streams: Option<(Writer<S>, Reader<R>)>,
}

impl<S: SendStream> SetupSend<S> {
    pub(crate) fn new(stream: S, cx: &Context) -> Self {
        let mut writer = Writer::new(stream);
        let setup = Setup {
            path: match cx.side {
                Side::Client => cx.config.path.clone(),
                Side::Server => None,
            },
            origin: std::num::NonZeroU64::new(cx.config.origin_id),
            // A link priced here tells the peer (absent: the default of 1).
            cost: (cx.config.link_cost != 1).then_some(cx.config.link_cost),
            ..Setup::default()
        };
        let version = cx.version;
        let failed = match encoded(|buf| {
            UniStream::Setup.encode(buf, version)?;
            setup.encode(buf, version)
        }) {
            Ok(bytes) => {
                writer.queue(bytes);
                None
            }
            Err(error) => Some(error),
        };
        Self { writer, failed }
    }

    pub(crate) fn poll(&mut self, waiter: &Waiter) -> Poll<Result<(), Error>> {
        if let Some(error) = self.failed.take() {
            return Poll::Ready(Err(error));
        }
        match self.writer.poll_flush(waiter) {
            Poll::Ready(Ok(())) => {
                Poll::Ready(self.writer.stream_mut().finish().map_err(Error::from))
            }
            other => other,
        }
    }
}

impl<S: SendStream, R: RecvStream> GoAwaySend<S, R> {
    pub(crate) fn new(send: S, recv: R, uri: String, cx: &Context) -> Self {
        let mut writer = Writer::new(send);
        let version = cx.version;
        let message = GoAway { uri };
        let failed = match encoded(|buf| {
            BidiStream::Goaway.encode(buf, version)?;
            message.encode(buf, version)
        }) {
            Ok(bytes) => {
                writer.queue(bytes);
                None
            }
            Err(error) => Some(error),
        };
        Self {
            writer,
            _reader: Reader::new(recv, cx.config.limits.max_message_bytes),
            failed,
        }
    }

    pub(crate) fn poll(&mut self, waiter: &Waiter) -> Poll<Result<(), Error>> {
        if let Some(error) = self.failed.take() {
            return Poll::Ready(Err(error));
        }
        match self.writer.poll_flush(waiter) {
            Poll::Ready(Ok(())) => {
                let _ = self.writer.stream_mut().finish();
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(_)) => Poll::Ready(Ok(())),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<R: RecvStream> GoAwayRecv<R> {
    pub(crate) fn poll(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        let version = cx.version;
        let uri = match self
            .reader
            .poll_message(waiter, |buf| GoAway::decode(buf, version))
        {
            Poll::Ready(Ok(Some(goaway))) => goaway.uri,
            // A GOAWAY cut short still says the peer is going away: to the same place.
            Poll::Ready(Ok(None)) | Poll::Ready(Err(_)) => String::new(),
            Poll::Pending => return Poll::Pending,
        };
        tracing::info!(uri = %moq_net_redacted(&uri), "the peer is going away (GOAWAY)");
        cx.goaway_uri.get_or_insert(uri);
        Poll::Ready(Ok(()))
    }
}

/// `uri` with any credentials in it hidden (it is logged).
fn moq_net_redacted(uri: &str) -> crate::redact::Redacted<'_> {
    crate::redact::Redacted(uri)
}

impl<R: RecvStream> SetupRead<R> {
    pub(crate) fn new(reader: Reader<R>) -> Self {
        Self {
            reader,
            received: false,
        }
    }

    pub(crate) fn poll(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        let version = cx.version;
        if !self.received {
            match self
                .reader
                .poll_message(waiter, |buf| Setup::decode(buf, version))
            {
                Poll::Ready(Ok(Some(setup))) => {
                    tracing::debug!(?setup, "the peer's SETUP");
                    if cx.side == Side::Server
                        && let Err(error) = authorize(cx, &setup)
                    {
                        tracing::debug!(%error, "the authorization hook refused the client");
                        return Poll::Ready(Err(error));
                    }
                    self.received = true;
                    cx.setup_received = true;
                    cx.sources_changed = true;
                    cx.peer_origin = setup.origin.map_or(0, |origin| origin.get());
                    // spec (-06, "Cost Parameter"): a peer declares what subscribing
                    // through it costs; a link priced here (`link_cost` set) keeps its
                    // own price, as a receiver may.
                    if let (Some(cost), true, 1) =
                        (setup.cost, cx.config.trust_peer_routes, cx.config.link_cost)
                    {
                        cx.config.link_cost = cost;
                    }
                    cx.peer_setup = Some(setup);
                }
                Poll::Ready(Ok(None)) => {
                    tracing::debug!("the peer's SETUP stream ended without a SETUP");
                    return Poll::Ready(Err(Error::ProtocolViolation));
                }
                Poll::Ready(Err(error)) => return Poll::Ready(error.outcome()),
                Poll::Pending => return Poll::Pending,
            }
        }
        // Nothing may follow the SETUP; anything that does is ignored until FIN.
        loop {
            match self.reader.poll_fill(waiter) {
                Poll::Ready(Ok(())) if self.reader.is_finished() => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => {
                    drop(self.reader.take_buffer());
                }
                Poll::Ready(Err(_)) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// Runs a server's authorization hook on the client's SETUP: the session's origins are
/// the hook's, and its own SETUP (the client's sign it was let in) and announce request go
/// out now that it knows what they are for.
pub(crate) fn authorize(cx: &mut Context, setup: &Setup) -> Result<(), Error> {
    if !run_authorize_hook(cx, setup)? {
        return Ok(());
    }
    if cx.version.has_setup_stream() {
        cx.opens.push_back(Open::Setup);
    }
    if cx.config.subscribe.is_some() {
        let prefix = cx.config.subscribe_prefix.clone();
        cx.opens
            .push_back(Open::AnnounceDiscover(AnnounceDiscover::new(prefix)));
    }
    Ok(())
}

/// Runs the authorization hook, if the session has one, on the client's SETUP (moq-lite's,
/// or what a moq-transport SETUP says in its terms): the session's origins and its end
/// become the hook's. Returns whether a hook ran (it runs once).
pub(crate) fn run_authorize_hook(cx: &mut Context, setup: &Setup) -> Result<bool, Error> {
    let Some(hook) = cx.config.authorize.take() else {
        return Ok(false);
    };
    // A client that named its path in its request (WebTransport, WebSocket) is decided on
    // that path, whatever its SETUP says: the one its request was checked on. One hook
    // for every binding.
    let named;
    let setup = match &cx.config.request_path {
        Some(path) if setup.path.as_ref() != Some(path) => {
            named = Setup {
                path: Some(path.clone()),
                ..setup.clone()
            };
            &named
        }
        _ => setup,
    };
    let origins = hook.decide(setup)?;
    cx.config.publish = origins.publish;
    cx.config.subscribe = origins.subscribe;
    cx.config.trust_peer_routes |= origins.trust_routes;
    cx.expires_at = origins
        .valid_for
        .and_then(|valid_for| cx.now.checked_add(valid_for));
    Ok(true)
}

impl<R: RecvStream> UniIncoming<R> {
    pub(crate) fn new(stream: R, limit: usize) -> Self {
        Self {
            reader: Some(Reader::new(stream, limit)),
        }
    }

    pub(crate) fn poll<T>(
        &mut self,
        waiter: &Waiter,
        cx: &mut Context,
    ) -> Poll<Result<Step<T>, Error>>
    where
        T: transport::Session<RecvStream = R>,
    {
        let Some(reader) = self.reader.as_mut() else {
            return Poll::Ready(Ok(Step::Done));
        };
        let version = cx.version;
        let kind = match reader.poll_message(waiter, |buf| UniStream::decode(buf, version)) {
            Poll::Ready(Ok(Some(kind))) => kind,
            Poll::Ready(Ok(None)) | Poll::Ready(Err(ReadError::Stream(_))) => {
                return Poll::Ready(Ok(Step::Done));
            }
            // An unknown stream type drops the stream (a reset, code 0), not the session.
            Poll::Ready(Err(ReadError::Malformed(error))) => {
                tracing::debug!(%error, "dropping a uni stream of unknown type");
                reader.stream_mut().stop(Error::Cancel.to_code());
                return Poll::Ready(Ok(Step::Done));
            }
            Poll::Pending => return Poll::Pending,
        };
        let Some(mut reader) = self.reader.take() else {
            return Poll::Ready(Ok(Step::Done));
        };
        Poll::Ready(Ok(match kind {
            UniStream::Setup if cx.version.has_setup_stream() => {
                Step::Become(Box::new(Task::setup_read(reader)))
            }
            // Before -05 there is no Setup stream: deployed peers stop it (UnexpectedStream).
            UniStream::Setup => {
                tracing::debug!("stopping a Setup stream: this version has none");
                reader.stream_mut().stop(Error::UnexpectedStream.to_code());
                Step::Done
            }
            // Before the client's SETUP a server takes nothing else (deployed peers stop it).
            UniStream::Group if cx.side == Side::Server && !cx.setup_received => {
                tracing::debug!("stopping a group stream that came before the client's SETUP");
                reader.stream_mut().stop(Error::Cancel.to_code());
                Step::Done
            }
            UniStream::Group => Step::Become(Box::new(Task::GroupRead(GroupRead::new(reader, cx)))),
        }))
    }
}

impl<S: SendStream, R: RecvStream> BidiIncoming<S, R> {
    pub(crate) fn new(send: S, recv: R, limit: usize) -> Self {
        Self {
            streams: Some((Writer::new(send), Reader::new(recv, limit))),
        }
    }

    pub(crate) fn poll<T>(
        &mut self,
        waiter: &Waiter,
        cx: &mut Context,
    ) -> Poll<Result<Step<T>, Error>>
    where
        T: transport::Session<SendStream = S, RecvStream = R>,
    {
        let Some((_, reader)) = self.streams.as_mut() else {
            return Poll::Ready(Ok(Step::Done));
        };
        let version = cx.version;
        let kind = match reader.poll_message(waiter, |buf| BidiStream::decode(buf, version)) {
            Poll::Ready(Ok(Some(kind))) => kind,
            Poll::Ready(Ok(None)) | Poll::Ready(Err(ReadError::Stream(_))) => {
                return Poll::Ready(Ok(Step::Done));
            }
            // An unknown stream type drops the stream (a reset, code 0), not the session.
            Poll::Ready(Err(ReadError::Malformed(error))) => {
                tracing::debug!(%error, "dropping a bidi stream of unknown type");
                if let Some((mut writer, mut reader)) = self.streams.take() {
                    writer.stream_mut().reset(Error::Cancel.to_code());
                    reader.stream_mut().stop(Error::Cancel.to_code());
                }
                return Poll::Ready(Ok(Step::Done));
            }
            Poll::Pending => return Poll::Pending,
        };
        let Some((mut writer, mut reader)) = self.streams.take() else {
            return Poll::Ready(Ok(Step::Done));
        };
        tracing::debug!(stream = ?kind, "the peer opened a stream");
        let refuse = |writer: &mut Writer<S>, reader: &mut Reader<R>, error: Error| {
            tracing::debug!(stream = ?kind, %error, "refusing the peer's stream");
            writer.stream_mut().reset(error.to_code());
            reader.stream_mut().stop(error.to_code());
        };
        // A request is served only within the session's bound on requests at once (TRACK
        // and FETCH count while they are answered); one more is refused on its own stream.
        let slot = |count, max, refused: &mut u64| {
            let slot = RequestSlot::take(count, max);
            if slot.is_none() {
                *refused += 1;
            }
            slot
        };
        let publishes = cx.config.publish.is_some();
        Poll::Ready(Ok(match kind {
            // Answered whether or not this side publishes (with an empty set when it
            // does not): a deployed relay closes the session if this stream fails.
            BidiStream::Announce => match slot(
                &cx.announce_requests,
                cx.config.limits.max_announce_requests,
                &mut cx.counters.announce_requests_refused,
            ) {
                Some(slot) => Step::Become(Box::new(Task::AnnounceServe(AnnounceServe::new(
                    writer, reader, slot,
                )))),
                None => {
                    refuse(&mut writer, &mut reader, Error::BoundsExceeded);
                    Step::Done
                }
            },
            // Before -05 there are no Track and Fetch streams.
            BidiStream::Track | BidiStream::Fetch if !version.has_track_stream() => {
                refuse(&mut writer, &mut reader, Error::UnexpectedStream);
                Step::Done
            }
            BidiStream::Track | BidiStream::Subscribe | BidiStream::Fetch if publishes => {
                // The relay's memory is full: nothing new until it drains (existing
                // subscriptions go on).
                if let Some(memory) = cx.config.memory_budget.as_ref().filter(|m| m.is_full()) {
                    memory.note_subscription_refused();
                    cx.counters.subscriptions_refused += 1;
                    tracing::debug!(
                        used = memory.used(),
                        limit = memory.limit(),
                        "refusing the peer's request: the memory budget is full"
                    );
                    refuse(&mut writer, &mut reader, Error::BoundsExceeded);
                    return Poll::Ready(Ok(Step::Done));
                }
                let Some(slot) = slot(
                    &cx.subscriptions,
                    cx.config.limits.max_subscriptions,
                    &mut cx.counters.subscriptions_refused,
                ) else {
                    refuse(&mut writer, &mut reader, Error::BoundsExceeded);
                    return Poll::Ready(Ok(Step::Done));
                };
                Step::Become(Box::new(match kind {
                    BidiStream::Track => Task::TrackServe(TrackServe::new(writer, reader, slot)),
                    BidiStream::Fetch => Task::FetchServe(FetchServe::new(writer, reader, slot)),
                    _ => {
                        cx.counters.subscriptions_served += 1;
                        Task::SubscribeServe(SubscribeServe::new(writer, reader, slot))
                    }
                }))
            }
            BidiStream::Track | BidiStream::Subscribe | BidiStream::Fetch => {
                // This side publishes nothing.
                refuse(&mut writer, &mut reader, Error::NotFound);
                Step::Done
            }
            BidiStream::Goaway => {
                // spec: receiving GOAWAY stops new streams at once; the URI follows.
                cx.goaway = true;
                let _ = writer.stream_mut().finish();
                Step::Become(Box::new(Task::GoAwayRecv(GoAwayRecv { reader })))
            }
            BidiStream::Probe => {
                refuse(&mut writer, &mut reader, Error::Unsupported);
                Step::Done
            }
            BidiStream::Session => {
                refuse(&mut writer, &mut reader, Error::UnexpectedStream);
                Step::Done
            }
        }))
    }
}
