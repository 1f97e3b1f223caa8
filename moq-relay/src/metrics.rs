//! The relay's counters, and their Prometheus text rendering for `/metrics`.
//!
//! Session counters (frames, bytes, subscriptions) live in each session and are summed at
//! scrape time over the sessions still open, plus what closed sessions left behind: the
//! hot path adds nothing for metrics.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use moqx_net::Error;
use moqx_net::coding::Version;
use moqx_net::model::{MemoryBudget, Origin};
use moqx_net::session::{Session, SessionCounters};
use moqx_net::transport::TransportStats;
use moqx_runtime::binding::Binding;
use moqx_runtime::endpoint::EndpointCounters;

/// Why a connection was refused before it had a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Refusal {
    /// Its token (or lack of one) does not allow it.
    Unauthorized,
    /// `limits.max_sessions` were open.
    TooManySessions,
    /// `limits.max_pending_setup` raw-QUIC connections were waiting for their SETUP.
    TooManyPending,
    /// The relay is draining (shutting down): it takes no new session.
    Draining,
}

impl Refusal {
    fn label(self) -> &'static str {
        match self {
            Refusal::Unauthorized => "unauthorized",
            Refusal::TooManySessions => "too_many_sessions",
            Refusal::TooManyPending => "too_many_pending_setup",
            Refusal::Draining => "draining",
        }
    }
}

/// Everything `/metrics` shows.
#[derive(Debug, Default)]
pub struct Metrics {
    state: Mutex<State>,
    /// Each driver worker's endpoint counters, in worker order (one in work-stealing mode).
    workers: Vec<Arc<EndpointCounters>>,
    /// The relay's memory budget, if it has one.
    memory: Option<MemoryBudget>,
}

#[derive(Debug, Default)]
struct State {
    live: HashMap<u64, Live>,
    /// Live sessions still waiting for their SETUP (raw QUIC, before its authorization).
    pending: usize,
    /// Sessions established before `opened` saw them (their SETUP raced the bookkeeping).
    established_early: std::collections::HashSet<u64>,
    opened: u64,
    /// Sessions accepted, by the moq-lite version they speak.
    opened_by_version: BTreeMap<Version, u64>,
    /// Sessions accepted, by the binding they came over (`quic`, `websocket`, …).
    opened_by_binding: BTreeMap<&'static str, u64>,
    /// What closed sessions counted, summed.
    closed: Totals,
    /// Closed sessions by the error they ended with.
    ended: BTreeMap<String, u64>,
    refused: BTreeMap<Refusal, u64>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Totals {
    counters: SessionCounters,
    bytes_sent: u64,
    bytes_received: u64,
    packets_lost: u64,
    peer_migrations: u64,
    path_fallbacks: u64,
}

impl Totals {
    fn add(&mut self, counters: SessionCounters, stats: TransportStats) {
        let c = &mut self.counters;
        c.frames_sent += counters.frames_sent;
        c.frames_received += counters.frames_received;
        c.payload_bytes_sent += counters.payload_bytes_sent;
        c.payload_bytes_received += counters.payload_bytes_received;
        c.subscriptions_served += counters.subscriptions_served;
        c.subscriptions_refused += counters.subscriptions_refused;
        c.subscriptions_active += counters.subscriptions_active;
        c.announce_requests_refused += counters.announce_requests_refused;
        c.groups_dropped += counters.groups_dropped;
        c.groups_skipped += counters.groups_skipped;
        c.groups_refused += counters.groups_refused;
        self.bytes_sent += stats.bytes_sent;
        self.bytes_received += stats.bytes_received;
        self.packets_lost += stats.packets_lost;
        self.peer_migrations += stats.peer_migrations;
        self.path_fallbacks += stats.path_fallbacks;
    }
}

impl State {
    /// Established sessions: live ones past their SETUP, and those whose SETUP was
    /// authorized before the relay's bookkeeping saw them open.
    fn established(&self) -> usize {
        self.live.len() - self.pending + self.established_early.len()
    }
}

/// A live session, and whether it is established (its client authorized; a session
/// waiting for its SETUP is not yet).
#[derive(Debug)]
struct Live {
    session: Session,
    established: bool,
    /// The binding's name.
    binding: &'static str,
    /// The client's address, where the binding has one.
    peer: Option<std::net::SocketAddr>,
    /// When it opened.
    since: std::time::Instant,
}

/// A live session as `/debug/sessions` shows it.
#[derive(Debug, Clone)]
pub(crate) struct LiveSession {
    pub(crate) id: u64,
    pub(crate) session: Session,
    pub(crate) established: bool,
    pub(crate) binding: &'static str,
    pub(crate) peer: Option<std::net::SocketAddr>,
    pub(crate) since: std::time::Instant,
}

impl Metrics {
    /// Counts a session from `peer` that opened over `binding`, established already
    /// (WebTransport, WebSocket: its request was authorized) or waiting for its SETUP; its
    /// counters are read until it closes.
    pub fn opened(
        &self,
        id: u64,
        session: Session,
        established: bool,
        binding: Binding,
        peer: Option<std::net::SocketAddr>,
    ) {
        let mut state = self.lock();
        state.opened += 1;
        *state
            .opened_by_version
            .entry(session.version())
            .or_default() += 1;
        *state.opened_by_binding.entry(binding.name()).or_default() += 1;
        let established = established || state.established_early.remove(&id);
        if !established {
            state.pending += 1;
        }
        state.live.insert(
            id,
            Live {
                session,
                established,
                binding: binding.name(),
                peer,
                since: std::time::Instant::now(),
            },
        );
    }

