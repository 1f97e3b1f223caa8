//! Clients that come back by themselves: a session kept up across relays, GOAWAYs and
//! losses, while the application keeps its producers and consumers. One policy for
//! every driver: each gives it a runtime and a way to dial (`moqx_tokio::Reconnect` on
//! tokio, the browser driver's reconnecting `Connection`), and the virtual-time runtime
//! runs it in tests.
//!
//! [`Reconnect`] dials the first of a list of relay URLs and, whenever its session ends
//! (the relay restarted, the network dropped) or the relay says it is going away
//! (GOAWAY), dials again: the URL the GOAWAY named, else the next of the list, waiting
//! between failed attempts with jittered backoff ([`crate::backoff`]: 1 s doubling to
//! 10 s). After a GOAWAY the new session is made **before** the old one is closed, and
//! the two overlap for [`OVERLAP`] (or until the relay closes the old one), so that
//! nothing is lost while it moves.
//!
//! The dialer makes every session from the same configuration, so that each serves the
//! same publish origin and fills the same subscribe origin:
//!
//! - what the application publishes is announced on each new session, its tracks'
//!   groups numbered on from where they were;
//! - what it subscribes to through [`Origin::follow_track`](crate::model::Origin::follow_track)
//!   carries on from its first missing group once the broadcast is back on the new
//!   session;
//! - the configuration's hop id (`SessionConfig::origin_id`, see [`hop_id`]) is the
//!   same on every session: it is how relays downstream recognise the same publisher on
//!   its new relay, and move its subscribers along instead of ending their
//!   subscriptions.
//!
//! Like the rest of this crate it does no I/O and reads no clock: time and timers come
//! from the [`Runtime`], the jitter from the caller's seed, and the caller runs the
//! future [`Reconnect::new`] returns on its executor.

use std::fmt::Display;
use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use moqx_kio::{Waiter, watch};

use crate::Error;
use crate::backoff::Backoff;
use crate::redact::redact;
use crate::runtime::{Deadline, Runtime};
use crate::session::Session;

/// How long a session that said GOAWAY is kept once its replacement is up.
pub const OVERLAP: Duration = Duration::from_secs(2);

/// A session kept up across relays (see the module docs): the handle. Dropping it (or
/// [`close`](Self::close)) closes the session and stops reconnecting.
///
/// `C` is what the dialer returns for each session: a [`Session`] itself, or a driver's
/// richer value (the browser's says which transport won).
#[derive(Debug)]
pub struct Reconnect<C: AsRef<Session>> {
    status: watch::Producer<Status<C>>,
    /// What the handle's waits read.
    view: watch::Consumer<Status<C>>,
}

/// What the reconnecting task and its handle share.
#[derive(Debug)]
struct Status<C> {
    /// The session up now (the one that said GOAWAY, until its replacement is up).
    current: Option<C>,
    /// Sessions established so far.
    connects: u64,
    /// Stopped: no session, no more attempts.
    closed: bool,
}

