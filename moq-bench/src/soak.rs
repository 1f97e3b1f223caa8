//! The soak: chat load with churn for many minutes against one relay process, sampling the
//! relay every minute and checking that nothing is lost.
//!
//! Two populations share the rooms:
//! - **stable members** stay connected the whole soak, each publishing a numbered message
//!   at a fixed rate and reading every other stable member of its room; a number a reader
//!   skipped and has not received since (groups are separate streams, so one may arrive
//!   after a later one), or a message a reader never got by the end, is a lost message;
//! - **churners** join a room, publish and read for a while, leave (a clean close), pause
//!   and join again, over and over: sessions, announcements and subscriptions coming and
//!   going, which is what makes bookkeeping that outlives its owner grow.
//!
//! Beside them, what grew state with history before (review findings F1, F2):
//! - **announce churn**: one session announces a fresh broadcast name many times a second
//!   and withdraws each shortly after, to an observer that follows that prefix;
//! - **long-open groups**: in the first rooms, a member keeps one group of a log track open
//!   for the whole soak, writing a frame a second, read by every member of its room.
//!
//! Members pin the configured versions in turn, so rooms mix them and the relay
//! translates. Every sample records the relay's resident memory and CPU, the sessions
//! connected, and the bytes the relay accounts against its memory budget (`/metrics`).
//! The verdict: no message lost, no session ended by the relay, resident memory after the
//! warm-up minutes within the allowed drift, and accounted bytes flat (at most 1.5 times
//! the baseline sample's, plus 256 KiB).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use moqx_net::model::{Announcement, BroadcastConsumer, BroadcastProducer, Origin, Track};
use moqx_net::session::{Session, SessionConfig};

use crate::heard::Heard;
use crate::load::Target;
use crate::relay::RelayProcess;

/// What a soak runs.
#[derive(Debug, Clone)]
pub struct SoakConfig {
    /// How long, in minutes.
    pub minutes: f64,
    /// Rooms.
    pub rooms: usize,
    /// Stable members per room.
    pub stable_per_room: usize,
    /// Churners per room.
    pub churners_per_room: usize,
    /// Messages per second per publisher.
    pub rate: f64,
    /// Payload bytes per message (at least 12: the sender and the number).
    pub message_bytes: usize,
    /// Seconds between samples.
    pub sample_seconds: f64,
    /// Samples before this minute are warm-up: drift is measured from the first sample at
    /// or after it.
    pub baseline_minute: f64,
    /// The largest allowed growth of resident memory after the baseline, as a share.
    pub max_drift: f64,
    /// Distinct broadcast names announced and withdrawn per second (0 for none).
    pub announce_churn: f64,
    /// Rooms (from the first) with a member that keeps one group open the whole soak.
    pub long_groups: usize,
    /// Subscribers of a media broadcast (4 KB frames at 60 fps) beside the chat
    /// ([`crate::media_soak`]; 0 for none).
    pub media_subscribers: usize,
}

impl Default for SoakConfig {
    /// 30 minutes; 20 rooms of 10 stable members and 2 churners; 1 message per second of
    /// 100 bytes; a sample a minute; drift from minute 2, at most 5 %.
    fn default() -> Self {
        Self {
            minutes: 30.0,
            rooms: 20,
            stable_per_room: 10,
            churners_per_room: 2,
            rate: 1.0,
            message_bytes: 100,
            sample_seconds: 60.0,
            baseline_minute: 2.0,
            max_drift: 0.05,
            announce_churn: 20.0,
            long_groups: 2,
            media_subscribers: 0,
        }
    }
}

/// One sample of the relay and the load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SoakSample {
    /// Minutes since the soak started.
    pub minute: f64,
    /// The relay's resident memory, bytes.
    pub rss_bytes: u64,
    /// The relay's CPU seconds since the last sample.
    pub cpu_seconds: f64,
    /// Sessions connected now (stable members and churners).
    pub sessions: usize,
    /// Messages delivered to stable readers so far.
    pub delivered: u64,
    /// Messages lost so far: numbers skipped that have not arrived since.
    pub lost: u64,
    /// Churn cycles (join, talk, leave) completed so far.
    pub churn_cycles: u64,
    /// Distinct broadcasts the announce churn announced so far.
    pub announcements: u64,
    /// Bytes the relay accounts against its memory budget now, if it serves `/metrics`.
    pub accounted_bytes: Option<u64>,
    /// Media frames delivered so far, all subscribers together.
    pub media_delivered: u64,
}

