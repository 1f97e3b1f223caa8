//! The session machine: owns the transport, accepts and opens streams, and polls the
//! sub-machine of each stream when its waiter fires.
//!
//! One turn of the machine ([`SessionMachine::poll`]):
//!
//! 1. if the machine's own waiter fired (or on the first turn): a close requested through
//!    the [`Session`](super::Session) handle closes the transport, a closed transport ends
//!    the machine, and streams the peer opened are accepted and given a sub-machine that
//!    reads their type (bidi streams only once the client's SETUP arrived, on a server);
//! 2. streams sub-machines asked for are opened ([`Open`]), as far as the transport allows;
//! 3. every sub-machine whose waiter fired is polled with the shared [`Context`].
//!
//! It repeats until a turn makes no progress. A sub-machine that fails with a protocol error
//! closes the session with that error's code.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context as TaskContext, Poll, Waker};

use moqx_kio::Waiter;

mod group_bounds;

/// Stream opens whose room a session keeps between turns; a burst past it gives the rest back
/// once drained.
const OPENS_KEPT: usize = 32;

pub(crate) use super::context::{Context, Ending, Route};
use super::discover::AnnounceDiscover;
use super::moqt::{
    self, Announcer, ControlStream, MoqtBidiIncoming, MoqtState, MoqtSubscribeServe,
    MoqtUniIncoming, Upstream,
};
use super::own_wake::OwnWake;
use super::remote::RemoteBroadcasts;
use super::setup::{BidiIncoming, GoAwaySend, SetupSend, UniIncoming};
pub(crate) use super::task::{Open, Spawn, Step, Task};
use super::tasks::TaskSet;
use super::{SessionConfig, Shared, Side};
use crate::Error;
use crate::coding::Setup;
use crate::id_map::IdMap;
use crate::runtime::{Deadline, Instant, Runtime};
use crate::transport::{self, Session as _};

/// How long a session that closed its transport waits for the transport to confirm before
/// it reports itself closed anyway.
const CLOSE_CONFIRM_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// A session's protocol machine. [`Runtime::spawn`] receives it and polls it to completion;
/// it is `Send` exactly when the runtime's transport is.
pub struct SessionMachine<R: Runtime> {
    transport: R::Transport,
    context: Context,
    tasks: TaskSet<Task<R::Transport>>,
    shared: Arc<Shared>,
    /// The machine's own waiter: transport accepts, opens and close requests.
    waiter: Option<Waiter>,
    state_watch: moqx_kio::Consumer<super::State>,
    done: bool,
    /// The one timer of the machine: the earliest wait for trailing groups.
    deadline: R::Deadline,
    armed: Option<Instant>,
    goaway_sent: bool,
    /// Set once this side closed the transport: the session is reported closed once the
    /// transport confirms it (its close is on the wire, so a process that exits right after
    /// `Session::closed` does not leave its peer waiting for an idle timeout), or by the
    /// deadline here at the latest.
    closing: Option<(Error, Instant)>,
    /// The waker of `waiter`: records that one of the machine's own sources fired.
    own: Arc<OwnWake>,
    runtime: R,
    /// Every event of this session is logged inside it (a driver's span, such as the
    /// peer's address, is its parent).
    span: tracing::Span,
    /// The open queue's other buffer (see `start_requested`).
    spare_opens: VecDeque<Open>,
    /// A server's: when it gives up on a client that has not sent SETUP.
    setup_deadline: Option<Instant>,
    /// Group streams opened and not finished, oldest first, as (task index, subscribe id,
    /// sequence); entries of groups that finished since are skipped when met.
    open_groups: VecDeque<(usize, u64, u64)>,
    /// How many group streams are open and not finished.
    open_group_count: usize,
    /// Whether the machine copies the transport's counters into the snapshot each turn:
    /// the transport gave the handle no reader of its own.
    reads_stats_itself: bool,
}

