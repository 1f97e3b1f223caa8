//! What a `Connection` and its iterators run on: one session, or a session kept up
//! across relays (`reconnect: true`).

use std::future::Future;
use std::rc::Rc;
use std::task::Poll;

use moqx_kio::Waiter;
use moqx_net::session::Session;

use crate::connect::Connected;
use crate::reconnect::Reconnect;

/// One session, or one kept up across relays.
#[derive(Debug, Clone)]
pub(crate) enum Link {
    /// One session: when it ends, the connection has ended.
    Once(Connected),
    /// A session kept up across relays: the connection ends only when closed.
    Kept(Rc<Reconnect>),
}

impl Link {
    /// The session up now, and what it runs over; `None` while reconnecting or closed.
    pub(crate) fn current(&self) -> Option<Connected> {
        match self {
            Self::Once(connected) => Some(connected.clone()),
            Self::Kept(reconnect) => reconnect.current(),
        }
    }

    /// The session up now.
    pub(crate) fn session(&self) -> Option<Session> {
        self.current().map(|connected| connected.session)
    }

    /// Whether it reconnects (rather than ending with its session).
    pub(crate) fn keeps_up(&self) -> bool {
        matches!(self, Self::Kept(_))
    }

    /// `Ready` with why once the connection has ended: its session's end, or (kept up)
    /// a cancel once closed.
    pub(crate) fn poll_closed(&self, waiter: &Waiter) -> Poll<moqx_net::Error> {
        match self {
            Self::Once(connected) => connected.session.poll_closed(waiter),
            Self::Kept(reconnect) => reconnect
                .poll_closed(waiter)
                .map(|()| moqx_net::Error::Cancel),
        }
    }

    /// Waits until the connection has ended; why.
    pub(crate) async fn closed(&self) -> moqx_net::Error {
        moqx_kio::wait(|waiter| self.poll_closed(waiter)).await
    }

    /// Waits for a session to be up (at once for one session, even ended); `None` once
    /// closed.
    pub(crate) async fn connected(&self) -> Option<Connected> {
        match self {
            Self::Once(connected) => Some(connected.clone()),
            Self::Kept(reconnect) => reconnect.connected().await,
        }
    }

    /// Closes the session (code 0, cancel) and stops reconnecting. Idempotent.
    pub(crate) fn close(&self) {
        match self {
            Self::Once(connected) => connected.session.close(moqx_net::Error::Cancel),
            Self::Kept(reconnect) => reconnect.close(),
        }
    }
}

/// `future`'s output, or the connection's end as an error if it comes first.
pub(crate) async fn or_closed<T>(
    link: &Link,
    future: impl Future<Output = T>,
) -> Result<T, moqx_net::Error> {
    moqx_kio::unless(future, |waiter| link.poll_closed(waiter)).await
}