/// What a soak found.
#[derive(Debug, Clone)]
pub struct SoakReport {
    /// Every sample, in order.
    pub samples: Vec<SoakSample>,
    /// Messages stable members sent.
    pub sent: u64,
    /// Messages delivered to stable readers.
    pub delivered: u64,
    /// Messages a stable reader missed: gaps, and messages not there at the end.
    pub lost: u64,
    /// Churn cycles completed.
    pub churn_cycles: u64,
    /// Sessions the relay ended, or clients that could not connect, with what happened.
    pub errors: Vec<String>,
    /// The first few reader/publisher pairs that lost messages, and which.
    pub losses: Vec<String>,
    /// Resident memory growth from the baseline sample to the largest later one.
    pub drift: f64,
    /// The allowed drift.
    pub max_drift: f64,
    /// Distinct broadcasts the announce churn announced.
    pub announcements: u64,
    /// Frames written into the long-open groups.
    pub long_group_frames: u64,
    /// The least and most bytes the relay accounted from the baseline sample on, if it
    /// serves `/metrics`.
    pub accounted_range: Option<(u64, u64)>,
    /// Whether the accounted bytes stayed flat (see the module docs); true if not read.
    pub accounted_flat: bool,
    /// The media part, if it ran.
    pub media: Option<crate::media_soak::MediaReport>,
    /// The relay's count, at the end, of connections that followed a client to a new
    /// address and of paths it gave up and fell back from (`/metrics`), if it serves them.
    pub migrations: Option<(u64, u64)>,
}

impl SoakReport {
    /// Whether the soak passed: nothing lost, no errors, drift within bounds, accounted
    /// bytes flat.
    pub fn passed(&self) -> bool {
        self.lost == 0
            && self.errors.is_empty()
            && self.drift < self.max_drift
            && self.accounted_flat
            && self
                .media
                .as_ref()
                .is_none_or(|media| media.lost == 0 && media.errors.is_empty())
    }
}

/// The counters every member shares.
#[derive(Debug, Default)]
struct Counters {
    sent: AtomicU64,
    delivered: AtomicU64,
    lost: AtomicU64,
    churn_cycles: AtomicU64,
    announcements: AtomicU64,
    long_group_frames: AtomicU64,
    sessions: AtomicUsize,
    stop: AtomicBool,
    errors: Mutex<Vec<String>>,
    /// Per stable publisher (its index): the last number it sent.
    last_sent: Mutex<HashMap<u32, u64>>,
    /// Per (reader, publisher): what the reader heard.
    last_seen: Mutex<HashMap<(u32, u32), Heard>>,
}

impl Counters {
    fn error(&self, error: String) {
        self.errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(error);
    }
}