impl<R: Runtime> SessionMachine<R> {
    pub(crate) fn new(
        runtime: R,
        transport: R::Transport,
        config: SessionConfig,
        side: Side,
        shared: Arc<Shared>,
    ) -> Self {
        let mut context = Context {
            version: config.version,
            side,
            setup_received: false,
            opens: VecDeque::new(),
            remote: RemoteBroadcasts::new(
                config.limits.max_announces,
                config.limits.max_announce_path_bytes,
            ),
            routes: IdMap::default(),
            now: runtime.now(),
            next_subscribe_id: 0,
            spawned: Vec::new(),
            goaway: false,
            goaway_uri: None,
            routes_priced_out: false,
            sources_changed: false,
            peer_setup: None,
            peer_origin: 0,
            epoch: runtime.now(),
            refused: None,
            counters: super::SessionCounters::default(),
            subscriptions: Default::default(),
            announce_requests: Default::default(),
            receiving_group_bytes: Default::default(),
            expires_at: config
                .valid_for
                .and_then(|valid_for| runtime.now().checked_add(valid_for)),
            moqt: config
                .version
                .draft()
                .map(|draft| MoqtState::new(draft, side, &config)),
            config,
        };
        // With an authorization hook, a server learns what it may serve and fill only from
        // the client's SETUP: it answers with its own SETUP, and asks for announcements,
        // once the hook accepted the client (`SetupRead`).
        let deferred = side == Side::Server && context.config.authorize.is_some();
        let has_setup = context.version.has_setup_stream();
        if let Some(moqt) = &context.moqt {
            // moq-transport: on 18 each side opens its control stream with SETUP (a server
            // with a hook once it decided); on 14 and 16 the client opens the one control
            // stream, and the server answers on it.
            match (moqt.draft.has_request_streams(), side) {
                (true, _) if !deferred => context.opens.push_back(Open::Setup),
                (false, Side::Client) => context.opens.push_back(Open::MoqtControl),
                _ => {}
            }
        } else if !has_setup {
            // Before -05 there is no SETUP: the session begins with the connection, as if
            // an empty SETUP had arrived. A server's hook decides on that, with no path (a
            // raw QUIC client of those versions carries none).
            let setup = Setup::default();
            context.setup_received = true;
            if deferred && let Err(error) = super::setup::authorize(&mut context, &setup) {
                // Closed on the first turn, inside the session's span.
                context.refused = Some(error);
            }
            context.peer_setup = Some(setup);
        }
        if !deferred && has_setup {
            context.opens.push_back(Open::Setup);
        }
        if context.config.subscribe.is_some() && !deferred && context.moqt.is_none() {
            let prefix = context.config.subscribe_prefix.clone();
            context
                .opens
                .push_back(Open::AnnounceDiscover(AnnounceDiscover::new(prefix)));
        }
        let state_watch = shared.state.consume();
        let setup_deadline = (side == Side::Server)
            .then(|| context.now.checked_add(context.config.limits.setup_timeout))
            .flatten();
        let span = tracing::debug_span!(
            "moq_session",
            side = ?side,
            protocol = context.config.version.name()
        );
        span.in_scope(|| tracing::debug!("session started"));
        let reads_stats_itself = shared.stats_reader.lock().is_none();
        Self {
            reads_stats_itself,
            transport,
            context,
            tasks: TaskSet::new(),
            shared,
            waiter: None,
            state_watch,
            done: false,
            deadline: runtime.deadline(),
            armed: None,
            goaway_sent: false,
            closing: None,
            own: Arc::new(OwnWake::default()),
            runtime,
            span,
            spare_opens: VecDeque::new(),
            setup_deadline,
            open_groups: VecDeque::new(),
            open_group_count: 0,
        }
    }

    /// Closes the transport with `error` and records it as the session's end.
    fn close(&mut self, error: Error) {
        if self.done || self.closing.is_some() {
            return;
        }
        let code = self.wire_code(error);
        tracing::debug!(code, %error, "closing the session");
        // What the peer published through this session is withdrawn before the close goes
        // out: a peer that sees the close finds those broadcasts gone. The sub-machines
        // (and their streams) go only after the close: dropped before it, their streams'
        // resets would reach the peer first, and a deployed relay treats a reset of its
        // announce stream as fatal.
        self.context.remote.clear();
        self.transport.close(code, &error.to_string());
        self.end_tasks();
        let until = self.context.now + CLOSE_CONFIRM_TIMEOUT;
        self.closing = Some((error, until));
        self.armed = Some(until);
        self.deadline.set(Some(until));
    }

    /// After [`close`](Self::close): ready once the transport confirms the close or the
    /// wait for it is over, recording the session's end.
    fn poll_closing(&mut self, waiter: &Waiter) -> Poll<()> {
        let Some((error, until)) = self.closing else {
            return Poll::Ready(());
        };
        let confirmed = self.transport.poll_closed(waiter).is_ready();
        if confirmed || self.context.now >= until || self.deadline.poll(waiter).is_ready() {
            self.finish(error);
            return Poll::Ready(());
        }
        Poll::Pending
    }

