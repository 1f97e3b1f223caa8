//! The worker's event loop: one thread, one ring, its ports, its tasks.
//!
//! Each turn:
//! 1. reap the ring's completions: receives go to their endpoints (their buffers back to the
//!    ring once handled), finished sends give their buffers back to the endpoint's pool;
//! 2. read the clock once; run the endpoints' due timers and the tasks' due deadlines;
//! 3. run the closures other threads sent, then every task woken since the last turn;
//! 4. turn established server connections into requests for the application;
//! 5. queue a `sendmsg` for every batch the endpoints produced (all connections' packets,
//!    coalesced by destination: one submission for the whole turn);
//! 6. arm receives that ended (buffers ran out, a zero-length datagram, an error);
//! 7. if nothing is ready, park in the ring until a completion, the futex word or the
//!    earliest deadline (an absolute timeout: no timer submission per deadline); else go
//!    round again, submitting without waiting.
//!
//! The system calls per turn: one `io_uring_enter`, whatever the number of sends and
//! receives (plus one more per full submission queue).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use io_uring::{IoUring, opcode};
use moqx_runtime::endpoint::RECV_BUDGET;
use moqx_runtime::quic::QuicConnection;
use moqx_runtime::server::{Admitted, Request};

use crate::buffers::BufferRing;
use crate::counters::WorkerCounters;
use crate::executor;
use crate::port::{Port, Role};
use crate::probe::{FUTEX_BITSET_MATCH_ANY, FUTEX2_PRIVATE, FUTEX2_SIZE_U32};
use crate::ring::{self, Clock, Queue};
use crate::runtime::{Local, UringRuntime};
use crate::user_data::UserData;
use crate::wake::PARKED;

/// A closure another thread sent to run on the worker.
pub(crate) type Job = Box<dyn FnOnce(&crate::Worker) + Send>;

/// What other threads reach of a worker: its job inbox, its futex word, its counters, and
/// the stop flag.
pub(crate) struct Remote {
    pub(crate) jobs: Mutex<Vec<Job>>,
    pub(crate) executor: Arc<executor::Shared>,
    pub(crate) counters: Arc<WorkerCounters>,
    pub(crate) stop: AtomicBool,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("counters", &self.counters)
            .field("stop", &self.stop)
            .finish_non_exhaustive()
    }
}

impl Remote {
    /// Runs `job` on the worker at its next turn.
    pub(crate) fn send(&self, job: Job) {
        self.jobs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(job);
        self.executor.unparker.unpark();
    }

    /// Asks the worker to stop accepting and end once its connections are gone.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.executor.unparker.unpark();
    }
}

/// What the loop and the worker's tasks share.
pub(crate) struct Core {
    pub(crate) index: usize,
    /// Endpoints call it when a connection has something to send.
    pub(crate) flush_waker: Waker,
    flush: Arc<FlushSignal>,
    pub(crate) local: Rc<Local>,
    pub(crate) runtime: UringRuntime,
    pub(crate) ports: RefCell<Ports>,
    pub(crate) requests: RefCell<Requests>,
    pub(crate) remote: Arc<Remote>,
    /// The worker's GSO and GRO switches.
    pub(crate) gso: bool,
    /// [`UringConfig::max_send_bytes_in_flight`](crate::UringConfig).
    pub(crate) max_send_bytes: usize,
    pub(crate) gro: bool,
}

/// The worker's sockets.
#[derive(Default)]
pub(crate) struct Ports {
    pub(crate) entries: Vec<Option<Port>>,
    free: Vec<u32>,
}

/// Requests waiting for the application's `accept`.
#[derive(Default)]
pub(crate) struct Requests {
    pub(crate) queue: VecDeque<Request<UringRuntime>>,
    pub(crate) waker: Option<Waker>,
    /// No more will come: the worker is stopping.
    pub(crate) closed: bool,
}

/// Wakes the loop when a connection has something to send.
pub(crate) struct FlushSignal {
    pending: AtomicBool,
    executor: Arc<executor::Shared>,
}

impl Wake for FlushSignal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.pending.swap(true, Ordering::AcqRel) {
            self.executor.unparker.unpark();
        }
    }
}