/// Runs a soak against `relay`, handing each sample to `on_sample` as it is taken.
pub async fn run(
    relay: &RelayProcess,
    target: &Target,
    config: &SoakConfig,
    mut on_sample: impl FnMut(&SoakSample),
) -> Result<SoakReport, String> {
    let counters = Arc::new(Counters::default());
    let started = Instant::now();
    let end = started + Duration::from_secs_f64(config.minutes * 60.0);
    let interval = Duration::from_secs_f64(1.0 / config.rate.max(0.001));

    // The stable members, a few at a time.
    let mut stable = Vec::new();
    let mut index = 0u32;
    for room in 0..config.rooms {
        for _ in 0..config.stable_per_room {
            let member = Stable {
                index,
                room,
                target: target.clone(),
                counters: counters.clone(),
                interval,
                size: config.message_bytes.max(12),
            };
            stable.push(member.join().await?);
            index += 1;
        }
    }
    // A log member in each of the first rooms: one group open the whole soak.
    let mut logs = Vec::new();
    for room in 0..config.long_groups.min(config.rooms) {
        logs.push(long_group(target, room, index as usize + room, counters.clone()).await?);
    }
    let announce_churn = match config.announce_churn > 0.0 {
        true => Some(
            AnnounceChurn::start(
                target,
                Duration::from_secs_f64(1.0 / config.announce_churn),
                counters.clone(),
            )
            .await?,
        ),
        false => None,
    };
    let media = match config.media_subscribers > 0 {
        true => Some(
            crate::media_soak::MediaSoak::start(
                target,
                config.media_subscribers,
                index as usize + config.rooms * (1 + config.churners_per_room),
            )
            .await?,
        ),
        false => None,
    };
    let churners: Vec<_> = (0..config.rooms * config.churners_per_room)
        .map(|k| {
            let churner = Churner {
                member: index as usize + config.rooms + k,
                number: k,
                room: k % config.rooms.max(1),
                target: target.clone(),
                counters: counters.clone(),
                interval,
                size: config.message_bytes.max(12),
            };
            tokio::spawn(churner.run(end))
        })
        .collect();

    let mut samples = Vec::new();
    let mut previous = relay.usage()?;
    let sample_every = Duration::from_secs_f64(config.sample_seconds);
    let mut next = started + sample_every;
    while Instant::now() < end {
        tokio::time::sleep_until(tokio::time::Instant::from_std(next.min(end))).await;
        next += sample_every;
        let usage = relay.usage()?;
        let accounted_bytes = relay
            .http_port
            .and_then(|port| crate::io::metric(port, "moq_relay_memory_accounted_bytes").ok());
        let sample = SoakSample {
            minute: started.elapsed().as_secs_f64() / 60.0,
            rss_bytes: usage.rss_bytes,
            cpu_seconds: previous.until(&usage).cpu_seconds,
            sessions: counters.sessions.load(Ordering::Relaxed),
            delivered: counters.delivered.load(Ordering::Relaxed),
            lost: counters.lost.load(Ordering::Relaxed),
            churn_cycles: counters.churn_cycles.load(Ordering::Relaxed),
            announcements: counters.announcements.load(Ordering::Relaxed),
            accounted_bytes,
            media_delivered: media.as_ref().map_or(0, |media| media.delivered()),
        };
        previous = usage;
        on_sample(&sample);
        samples.push(sample);
    }

    let migrations = relay.http_port.and_then(|port| {
        let read = |name| crate::io::metric(port, name).ok();
        read("moq_relay_quic_peer_migrations_total")
            .zip(read("moq_relay_quic_path_fallbacks_total"))
    });

    // Stop publishing, let the last messages arrive, then count what never did.
    counters.stop.store(true, Ordering::Relaxed);
    for churner in churners {
        let _ = churner.await;
    }
    if let Some(churn) = announce_churn {
        churn.stop(&counters).await;
    }
    let media = match media {
        Some(media) => Some(media.stop().await),
        None => None,
    };
    crate::patience::wait_for(crate::patience::LAST_ARRIVALS, || all_heard(&counters)).await;
    let tail_lost = {
        let sent = counters.last_sent.lock().unwrap_or_else(|e| e.into_inner());
        let seen = counters.last_seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.iter()
            .map(|((_, publisher), heard)| {
                sent.get(publisher)
                    .map_or(0, |sent| sent.saturating_sub(heard.last))
            })
            .sum::<u64>()
    };
    counters.lost.fetch_add(tail_lost, Ordering::Relaxed);
    let losses = describe_losses(&counters);
    // Every stable reader must have heard every other stable member of its room.
    let pairs = config.rooms * config.stable_per_room * config.stable_per_room.saturating_sub(1);
    let heard = counters
        .last_seen
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .len();
    if heard < pairs {
        counters.error(format!(
            "{} of {pairs} stable reader/publisher pairs never delivered a message",
            pairs - heard
        ));
    }
    for session in stable.iter().chain(&logs) {
        if let Some(error) = session.close_error() {
            counters.error(format!(
                "a stable member's session ended during the soak: {error} ({})",
                session.transport_closed().unwrap_or_default()
            ));
        }
        session.close(moqx_net::Error::Cancel);
    }

    let baseline = samples
        .iter()
        .find(|sample| sample.minute >= config.baseline_minute)
        .map(|sample| sample.rss_bytes);
    let drift = match baseline {
        Some(baseline) if baseline > 0 => {
            let peak = samples
                .iter()
                .filter(|sample| sample.minute >= config.baseline_minute)
                .map(|sample| sample.rss_bytes)
                .max()
                .unwrap_or(baseline);
            peak as f64 / baseline as f64 - 1.0
        }
        _ => 0.0,
    };
    let accounted: Vec<(f64, u64)> = samples
        .iter()
        .filter_map(|sample| sample.accounted_bytes.map(|bytes| (sample.minute, bytes)))
        .collect();
    let baseline_accounted = accounted
        .iter()
        .find(|(minute, _)| *minute >= config.baseline_minute)
        .map(|(_, bytes)| *bytes);
    let after: Vec<u64> = accounted
        .iter()
        .filter(|(minute, _)| *minute >= config.baseline_minute)
        .map(|(_, bytes)| *bytes)
        .collect();
    let accounted_range = after
        .iter()
        .min()
        .zip(after.iter().max())
        .map(|(low, high)| (*low, *high));
    let accounted_flat = match (baseline_accounted, accounted_range) {
        (Some(baseline), Some((_, high))) => high <= baseline + baseline / 2 + (256 << 10),
        _ => true,
    };
    let errors = counters
        .errors
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    Ok(SoakReport {
        announcements: counters.announcements.load(Ordering::Relaxed),
        long_group_frames: counters.long_group_frames.load(Ordering::Relaxed),
        accounted_range,
        accounted_flat,
        migrations,
        samples,
        sent: counters.sent.load(Ordering::Relaxed),
        delivered: counters.delivered.load(Ordering::Relaxed),
        lost: counters.lost.load(Ordering::Relaxed),
        churn_cycles: counters.churn_cycles.load(Ordering::Relaxed),
        errors,
        losses,
        drift,
        max_drift: config.max_drift,
        media,
    })
}

