//! The load generator: client sessions in rooms, publishing at a fixed offered rate and
//! timing every delivery end to end.
//!
//! A run goes through three phases:
//!
//! 1. **connect**: every member opens its own session to the relay (raw QUIC), a few dozen
//!    at a time;
//! 2. **warm up**: once everyone is connected, each publisher writes a warm-up frame every
//!    200 ms until all of its subscribers have heard from it, and the run waits until every
//!    subscriber has heard from every publisher it should (a true barrier: every
//!    subscription is in place end to end before anything is counted, and the warm-up
//!    load stops as soon as it did its job);
//! 3. **measure**: publishers write frames on a fixed schedule (frame `k` of publisher `i`
//!    at `start + (k + i / publishers) / rate`, so that publishers interleave instead of
//!    firing together) for the run's length; then the run waits for frames still on their
//!    way. The first payload byte tells warm-up (0) from measured (1) frames; the next
//!    eight carry the frame's send time (microseconds since the Unix epoch, big-endian),
//!    which every moq-lite version delivers (frame timestamps exist only from -05).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use moqx_net::coding::Version;
use moqx_net::model::{Announcement, BroadcastConsumer, BroadcastProducer, Frame, Origin, Track};
use moqx_net::session::{Session, SessionConfig};
use moqx_runtime::client::ConnectError;
use moqx_runtime::tls::Fingerprint;
use moqx_tokio::ClientConfig;

/// What each publisher writes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stream {
    /// Payload bytes per frame (at least 1).
    pub frame_bytes: usize,
    /// Frames per second, per publisher; 0 writes as fast as the publisher's task runs
    /// (unpaced: the highest offered load this process can make, yielding between frames).
    pub rate: f64,
    /// Frames per group (1: every frame a group of its own, as chat does).
    pub frames_per_group: u64,
}

/// Who connects: rooms of members, each member a session that publishes, subscribes to the
/// rest of its room, or both.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Each room's members: `(publishes, subscribes)`.
    pub rooms: Vec<Vec<(bool, bool)>>,
    /// What publishers write.
    pub stream: Stream,
    /// Length of the measured phase.
    pub seconds: f64,
}

impl Workload {
    /// `connections` members in rooms of `room_size`, each publishing and subscribing to
    /// the others (the last room may be smaller).
    pub fn chat(connections: usize, room_size: usize, stream: Stream, seconds: f64) -> Self {
        let room_size = room_size.max(2);
        let mut rooms = Vec::new();
        let mut left = connections;
        while left > 0 {
            let size = left.min(room_size);
            rooms.push(vec![(true, true); size]);
            left -= size;
        }
        Self {
            rooms,
            stream,
            seconds,
        }
    }

    /// `connections` members in rooms of `room_size` that only listen for their room's
    /// announcements: nobody publishes, so nothing is delivered.
    pub fn idle(connections: usize, room_size: usize, seconds: f64) -> Self {
        // Nobody publishes: the stream is never written.
        let unused = Stream {
            frame_bytes: 1,
            rate: 1.0,
            frames_per_group: 1,
        };
        let mut workload = Self::chat(connections, room_size, unused, seconds);
        for member in workload.rooms.iter_mut().flatten() {
            *member = (false, true);
        }
        workload
    }

    /// One publisher and `subscribers` subscribers in one room.
    pub fn fanout(subscribers: usize, stream: Stream, seconds: f64) -> Self {
        let mut room = vec![(true, false)];
        room.extend(std::iter::repeat_n((false, true), subscribers));
        Self {
            rooms: vec![room],
            stream,
            seconds,
        }
    }

    /// Every member of every room.
    pub fn connections(&self) -> usize {
        self.rooms.iter().map(Vec::len).sum()
    }

    /// Publishing members.
    pub fn publishers(&self) -> usize {
        self.rooms.iter().flatten().filter(|(p, _)| *p).count()
    }

