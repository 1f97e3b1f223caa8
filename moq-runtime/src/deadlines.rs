//! The deadlines of one single-threaded event loop: slots in a [`TimerWheel`], each
//! waking the task that waits on it when it fires.
//!
//! A loop that runs `moqx_net` session machines on one thread (the io_uring worker, the
//! cost meter) gives each machine's `Deadline` a slot here: arming one costs no system
//! call, and the loop parks once per turn on [`next_deadline`](DeadlineSlots::next_deadline)
//! and fires what is due with [`expire`](DeadlineSlots::expire) (DESIGN.md, "Timers").

use std::task::{Poll, Waker};
use std::time::Instant;

use moqx_kio::Waiter;

use crate::timer::TimerWheel;

/// The deadlines of one loop, by slot.
#[derive(Debug)]
pub struct DeadlineSlots {
    wheel: TimerWheel<u32>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Reused by [`expire`](Self::expire).
    expired: Vec<u32>,
}

#[derive(Debug, Default)]
struct Slot {
    armed: bool,
    fired: bool,
    waker: Option<Waker>,
}

impl DeadlineSlots {
    /// No deadlines, the wheel's clock starting at `now`.
    pub fn new(now: Instant) -> Self {
        Self {
            wheel: TimerWheel::new(now),
            slots: Vec::new(),
            free: Vec::new(),
            expired: Vec::new(),
        }
    }

    /// The earliest armed deadline.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.wheel.next_deadline()
    }

    /// How many deadlines are armed.
    pub fn armed(&self) -> usize {
        self.wheel.len()
    }

    /// Fires every deadline due at `now`, waking its task.
    pub fn expire(&mut self, now: Instant) {
        let mut expired = std::mem::take(&mut self.expired);
        self.wheel.expire(now, &mut expired);
        for slot in expired.drain(..) {
            let entry = &mut self.slots[slot as usize];
            entry.armed = false;
            entry.fired = true;
            if let Some(waker) = entry.waker.take() {
                waker.wake();
            }
        }
        self.expired = expired;
    }

    /// A slot for a new deadline, disarmed; give it back with [`release`](Self::release).
    pub fn take(&mut self) -> u32 {
        self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot::default());
            u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 deadlines")
        })
    }

    /// Arms (or re-arms) `slot` for `at`.
    pub fn arm(&mut self, slot: u32, at: Instant) {
        let entry = &mut self.slots[slot as usize];
        entry.armed = true;
        entry.fired = false;
        self.wheel.insert(slot, at);
    }

    /// Disarms `slot`: it will not fire.
    pub fn disarm(&mut self, slot: u32) {
        let entry = &mut self.slots[slot as usize];
        entry.armed = false;
        entry.fired = false;
        entry.waker = None;
        self.wheel.remove(slot);
    }

    /// Disarms `slot` and frees it for another deadline.
    pub fn release(&mut self, slot: u32) {
        self.disarm(slot);
        self.free.push(slot);
    }

    /// Ready once `slot` fired (and until it is armed again); else the task of `waiter` is
    /// woken when it fires.
    pub fn poll(&mut self, slot: u32, waiter: &Waiter) -> Poll<()> {
        let entry = &mut self.slots[slot as usize];
        if entry.fired {
            return Poll::Ready(());
        }
        if entry.armed {
            entry.waker = waiter.waker();
        }
        Poll::Pending
    }
}