    /// Records the session's end and drops every sub-machine (ending their tracks).
    fn finish(&mut self, error: Error) {
        self.finish_as(error, false);
    }

    /// [`finish`](Self::finish); `lost`: the connection was lost rather than closed, so
    /// the peer's broadcasts are dropped as lost (a lingering origin keeps their paths).
    fn finish_as(&mut self, error: Error, lost: bool) {
        tracing::debug!(code = self.wire_code(error), %error, "session ended");
        self.done = true;
        self.closing = None;
        // Recorded before the tracks end: a reader whose track ends with the session can
        // tell, from the handle, that the session is why.
        self.shared.state.update(|state| {
            state.closed.get_or_insert(error);
        });
        let reader = self.shared.stats_reader.lock().take();
        if let Some(reader) = reader {
            self.shared.snapshot.lock().transport = reader.read();
        }
        if lost {
            self.context.remote.lose_all();
        }
        self.end_tasks();
    }

    /// Drops every sub-machine, ending their tracks.
    fn end_tasks(&mut self) {
        for task in self.tasks.drain() {
            drop(task);
        }
        self.open_groups.clear();
        self.open_group_count = 0;
        // The broadcasts first, then their tracks: a relay reading a track that fails
        // finds its broadcast already closed, and so tells a route that died (and moves
        // to another; `FollowedTrack`) from a track its publisher dropped.
        self.context.remote.clear();
        self.context.routes.clear();
        self.context.opens.clear();
    }

    /// One pass over the machine's own sources (close requests, the transport's close and
    /// accept queues); returns whether anything happened.
    fn poll_sources(&mut self, waiter: &Waiter) -> bool {
        let mut progress = false;

        // A close (or GOAWAY) requested through the handle.
        let request = self.state_watch.poll_until(waiter, |state| {
            if let Some(error) = state.close_requested {
                return Some(Err(error));
            }
            match &state.goaway_requested {
                Some(uri) if !self.goaway_sent => Some(Ok(uri.clone())),
                _ => None,
            }
        });
        match request {
            Poll::Ready(Ok(Err(error))) => {
                self.close(error);
                return true;
            }
            Poll::Ready(Ok(Ok(uri))) => {
                self.goaway_sent = true;
                if let Some(moqt) = self.context.moqt.as_mut() {
                    if let Err(error) = moqt.send_goaway(uri) {
                        self.close(error);
                        return true;
                    }
                } else if self.context.version.has_goaway() {
                    self.context.opens.push_back(Open::GoAway(uri));
                } else {
                    tracing::debug!("no GOAWAY on this version: the session just drains");
                }
                // A ready poll left no waiter on the handle's state: look again on the next
                // pass, or a close requested after the GOAWAY would go unseen.
                self.own.woken.store(true, Ordering::Release);
                progress = true;
            }
            _ => {}
        }

        // The transport went away.
        if let Poll::Ready(error) = self.transport.poll_closed(waiter) {
            // The words of the peer's (or the transport's) close, before they are reduced
            // to a code: what a user diagnosing an interop failure needs.
            tracing::debug!(%error, "the connection closed");
            let words = error.to_string();
            self.shared.state.update(|state| {
                state.transport_closed.get_or_insert(words);
            });
            // Not closed but lost: what the peer published may come back by another route,
            // and a lingering origin waits for it.
            let lost = matches!(error, transport::TransportError::Lost(_));
            let error = match error {
                transport::TransportError::Closed { code, .. } => self.error_from_code(code),
                _ => Error::Transport,
            };
            self.finish_as(error, lost);
            return true;
        }

        // Streams the peer opened.
        while let Poll::Ready(result) = self.transport.poll_accept_uni(waiter) {
            match result {
                Ok(stream) => {
                    // Its first message is the type, then (if it is the SETUP stream) the
                    // SETUP: the small limit until it is known to be something else.
                    let limit = self.context.config.limits.max_setup_bytes;
                    self.tasks.push(match self.context.moqt {
                        Some(_) => Task::MoqtUniIncoming(MoqtUniIncoming::new(stream, limit)),
                        None => Task::UniIncoming(UniIncoming::new(stream, limit)),
                    });
                    progress = true;
                }
                Err(_) => return true, // seen as closed on the next pass
            }
        }
        // A server serves nothing before the client's SETUP. A client serves at once, but
        // on -06, where an announce stream's excluded hop is the one in the peer's SETUP,
        // only once that arrived (as deployed peers wait for it).
        // On moq-transport the client's control stream is itself a bidi stream (14, 16),
        // and requests may come before the peer's SETUP is read (18): taken at once.
        let may_serve = self.context.setup_received
            || self.context.moqt.is_some()
            || (self.context.side == Side::Client && !self.context.version.has_typed_announce());
        if may_serve {
            loop {
                match self.transport.poll_accept_bidi(waiter) {
                    Poll::Ready(Ok((send, recv))) => {
                        let limits = &self.context.config.limits;
                        self.tasks.push(match self.context.moqt {
                            // A CLIENT_SETUP may open it: the SETUP's limit until known.
                            Some(_) => Task::MoqtBidiIncoming(MoqtBidiIncoming::new(
                                send,
                                recv,
                                limits.max_setup_bytes.max(limits.max_message_bytes),
                            )),
                            None => Task::BidiIncoming(BidiIncoming::new(
                                send,
                                recv,
                                limits.max_message_bytes,
                            )),
                        });
                        progress = true;
                    }
                    Poll::Ready(Err(_)) => return true,
                    Poll::Pending => break,
                }
            }
        }

        progress
    }