    /// (subscriber, publisher) pairs: how many subscriptions the warm-up waits for.
    pub fn pairs(&self) -> u64 {
        self.rooms
            .iter()
            .map(|room| {
                let publishers = room.iter().filter(|(p, _)| *p).count() as u64;
                room.iter()
                    .filter(|(_, s)| *s)
                    .map(|(p, _)| publishers - u64::from(*p))
                    .sum::<u64>()
            })
            .sum()
    }

    /// How many subscribers each publisher of `room` has.
    fn audience(room: &[(bool, bool)], publishes_too: bool) -> u64 {
        let subscribers = room.iter().filter(|(_, s)| *s).count() as u64;
        subscribers - u64::from(publishes_too)
    }
}

/// How many times a client tries a handshake that timed out.
const HANDSHAKE_ATTEMPTS: u32 = 3;

/// How to reach the relay.
#[derive(Debug, Clone)]
pub struct Target {
    /// `moqt://host:port/root`.
    pub url: String,
    /// The relay certificate's fingerprint to pin; `None` skips verification.
    pub fingerprint: Option<Fingerprint>,
    /// The moq-lite versions the clients pin, given to members in turn (member `i` pins
    /// `pins[i % len]`; several make mixed rooms, where the relay translates); empty: every
    /// client offers the default versions and the relay picks.
    pub pins: Vec<Version>,
    /// How often each client switches connection IDs (`None`: never).
    pub cid_rotation: Option<Duration>,
}

impl Target {
    /// The relay `relay`'s address with the root `root` (the relay's own root if a pinned
    /// version has no SETUP to carry a path), pinning its certificate if it wrote its
    /// fingerprint, the clients pinning `pins` in turn.
    pub fn of(
        relay: &crate::relay::RelayProcess,
        root: &str,
        pins: &[Version],
    ) -> Result<Self, String> {
        let fingerprint = relay
            .fingerprint
            .as_deref()
            .map(|text| {
                Fingerprint::parse(text)
                    .ok_or_else(|| format!("the relay wrote a bad fingerprint {text:?}"))
            })
            .transpose()?;
        // Before -05, raw QUIC carries no path: a client of those versions is at the
        // relay's root whatever its URL says, so every client goes there.
        let root = match pins.iter().all(|version| version.has_setup_stream()) {
            true => root,
            false => "",
        };
        Ok(Self {
            url: format!("moqt://127.0.0.1:{}/{root}", relay.port),
            fingerprint,
            pins: pins.to_vec(),
            cid_rotation: None,
        })
    }

    /// The same relay reached over `scheme` instead of raw QUIC; a scheme over TCP (`ws`,
    /// `tls`…) reaches the relay's web port: `tcp_port` if the relay was given one of its
    /// own (`{http_port}`), else the same number as its UDP one.
    pub fn over(mut self, scheme: &str, udp: bool, tcp_port: Option<u16>) -> Self {
        let Some(rest) = self.url.strip_prefix("moqt://") else {
            return self;
        };
        let rest = match (udp, tcp_port, rest.split_once('/')) {
            (false, Some(port), Some((_, root))) => format!("127.0.0.1:{port}/{root}"),
            _ => rest.to_owned(),
        };
        self.url = format!("{scheme}://{rest}");
        self
    }

    /// The same relay reached through `addr` (an impairment proxy in front of it).
    pub fn through(mut self, addr: std::net::SocketAddr) -> Self {
        let root = self
            .url
            .strip_prefix("moqt://")
            .and_then(|rest| rest.split_once('/'))
            .map_or("", |(_, root)| root);
        self.url = format!("moqt://{addr}/{root}");
        self
    }

