//! The sub-machines of a session, one per stream (or none), and what they ask of the
//! machine: the streams to open ([`Open`]), the sub-machines to start without one
//! ([`Spawn`]), and what polling one led to ([`Step`]).

use std::task::Poll;

use moqx_kio::Waiter;

use super::announce::AnnounceServe;
use super::context::Context;
use super::discover::AnnounceDiscover;
use super::moqt::{
    Announcements, Announcer, ControlStream, MoqtBidiIncoming, MoqtGroupRead, MoqtSubscribeServe,
    MoqtUniIncoming, NamespaceFollow, NamespaceFollowPlan, NamespaceStream, Publication,
    PublicationPlan, RequestRefuse, Subscription, Upstream, UpstreamPlan,
};
use super::publisher::{FetchServe, GroupWrite, SubscribeServe, TrackServe};
use super::setup::{BidiIncoming, GoAwayRecv, GoAwaySend, SetupRead, SetupSend, UniIncoming};
use super::subscriber::{BroadcastRequests, GroupRead, SubscribePlan, SubscribeRemote, TrackQuery};
use crate::Error;
use crate::transport;

/// A stream a sub-machine wants opened, with what its own sub-machine will need.
pub(crate) enum Open {
    /// This side's SETUP stream (moq-lite), or its control stream on moq-transport 18.
    Setup,
    /// The client's bidirectional control stream on moq-transport 14 and 16.
    MoqtControl,
    /// A subscription's request stream on moq-transport 18.
    MoqtUpstream(UpstreamPlan),
    /// A PUBLISH_NAMESPACE's request stream on moq-transport 18.
    MoqtPublication(PublicationPlan),
    /// A SUBSCRIBE_NAMESPACE's stream on moq-transport 16 and 18.
    MoqtNamespaceFollow(NamespaceFollowPlan),
    GoAway(String),
    Group(GroupWrite<()>),
    AnnounceDiscover(AnnounceDiscover<(), ()>),
    TrackQuery(TrackQuery<(), ()>),
    Subscribe(SubscribePlan),
}

impl Open {
    pub(crate) fn is_uni(&self) -> bool {
        matches!(self, Open::Setup | Open::Group(_))
    }

    pub(crate) fn is_group(&self) -> bool {
        matches!(self, Open::Group(_))
    }

    /// `None` if the peer is `going_away` and this would start a new request: after the
    /// peer's GOAWAY no new request starts, and dropping one cancels it (a track request
    /// is answered NotFound; a subscription whose track query went out but whose
    /// SUBSCRIBE did not ends its track). Groups of running subscriptions still go out.
    pub(crate) fn unless_going_away(self, going_away: bool) -> Option<Self> {
        // Every open of every group passes here: nothing more than a flag while the peer
        // stays.
        if !going_away {
            return Some(self);
        }
        let Some(request) = self.request_name() else {
            return Some(self);
        };
        tracing::debug!(
            request,
            "the peer is going away: a request not sent yet is dropped"
        );
        None
    }

    /// What new exchange with the peer this starts, for the log; `None` if it continues
    /// one.
    fn request_name(&self) -> Option<&'static str> {
        match self {
            Open::AnnounceDiscover(_) => Some("announcement interest"),
            Open::TrackQuery(_) => Some("track query"),
            Open::Subscribe(_) => Some("subscription"),
            Open::MoqtUpstream(_) => Some("subscription (moq-transport)"),
            Open::MoqtPublication(_) => Some("namespace publication (moq-transport)"),
            Open::MoqtNamespaceFollow(_) => Some("namespace subscription (moq-transport)"),
            _ => None,
        }
    }
}

/// A sub-machine that needs no stream of its own.
pub(crate) enum Spawn {
    BroadcastRequests(BroadcastRequests),
    /// A moq-transport subscription whose replies travel on the control stream (14, 16).
    MoqtSubscribe(Subscription),
    /// A moq-transport subscription to the peer whose SUBSCRIBE went on the control
    /// stream (14, 16), by request id.
    MoqtUpstream(u64),
    /// Announcements of this side's broadcasts that need no stream of their own.
    MoqtAnnounce(Announcements),
}