    /// Opens the streams sub-machines asked for and starts the sub-machines they spawned;
    /// returns whether anything happened.
    fn start_requested(&mut self, waiter: &Waiter) -> bool {
        let mut progress = false;
        // Uni and bidi streams have separate credit: a uni open waiting for credit must not
        // hold back a bidi one (or the reverse). Order is kept within each kind.
        let (mut uni_blocked, mut bidi_blocked) = (false, false);
        if self.context.opens.is_empty() && self.context.spawned.is_empty() {
            return false;
        }
        // Both queues keep their allocations from turn to turn.
        let mut waiting = std::mem::take(&mut self.spare_opens);
        while let Some(open) = self.context.opens.pop_front() {
            let Some(open) = open.unless_going_away(self.context.goaway) else {
                continue;
            };
            let uni = open.is_uni();
            if (uni && uni_blocked) || (!uni && bidi_blocked) {
                waiting.push_back(open);
                continue;
            }
            match self.open(open, waiter) {
                Ok(Some(task)) => {
                    let group = match &task {
                        Task::GroupWrite(group) => Some(group.names()),
                        _ => None,
                    };
                    let index = self.tasks.push(task);
                    if let Some((id, sequence)) = group {
                        self.open_groups.push_back((index, id, sequence));
                        self.open_group_count += 1;
                        self.bound_open_groups();
                    }
                    progress = true;
                }
                Ok(None) => {}
                Err(open) => {
                    if uni {
                        uni_blocked = true;
                    } else {
                        bidi_blocked = true;
                    }
                    waiting.push_back(open);
                }
            }
        }
        if uni_blocked {
            self.drop_oldest_groups(&mut waiting);
        }
        self.spare_opens = std::mem::replace(&mut self.context.opens, waiting);
        // A burst's queue gives its memory back once drained: a session lives for hours and
        // must not keep the largest burst it ever had. A steady turn fits in what is kept.
        if self.spare_opens.capacity() > OPENS_KEPT {
            self.spare_opens.shrink_to(OPENS_KEPT);
        }

        for spawn in self.context.spawned.drain(..) {
            match spawn {
                Spawn::BroadcastRequests(task) => {
                    self.tasks.push(Task::BroadcastRequests(task));
                }
                Spawn::MoqtAnnounce(announcements) => {
                    self.tasks
                        .push(Task::MoqtAnnouncer(Announcer::without_stream(
                            announcements,
                        )));
                }
                Spawn::MoqtUpstream(request_id) => {
                    self.tasks
                        .push(Task::MoqtUpstream(Upstream::on_control_stream(request_id)));
                }
                Spawn::MoqtSubscribe(subscription) => {
                    self.tasks
                        .push(Task::MoqtSubscribe(MoqtSubscribeServe::on_control_stream(
                            subscription,
                        )));
                }
            }
            progress = true;
        }
        progress
    }

