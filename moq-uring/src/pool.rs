//! Worker threads: each pinned to a core, with its ring, its receive buffers and its loop;
//! and what other threads hold of them.

use std::future::Future;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use crate::buffers::BufferRing;
use crate::counters::WorkerCounters;
use crate::probe::Capabilities;
use crate::recv::MAX_RECEIVE;
use crate::worker::{Core, Loop, Remote};
use crate::{Error, UringConfig, Worker};

/// What each worker runs before its first turn (a server's: take its socket, start the
/// application's loop).
pub(crate) type Setup = dyn Fn(&Worker) -> Result<(), Error> + Send + Sync;

/// The worker threads of a server or a client, and their handles.
#[derive(Debug)]
pub(crate) struct Pool {
    pub(crate) remotes: Vec<Arc<Remote>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// The first worker that failed (its loop returned an error or panicked), if any.
    pub(crate) failure: moqx_kio::Producer<Option<WorkerFailure>>,
}

/// A worker that stopped running while its server was up: an I/O error of its ring, or a
/// panic outside the tasks (which are caught one by one). Its connections are lost, and
/// its socket stays in the port's group, where the kernel keeps steering its share of
/// packets to it, unread: whoever runs the server should stop it (the relay drains the
/// other workers' sessions and exits non-zero).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerFailure {
    /// The worker's index.
    pub worker: usize,
    /// What ended it.
    pub reason: String,
}

impl std::fmt::Display for WorkerFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "worker {} failed: {}", self.worker, self.reason)
    }
}

impl Pool {
    /// Starts `workers` threads; each runs `setup` on its worker before its first turn.
    /// Returns once every worker has its ring (or with the first that failed).
    pub(crate) fn start(
        role: &'static str,
        workers: usize,
        config: &UringConfig,
        capabilities: &Capabilities,
        setup: Arc<Setup>,
    ) -> Result<Self, Error> {
        let cpus = moqx_runtime::cores::available();
        let mut pool = Self {
            remotes: Vec::with_capacity(workers),
            threads: Vec::with_capacity(workers),
            failure: moqx_kio::Producer::new(None),
        };
        let (ready_sender, ready) = std::sync::mpsc::channel();
        for index in 0..workers {
            let remote = Arc::new(Remote {
                jobs: Mutex::new(Vec::new()),
                executor: Arc::new(crate::executor::Shared::default()),
                counters: Arc::new(WorkerCounters::default()),
                stop: AtomicBool::new(false),
            });
            pool.remotes.push(remote.clone());
            let (config, consumption, setup, ready) = (
                config.clone(),
                if config.incremental_buffers {
                    capabilities.consumption()
                } else {
                    crate::buffers::Consumption::Whole
                },
                setup.clone(),
                ready_sender.clone(),
            );
            let cpu = cpus[index % cpus.len()];
            let failure = pool.failure.clone();
            let thread = std::thread::Builder::new()
                .name(format!("moq-uring-{role}-{index}"))
                .spawn(move || {
                    let span = tracing::info_span!("worker", role, index, cpu);
                    let _entered = span.enter();
                    if config.pin
                        && let Err(error) = moqx_runtime::cores::pin_current_thread(cpu) {
                            tracing::warn!(%error, "running unpinned");
                        }
                    let started = (|| {
                        let ring = crate::ring::build(crate::ring::SUBMISSION_ENTRIES)
                            .map_err(Error::io("building the worker's ring"))?;
                        let buffer_size = match consumption {
                            crate::buffers::Consumption::Incremental { .. } => {
                                config.recv_buffer_bytes.max(2 * MAX_RECEIVE as u32)
                            }
                            crate::buffers::Consumption::Whole => MAX_RECEIVE as u32,
                        };
                        let buffers =
                            BufferRing::new(0, config.recv_buffers, buffer_size, consumption)
                                .map_err(Error::io("allocating receive buffers"))?;
                        let core = Rc::new(Core::new(index, remote, &config, Instant::now()));
                        let worker_loop = Loop::new(core.clone(), ring, buffers)
                            .map_err(Error::io("registering receive buffers"))?;
                        setup(&Worker::from_core(core))?;
                        Ok(worker_loop)
                    })();
                    match started {
                        Ok(worker_loop) => {
                            let _ = ready.send(Ok(()));
                            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(
                                || worker_loop.run(),
                            ));
                            let reason = match ran {
                                Ok(Ok(())) => None,
                                Ok(Err(error)) => Some(error.to_string()),
                                Err(panic) => Some(panic_message(panic.as_ref())),
                            };
                            if let Some(reason) = reason {
                                // Review finding F7: this used to be the only trace, and
                                // the process went on with a socket nobody read.
                                tracing::error!(
                                    %reason,
                                    "worker failed: its connections are lost and its socket is unread; stop the server"
                                );
                                failure.update(|first| {
                                    first.get_or_insert(WorkerFailure {
                                        worker: index,
                                        reason,
                                    });
                                });
                            }
                        }
                        Err(error) => {
                            let _ = ready.send(Err(error));
                        }
                    }
                })
                .map_err(Error::io(format!("starting worker {index}")))?;
            pool.threads.push(thread);
        }
        drop(ready_sender);
        for _ in 0..workers {
            match ready.recv() {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    pool.stop();
                    return Err(error);
                }
                Err(_) => {
                    pool.stop();
                    return Err(Error::WORKER_GONE);
                }
            }
        }
        Ok(pool)
    }

    /// Each worker's ring counters, in worker order.
    pub(crate) fn worker_counters(&self) -> Vec<Arc<WorkerCounters>> {
        self.remotes
            .iter()
            .map(|remote| remote.counters.clone())
            .collect()
    }

    /// Asks every worker to stop (they end once their connections are gone).
    pub(crate) fn stop(&self) {
        for remote in &self.remotes {
            remote.stop();
        }
    }

    /// Waits for every worker thread to end.
    pub(crate) fn join(self) {
        for thread in self.threads {
            let _ = thread.join();
        }
    }

    /// Runs `task` on worker `index`; the handle yields what it returns.
    pub(crate) fn run_on<F, Fut, T>(&self, index: usize, task: F) -> JoinHandle<T>
    where
        F: FnOnce(Worker) -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        let (handle, slot) = JoinHandle::new();
        let remote = &self.remotes[index % self.remotes.len()];
        remote.send(Box::new(move |worker: &Worker| {
            let future = task(worker.clone());
            worker.spawn(async move { slot.set(future.await) });
        }));
        handle
    }
}