/// A member that stays the whole soak.
struct Stable {
    index: u32,
    room: usize,
    target: Target,
    counters: Arc<Counters>,
    interval: Duration,
    size: usize,
}

impl Stable {
    /// Connects, starts publishing and reading; returns the session.
    async fn join(self) -> Result<Session, String> {
        let path = format!("room{}/s{}", self.room, self.index);
        let (session, track, seen, broadcast) =
            connect(&self.target, self.index as usize, self.room, &path).await?;
        self.counters.sessions.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(read_room(
            seen,
            Some(self.index),
            path.clone(),
            self.counters.clone(),
        ));
        tokio::spawn(publish(
            broadcast,
            track,
            Some(self.index),
            self.interval,
            self.size,
            self.counters.clone(),
        ));
        Ok(session)
    }
}

/// A member that joins, talks, leaves and comes back.
struct Churner {
    /// Which of the target's pinned versions it takes.
    member: usize,
    number: usize,
    room: usize,
    target: Target,
    counters: Arc<Counters>,
    interval: Duration,
    size: usize,
}

impl Churner {
    async fn run(self, end: Instant) {
        let mut cycle = 0u64;
        while Instant::now() < end && !self.counters.stop.load(Ordering::Relaxed) {
            // Deterministic variety: 5 to 20 s connected, 1 to 3 s away.
            let mix = (self.number as u64)
                .wrapping_mul(7919)
                .wrapping_add(cycle * 104_729);
            let stay = Duration::from_secs(5 + mix % 16);
            let away = Duration::from_millis(1000 + (mix / 16) % 2000);
            let path = format!("room{}/c{}", self.room, self.number);
            match connect(&self.target, self.member, self.room, &path).await {
                Ok((session, track, seen, broadcast)) => {
                    self.counters.sessions.fetch_add(1, Ordering::Relaxed);
                    let reader =
                        tokio::spawn(read_room(seen, None, path.clone(), self.counters.clone()));
                    let writer = tokio::spawn(publish(
                        broadcast,
                        track,
                        None,
                        self.interval,
                        self.size,
                        self.counters.clone(),
                    ));
                    tokio::time::sleep(stay).await;
                    if session.is_closed() {
                        self.counters
                            .error(format!("churner {path}: the relay ended its session"));
                    }
                    writer.abort();
                    reader.abort();
                    session.close(moqx_net::Error::Cancel);
                    let _ = tokio::time::timeout(Duration::from_secs(2), session.closed()).await;
                    self.counters.sessions.fetch_sub(1, Ordering::Relaxed);
                    self.counters.churn_cycles.fetch_add(1, Ordering::Relaxed);
                }
                Err(error) => self.counters.error(format!("churner {path}: {error}")),
            }
            cycle += 1;
            tokio::time::sleep(away).await;
        }
    }
}