impl<C: AsRef<Session> + Clone + 'static> Reconnect<C> {
    /// Starts keeping a session up to one of `urls` (tried in order, then round again),
    /// each made by `dial`. Returns the handle and the future that does the work: run it
    /// on the runtime's executor (it ends once the handle is closed or dropped). `seed`
    /// drives the backoff's jitter: give each client its own.
    ///
    /// # Panics
    ///
    /// If `urls` is empty.
    pub fn new<R, D, F, E>(
        runtime: R,
        urls: Vec<String>,
        seed: u64,
        dial: D,
    ) -> (Self, impl Future<Output = ()> + use<R, D, F, E, C>)
    where
        R: Runtime,
        D: FnMut(String) -> F,
        F: Future<Output = Result<C, E>>,
        E: Display,
    {
        assert!(!urls.is_empty(), "Reconnect needs at least one URL");
        let status = watch::Producer::new(Status {
            current: None,
            connects: 0,
            closed: false,
        });
        let task = keep_up(runtime, urls, seed, dial, status.clone());
        let view = status.consume();
        (Self { status, view }, task)
    }

    /// What the dialer returned for the session up now, if any.
    pub fn current(&self) -> Option<C> {
        self.status.borrow().current.clone()
    }

    /// The session up now, if any.
    pub fn session(&self) -> Option<Session> {
        self.status
            .borrow()
            .current
            .as_ref()
            .map(|current| current.as_ref().clone())
    }

    /// `Ready(Some)` with the session up now (one that has not ended), `Ready(None)` once
    /// closed, else `Pending` (registering `waiter`).
    pub fn poll_connected(&self, waiter: &Waiter) -> Poll<Option<C>> {
        self.view
            .poll_until(waiter, up)
            .map(|result| result.ok().flatten())
    }

    /// Waits for a session to be up (one that has not ended), and returns it; `None` once
    /// closed.
    pub async fn connected(&self) -> Option<C> {
        moqx_kio::wait(|waiter| self.poll_connected(waiter)).await
    }
}

impl<C: AsRef<Session>> Reconnect<C> {
    /// How many sessions were established so far (the first one included).
    pub fn connects(&self) -> u64 {
        self.status.borrow().connects
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.status.borrow().closed
    }

    /// `Ready` once [`close`](Self::close) was called, else `Pending` (registering
    /// `waiter`).
    pub fn poll_closed(&self, waiter: &Waiter) -> Poll<()> {
        self.view
            .poll_until(waiter, |status| status.closed.then_some(()))
            .map(|_| ())
    }

    /// Waits until [`close`](Self::close) is called.
    pub async fn closed(&self) {
        moqx_kio::wait(|waiter| self.poll_closed(waiter)).await
    }

    /// Closes the session (code 0, cancel) and stops reconnecting. Idempotent.
    pub fn close(&self) {
        let current = self.status.update(|status| {
            status.closed = true;
            status.current.take()
        });
        if let Some(current) = current {
            current.as_ref().close(Error::Cancel);
        }
    }
}

impl<C: AsRef<Session>> Drop for Reconnect<C> {
    fn drop(&mut self) {
        self.close();
    }
}

/// A hop id for a client that reconnects (`SessionConfig::origin_id`), from `random`
/// bits: never 0 (no hop id), and below 2^53 (browsers read hop ids as JavaScript
/// numbers).
pub fn hop_id(random: u64) -> u64 {
    (random & ((1 << 53) - 1)).max(1)
}

/// What [`Reconnect::poll_connected`] waits for: `Some(None)` once closed, `Some(Some)`
/// with a session up that has not ended (one that ended is replaced in the status once
/// the task sees it end, which wakes the wait again).
fn up<C: AsRef<Session> + Clone>(status: &Status<C>) -> Option<Option<C>> {
    if status.closed {
        return Some(None);
    }
    status
        .current
        .as_ref()
        .filter(|current| !current.as_ref().is_closed())
        .map(|current| Some(current.clone()))
}