    /// Opens the stream `open` needs; gives it back if the transport cannot open one now.
    #[allow(clippy::result_large_err)]
    fn open(&mut self, open: Open, waiter: &Waiter) -> Result<Option<Task<R::Transport>>, Open> {
        if open.is_uni() {
            let stream = match self.transport.poll_open_uni(waiter) {
                Poll::Ready(Ok(stream)) => stream,
                Poll::Ready(Err(_)) => return Ok(None),
                Poll::Pending => return Err(open),
            };
            return Ok(Some(match open {
                Open::Setup if self.context.moqt.is_some() => {
                    match ControlStream::sender(stream, &self.context) {
                        Ok(control) => Task::MoqtControl(control),
                        Err(error) => {
                            self.context.refused = Some(error);
                            return Ok(None);
                        }
                    }
                }
                Open::Setup => Task::SetupSend(SetupSend::new(stream, &self.context)),
                Open::Group(group) => Task::GroupWrite(group.with_stream(stream)),
                _ => return Ok(None),
            }));
        }
        let (send, recv) = match self.transport.poll_open_bidi(waiter) {
            Poll::Ready(Ok(streams)) => streams,
            Poll::Ready(Err(_)) => return Ok(None),
            Poll::Pending => return Err(open),
        };
        Ok(Some(match open {
            Open::GoAway(uri) => Task::GoAwaySend(GoAwaySend::new(send, recv, uri, &self.context)),
            Open::AnnounceDiscover(task) => {
                Task::AnnounceDiscover(task.with_streams(send, recv, &self.context))
            }
            Open::TrackQuery(task) => {
                Task::TrackQuery(task.with_streams(send, recv, &self.context))
            }
            Open::Subscribe(task) => {
                Task::SubscribeRemote(task.with_streams(send, recv, &mut self.context))
            }
            Open::MoqtPublication(plan) => {
                Task::MoqtPublication(plan.with_streams(send, recv, &self.context))
            }
            Open::MoqtNamespaceFollow(plan) => {
                Task::MoqtNamespaceFollow(plan.with_streams(send, recv, &self.context))
            }
            Open::MoqtUpstream(plan) => {
                Task::MoqtUpstream(plan.with_streams(send, recv, &self.context))
            }
            Open::MoqtControl => match ControlStream::client(send, recv, &self.context) {
                Ok(control) => Task::MoqtControl(control),
                Err(error) => {
                    self.context.refused = Some(error);
                    return Ok(None);
                }
            },
            Open::Setup | Open::Group(_) => return Ok(None),
        }))
    }

    /// Polls every sub-machine whose waiter fired; returns whether any was ready.
    fn poll_tasks(&mut self, parent: &Waker) -> Result<bool, Error> {
        let ready = self.tasks.drain_ready(parent);
        let progress = !ready.is_empty();
        for &index in &ready {
            while let Some((task, waiter)) = self.tasks.get_mut(index) {
                match task.poll(waiter, &mut self.context) {
                    Poll::Pending => break,
                    Poll::Ready(Ok(Step::Done)) => {
                        let group = |task: &Task<R::Transport>| matches!(task, Task::GroupWrite(_));
                        if self.tasks.finish(index, group) == Some(true) {
                            self.open_group_count -= 1;
                        }
                        break;
                    }
                    Poll::Ready(Ok(Step::Become(next))) => {
                        // Same slot, same waiter: poll the new sub-machine right away.
                        if let Some((task, _)) = self.tasks.get_mut(index) {
                            *task = *next;
                        }
                    }
                    Poll::Ready(Err(error)) => return Err(error),
                }
            }
        }
        self.tasks.recycle(ready);
        if std::mem::take(&mut self.context.sources_changed) {
            self.own.woken.store(true, Ordering::Release);
        }
        if let Some(setup) = self.context.peer_setup.take() {
            self.shared
                .state
                .update(|state| state.peer_setup = Some(setup));
        }
        if self.context.goaway && !self.context.routes_priced_out {
            self.context.price_out_routes();
        }
        if let Some(uri) = self.context.goaway_uri.take() {
            self.shared
                .state
                .update(|state| state.peer_goaway = Some(uri));
        }
        Ok(progress)
    }