impl Ports {
    /// Adds a port; returns its index.
    pub(crate) fn insert(&mut self, port: Port) -> u32 {
        match self.free.pop() {
            Some(index) => {
                self.entries[index as usize] = Some(port);
                index
            }
            None => {
                self.entries.push(Some(port));
                u32::try_from(self.entries.len() - 1).expect("fewer than 2^32 ports")
            }
        }
    }

    pub(crate) fn get_mut(&mut self, index: u32) -> Option<&mut Port> {
        self.entries.get_mut(index as usize)?.as_mut()
    }

    fn remove(&mut self, index: u32) {
        if let Some(entry) = self.entries.get_mut(index as usize) {
            *entry = None;
            self.free.push(index);
        }
    }
}

/// The loop's own state.
pub(crate) struct Loop {
    core: Rc<Core>,
    ring: IoUring,
    clock: Clock,
    buffers: BufferRing,
    counters: Arc<WorkerCounters>,
    futex_armed: bool,
    /// Stopping: no more requests; the loop ends once every port closed.
    stopping: bool,
}

impl Loop {
    pub(crate) fn new(
        core: Rc<Core>,
        ring: IoUring,
        mut buffers: BufferRing,
    ) -> std::io::Result<Self> {
        buffers.register(&ring)?;
        let counters = core.remote.counters.clone();
        Ok(Self {
            counters,
            core,
            ring,
            clock: Clock::new(),
            buffers,
            futex_armed: false,
            stopping: false,
        })
    }

    /// Runs until asked to stop and every connection is gone; then takes the receive
    /// buffers back from the kernel.
    pub(crate) fn run(mut self) -> std::io::Result<()> {
        loop {
            self.reap();
            let now = Instant::now();
            self.core.local.timers.borrow_mut().expire(now);
            for port in self.core.ports.borrow_mut().entries.iter_mut().flatten() {
                port.handle_timeouts(now);
            }
            self.run_jobs();
            self.core.local.executor.run();
            self.accept(now);
            if self.core.remote.stop.load(Ordering::SeqCst) && !self.stopping {
                self.begin_stop();
            }
            self.core.flush.pending.store(false, Ordering::Release);
            self.submit_sends(now)?;
            self.maintain_ports()?;
            if self.stopping && self.core.ports.borrow().entries.iter().all(Option::is_none) {
                break;
            }
            self.park()?;
        }
        self.finish()
    }

    /// Step 1: the completions the ring holds, up to [`RECV_BUDGET`] received datagrams:
    /// a flood must not keep the turn's timers and sends from running (the rest stay in
    /// the completion queue, and the next turn takes them without parking).
    fn reap(&mut self) {
        let now = Instant::now();
        let mut ports = self.core.ports.borrow_mut();
        let mut completions = self.ring.completion();
        completions.sync();
        let mut reaped = 0usize;
        let received_before = self.counters.datagrams_received.load(Ordering::Relaxed);
        for entry in completions.by_ref() {
            reaped += 1;
            tracing::trace!(
                user_data = entry.user_data(),
                result = entry.result(),
                flags = entry.flags(),
                "completion"
            );
            match UserData::parse(entry.user_data()) {
                Some(UserData::Recv { port }) => {
                    if let Some(port) = ports.get_mut(port) {
                        port.received(
                            entry.result(),
                            entry.flags(),
                            &mut self.buffers,
                            &self.counters,
                            now,
                        );
                    } else if let Some(buffer) = io_uring::cqueue::buffer_select(entry.flags()) {
                        // A port that went away between its receive and this completion.
                        if !io_uring::cqueue::buffer_more(entry.flags()) {
                            self.buffers.give_back(buffer);
                        }
                    }
                }
                Some(UserData::Send { port, slot }) => {
                    if let Some(port) = ports.get_mut(port) {
                        port.sent(slot, entry.result(), now);
                    }
                }
                Some(UserData::Futex) => self.futex_armed = false,
                Some(UserData::Cancel) | None => {}
            }
            let received = self.counters.datagrams_received.load(Ordering::Relaxed);
            if received.wrapping_sub(received_before) >= RECV_BUDGET as u64 {
                self.counters
                    .add(&self.counters.receive_budget_exhausted, 1);
                break;
            }
        }
        drop(completions);
        self.buffers.publish();
        if reaped > 0 {
            tracing::trace!(reaped, "reaped");
        }
    }