    /// Marks session `id` established (its SETUP was authorized) if fewer than `max`
    /// sessions are, and says whether it did: from then on it counts against
    /// `limits.max_sessions`. The check and the mark are one step, so sessions whose
    /// SETUPs arrive together cannot all pass the check.
    pub fn try_establish(&self, id: u64, max: usize) -> bool {
        let mut state = self.lock();
        if state.established() >= max {
            return false;
        }
        match state.live.get_mut(&id) {
            Some(live) if !live.established => {
                live.established = true;
                state.pending -= 1;
            }
            Some(_) => {}
            None => {
                state.established_early.insert(id);
            }
        }
        true
    }

    /// Counts a session that closed with `error`, keeping what it counted.
    pub fn closed(&self, id: u64, error: Error) {
        let mut state = self.lock();
        if let Some(live) = state.live.remove(&id) {
            if !live.established {
                state.pending -= 1;
            }
            let (counters, stats) = (live.session.counters(), live.session.stats());
            state.closed.add(counters, stats);
        }
        state.established_early.remove(&id);
        *state.ended.entry(error_label(error)).or_default() += 1;
    }

    /// Counts a refused connection.
    pub fn refused(&self, why: Refusal) {
        *self.lock().refused.entry(why).or_default() += 1;
    }

    /// The sessions open now, established or not.
    pub fn live_sessions(&self) -> Vec<Session> {
        self.lock()
            .live
            .values()
            .map(|live| live.session.clone())
            .collect()
    }

    /// Every live session with what the relay knows of it, by id.
    pub(crate) fn live_details(&self) -> Vec<LiveSession> {
        let mut sessions: Vec<LiveSession> = self
            .lock()
            .live
            .iter()
            .map(|(&id, live)| LiveSession {
                id,
                session: live.session.clone(),
                established: live.established,
                binding: live.binding,
                peer: live.peer,
                since: live.since,
            })
            .collect();
        sessions.sort_by_key(|live| live.id);
        sessions
    }

    /// The live session `id`, if it is open.
    pub fn session(&self, id: u64) -> Option<Session> {
        self.lock().live.get(&id).map(|live| live.session.clone())
    }

    /// How many established sessions are open now (what `limits.max_sessions` bounds).
    pub fn session_count(&self) -> usize {
        self.lock().established()
    }

    /// How many sessions are waiting for their SETUP now.
    pub fn pending_count(&self) -> usize {
        self.lock().pending
    }

    /// Metrics that also show each of the driver's workers (`counters`, in worker order).
    pub fn with_workers(counters: Vec<Arc<EndpointCounters>>) -> Self {
        Self {
            state: Mutex::default(),
            workers: counters,
            memory: None,
        }
    }