/// Keeps a session up until the handle is closed.
async fn keep_up<R, C, D, F, E>(
    runtime: R,
    urls: Vec<String>,
    seed: u64,
    mut dial: D,
    status: watch::Producer<Status<C>>,
) where
    R: Runtime,
    C: AsRef<Session> + Clone,
    D: FnMut(String) -> F,
    F: Future<Output = Result<C, E>>,
    E: Display,
{
    let closed = status.consume();
    let mut backoff = Backoff::new(seed);
    let mut next = 0;
    // After a GOAWAY: the URL it named, tried first.
    let mut named: Option<String> = None;
    // The session that said GOAWAY, kept until the next one is up.
    let mut leaving: Option<C> = None;
    loop {
        let url = named.take().unwrap_or_else(|| {
            let url = urls[next % urls.len()].clone();
            next += 1;
            url
        });
        let redacted = redact(&url).into_owned();
        tracing::debug!(url = %redacted, "connecting");
        let Some(dialed) = unless_closed(&closed, dial(url)).await else {
            break;
        };
        let connected = match dialed {
            Ok(connected) => connected,
            Err(error) => {
                let wait = backoff.failed();
                tracing::info!(url = %redacted, %error, ?wait, "connecting failed; trying again");
                if leaving
                    .as_ref()
                    .is_some_and(|leaving| leaving.as_ref().is_closed())
                {
                    leaving = None;
                }
                if unless_closed(&closed, sleep(&runtime, wait))
                    .await
                    .is_none()
                {
                    break;
                }
                continue;
            }
        };
        let session = connected.as_ref().clone();
        let up = runtime.now();
        let stopped = status.update(|status| {
            if !status.closed {
                status.current = Some(connected.clone());
                status.connects += 1;
            }
            status.closed
        });
        if stopped {
            session.close(Error::Cancel);
            break;
        }
        tracing::info!(url = %redacted, version = %session.version(), "connected");
        let Some(outcome) = unless_closed(
            &closed,
            going_away_retiring(&runtime, &session, leaving.take()),
        )
        .await
        else {
            break;
        };
        match outcome {
            Ok(uri) => {
                tracing::info!(url = %redacted, to = %redact(&uri), "the relay is going away; moving");
                if !uri.is_empty() {
                    named = Some(uri);
                }
                leaving = Some(connected);
                backoff.reset();
            }
            Err(error) => {
                let wait = backoff.ended(runtime.now().saturating_duration_since(up));
                tracing::info!(url = %redacted, %error, ?wait, "the session ended; reconnecting");
                status.update(|status| status.current = None);
                if unless_closed(&closed, sleep(&runtime, wait))
                    .await
                    .is_none()
                {
                    break;
                }
            }
        }
    }
    if let Some(leaving) = leaving {
        leaving.as_ref().close(Error::Cancel);
    }
    tracing::debug!("reconnecting stopped: closed by the application");
}

/// Waits for `session` to say GOAWAY (`Ok`, with the URI it named) or end (`Err`),
/// meanwhile closing `leaving` (the session the last GOAWAY came on) once it has ended by
/// itself or had [`OVERLAP`] to hand over what it carried (the relay closes it at the end
/// of its drain anyway; groups still arriving on it are not cut off). `leaving` is closed
/// on return in any case.
async fn going_away_retiring<R: Runtime, C: AsRef<Session>>(
    runtime: &R,
    session: &Session,
    mut leaving: Option<C>,
) -> Result<String, Error> {
    let mut overlap = runtime.deadline();
    overlap.set(Some(runtime.now() + OVERLAP));
    let outcome = moqx_kio::wait(|waiter| {
        if let Some(old) = &leaving {
            let old = old.as_ref();
            if old.poll_closed(waiter).is_ready() || overlap.poll(waiter).is_ready() {
                old.close(Error::Cancel);
                leaving = None;
            }
        }
        session.poll_going_away(waiter)
    })
    .await;
    if let Some(old) = leaving {
        old.as_ref().close(Error::Cancel);
    }
    outcome
}

/// Runs `future` until it completes (`Some`), or until the handle is closed (`None`).
async fn unless_closed<C, T>(
    closed: &watch::Consumer<Status<C>>,
    future: impl Future<Output = T>,
) -> Option<T> {
    moqx_kio::unless(future, |waiter| {
        closed.poll_until(waiter, |status| status.closed.then_some(()))
    })
    .await
    .ok()
}

/// Waits `duration` on `runtime`'s clock.
async fn sleep<R: Runtime>(runtime: &R, duration: Duration) {
    let mut deadline = runtime.deadline();
    deadline.set(Some(runtime.now() + duration));
    moqx_kio::wait(|waiter| deadline.poll(waiter)).await
}