    /// Copies the session's counters where its handle reads them: once per turn, as the
    /// turn ends (not on each pass of its loop: a copy of the counters under a lock).
    fn publish_counters(&mut self) {
        self.context.counters.subscriptions_active =
            self.context.subscriptions.load(Ordering::Relaxed) as u64;
        self.context.counters.open_group_streams = self.open_group_count as u64;
        self.context.counters.open_group_entries = self.open_groups.len() as u64;
        self.context.counters.upstream_subscriptions = self.context.routes.len() as u64;
        self.context.counters.announced_broadcasts = self.context.remote.len() as u64;
        if self.reads_stats_itself {
            let transport = self.transport.stats();
            *self.shared.snapshot.lock() = super::Snapshot {
                transport,
                counters: self.context.counters,
            };
        } else {
            // The handle reads the transport's counters itself (`Session::stats`).
            self.shared.snapshot.lock().counters = self.context.counters;
        }
    }
}

impl<R: Runtime> SessionMachine<R> {
    /// The code a close with `error` carries: moq-lite's, or the draft's termination code.
    fn wire_code(&self, error: Error) -> u64 {
        match &self.context.moqt {
            Some(moqt) => moqt::termination_code(error, moqt.draft),
            None => error.to_code(),
        }
    }

    /// The error a close code from the peer (or the transport) names.
    fn error_from_code(&self, code: u64) -> Error {
        match &self.context.moqt {
            Some(moqt) => Error::from_termination(code, moqt.draft),
            None => Error::from_code(code),
        }
    }
}

// The machine never relies on its fields staying put (it pins nothing inside), so it may move
// between polls whatever its type parameters are.
impl<R: Runtime> Unpin for SessionMachine<R> {}

impl<R: Runtime> Future for SessionMachine<R> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<()> {
        let this = self.get_mut();
        let _span = this.span.clone().entered();
        this.own.set_task(cx.waker());
        let waiter = match this.waiter.take() {
            Some(waiter) => waiter,
            None => {
                // The first turn polls every source.
                this.own.woken.store(true, Ordering::Release);
                Waiter::new(&Waker::from(this.own.clone()))
            }
        };
        // The clock is read once per turn.
        this.context.now = this.runtime.now();
        let turn = this.turn(&waiter, cx.waker());
        this.publish_counters();
        this.waiter = Some(waiter);
        turn
    }
}

impl<R: Runtime> SessionMachine<R> {
    /// One turn: every source and sub-machine that was woken, until none makes progress.
    fn turn(&mut self, waiter: &Waiter, parent: &Waker) -> Poll<()> {
        loop {
            if self.done {
                return Poll::Ready(());
            }
            if let Some(error) = self.context.refused.take() {
                self.close(error);
            }
            if self.closing.is_some() {
                return self.poll_closing(waiter);
            }
            // The machine's own sources only when they fired: most turns are a sub-machine
            // (a stream) waking, and re-polling the transport's queues on each costs.
            let mut progress = false;
            if self.own.woken.swap(false, Ordering::AcqRel) {
                progress |= self.poll_sources(waiter);
            }
            if self.done || self.closing.is_some() {
                continue;
            }
            progress |= self.start_requested(waiter);
            match self.poll_tasks(parent) {
                Ok(tasks_progress) => progress |= tasks_progress,
                Err(error) => {
                    self.close(error);
                    continue;
                }
            }
            // A server whose client has not sent SETUP in time gives up on it: a connection
            // that never says who it is must not hold a session slot forever.
            if let Some(until) = self.setup_deadline {
                if self.context.setup_received {
                    self.setup_deadline = None;
                } else if self.context.now >= until {
                    tracing::debug!("no SETUP from the client in time");
                    self.close(Error::Timeout);
                    continue;
                }
            }
            // A client let in for a while (its token's lifetime) is let go when it ends.
            if self
                .context
                .expires_at
                .is_some_and(|at| self.context.now >= at)
            {
                tracing::debug!("the session's authorization expired");
                self.close(Error::Unauthorized);
                continue;
            }
            // Ended subscriptions whose trailing groups arrived (or whose wait is over).
            let next = self
                .context
                .settle_routes()
                .into_iter()
                .chain(self.context.settle_timed())
                .chain(self.setup_deadline)
                .chain(self.context.expires_at)
                .min();
            if next != self.armed {
                self.armed = next;
                self.deadline.set(next);
            }
            if next.is_some() && self.deadline.poll(waiter).is_ready() {
                self.context.now = self.runtime.now();
                progress = true;
            }
            if !progress {
                return Poll::Pending;
            }
        }
    }
}

impl<R: Runtime> std::fmt::Debug for SessionMachine<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionMachine")
            .field("side", &self.context.side)
            .field("tasks", &self.tasks.len())
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}
