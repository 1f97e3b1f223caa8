//! The soak's media part: one publisher of 4 KB frames at 60 fps, a group every 2 s, to
//! N subscribers, each on its own session. Every frame carries its number; a subscriber
//! that skipped a number and has not received it by the end (a frame of a group the relay
//! dropped or cut short counts too) lost a frame. Beside the chat of [`crate::soak`], it
//! keeps long-lived streams of many packets going through the relay, which chat does not.

use std::collections::BTreeSet;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use moqx_net::model::{Announcement, BroadcastProducer, Frame, Origin, Track};
use moqx_net::session::{Session, SessionConfig};

use crate::heard::Heard;
use crate::load::Target;

/// Frames per second.
const RATE: u64 = 60;
/// Frames per group: a group every 2 s.
const FRAMES_PER_GROUP: u64 = 120;
/// Bytes per frame.
const FRAME_BYTES: usize = 4096;
/// Where the broadcast is published.
const PATH: &str = "media/live";
/// The most payload the publisher's track and each subscriber's session cache.
const SUBSCRIBER_CACHE_BYTES: u64 = 2 << 20;

/// A running media soak: the publisher and its subscribers.
#[derive(Debug)]
pub struct MediaSoak {
    publisher: Session,
    subscribers: Vec<Session>,
    task: tokio::task::JoinHandle<()>,
    counters: Arc<MediaCounters>,
}

/// What the media part found.
#[derive(Debug, Clone, Default)]
pub struct MediaReport {
    /// Frames published.
    pub sent: u64,
    /// Frames received, all subscribers together.
    pub delivered: u64,
    /// Frames a subscriber missed: gaps, and frames not there at the end.
    pub lost: u64,
    /// Sessions that ended during the soak, subscribers that never received a frame.
    pub errors: Vec<String>,
    /// For the first few subscribers that lost frames: which, in which groups, and when
    /// they were published (to find the moment in the relay's log).
    pub losses: Vec<String>,
}

#[derive(Debug, Default)]
struct MediaCounters {
    sent: AtomicU64,
    delivered: AtomicU64,
    stop: AtomicBool,
    /// Per subscriber: what it received, from its first frame on.
    heard: Mutex<Vec<Option<Heard>>>,
}

impl MediaSoak {
    /// Connects the publisher and `subscribers` subscribers (members from `first_member`
    /// on, for the target's version pins) and starts publishing.
    pub async fn start(
        target: &Target,
        subscribers: usize,
        first_member: usize,
    ) -> Result<Self, String> {
        let counters = Arc::new(MediaCounters {
            heard: Mutex::new((0..subscribers).map(|_| None).collect()),
            ..MediaCounters::default()
        });
        let published = Origin::new();
        let broadcast = BroadcastProducer::new();
        // The relay is its only reader: a short cache, like the subscribers'.
        let mut video = Track::new("video");
        video.cache_groups = 2;
        video.cache_bytes = Some(SUBSCRIBER_CACHE_BYTES);
        let track = broadcast.create_track(video);
        published
            .publish(PATH, &broadcast)
            .map_err(|e| e.to_string())?;
        let publisher = target
            .join(
                SessionConfig::default().with_publisher(&published),
                first_member,
                "media publisher",
            )
            .await?;
        let mut sessions = Vec::with_capacity(subscribers);
        for index in 0..subscribers {
            let seen = Origin::new();
            let session = target
                .join(
                    {
                        let mut session_config = SessionConfig::default();
                        session_config.subscribe = Some(seen.clone());
                        session_config.subscribe_prefix = "media".into();
                        // A live player keeps what it is reading, not a minute of video:
                        // the default cache (32 groups, released a chunk of up to 64
                        // at a time) held about 30 MB per subscriber here.
                        session_config.cache.groups = 2;
                        session_config.cache.bytes = Some(SUBSCRIBER_CACHE_BYTES);
                        session_config
                    },
                    first_member + 1 + index,
                    &format!("media subscriber {index}"),
                )
                .await?;
            tokio::spawn(read(seen, index, counters.clone()));
            sessions.push(session);
        }
        let task = tokio::spawn(publish(broadcast, track, counters.clone()));
        Ok(Self {
            publisher,
            subscribers: sessions,
            task,
            counters,
        })
    }

    /// Frames received so far, all subscribers together.
    pub fn delivered(&self) -> u64 {
        self.counters.delivered.load(Ordering::Relaxed)
    }

    /// Stops publishing, lets the last frames arrive, and counts what never did.
    pub async fn stop(self) -> MediaReport {
        self.counters.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        let sent = self.counters.sent.load(Ordering::Relaxed);
        crate::patience::wait_for(crate::patience::LAST_ARRIVALS, || {
            let heard = self
                .counters
                .heard
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            heard
                .iter()
                .flatten()
                .all(|heard| heard.missing.is_empty() && heard.last + 1 >= sent)
        })
        .await;
        let mut errors = Vec::new();
        let mut losses = Vec::new();
        let mut lost = 0;
        let heard = self
            .counters
            .heard
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for (index, heard) in heard.iter().enumerate() {
            match heard {
                // Numbers run from 0: the last sent is `sent - 1`.
                Some(heard) => {
                    let mut runs = runs_of(&heard.missing);
                    runs.extend(Some(heard.last + 1..sent).filter(|never| !never.is_empty()));
                    let frames: u64 = runs.iter().map(|run| run.end - run.start).sum();
                    lost += frames;
                    if frames > 0 && losses.len() < SHOWN {
                        losses.push(describe_loss(index, frames, &runs));
                    }
                }
                None => errors.push(format!("media subscriber {index} received no frame")),
            }
        }
        for (what, session) in std::iter::once(("publisher", &self.publisher)).chain(
            self.subscribers
                .iter()
                .map(|session| ("subscriber", session)),
        ) {
            if let Some(error) = session.close_error() {
                errors.push(format!(
                    "a media {what}'s session ended during the soak: {error} ({})",
                    session.transport_closed().unwrap_or_default()
                ));
            }
            session.close(moqx_net::Error::Cancel);
        }
        MediaReport {
            sent,
            delivered: self.counters.delivered.load(Ordering::Relaxed),
            lost,
            errors,
            losses,
        }
    }
}