    /// A session to the relay configured by `session`, once the relay let it in, for the
    /// `member`th client; `name` says which member in an error.
    pub async fn join(
        &self,
        session: SessionConfig,
        member: usize,
        name: &str,
    ) -> Result<Session, String> {
        let versions = match self.pins.is_empty() {
            true => Version::DEFAULT_OFFER.to_vec(),
            false => vec![self.pins[member % self.pins.len()]],
        };
        let config = {
            let mut client_config = ClientConfig::default();
            client_config.session = session;
            client_config.versions = versions;
            client_config.insecure_skip_verify = self.fingerprint.is_none();
            client_config.fingerprint = self.fingerprint;
            client_config.cid_rotation = self.cid_rotation;
            client_config
        };
        // A handshake that a lossy path (--impair) lost past its timeout is tried again, as
        // a real client would; a refusal is not.
        let mut attempt = 1;
        let session = loop {
            match moqx_tokio::connect(&self.url, config.clone()).await {
                Ok(session) => break session,
                Err(moqx_tokio::Error::Connect(ConnectError::Handshake(why)))
                    if attempt < HANDSHAKE_ATTEMPTS =>
                {
                    tracing::debug!(name, attempt, %why, "handshake lost: trying again");
                    attempt += 1;
                }
                Err(error) => return Err(format!("connecting {name}: {error}")),
            }
        };
        session
            .established()
            .await
            .map_err(|e| format!("{name}: the relay closed the session: {e}"))?;
        Ok(session)
    }
}

/// The shared counters of a run.
#[derive(Debug, Default)]
pub struct Tally {
    /// Set once every member is connected: publishers start their warm-up.
    pub connected: AtomicBool,
    /// Per publisher (by path): how many of its subscribers have heard from it.
    heard: std::collections::HashMap<String, AtomicU64>,
    /// Subscriber/publisher pairs that have seen a warm-up frame.
    pub ready_pairs: AtomicU64,
    /// Measured frames sent.
    pub offered: AtomicU64,
    /// Deliveries expected from the measured frames sent.
    pub expected: AtomicU64,
    /// Measured frames received.
    pub delivered: AtomicU64,
    /// Set when publishers should write measured frames.
    pub measuring: AtomicBool,
    /// The measured phase, from start to end, the same for every publisher (set before
    /// `measuring`).
    pub window: std::sync::OnceLock<(Instant, Instant)>,
    /// Set when publishers should stop.
    pub stopped: AtomicBool,
    /// Latencies in microseconds, sharded to keep readers off one lock.
    latencies: [Mutex<Vec<u64>>; 16],
}

impl Tally {
    /// Every latency recorded, in no particular order.
    pub fn latencies(&self) -> Vec<u64> {
        let mut all = Vec::new();
        for shard in &self.latencies {
            all.extend(shard.lock().unwrap_or_else(|e| e.into_inner()).iter());
        }
        all
    }
}

/// The connected members of a run.
#[derive(Debug)]
pub struct Clients {
    sessions: Vec<Session>,
    publishers: Vec<tokio::task::JoinHandle<()>>,
    /// The counters the run reads.
    pub tally: Arc<Tally>,
}

/// Connects every member of `workload` to `target` and starts them (in warm-up).
pub async fn connect(workload: &Workload, target: &Target) -> Result<Clients, String> {
    let heard = workload
        .rooms
        .iter()
        .enumerate()
        .flat_map(|(room, members)| {
            (0..members.len()).map(move |member| (member_path(room, member), AtomicU64::new(0)))
        })
        .collect();
    let tally = Arc::new(Tally {
        heard,
        ..Tally::default()
    });
    let mut sessions = Vec::new();
    let mut publishers = Vec::new();
    let publisher_count = workload.publishers().max(1);
    let mut publisher_index = 0;
    let mut pending = Vec::new();
    for (room_index, room) in workload.rooms.iter().enumerate() {
        for (member_index, &(publishes, subscribes)) in room.iter().enumerate() {
            let phase = publisher_index as f64 / publisher_count as f64;
            publisher_index += usize::from(publishes);
            let member = Member {
                room: format!("room{room_index}"),
                path: member_path(room_index, member_index),
                publishes,
                subscribes,
                audience: Workload::audience(room, subscribes),
                phase,
                index: sessions.len() + pending.len(),
            };
            pending.push(member.join(target.clone(), workload.clone(), tally.clone()));
            // A few dozen handshakes at a time.
            if pending.len() == 32 {
                for joined in futures_join(std::mem::take(&mut pending)).await {
                    let (session, task) = joined?;
                    sessions.push(session);
                    publishers.extend(task);
                }
            }
        }
    }
    for joined in futures_join(pending).await {
        let (session, task) = joined?;
        sessions.push(session);
        publishers.extend(task);
    }
    tally.connected.store(true, Ordering::Relaxed);
    Ok(Clients {
        sessions,
        publishers,
        tally,
    })
}