/// One sub-machine.
pub(crate) enum Task<T: transport::Session> {
    SetupSend(SetupSend<T::SendStream>),
    GoAwaySend(GoAwaySend<T::SendStream, T::RecvStream>),
    GoAwayRecv(GoAwayRecv<T::RecvStream>),
    SetupRead(SetupRead<T::RecvStream>),
    UniIncoming(UniIncoming<T::RecvStream>),
    BidiIncoming(BidiIncoming<T::SendStream, T::RecvStream>),
    AnnounceServe(AnnounceServe<T::SendStream, T::RecvStream>),
    TrackServe(TrackServe<T::SendStream, T::RecvStream>),
    SubscribeServe(SubscribeServe<T::SendStream, T::RecvStream>),
    FetchServe(FetchServe<T::SendStream, T::RecvStream>),
    GroupWrite(GroupWrite<T::SendStream>),
    AnnounceDiscover(AnnounceDiscover<T::SendStream, T::RecvStream>),
    BroadcastRequests(BroadcastRequests),
    TrackQuery(TrackQuery<T::SendStream, T::RecvStream>),
    SubscribeRemote(SubscribeRemote<T::SendStream, T::RecvStream>),
    GroupRead(GroupRead<T::RecvStream>),
    MoqtControl(ControlStream<T::SendStream, T::RecvStream>),
    MoqtUniIncoming(MoqtUniIncoming<T::RecvStream>),
    MoqtBidiIncoming(MoqtBidiIncoming<T::SendStream, T::RecvStream>),
    MoqtRequestRefuse(RequestRefuse<T::SendStream, T::RecvStream>),
    MoqtSubscribe(MoqtSubscribeServe<T::SendStream, T::RecvStream>),
    MoqtUpstream(Upstream<T::SendStream, T::RecvStream>),
    MoqtGroupRead(MoqtGroupRead<T::RecvStream>),
    MoqtNamespace(NamespaceStream<T::SendStream, T::RecvStream>),
    MoqtAnnouncer(Announcer<T::SendStream, T::RecvStream>),
    MoqtPublication(Publication<T::SendStream, T::RecvStream>),
    MoqtNamespaceFollow(NamespaceFollow<T::SendStream, T::RecvStream>),
}

/// What polling a sub-machine led to.
pub(crate) enum Step<T: transport::Session> {
    /// It finished.
    Done,
    /// It became another sub-machine on the same stream(s) (after reading a stream type).
    Become(Box<Task<T>>),
}

impl<T: transport::Session> Task<T> {
    pub(crate) fn poll(
        &mut self,
        waiter: &Waiter,
        cx: &mut Context,
    ) -> Poll<Result<Step<T>, Error>> {
        match self {
            Task::SetupSend(task) => task.poll(waiter).map(done),
            Task::GoAwaySend(task) => task.poll(waiter).map(done),
            Task::GoAwayRecv(task) => task.poll(waiter, cx).map(done),
            Task::SetupRead(task) => task.poll(waiter, cx).map(done),
            Task::UniIncoming(task) => task.poll(waiter, cx),
            Task::BidiIncoming(task) => task.poll(waiter, cx),
            Task::AnnounceServe(task) => task.poll(waiter, cx).map(done),
            Task::TrackServe(task) => task.poll(waiter, cx).map(done),
            Task::SubscribeServe(task) => task.poll(waiter, cx).map(done),
            Task::FetchServe(task) => task.poll(waiter, cx).map(done),
            Task::GroupWrite(task) => task.poll(waiter, cx.version, &mut cx.counters).map(done),
            Task::AnnounceDiscover(task) => task.poll(waiter, cx).map(done),
            Task::BroadcastRequests(task) => task.poll(waiter, cx).map(done),
            Task::TrackQuery(task) => task.poll(waiter, cx).map(done),
            Task::SubscribeRemote(task) => task.poll(waiter, cx).map(done),
            Task::GroupRead(task) => task.poll(waiter, cx).map(done),
            Task::MoqtControl(task) => task.poll(waiter, cx).map(done),
            Task::MoqtUniIncoming(task) => task.poll(waiter, cx),
            Task::MoqtBidiIncoming(task) => task.poll(waiter, cx),
            Task::MoqtRequestRefuse(task) => task.poll(waiter, cx).map(done),
            Task::MoqtSubscribe(task) => task.poll(waiter, cx).map(done),
            Task::MoqtUpstream(task) => task.poll(waiter, cx).map(done),
            Task::MoqtGroupRead(task) => task.poll(waiter, cx).map(done),
            Task::MoqtNamespace(task) => task.poll(waiter, cx).map(done),
            Task::MoqtAnnouncer(task) => task.poll(waiter, cx).map(done),
            Task::MoqtPublication(task) => task.poll(waiter, cx).map(done),
            Task::MoqtNamespaceFollow(task) => task.poll(waiter, cx).map(done),
        }
    }
}

fn done<T: transport::Session>(result: Result<(), Error>) -> Result<Step<T>, Error> {
    result.map(|()| Step::Done)
}

/// Sub-machines that start from a received SETUP.
impl<T: transport::Session> Task<T> {
    pub(crate) fn setup_read(stream: super::stream::Reader<T::RecvStream>) -> Self {
        Task::SetupRead(SetupRead::new(stream))
    }
}