type Connected = (
    Session,
    moqx_net::model::TrackProducer,
    Origin,
    BroadcastProducer,
);

/// A session of member `member` publishing `path` (track `data`) and following its room.
async fn connect(
    target: &Target,
    member: usize,
    room: usize,
    path: &str,
) -> Result<Connected, String> {
    let published = Origin::new();
    let broadcast = BroadcastProducer::new();
    let track = broadcast.create_track(Track::new("data"));
    published
        .publish(path, &broadcast)
        .map_err(|e| e.to_string())?;
    let seen = Origin::new();
    let session = {
        let mut session_config = SessionConfig::default();
        session_config.publish = Some(published);
        session_config.subscribe = Some(seen.clone());
        session_config.subscribe_prefix = format!("room{room}").as_str().into();
        session_config
    };
    let session = target.join(session, member, path).await?;
    Ok((session, track, seen, broadcast))
}

/// A member of `room` whose track `data` is one group kept open for the whole soak, a
/// frame a second (not a chat message: readers do not account it). Returns its session.
async fn long_group(
    target: &Target,
    room: usize,
    member: usize,
    counters: Arc<Counters>,
) -> Result<Session, String> {
    let path = format!("room{room}/log");
    let (session, mut track, _seen, broadcast) = connect(target, member, room, &path).await?;
    tokio::spawn(async move {
        let _broadcast = broadcast;
        let mut group = track.append_group();
        let mut ticks = tokio::time::interval(Duration::from_secs(1));
        while !counters.stop.load(Ordering::Relaxed) {
            ticks.tick().await;
            let mut payload = vec![0u8; 64];
            payload[..4].copy_from_slice(&u32::MAX.to_be_bytes());
            group.write(0, Bytes::from(payload));
            counters.long_group_frames.fetch_add(1, Ordering::Relaxed);
        }
        group.finish();
        std::future::pending::<()>().await;
    });
    Ok(session)
}

/// One session announcing a fresh broadcast name every `interval` and withdrawing each
/// shortly after, and one following those announcements.
struct AnnounceChurn {
    announcer: Session,
    observer: Session,
    task: tokio::task::JoinHandle<()>,
}

impl AnnounceChurn {
    async fn start(
        target: &Target,
        interval: Duration,
        counters: Arc<Counters>,
    ) -> Result<Self, String> {
        let published = Origin::new();
        let announcer = target
            .join(
                SessionConfig::default().with_publisher(&published),
                0,
                "churn announcer",
            )
            .await?;
        let seen = Origin::new();
        let observer = target
            .join(
                {
                    let mut session_config = SessionConfig::default();
                    session_config.subscribe = Some(seen.clone());
                    session_config.subscribe_prefix = "churn".into();
                    session_config
                },
                1,
                "churn observer",
            )
            .await?;
        tokio::spawn(async move {
            let mut announced = seen.announced("");
            loop {
                let _ = announced.next().await;
            }
        });
        let task = tokio::spawn(async move {
            let mut live = std::collections::VecDeque::new();
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut number = 0u64;
            while !counters.stop.load(Ordering::Relaxed) {
                ticks.tick().await;
                let broadcast = BroadcastProducer::new();
                if published
                    .publish(format!("churn/n{number}"), &broadcast)
                    .is_ok()
                {
                    counters.announcements.fetch_add(1, Ordering::Relaxed);
                }
                number += 1;
                live.push_back(broadcast);
                // Each name lives a few ticks, then is withdrawn for good.
                if live.len() > 4 {
                    live.pop_front();
                }
            }
        });
        Ok(Self {
            announcer,
            observer,
            task,
        })
    }

    async fn stop(self, counters: &Counters) {
        let _ = self.task.await;
        for (what, session) in [("announcer", &self.announcer), ("observer", &self.observer)] {
            if session.is_closed() {
                counters.error(format!("the announce churn's {what} session ended"));
            }
            session.close(moqx_net::Error::Cancel);
        }
    }
}