/// Awaits every future, in order (tokio tasks, so they progress together).
async fn futures_join<F, T>(futures: Vec<F>) -> Vec<T>
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::new();
    for handle in handles {
        if let Ok(value) = handle.await {
            out.push(value);
        }
    }
    out
}

impl Clients {
    /// Closes every session.
    pub async fn close(self) {
        self.tally.stopped.store(true, Ordering::Relaxed);
        for task in self.publishers {
            task.abort();
        }
        for session in &self.sessions {
            session.close(moqx_net::Error::Cancel);
        }
        for session in &self.sessions {
            let _ = tokio::time::timeout(Duration::from_secs(2), session.closed()).await;
        }
    }
}

/// One member: where it is and what it does.
struct Member {
    room: String,
    /// `room<r>/m<i>`: its broadcast's path, relative to the run's root.
    path: String,
    publishes: bool,
    subscribes: bool,
    /// Subscribers of this member's broadcast.
    audience: u64,
    /// Its place among the publishers, 0 to 1: its frames are offset by this share of the
    /// interval.
    phase: f64,
    /// Its place among all members (which version it pins, when they are mixed).
    index: usize,
}

type Joined = Result<(Session, Option<tokio::task::JoinHandle<()>>), String>;

impl Member {
    async fn join(self, target: Target, workload: Workload, tally: Arc<Tally>) -> Joined {
        let published = Origin::new();
        let broadcast = BroadcastProducer::new();
        let track = broadcast.create_track(Track {
            timescale: 1_000_000,
            ..Track::new("data")
        });
        let path = self.path.clone();
        if self.publishes {
            published
                .publish(path.as_str(), &broadcast)
                .map_err(|e| e.to_string())?;
        }
        let seen = Origin::new();
        let session = {
            let mut session_config = SessionConfig::default();
            session_config.publish = self.publishes.then_some(published);
            session_config.subscribe = self.subscribes.then(|| seen.clone());
            session_config.subscribe_prefix = self.room.as_str().into();
            session_config
        };
        let session = target.join(session, self.index, &path).await?;
        if self.subscribes {
            tokio::spawn(follow(seen, path.clone(), tally.clone(), hash(&path)));
        }
        let task = self.publishes.then(|| {
            let publisher = Publisher {
                _broadcast: broadcast,
                track,
                stream: workload.stream,
                seconds: workload.seconds,
                phase: self.phase,
                audience: self.audience,
                path: path.clone(),
            };
            tokio::spawn(publisher.run(tally))
        });
        Ok((session, task))
    }
}

/// The broadcast path of member `member` of room `room`.
fn member_path(room: usize, member: usize) -> String {
    format!("room{room}/m{member}")
}

/// Spreads members over the latency shards.
fn hash(text: &str) -> usize {
    text.bytes()
        .fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize))
}

/// Subscribes to every other member of the room as it is announced.
async fn follow(seen: Origin, me: String, tally: Arc<Tally>, shard: usize) {
    let mut announced = seen.announced("");
    loop {
        if let Announcement::Active { path, broadcast } = announced.next().await
            && path.as_str() != me
        {
            tokio::spawn(read(path.to_string(), broadcast, tally.clone(), shard));
        }
    }
}

