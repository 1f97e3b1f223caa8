//! The meter's loop: a relay, its members and the network between them, stepped until a
//! message has reached every reader and nothing moves.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::MeterError;
use crate::local::LocalRuntime;
use crate::members::{Member, Transport};
use crate::network::{Datagram, Network};
use crate::relay::Relay;
use crate::workload::Workload;

/// The most steps one phase (setting up, delivering one message) may take before the
/// meter says it stalled: a message takes a handful, the set-up of a thousand members a
/// few hundred.
const MAX_STEPS: u32 = 100_000;

/// The relay's address.
const RELAY: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 4443);

/// A relay, its members, and the network between them.
#[derive(Debug)]
pub struct Meter {
    workload: Workload,
    relay: Relay,
    members: Vec<Member>,
    /// The members' runtime (one for all: their tasks are not measured).
    runtime: LocalRuntime,
    network: Network,
    inbox: Vec<Datagram>,
    payload: Bytes,
    /// Messages published so far.
    published: u64,
    /// Time spent in the relay's turns since the meter started (indicative: wall clock).
    relay_time: Duration,
    /// Datagrams the relay received and sent since the meter started.
    relay_datagrams: (u64, u64),
}

/// What a run measured.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    /// Messages published in the measured part.
    pub messages: u64,
    /// Frames the relay delivered in it.
    pub deliveries: u64,
    /// Wall-clock time in the relay's turns during it (indicative only).
    pub relay_time: Duration,
    /// Datagrams the relay received in it: more than a run of the same build had, and a
    /// timer fired (a busy machine slowed the run past a probe timeout).
    pub datagrams_in: u64,
    /// Datagrams the relay sent in it.
    pub datagrams_out: u64,
}

impl Meter {
    /// Starts the relay and connects every member of `workload` over `transport` (not yet
    /// set up: see [`set_up`](Self::set_up)).
    pub fn new(workload: Workload, transport: Transport) -> Result<Self, MeterError> {
        workload.check().map_err(MeterError::Workload)?;
        let now = Instant::now();
        let mut network = Network::default();
        network.attach(RELAY);
        let relay = Relay::new(RELAY, now)?;
        let runtime = LocalRuntime::new(now);
        let members = workload
            .roles()
            .into_iter()
            .enumerate()
            .map(|(index, role)| {
                let address = member_address(index);
                network.attach(address);
                Member::connect(address, RELAY, transport, role, &runtime, now)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            payload: Bytes::from(vec![b'x'; workload.size()]),
            workload,
            relay,
            members,
            runtime,
            network,
            inbox: Vec::new(),
            published: 0,
            relay_time: Duration::ZERO,
            relay_datagrams: (0, 0),
        })
    }

    /// Steps until every member is connected and reads what it should, every publisher
    /// is read by the relay, and nothing moves.
    pub fn set_up(&mut self) -> Result<(), MeterError> {
        let mut steps = 0;
        loop {
            let moved = self.step();
            let mut ready = true;
            for member in &mut self.members {
                match member.is_connected() {
                    Ok(true) => ready &= member.subscribe_announced(),
                    Ok(false) => ready = false,
                    Err(why) => return Err(MeterError::Connect(why)),
                }
            }
            let readers = self.workload.deliveries_per_message() > 0;
            ready &= self
                .members
                .iter()
                .enumerate()
                .filter(|(index, _)| self.is_publisher(*index))
                .all(|(_, member)| member.is_read() || !readers);
            if ready && !moved {
                return Ok(());
            }
            steps += 1;
            if steps > MAX_STEPS {
                return Err(MeterError::Stalled {
                    phase: "set-up".to_owned(),
                    received: self.received(),
                    expected: 0,
                });
            }
        }
    }

    /// Publishes `count` messages one at a time, each delivered to every reader before
    /// the next (a chat at a low rate per member).
    pub fn deliver(&mut self, count: u64) -> Result<Measured, MeterError> {
        let before = (self.received(), self.relay_time, self.relay_datagrams);
        for _ in 0..count {
            self.publish_one();
            self.settle()?;
        }
        Ok(Measured {
            messages: count,
            deliveries: self.received() - before.0,
            relay_time: self.relay_time - before.1,
            datagrams_in: self.relay_datagrams.0 - before.2.0,
            datagrams_out: self.relay_datagrams.1 - before.2.1,
        })
    }

    /// Publishes the next message.
    fn publish_one(&mut self) {
        let message = self.published;
        let publisher = self.workload.publisher(message);
        let own_message = match self.workload {
            Workload::Chat { members, .. } => message / members as u64,
            _ => message,
        };
        let (starts, ends) = self.workload.framing(own_message);
        let member = &mut self.members[publisher];
        member.publish(&self.payload, starts, own_message);
        if ends {
            member.finish_group();
        }
        self.published += 1;
    }

    /// Steps until every message published so far reached every reader and nothing
    /// moves; an error if a message never arrives.
    fn settle(&mut self) -> Result<(), MeterError> {
        let expected = self.published * self.workload.deliveries_per_message();
        let mut steps = 0;
        loop {
            let moved = self.step();
            let received = self.received();
            if received > expected {
                return Err(MeterError::Duplicated { received, expected });
            }
            if received == expected && !moved {
                return Ok(());
            }
            steps += 1;
            if steps > MAX_STEPS {
                return Err(MeterError::Stalled {
                    phase: format!("message {}", self.published),
                    received,
                    expected,
                });
            }
        }
    }

    /// One step: every member's turn, then the relay's. Returns whether anything moved (a
    /// datagram, a task).
    fn step(&mut self) -> bool {
        let now = Instant::now();
        let mut moved = false;
        for member in &mut self.members {
            self.network.take(member.host.address, &mut self.inbox);
            moved |= !self.inbox.is_empty();
            member.host.receive(&mut self.inbox, now);
        }
        self.runtime.expire(now);
        moved |= self.runtime.run() > 0;
        for member in &mut self.members {
            member.host.send(now);
            self.network
                .send(member.host.address, &member.host.transmits);
        }
        self.network.take(RELAY, &mut self.inbox);
        moved |= !self.inbox.is_empty();
        self.relay_datagrams.0 += self.inbox.len() as u64;
        let started = Instant::now();
        moved |= self.relay.relay_turn_measured(&mut self.inbox, started) > 0;
        self.relay_time += started.elapsed();
        self.relay_datagrams.1 += self
            .relay
            .host
            .transmits
            .iter()
            .map(|transmit| {
                transmit
                    .contents
                    .len()
                    .div_ceil(transmit.segment_size.max(1)) as u64
            })
            .sum::<u64>();
        self.network.send(RELAY, &self.relay.host.transmits);
        moved || self.network.in_flight() > 0 || self.runtime.has_ready()
    }

    /// Frames read by every member so far.
    fn received(&self) -> u64 {
        self.members.iter().map(Member::received).sum()
    }

    fn is_publisher(&self, index: usize) -> bool {
        match self.workload {
            Workload::Chat { .. } => true,
            _ => index == 0,
        }
    }

    /// How many sessions the relay accepted.
    pub fn relay_sessions(&self) -> usize {
        self.relay.sessions()
    }
}

/// Member `index`'s address: one IPv4 address each, as clients on their own machines.
fn member_address(index: usize) -> SocketAddr {
    let [_, b, c, d] = (index as u32 + 1).to_be_bytes();
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(11, b, c, d)), 5000)
}