/// Publishes a numbered message every `interval` until the soak stops; a stable
/// publisher records each number it sent.
async fn publish(
    _broadcast: BroadcastProducer,
    mut track: moqx_net::model::TrackProducer,
    stable: Option<u32>,
    interval: Duration,
    size: usize,
    counters: Arc<Counters>,
) {
    let mut number = 0u64;
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !counters.stop.load(Ordering::Relaxed) {
        ticks.tick().await;
        number += 1;
        let mut payload = vec![0u8; size];
        payload[..4].copy_from_slice(&stable.unwrap_or(u32::MAX).to_be_bytes());
        payload[4..12].copy_from_slice(&number.to_be_bytes());
        track.write_group(0, Bytes::from(payload));
        if let Some(index) = stable {
            counters.sent.fetch_add(1, Ordering::Relaxed);
            counters
                .last_sent
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(index, number);
        }
    }
    // Stay published until the session closes.
    std::future::pending::<()>().await;
}

/// Whether every stable reader has heard every number its publishers sent.
fn all_heard(counters: &Counters) -> bool {
    let sent = counters.last_sent.lock().unwrap_or_else(|e| e.into_inner());
    let seen = counters.last_seen.lock().unwrap_or_else(|e| e.into_inner());
    seen.iter().all(|((_, publisher), heard)| {
        heard.missing.is_empty() && sent.get(publisher).is_none_or(|last| heard.last >= *last)
    })
}

/// For the first few reader/publisher pairs that lost messages, which: numbers skipped
/// that never came, or the last ones never came.
fn describe_losses(counters: &Counters) -> Vec<String> {
    const SHOWN: usize = 10;
    let sent = counters.last_sent.lock().unwrap_or_else(|e| e.into_inner());
    let seen = counters.last_seen.lock().unwrap_or_else(|e| e.into_inner());
    seen.iter()
        .filter_map(|((reader, publisher), heard)| {
            let last_sent = sent.get(publisher).copied().unwrap_or(heard.last);
            if heard.missing.is_empty() && last_sent <= heard.last {
                return None;
            }
            let gaps: Vec<u64> = heard.missing.iter().take(8).copied().collect();
            Some(format!(
                "reader {reader} from publisher {publisher}: {} skipped {gaps:?}{}; heard up to {} of {last_sent}",
                heard.missing.len(),
                if heard.missing.len() > gaps.len() { " …" } else { "" },
                heard.last,
            ))
        })
        .take(SHOWN)
        .collect()
}

/// Reads every other member of the room as it is announced; a stable reader accounts for
/// every stable publisher's numbers.
async fn read_room(seen: Origin, reader: Option<u32>, me: String, counters: Arc<Counters>) {
    let mut announced = seen.announced("");
    loop {
        if let Announcement::Active { path, broadcast } = announced.next().await
            && path.as_str() != me
        {
            tokio::spawn(read(broadcast, reader, counters.clone()));
        }
    }
}

async fn read(broadcast: BroadcastConsumer, reader: Option<u32>, counters: Arc<Counters>) {
    let Ok(mut track) = broadcast.subscribe_track("data").await else {
        return;
    };
    while let Ok(Some(mut group)) = track.next_group().await {
        while let Ok(Some(frame)) = group.read_frame().await {
            let (Some(reader), Some(header)) = (reader, frame.payload.get(..12)) else {
                continue;
            };
            let publisher = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
            if publisher == u32::MAX {
                continue; // a churner's: not accounted
            }
            let mut number = [0u8; 8];
            number.copy_from_slice(&header[4..12]);
            let number = u64::from_be_bytes(number);
            counters.delivered.fetch_add(1, Ordering::Relaxed);
            let mut seen = counters.last_seen.lock().unwrap_or_else(|e| e.into_inner());
            let heard = seen
                .entry((reader, publisher))
                .or_insert(Heard::new(number));
            let missing = heard.missing.len() as u64;
            heard.hear(number);
            let now_missing = heard.missing.len() as u64;
            if now_missing > missing {
                counters
                    .lost
                    .fetch_add(now_missing - missing, Ordering::Relaxed);
            } else {
                counters
                    .lost
                    .fetch_sub(missing - now_missing, Ordering::Relaxed);
            }
        }
    }
}