/// Reads one publisher's frames: the first warm-up frame makes the pair ready; measured
/// frames are counted and timed.
async fn read(publisher: String, broadcast: BroadcastConsumer, tally: Arc<Tally>, shard: usize) {
    let Ok(mut track) = broadcast.subscribe_track("data").await else {
        return;
    };
    let mut ready = false;
    let shard = &tally.latencies[shard % tally.latencies.len()];
    while let Ok(Some(mut group)) = track.next_group().await {
        while let Ok(Some(frame)) = group.read_frame().await {
            if !ready {
                ready = true;
                tally.ready_pairs.fetch_add(1, Ordering::Relaxed);
                if let Some(heard) = tally.heard.get(&publisher) {
                    heard.fetch_add(1, Ordering::Relaxed);
                }
            }
            if frame.payload.first() == Some(&1) {
                let sent = sent_at(&frame.payload).unwrap_or(frame.timestamp);
                let latency = now_micros().saturating_sub(sent);
                tally.delivered.fetch_add(1, Ordering::Relaxed);
                shard
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(latency);
            }
        }
    }
}

/// One publishing member's broadcast and schedule.
struct Publisher {
    /// Kept published for as long as the publisher runs.
    _broadcast: BroadcastProducer,
    track: moqx_net::model::TrackProducer,
    stream: Stream,
    seconds: f64,
    /// Its offset within the interval, as a share of it.
    phase: f64,
    /// How many subscribers it has.
    audience: u64,
    /// Its broadcast's path.
    path: String,
}

