//! The `moqx_net` runtime on tokio: machines on the work-stealing pool, timers from tokio.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use moqx_kio::Waiter;
use moqx_net::runtime::{Deadline, Runtime};
use moqx_net::session::SessionMachine;
use moqx_runtime::binding::BindingSession;

/// Runs session machines on a tokio runtime.
#[derive(Debug, Clone)]
pub struct TokioRuntime {
    handle: tokio::runtime::Handle,
}

/// A session machine's timer: a tokio `Sleep`.
#[derive(Debug)]
pub struct TokioDeadline {
    handle: tokio::runtime::Handle,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl TokioRuntime {
    /// The runtime the caller runs on.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn current() -> Self {
        Self {
            handle: tokio::runtime::Handle::current(),
        }
    }

    /// A given runtime.
    pub fn new(handle: tokio::runtime::Handle) -> Self {
        Self { handle }
    }
}

impl Runtime for TokioRuntime {
    type Transport = BindingSession;
    type Deadline = TokioDeadline;

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn deadline(&self) -> TokioDeadline {
        TokioDeadline {
            handle: self.handle.clone(),
            sleep: None,
        }
    }

    fn spawn(&self, machine: SessionMachine<Self>) {
        self.handle.spawn(machine);
    }
}

impl Deadline for TokioDeadline {
    fn set(&mut self, at: Option<Instant>) {
        let Some(at) = at else {
            self.sleep = None;
            return;
        };
        let at = tokio::time::Instant::from_std(at);
        match self.sleep.as_mut() {
            Some(sleep) => sleep.as_mut().reset(at),
            None => {
                let _context = self.handle.enter();
                self.sleep = Some(Box::pin(tokio::time::sleep_until(at)));
            }
        }
    }

    fn poll(&mut self, waiter: &Waiter) -> Poll<()> {
        let (Some(sleep), Some(waker)) = (self.sleep.as_mut(), waiter.waker()) else {
            return Poll::Pending;
        };
        sleep.as_mut().poll(&mut Context::from_waker(&waker))
    }
}