    /// These metrics, showing `memory`'s accounting too.
    pub fn with_memory_budget(self, memory: MemoryBudget) -> Self {
        Self {
            memory: Some(memory),
            ..self
        }
    }

    /// The Prometheus text exposition of every counter, with `origin`'s broadcasts.
    pub fn render(&self, origin: &Origin) -> String {
        // Counted before the metrics lock, and without copying a path: the origin's lock is
        // what every publish and subscribe takes.
        let broadcasts = origin.broadcast_count() as u64;
        let listeners = origin.listener_stats();
        // What the text needs, copied out, so that sessions opening and closing do not
        // wait for the rendering.
        let by_binding;
        let (opened, by_version, live, established, pending, closed, ended, refused) = {
            let state = self.lock();
            let live: Vec<Session> = state
                .live
                .values()
                .map(|live| live.session.clone())
                .collect();
            // Every binding listed, at 0 if none came over it: a dashboard's series exist
            // from the start.
            let every = || -> BTreeMap<&'static str, u64> {
                Binding::ALL
                    .iter()
                    .map(|binding| (binding.name(), 0))
                    .collect()
            };
            let (mut live_by_binding, mut opened_by_binding) = (every(), every());
            for live in state.live.values() {
                *live_by_binding.entry(live.binding).or_default() += 1;
            }
            opened_by_binding.extend(&state.opened_by_binding);
            by_binding = (live_by_binding, opened_by_binding);
            (
                state.opened,
                state.opened_by_version.clone(),
                live,
                state.established(),
                state.pending,
                state.closed,
                state.ended.clone(),
                state.refused.clone(),
            )
        };
        let mut totals = closed;
        let mut active = Totals::default();
        let (mut open_group_streams, mut open_group_entries) = (0, 0);
        for session in &live {
            let (counters, stats) = (session.counters(), session.stats());
            totals.add(counters, stats);
            active.add(counters, stats);
            open_group_streams += counters.open_group_streams;
            open_group_entries += counters.open_group_entries;
        }
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, u64)]| {
            let _ = writeln!(out, "# HELP moq_relay_{name} {help}");
            let _ = writeln!(out, "# TYPE moq_relay_{name} {kind}");
            for (labels, value) in samples {
                let _ = writeln!(out, "moq_relay_{name}{labels} {value}");
            }
        };
        let one = |value: u64| [(String::new(), value)];
        let c = totals.counters;
        metric(
            "sessions",
            "gauge",
            "Sessions established now (counted against limits.max_sessions).",
            &one(established as u64),
        );
        metric(
            "sessions_pending_setup",
            "gauge",
            "Raw-QUIC connections waiting for their SETUP now (limits.max_pending_setup).",
            &one(pending as u64),
        );
        metric(
            "sessions_opened_total",
            "counter",
            "Sessions accepted.",
            &one(opened),
        );
        let mut live_by_version: BTreeMap<Version, u64> =
            by_version.keys().map(|v| (*v, 0)).collect();
        for session in &live {
            *live_by_version.entry(session.version()).or_default() += 1;
        }
        let labelled = |counts: &BTreeMap<Version, u64>| -> Vec<(String, u64)> {
            counts
                .iter()
                .map(|(version, n)| (format!("{{version=\"{version}\"}}"), *n))
                .collect()
        };
        metric(
            "sessions_by_version",
            "gauge",
            "Sessions open now (established or waiting for their SETUP), by the moq-lite version they speak.",
            &labelled(&live_by_version),
        );
        metric(
            "sessions_opened_by_version_total",
            "counter",
            "Sessions accepted, by the moq-lite version they negotiated.",
            &labelled(&by_version),
        );
        let by_name = |counts: &BTreeMap<&'static str, u64>| -> Vec<(String, u64)> {
            counts
                .iter()
                .map(|(binding, n)| (format!("{{binding=\"{binding}\"}}"), *n))
                .collect()
        };
        metric(
            "sessions_by_binding",
            "gauge",
            "Sessions open now, by the binding they came over (quic, webtransport, websocket, tls, tcp).",
            &by_name(&by_binding.0),
        );
        metric(
            "sessions_opened_by_binding_total",
            "counter",
            "Sessions accepted, by the binding they came over.",
            &by_name(&by_binding.1),
        );
        let ended: Vec<_> = ended
            .iter()
            .map(|(code, n)| (format!("{{error=\"{code}\"}}"), *n))
            .collect();
        metric(
            "sessions_closed_total",
            "counter",
            "Sessions ended, by the error they ended with (cancelled is a normal close).",
            &ended,
        );
        let refused: Vec<_> = refused
            .iter()
            .map(|(why, n)| (format!("{{reason=\"{}\"}}", why.label()), *n))
            .collect();
        metric(
            "connections_refused_total",
            "counter",
            "Connections refused before a session started.",
            &refused,
        );
        metric(
            "broadcasts",
            "gauge",
            "Broadcasts announced now.",
            &one(broadcasts),
        );
        metric(
            "subscriptions",
            "gauge",
            "Subscriptions being served now.",
            &one(active.counters.subscriptions_active),
        );
        metric(
            "subscriptions_total",
            "counter",
            "Subscriptions served.",
            &one(c.subscriptions_served),
        );
        metric(
            "subscriptions_refused_total",
            "counter",
            "Requests (SUBSCRIBE, TRACK, FETCH) refused for limits.max_subscriptions_per_session.",
            &one(c.subscriptions_refused),
        );
        metric(
            "announce_requests_refused_total",
            "counter",
            "Announce streams refused for limits.max_announce_requests_per_session.",
            &one(c.announce_requests_refused),
        );
        metric(
            "groups_dropped_total",
            "counter",
            "Groups dropped unsent: the subscriber gave no stream credit \
             (limits.max_queued_groups_per_session).",
            &one(c.groups_dropped),
        );
        metric(
            "groups_skipped_total",
            "counter",
            "Groups a subscriber never got because the relay's cache released them before they \
             were sent (caches shed under limits.max_memory_bytes, or the track ran ahead).",
            &one(c.groups_skipped),
        );
        metric(
            "groups_refused_total",
            "counter",
            "Groups from publishers refused for limits.max_group_bytes or max_group_frames.",
            &one(c.groups_refused),
        );
        metric(
            "frames_received_total",
            "counter",
            "Frames received from publishers.",
            &one(c.frames_received),
        );
        metric(
            "frames_sent_total",
            "counter",
            "Frames sent to subscribers.",
            &one(c.frames_sent),
        );
        metric(
            "payload_bytes_received_total",
            "counter",
            "Frame payload bytes received.",
            &one(c.payload_bytes_received),
        );
        metric(
            "payload_bytes_sent_total",
            "counter",
            "Frame payload bytes sent.",
            &one(c.payload_bytes_sent),
        );
        metric(
            "quic_bytes_received_total",
            "counter",
            "QUIC bytes received.",
            &one(totals.bytes_received),
        );
        metric(
            "quic_bytes_sent_total",
            "counter",
            "QUIC bytes sent, retransmissions included.",
            &one(totals.bytes_sent),
        );
        metric(
            "quic_packets_lost_total",
            "counter",
            "QUIC packets declared lost.",
            &one(totals.packets_lost),
        );
        metric(
            "quic_peer_migrations_total",
            "counter",
            "Times a client's address changed (a NAT that rebinds, a client that moves) and its connection followed it there, once the new address was validated.",
            &one(totals.peer_migrations),
        );
        metric(
            "quic_path_fallbacks_total",
            "counter",
            "Times QUIC gave the path a connection was on up (a path check counted lost) and fell back to an older one; meanwhile what it sends goes where the client was last seen. Each is logged at debug.",
            &one(totals.path_fallbacks),
        );
        let per_worker = |read: fn(&EndpointCounters) -> u64| -> Vec<(String, u64)> {
            self.workers
                .iter()
                .enumerate()
                .map(|(worker, counters)| (format!("{{worker=\"{worker}\"}}"), read(counters)))
                .collect()
        };
        metric(
            "worker_datagrams_total",
            "counter",
            "UDP datagrams each driver worker handled.",
            &per_worker(|c| c.datagrams.load(Ordering::Relaxed)),
        );
        metric(
            "worker_receive_calls_total",
            "counter",
            "Receive operations of each driver worker that returned datagrams (recvmmsg calls, io_uring receive completions).",
            &per_worker(|c| c.receive_calls.load(Ordering::Relaxed)),
        );
        metric(
            "worker_datagrams_sent_total",
            "counter",
            "UDP datagrams each driver worker sent.",
            &per_worker(|c| c.datagrams_sent.load(Ordering::Relaxed)),
        );
        metric(
            "worker_send_calls_total",
            "counter",
            "Send operations of each driver worker (sendmsg calls, io_uring sendmsgs): with GSO, one per batch.",
            &per_worker(|c| c.send_calls.load(Ordering::Relaxed)),
        );
        metric(
            "worker_parks_total",
            "counter",
            "Times each driver worker ran out of work and waited for a datagram, a timer or another worker (0 from the multi-threaded tokio driver, which cannot count them): worker_datagrams_total over it is what one wake-up handles.",
            &per_worker(|c| c.parks.load(Ordering::Relaxed)),
        );
        metric(
            "announce_listeners",
            "gauge",
            "Announcement listeners now (sessions' announce streams, and the relay's own).",
            &one(listeners.listeners as u64),
        );
        metric(
            "announcements_waiting",
            "gauge",
            "Announcement changes queued for listeners that have not read them (at most one per live path per listener).",
            &one(listeners.waiting_changes as u64),
        );
        metric(
            "open_group_streams",
            "gauge",
            "Group streams the relay has open to subscribers now.",
            &one(open_group_streams),
        );
        metric(
            "open_group_entries",
            "gauge",
            "Entries in the sessions' queues of open group streams (at most twice the open streams plus a constant per session).",
            &one(open_group_entries),
        );
        if let Some(memory) = &self.memory {
            let stats = memory.stats();
            metric(
                "memory_budget_bytes",
                "gauge",
                "limits.max_memory_bytes: the relay-wide memory budget.",
                &one(stats.limit),
            );
            metric(
                "memory_accounted_bytes",
                "gauge",
                "Bytes accounted against the budget now: payload of every group held (cached, queued, being received) and waiting announcements.",
                &one(stats.used),
            );
            metric(
                "memory_accounted_peak_bytes",
                "gauge",
                "The most bytes ever accounted at once.",
                &one(stats.peak),
            );
            metric(
                "memory_caches_shed_total",
                "counter",
                "Times a track's cache was cut to its newest group because the budget was past three quarters full.",
                &one(stats.caches_shed),
            );
            metric(
                "memory_subscriptions_refused_total",
                "counter",
                "Subscriptions refused because the memory budget was full.",
                &one(stats.subscriptions_refused),
            );
            metric(
                "memory_frames_refused_total",
                "counter",
                "Received frames refused, with their groups, because the memory budget was full.",
                &one(stats.frames_refused),
            );
        }
        let sum = |read: fn(&EndpointCounters) -> u64| -> u64 {
            self.workers.iter().map(|counters| read(counters)).sum()
        };
        metric(
            "send_errors_total",
            "counter",
            "UDP send operations the kernel refused (their datagrams lost until QUIC retransmits them), over every worker. Each is also logged at warn, at most once a second per socket.",
            &one(sum(|c| c.send_errors.load(Ordering::Relaxed))),
        );
        metric(
            "datagrams_send_failed_total",
            "counter",
            "UDP datagrams in the refused sends of send_errors_total.",
            &one(sum(|c| c.datagrams_send_failed.load(Ordering::Relaxed))),
        );
        metric(
            "mtu_probes_refused_total",
            "counter",
            "Path MTU probes the kernel refused as larger than the interface's MTU (EMSGSIZE): the path is smaller than the probe, which QUIC takes as a lost probe. Not errors.",
            &one(sum(|c| c.oversize_refused.load(Ordering::Relaxed))),
        );
        metric(
            "stateless_resets_sent_total",
            "counter",
            "Stateless resets sent: answers to packets for connections this relay no longer has (after a restart, the peers of the connections it lost hear at once).",
            &one(sum(|c| c.stateless_resets.load(Ordering::Relaxed))),
        );
        metric(
            "worker_misrouted_packets_total",
            "counter",
            "Packets that reached a worker other than their connection's (dropped): the steering missed, e.g. after a restart with another worker count.",
            &per_worker(|c| c.misrouted.load(Ordering::Relaxed)),
        );
        out
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A label for the error a session ended with: its name, stable across releases. The set
/// is bounded whatever peers send: moq-lite's own codes (0 to 31) each have one; every
/// application code shares `application`, every other code a peer sends `unknown_code`.
/// (Before, each distinct code a peer closed with became a label, kept forever.)
fn error_label(error: Error) -> String {
    match error {
        Error::Cancel => "cancelled".into(),
        Error::Closed => "closed".into(),
        Error::Unauthorized => "unauthorized".into(),
        Error::Timeout => "timeout".into(),
        Error::Transport => "transport".into(),
        Error::Decode => "decode".into(),
        Error::ProtocolViolation => "protocol_violation".into(),
        Error::FrameTooLarge => "frame_too_large".into(),
        Error::BoundsExceeded => "bounds_exceeded".into(),
        Error::App(_) => "application".into(),
        Error::Remote(_) => "unknown_code".into(),
        other => format!("code_{}", other.to_code()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (review): the SETUP hook checked the count, then marked the session, in
    /// two steps, so SETUPs arriving together could all pass. A session whose SETUP was
    /// authorized before the bookkeeping saw it open counts too.
    #[test]
    fn establishing_checks_and_counts_in_one_step() {
        let metrics = Metrics::default();
        assert!(metrics.try_establish(1, 1), "the first place");
        assert_eq!(metrics.session_count(), 1, "counted before it is seen open");
        assert!(!metrics.try_establish(2, 1), "no second place");
        metrics.closed(1, Error::Cancel);
        assert_eq!(metrics.session_count(), 0);
        assert!(metrics.try_establish(2, 1), "the place is free again");
    }

    #[test]
    fn the_exposition_has_help_type_and_labelled_samples() {
        let metrics = Metrics::default();
        metrics.refused(Refusal::Unauthorized);
        metrics.refused(Refusal::Unauthorized);
        metrics.closed(7, Error::Cancel);
        let origin = Origin::new();
        let broadcast = moqx_net::model::BroadcastProducer::new();
        origin.publish("a", &broadcast).unwrap();
        let text = metrics.render(&origin);
        assert!(text.contains("# TYPE moq_relay_sessions gauge\nmoq_relay_sessions 0\n"));
        assert!(text.contains("moq_relay_connections_refused_total{reason=\"unauthorized\"} 2\n"));
        assert!(text.contains("moq_relay_sessions_closed_total{error=\"cancelled\"} 1\n"));
        assert!(text.contains("moq_relay_broadcasts 1\n"));
        for line in text.lines().filter(|line| !line.starts_with('#')) {
            let (_, value) = line.rsplit_once(' ').expect("name value");
            value.parse::<u64>().expect("an integer sample");
        }
    }

    /// Regression: every distinct code a peer closed with became a label, kept forever.
    #[test]
    fn codes_from_peers_do_not_grow_the_label_set() {
        let metrics = Metrics::default();
        for code in 1_000_000..1_000_100u64 {
            metrics.closed(code, Error::Remote(code));
        }
        for code in 0..100u16 {
            metrics.closed(u64::from(code), Error::App(code));
        }
        let text = metrics.render(&Origin::new());
        let closed: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with("moq_relay_sessions_closed_total{"))
            .collect();
        assert_eq!(closed.len(), 2, "{closed:?}");
        assert!(text.contains("moq_relay_sessions_closed_total{error=\"unknown_code\"} 100\n"));
        assert!(text.contains("moq_relay_sessions_closed_total{error=\"application\"} 100\n"));
    }

    #[test]
    fn every_code_moq_lite_names_keeps_a_label_of_its_own() {
        for code in 0..64u64 {
            let error = Error::from_code(code);
            if matches!(error, Error::Remote(_)) {
                continue; // a code moq-lite does not name
            }
            assert_ne!(error_label(error), "unknown_code", "code {code}");
        }
    }
}