/// The result of a task run on a worker, awaited on any executor or waited for by a
/// blocking thread. `None` if the worker stopped before the task finished.
#[derive(Debug)]
pub struct JoinHandle<T> {
    shared: Arc<JoinShared<T>>,
}

#[derive(Debug)]
struct JoinShared<T> {
    state: Mutex<JoinState<T>>,
    done: Condvar,
}

#[derive(Debug)]
struct JoinState<T> {
    value: Option<T>,
    finished: bool,
    waker: Option<Waker>,
}

/// The task's side: sets the value, or (dropped unset) says the task will never finish.
struct JoinSlot<T> {
    shared: Arc<JoinShared<T>>,
}

impl<T> JoinHandle<T> {
    fn new() -> (Self, JoinSlot<T>) {
        let shared = Arc::new(JoinShared {
            state: Mutex::new(JoinState {
                value: None,
                finished: false,
                waker: None,
            }),
            done: Condvar::new(),
        });
        (
            Self {
                shared: shared.clone(),
            },
            JoinSlot { shared },
        )
    }

    /// Blocks the calling thread until the task finished (never call it on a worker).
    pub fn wait(self) -> Option<T> {
        let mut state = lock(&self.shared.state);
        while !state.finished {
            state = self
                .shared
                .done
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        state.value.take()
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Option<T>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut state = lock(&self.shared.state);
        if state.finished {
            return Poll::Ready(state.value.take());
        }
        state.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl<T> JoinSlot<T> {
    fn set(self, value: T) {
        lock(&self.shared.state).value = Some(value);
        // The drop marks it finished.
    }
}

impl<T> Drop for JoinSlot<T> {
    fn drop(&mut self) {
        let waker = {
            let mut state = lock(&self.shared.state);
            state.finished = true;
            state.waker.take()
        };
        self.shared.done.notify_all();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What a panic said, if it said it with a string.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        format!("panicked: {text}")
    } else if let Some(text) = panic.downcast_ref::<String>() {
        format!("panicked: {text}")
    } else {
        "panicked".to_owned()
    }
}