/// Subscribers whose losses [`MediaReport::losses`] describes.
const SHOWN: usize = 10;

/// Subscriber `index`'s `frames` lost frames, in `runs` of consecutive numbers.
fn describe_loss(index: usize, frames: u64, runs: &[Range<u64>]) -> String {
    const RUNS: usize = 8;
    let shown: Vec<String> = runs.iter().take(RUNS).map(describe_run).collect();
    format!(
        "media subscriber {index}: {frames} frames in {} runs: {}{}",
        runs.len(),
        shown.join(", "),
        if runs.len() > RUNS { ", …" } else { "" }
    )
}

/// A run of lost frames: their numbers, their groups, and when the first was published
/// (minutes and seconds after the first frame).
fn describe_run(run: &Range<u64>) -> String {
    let (first, last) = (run.start, run.end - 1);
    let groups = (first / FRAMES_PER_GROUP, last / FRAMES_PER_GROUP);
    let seconds = first / RATE;
    format!(
        "frames {first}..={last} (group {}, published at {}:{:02})",
        if groups.0 == groups.1 {
            groups.0.to_string()
        } else {
            format!("{}..={}", groups.0, groups.1)
        },
        seconds / 60,
        seconds % 60
    )
}

/// `numbers` as runs of consecutive numbers, in order.
fn runs_of(numbers: &BTreeSet<u64>) -> Vec<Range<u64>> {
    let mut runs: Vec<Range<u64>> = Vec::new();
    for &number in numbers {
        match runs.last_mut() {
            Some(run) if run.end == number => run.end += 1,
            _ => runs.push(number..number + 1),
        }
    }
    runs
}

/// Publishes numbered frames at [`RATE`] until the soak stops, each group's last frame
/// with its end.
async fn publish(
    _broadcast: BroadcastProducer,
    mut track: moqx_net::model::TrackProducer,
    counters: Arc<MediaCounters>,
) {
    let mut ticks = tokio::time::interval(Duration::from_micros(1_000_000 / RATE));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut group = None;
    let mut number = 0u64;
    while !counters.stop.load(Ordering::Relaxed) {
        ticks.tick().await;
        let mut payload = vec![0u8; FRAME_BYTES];
        payload[..8].copy_from_slice(&number.to_be_bytes());
        let frame = Frame {
            timestamp: number * 1000 / RATE,
            payload: Bytes::from(payload),
        };
        let current = group.get_or_insert_with(|| track.append_group());
        if number % FRAMES_PER_GROUP == FRAMES_PER_GROUP - 1 {
            if let Some(full) = group.take() {
                full.finish_with(frame);
            }
        } else {
            current.write_frame(frame);
        }
        number += 1;
        counters.sent.store(number, Ordering::Relaxed);
    }
    if let Some(last) = group {
        last.finish();
    }
}

/// Subscriber `index`: reads the broadcast once announced, every frame of every group.
async fn read(seen: Origin, index: usize, counters: Arc<MediaCounters>) {
    let mut announced = seen.announced("");
    let broadcast = loop {
        if let Announcement::Active { path, broadcast } = announced.next().await
            && path.as_str() == PATH
        {
            break broadcast;
        }
    };
    let Ok(mut track) = broadcast.subscribe_track("video").await else {
        return;
    };
    while let Ok(Some(mut group)) = track.next_group().await {
        while let Ok(Some(frame)) = group.read_frame().await {
            let Some(header) = frame.payload.get(..8) else {
                continue;
            };
            let mut number = [0u8; 8];
            number.copy_from_slice(header);
            let number = u64::from_be_bytes(number);
            counters.delivered.fetch_add(1, Ordering::Relaxed);
            let mut heard = counters.heard.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(slot) = heard.get_mut(index) {
                slot.get_or_insert_with(|| Heard::new(number)).hear(number);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_frames_are_told_as_runs_with_their_groups_and_time() {
        let missing: BTreeSet<u64> = [5, 6, 7, 119, 120, 7_200].into_iter().collect();
        let runs = runs_of(&missing);
        assert_eq!(runs, vec![5..8, 119..121, 7_200..7_201]);
        assert_eq!(
            describe_loss(3, 6, &runs),
            "media subscriber 3: 6 frames in 3 runs: frames 5..=7 (group 0, published at 0:00), \
             frames 119..=120 (group 0..=1, published at 0:01), \
             frames 7200..=7200 (group 60, published at 2:00)"
        );
    }
}
