//! A SUBSCRIBE for a track nobody publishes yet, held for its RENDEZVOUS_TIMEOUT (18):
//! once a broadcast appears at its path within the wait, the subscription resolves as any
//! other; when the wait is over first, it is refused TIMEOUT. Without the parameter (or
//! with 0) such a SUBSCRIBE is refused DOES_NOT_EXIST at once, as before.
//!
//! The wait is the subscriber's, capped at [`MOST_RENDEZVOUS`] (the draft lets a relay
//! shorten it to protect itself); the held request counts against `max_subscriptions` as
//! a served one does, and watches only the announcements under its own path.

use std::task::Poll;
use std::time::Duration;

use moqx_kio::Waiter;

use super::requests::Refuse;
use crate::Error;
use crate::model::{Announced, BroadcastConsumer, Path, PendingTrack};
use crate::runtime::Instant;
use crate::session::context::Context;

/// The longest a SUBSCRIBE is held for its publisher, whatever it asks.
pub(crate) const MOST_RENDEZVOUS: Duration = Duration::from_secs(30);

/// One SUBSCRIBE waiting for its publisher.
pub(crate) struct Rendezvous {
    request_id: u64,
    path: Path,
    name: String,
    start: Option<u64>,
    until: Instant,
    /// The announcements under the path: each one may be the publisher.
    announced: Announced,
}

impl Rendezvous {
    /// Holds request `request_id` for track `name` of the broadcast at `path` (from group
    /// `start`) for `wait` (capped); `None` where nothing can publish here (no origin).
    pub(crate) fn hold(
        request_id: u64,
        path: &Path,
        name: &str,
        start: Option<u64>,
        wait: Duration,
        cx: &Context,
    ) -> Option<Self> {
        let origin = cx.config.publish.as_ref()?;
        tracing::debug!(%path, track = name, ?wait, "no publisher yet: holding the subscription");
        Some(Self {
            request_id,
            path: path.clone(),
            name: name.to_owned(),
            start,
            until: cx.now + wait.min(MOST_RENDEZVOUS),
            announced: origin.announced_excluding(path.clone(), cx.peer_origin),
        })
    }

    /// The track once its broadcast appeared; TIMEOUT once the wait is over first.
    pub(crate) fn poll(
        &mut self,
        waiter: &Waiter,
        cx: &mut Context,
    ) -> Poll<Result<(BroadcastConsumer, PendingTrack), Refuse>> {
        let mut appeared = false;
        while self.announced.poll_next(waiter).is_ready() {
            appeared = true;
        }
        if appeared {
            let resolved =
                crate::session::publisher::resolve(cx, &self.path, &self.name, self.start, true);
            match resolved {
                Ok(resolved) => {
                    self.forget(cx);
                    return Poll::Ready(Ok(resolved));
                }
                Err(Error::NotFound) => {}
                Err(error) => {
                    self.forget(cx);
                    return Poll::Ready(Err(Refuse::from_error(error)));
                }
            }
        }
        let now = cx.now;
        let Some(moqt) = cx.moqt.as_mut() else {
            return Poll::Ready(Err(Refuse::Internal));
        };
        if moqt.poll_time(self.request_id, self.until, now, waiter.waker()) {
            tracing::debug!(path = %self.path, track = %self.name, "no publisher within the rendezvous");
            return Poll::Ready(Err(Refuse::Timeout));
        }
        Poll::Pending
    }

    /// The wait is over early: its timer goes.
    pub(crate) fn forget(&self, cx: &mut Context) {
        if let Some(moqt) = cx.moqt.as_mut() {
            moqt.forget_time(self.request_id);
        }
    }
}