impl Publisher {
    /// Writes warm-up frames until the run measures, then measured frames on schedule.
    async fn run(mut self, tally: Arc<Tally>) {
        let size = self.stream.frame_bytes.max(1);
        let warm = frame(size, 0);
        let measured = frame(size, 1);
        let heard = |tally: &Tally| {
            tally
                .heard
                .get(&self.path)
                .map_or(0, |h| h.load(Ordering::Relaxed))
        };
        while !tally.measuring.load(Ordering::Relaxed) {
            if tally.stopped.load(Ordering::Relaxed) {
                return;
            }
            if tally.connected.load(Ordering::Relaxed) && heard(&tally) < self.audience {
                let now = now_micros();
                self.track.write_group(now, stamped(&warm, now));
                tokio::time::sleep(Duration::from_millis(200)).await;
            } else {
                // Heard by everyone: wait for the measured phase, promptly.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        let unpaced = self.stream.rate <= 0.0;
        let interval = if unpaced {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(1.0 / self.stream.rate)
        };
        let (window_start, window_end) = tally.window.get().copied().unwrap_or_else(|| {
            let now = Instant::now();
            (now, now + Duration::from_secs_f64(self.seconds))
        });
        let start = tokio::time::Instant::from_std(window_start) + interval.mul_f64(self.phase);
        let end = tokio::time::Instant::from_std(window_end);
        let mut group = None;
        let mut sent = 0u64;
        loop {
            let at = start + interval.mul_f64(sent as f64);
            if at >= end || tally.stopped.load(Ordering::Relaxed) {
                break;
            }
            if unpaced {
                if sent == 0 {
                    tokio::time::sleep_until(start).await;
                } else {
                    tokio::task::yield_now().await;
                }
                if tokio::time::Instant::now() >= end {
                    break;
                }
            } else {
                tokio::time::sleep_until(at).await;
            }
            let current = group.get_or_insert_with(|| self.track.append_group());
            let now = now_micros();
            let frame = Frame {
                timestamp: now,
                payload: stamped(&measured, now),
            };
            // The group's last frame and its end in one go (`finish_with`).
            if current.frame_count() + 1 >= self.stream.frames_per_group.max(1) {
                if let Some(full) = group.take() {
                    full.finish_with(frame);
                }
            } else {
                current.write_frame(frame);
            }
            sent += 1;
            tally.offered.fetch_add(1, Ordering::Relaxed);
            tally.expected.fetch_add(self.audience, Ordering::Relaxed);
        }
        if let Some(last) = group {
            last.finish();
        }
        // Stay published until the run closes the session.
        std::future::pending::<()>().await;
    }
}

/// `template` with `sent` (microseconds since the Unix epoch) in bytes 1 to 8, where it
/// fits.
fn stamped(template: &Bytes, sent: u64) -> Bytes {
    if template.len() < 9 {
        return template.clone();
    }
    let mut payload = template.to_vec();
    payload[1..9].copy_from_slice(&sent.to_be_bytes());
    Bytes::from(payload)
}

/// The send time [`stamped`] into `payload`, if it is long enough to carry one.
fn sent_at(payload: &[u8]) -> Option<u64> {
    let bytes: [u8; 8] = payload.get(1..9)?.try_into().ok()?;
    Some(u64::from_be_bytes(bytes))
}

/// A payload of `size` bytes whose first byte is `kind`.
fn frame(size: usize, kind: u8) -> Bytes {
    let mut payload = vec![0u8; size];
    payload[0] = kind;
    Bytes::from(payload)
}

/// Microseconds since the Unix epoch.
pub fn now_micros() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
}

/// Waits until every pair is ready, or `limit` passes.
pub async fn warm_up(tally: &Tally, pairs: u64, limit: Duration) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    while tally.ready_pairs.load(Ordering::Relaxed) < pairs {
        if Instant::now() > deadline {
            return Err(format!(
                "only {} of {pairs} subscriptions were live after {limit:?}",
                tally.ready_pairs.load(Ordering::Relaxed)
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHAT: Stream = Stream {
        frame_bytes: 100,
        rate: 1.0,
        frames_per_group: 1,
    };

    #[test]
    fn chat_rooms_split_the_connections_and_count_their_pairs() {
        let workload = Workload::chat(25, 10, CHAT, 1.0);
        assert_eq!(
            workload.rooms.iter().map(Vec::len).collect::<Vec<_>>(),
            [10, 10, 5]
        );
        assert_eq!(workload.connections(), 25);
        assert_eq!(workload.publishers(), 25);
        // Each member hears every other member of its room.
        assert_eq!(workload.pairs(), 10 * 9 + 10 * 9 + 5 * 4);
        assert_eq!(Workload::audience(&workload.rooms[2], true), 4);
    }

    #[test]
    fn a_target_reached_through_a_proxy_keeps_its_root_and_pins() {
        let target = Target {
            url: "moqt://127.0.0.1:4443/bench".into(),
            fingerprint: None,
            pins: vec![Version::Lite04],
            cid_rotation: None,
        };
        let through = target.through("127.0.0.1:9000".parse().unwrap());
        assert_eq!(through.url, "moqt://127.0.0.1:9000/bench");
        assert_eq!(through.pins, [Version::Lite04]);
    }

    #[test]
    fn fanout_is_one_publisher_and_its_subscribers() {
        let workload = Workload::fanout(100, CHAT, 1.0);
        assert_eq!(workload.connections(), 101);
        assert_eq!(workload.publishers(), 1);
        assert_eq!(workload.pairs(), 100);
        assert_eq!(Workload::audience(&workload.rooms[0], false), 100);
    }

    #[test]
    fn idle_members_only_listen() {
        let workload = Workload::idle(25, 10, 1.0);
        assert_eq!(workload.connections(), 25);
        assert_eq!(workload.publishers(), 0);
        assert_eq!(workload.pairs(), 0);
        assert!(
            workload
                .rooms
                .iter()
                .flatten()
                .all(|&member| member == (false, true))
        );
    }
}