    /// Step 3: closures from other threads.
    fn run_jobs(&mut self) {
        let jobs = std::mem::take(
            &mut *self
                .core
                .remote
                .jobs
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        if jobs.is_empty() {
            return;
        }
        let worker = crate::Worker::from_core(self.core.clone());
        for job in jobs {
            job(&worker);
        }
    }

    /// Step 4: established server connections, to requests.
    fn accept(&mut self, now: Instant) {
        let _ = now;
        let mut established: Vec<(QuicConnection, moqx_runtime::server::Acceptor)> = Vec::new();
        for port in self.core.ports.borrow_mut().entries.iter_mut().flatten() {
            if let Role::Server { acceptor } = &port.role {
                while let Some(connection) = port.endpoint.accept() {
                    established.push((connection, (**acceptor).clone()));
                }
            }
        }
        for (connection, acceptor) in established {
            match acceptor.admit(&self.core.runtime, connection) {
                Admitted::Request(request) => self.core.push_request(request),
                Admitted::Handshake(handshaking) => {
                    let core = self.core.clone();
                    self.core.local.executor.spawn(async move {
                        if let Some(request) = handshaking.await {
                            core.push_request(request);
                        }
                    });
                }
                Admitted::Refused => {}
            }
        }
    }

    /// Stops taking requests: the application's `accept` ends; server ports close once
    /// their connections are gone.
    fn begin_stop(&mut self) {
        self.stopping = true;
        for port in self.core.ports.borrow_mut().entries.iter_mut().flatten() {
            port.endpoint.stop();
        }
        let mut requests = self.core.requests.borrow_mut();
        requests.closed = true;
        if let Some(waker) = requests.waker.take() {
            waker.wake();
        }
        tracing::debug!(worker = self.core.index, "stopping");
    }

    /// Step 5: every batch the endpoints have to send.
    fn submit_sends(&mut self, now: Instant) -> std::io::Result<()> {
        let mut queue = Queue {
            ring: &mut self.ring,
            counters: &self.counters,
        };
        let mut ports = self.core.ports.borrow_mut();
        for (index, port) in ports.entries.iter_mut().enumerate() {
            if let Some(port) = port {
                port.flush(&mut queue, index as u32, now)?;
            }
        }
        Ok(())
    }

    /// Step 6: arms receives that ended; closes ports that are done; drops closed ones.
    fn maintain_ports(&mut self) -> std::io::Result<()> {
        let mut queue = Queue {
            ring: &mut self.ring,
            counters: &self.counters,
        };
        let group = self.buffers.group();
        let mut ports = self.core.ports.borrow_mut();
        let mut gone = Vec::new();
        for (index, entry) in ports.entries.iter_mut().enumerate() {
            let Some(port) = entry else { continue };
            let index = index as u32;
            let done = port.is_spent() || (self.stopping && port.endpoint.is_empty());
            if done {
                port.close(&mut queue, index)?;
            }
            if port.is_closed() {
                gone.push(index);
            } else {
                port.arm(&mut queue, index, group)?;
            }
        }
        for index in gone {
            ports.remove(index);
            tracing::debug!(port = index, "port closed");
        }
        Ok(())
    }

    /// Step 7: park unless something is ready.
    fn park(&mut self) -> std::io::Result<()> {
        if self.busy() {
            self.counters.add(&self.counters.enters, 1);
            self.ring.submit()?;
            return Ok(());
        }
        self.core.remote.executor.unparker.prepare_park();
        if self.busy() || self.core.remote.executor.unparker.notified() {
            self.core.remote.executor.unparker.running();
            self.counters.add(&self.counters.enters, 1);
            self.ring.submit()?;
            return Ok(());
        }
        let unparker = &self.core.remote.executor.unparker;
        if !self.futex_armed {
            let wait = opcode::FutexWait::new(
                unparker.word(),
                u64::from(PARKED),
                FUTEX_BITSET_MATCH_ANY,
                FUTEX2_SIZE_U32 | FUTEX2_PRIVATE,
            )
            .build()
            .user_data(UserData::Futex.into());
            Queue {
                ring: &mut self.ring,
                counters: &self.counters,
            }
            .push(&wait)?;
            self.futex_armed = true;
        }
        let deadline = self.next_deadline();
        tracing::trace!(in_ms = ?deadline.map(|at| at.saturating_duration_since(Instant::now()).as_millis()), "parking");
        self.counters.add(&self.counters.enters, 1);
        self.counters.add(&self.counters.parks, 1);
        for port in self.core.ports.borrow().entries.iter().flatten() {
            port.io_counters().parks.fetch_add(1, Ordering::Relaxed);
        }
        ring::submit_and_wait(&self.ring, deadline, &self.clock)?;
        unparker.running();
        Ok(())
    }

    /// Whether the next turn has work without waiting.
    fn busy(&mut self) -> bool {
        (self.core.remote.stop.load(Ordering::SeqCst) && !self.stopping)
            || self.core.local.executor.has_ready()
            || self.core.flush.pending.load(Ordering::Acquire)
            || !self
                .core
                .remote
                .jobs
                .lock()
                .map(|jobs| jobs.is_empty())
                .unwrap_or(false)
            || !self.ring.completion().is_empty()
    }

    /// The earliest of the endpoints' timeouts and the tasks' deadlines.
    fn next_deadline(&self) -> Option<Instant> {
        let timers = self.core.local.timers.borrow().next_deadline();
        self.core
            .ports
            .borrow()
            .entries
            .iter()
            .flatten()
            .filter_map(|port| port.endpoint.next_timeout())
            .chain(timers)
            .min()
    }

    /// After the last port closed: the futex wait cancelled, the buffers taken back.
    fn finish(mut self) -> std::io::Result<()> {
        if self.futex_armed {
            // Cancels the futex wait: its completion ends it. (Waking it would take a
            // FUTEX_WAKE, which `unpark` makes only while the word holds PARKED; after the
            // last turn it holds RUNNING, so the wait sat out the whole safety deadline
            // below on every stop: review finding F15.)
            let cancel = opcode::AsyncCancel::new(UserData::Futex.into())
                .build()
                .user_data(UserData::Cancel.into());
            Queue {
                ring: &mut self.ring,
                counters: &self.counters,
            }
            .push(&cancel)?;
            let deadline = Instant::now() + Duration::from_secs(1);
            while self.futex_armed && Instant::now() < deadline {
                ring::submit_and_wait(&self.ring, Some(deadline), &self.clock)?;
                self.reap();
            }
            if self.futex_armed {
                self.counters.add(&self.counters.unclean_stops, 1);
                tracing::warn!(
                    worker = self.core.index,
                    "the worker's park wait did not end within a second of stopping"
                );
            }
        }
        self.buffers.unregister(&self.ring)?;
        // Tasks hold the core (a cycle through the executor): dropped here, with it.
        self.core.local.executor.clear();
        self.core.requests.borrow_mut().queue.clear();
        tracing::debug!(worker = self.core.index, "worker ended");
        Ok(())
    }
}

impl Core {
    pub(crate) fn new(
        index: usize,
        remote: Arc<Remote>,
        options: &crate::UringConfig,
        now: Instant,
    ) -> Self {
        let local = Rc::new(Local::new(now, remote.executor.clone()));
        let flush = Arc::new(FlushSignal {
            pending: AtomicBool::new(false),
            executor: remote.executor.clone(),
        });
        Self {
            index,
            flush_waker: Waker::from(flush.clone()),
            flush,
            runtime: UringRuntime::new(local.clone()),
            local,
            ports: RefCell::new(Ports::default()),
            requests: RefCell::new(Requests::default()),
            remote,
            gso: options.gso,
            max_send_bytes: options.max_send_bytes_in_flight.max(1),
            gro: options.gro,
        }
    }

    fn push_request(&self, request: Request<UringRuntime>) {
        let mut requests = self.requests.borrow_mut();
        if requests.closed {
            return; // dropped: the connection closes
        }
        requests.queue.push_back(request);
        if let Some(waker) = requests.waker.take() {
            waker.wake();
        }
    }
}
