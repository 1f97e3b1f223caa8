//! The impaired scenario: publisher → relay → subscribers over paths that lose, reorder,
//! duplicate, corrupt, delay and throttle packets (the `moq-impair` proxy in front of
//! every server), and the conditions every driver and binding is run under.
//!
//! What it asserts is what the protocol promises whatever the path: every group of a
//! subscription arrives whole and in its own order, every group stream ends, and no send
//! is refused.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use moq_impair::Impairment;
use moqx_net::Error;
use moqx_net::model::{Origin, TrackProducer};
use moqx_net::session::Session;

use crate::Harness;
use crate::scenarios::{Relay, publisher, subscriber};

/// The conditions of the impaired suite: (test name, impairment in both directions).
///
/// Under the conditions that lose packets, quiche 0.30 can stop sending a stream's data
/// or lose its FIN for good; `moqx-runtime` works around each path found
/// (`quic/parking.rs`, `quic/stall.rs`, `quic/fins.rs`), and RELIABILITY.md ("Real
/// networks") has the runs that show it.
pub const CONDITIONS: &[(&str, &str)] = &[
    ("loss_1_percent", "loss=1%"),
    ("loss_5_percent", "loss=5%"),
    ("loss_10_percent", "loss=10%"),
    ("burst_loss", "loss=5%,burst=4"),
    ("reordering", "reorder=10%,reorder_delay=5ms,delay=1ms"),
    ("duplication", "duplicate=10%"),
    ("corruption", "corrupt=1%"),
    ("rtt_100ms_with_jitter", "delay=50ms,jitter=10ms"),
    ("bottleneck_10_mbit", "rate=10mbit,queue=50ms,delay=5ms"),
    // A router in the path drops what is over 1,280 bytes and says nothing (a PMTU black
    // hole): packets start at 1,200 and the probes past the MTU are lost (review F9).
    ("path_mtu_1280_black_hole", "mtu=1280"),
];

/// The impairment of condition `name` of [`CONDITIONS`].
pub fn condition(name: &str) -> Impairment {
    let (_, spec) = CONDITIONS
        .iter()
        .find(|(condition, _)| *condition == name)
        .unwrap_or_else(|| panic!("no condition {name}"));
    spec.parse().unwrap_or_else(|error| panic!("{error}"))
}

/// The seed of the impaired suite's proxies: `MOQ_IMPAIR_SEED`, or 1. The proxy's
/// decisions for each connection follow from it (the timing of real sockets does not).
pub fn seed() -> u64 {
    std::env::var("MOQ_IMPAIR_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or(1)
}

/// Generates one `#[test]` per condition of [`CONDITIONS`], running
/// [`an_impaired_path_loses_nothing_the_protocol_promises`] on the harness that `$make`
/// (called with the condition's [`Impairment`] and the [`seed`]) makes.
#[macro_export]
macro_rules! impaired_tests {
    ($make:expr) => {
        $crate::impaired_tests!(@each $make;
            loss_1_percent,
            loss_5_percent,
            loss_10_percent,
            burst_loss,
            reordering,
            duplication,
            corruption,
            rtt_100ms_with_jitter,
            bottleneck_10_mbit,
            path_mtu_1280_black_hole,
        );
    };
    (@each $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                let make = $make;
                let mut harness = make(
                    $crate::impaired::condition(stringify!($name)),
                    $crate::impaired::seed(),
                );
                $crate::impaired::an_impaired_path_loses_nothing_the_protocol_promises(
                    &mut harness,
                );
            }
        )*
    };
}

/// How many subscribers read the track, each on its own connection and path.
const SUBSCRIBERS: usize = 3;
/// Groups written at once (below the track's cache of 32, so that no reader can lag
/// past the cache: every one of them must arrive).
const BURST: u64 = 20;
/// Groups whose end is written only once every subscriber has their frames: each end
/// then travels alone, in a stream frame with no bytes (review finding F17).
const PACED: u64 = 8;

/// Over an impaired path: a burst of groups of 1 to 4 frames (chat-sized to 16 KB),
/// then groups whose end comes after their frames were read. Every subscriber gets every
/// group whole, and every group stream ends; no send is refused.
pub fn an_impaired_path_loses_nothing_the_protocol_promises(harness: &mut dyn Harness) {
    let mut relay = Relay::new();
    let (_publisher, _broadcast, mut track) = publisher(harness, &mut relay, "live", "video");
    let subscribers: Vec<(Session, Origin)> = (0..SUBSCRIBERS)
        .map(|_| subscriber(harness, &mut relay))
        .collect();
    expect(harness, "every subscriber discovers the broadcast", || {
        subscribers
            .iter()
            .all(|(_, origin)| origin.consume_broadcast("live").is_some())
    });
    let readers: Vec<Groups> = subscribers
        .iter()
        .map(|(_, origin)| Groups::read(harness, origin, "live", "video"))
        .collect();
    expect(harness, "every subscription reaches the publisher", || {
        track.consumer_count() > 0 && readers.iter().all(Groups::subscribed)
    });
    // A first group shows every path in place (see `scenarios::live_at`).
    let mut expected = BTreeMap::new();
    write_group(&mut track, &mut expected, 0, 1).finish();
    expect(harness, "a first group crosses the relay", || {
        readers.iter().all(|reader| reader.ended(0))
    });

    for index in 1..=BURST {
        write_group(&mut track, &mut expected, index, index as usize % 4 + 1).finish();
    }
    for index in BURST + 1..=BURST + PACED {
        let group = write_group(&mut track, &mut expected, index, 2);
        let sequence = group.sequence();
        let mut arrived = || readers.iter().all(|reader| reader.frames(sequence) == 2);
        if !harness.run_until(PATIENCE, &mut arrived) {
            report(
                &readers,
                &expected,
                "the frames of a paced group did not arrive",
            );
        }
        group.finish();
    }

    let mut complete = || readers.iter().all(|reader| reader.all_ended(&expected));
    if !harness.run_until(PATIENCE, &mut complete) {
        report(&readers, &expected, "not every group arrived and ended");
    }
    for (index, reader) in readers.iter().enumerate() {
        let groups = reader.groups.lock().unwrap();
        for (sequence, frames) in &expected {
            let got = &groups[sequence];
            assert_eq!(
                got.end,
                Some(Ok(())),
                "subscriber {index}, group {sequence}"
            );
            assert!(
                &got.frames == frames,
                "subscriber {index}, group {sequence}: the frames differ"
            );
        }
    }
    assert_eq!(harness.send_errors(), 0, "no send was refused");
}

/// Fails the scenario with `what` and, per subscriber, what is missing.
fn report(readers: &[Groups], expected: &BTreeMap<u64, Vec<Bytes>>, what: &str) -> ! {
    let missing: Vec<String> = readers
        .iter()
        .enumerate()
        .map(|(index, reader)| format!("subscriber {index}: {}", reader.missing(expected)))
        .collect();
    panic!("{what}:\n{}", missing.join("\n"));
}

/// How long a step may take over an impaired path: a bound against hangs, far above what
/// recovery takes (a handshake whose packets are lost backs off to seconds).
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs until `done`, failing the scenario with `what` if it does not happen.
fn expect(harness: &mut dyn Harness, what: &str, mut done: impl FnMut() -> bool) {
    assert!(harness.run_until(PATIENCE, &mut done), "{what}");
}

/// Writes group `index` with `frames` frames (sizes cycle from chat-sized to 16 KB) and
/// records them in `expected` by the group's sequence; returns the open group.
fn write_group(
    track: &mut TrackProducer,
    expected: &mut BTreeMap<u64, Vec<Bytes>>,
    index: u64,
    frames: usize,
) -> moqx_net::model::GroupProducer {
    const SIZES: [usize; 5] = [60, 300, 1_400, 4_000, 16_000];
    let mut group = track.append_group();
    let mut written = Vec::new();
    for frame in 0..frames {
        let size = SIZES[(index as usize + frame) % SIZES.len()];
        let payload: Bytes = (0..size)
            .map(|byte| (byte as u64 * 31 + index * 7 + frame as u64) as u8)
            .collect();
        group.write(index, payload.clone());
        written.push(payload);
    }
    expected.insert(group.sequence(), written);
    group
}

/// One group as a reader saw it.
#[derive(Default)]
struct Group {
    frames: Vec<Bytes>,
    /// `Ok` once the group stream ended cleanly; the error if it was cut off.
    end: Option<Result<(), Error>>,
}

/// What a reading task saw, group by group.
#[derive(Clone, Default)]
struct Groups {
    subscribed: Arc<Mutex<bool>>,
    groups: Arc<Mutex<BTreeMap<u64, Group>>>,
    track_end: Arc<Mutex<Option<Result<(), Error>>>>,
}

impl Groups {
    /// Spawns a task that reads every group of `path`/`name` from `origin`.
    fn read(harness: &mut dyn Harness, origin: &Origin, path: &str, name: &str) -> Self {
        let groups = Self::default();
        let seen = groups.clone();
        let broadcast = origin.consume_broadcast(path).expect("announced");
        let name = name.to_owned();
        harness.spawn(Box::pin(async move {
            let mut track = match broadcast.subscribe_track(&name).await {
                Ok(track) => track,
                Err(error) => {
                    *seen.track_end.lock().unwrap() = Some(Err(error));
                    return;
                }
            };
            *seen.subscribed.lock().unwrap() = true;
            let outcome = loop {
                match track.next_group().await {
                    Ok(Some(mut group)) => {
                        let sequence = group.sequence();
                        seen.groups.lock().unwrap().entry(sequence).or_default();
                        let end = loop {
                            match group.read_frame().await {
                                Ok(Some(frame)) => seen
                                    .groups
                                    .lock()
                                    .unwrap()
                                    .entry(sequence)
                                    .or_default()
                                    .frames
                                    .push(frame.payload),
                                Ok(None) => break Ok(()),
                                Err(error) => break Err(error),
                            }
                        };
                        seen.groups.lock().unwrap().entry(sequence).or_default().end = Some(end);
                    }
                    Ok(None) => break Ok(()),
                    Err(error) => break Err(error),
                }
            };
            *seen.track_end.lock().unwrap() = Some(outcome);
        }));
        groups
    }

    fn subscribed(&self) -> bool {
        *self.subscribed.lock().unwrap()
    }

    fn frames(&self, sequence: u64) -> usize {
        self.groups
            .lock()
            .unwrap()
            .get(&sequence)
            .map_or(0, |group| group.frames.len())
    }

    fn ended(&self, sequence: u64) -> bool {
        self.groups
            .lock()
            .unwrap()
            .get(&sequence)
            .is_some_and(|group| group.end.is_some())
    }

    fn all_ended(&self, expected: &BTreeMap<u64, Vec<Bytes>>) -> bool {
        expected.keys().all(|sequence| self.ended(*sequence))
    }

    /// Which expected groups never arrived, and which arrived but never ended.
    fn missing(&self, expected: &BTreeMap<u64, Vec<Bytes>>) -> String {
        let groups = self.groups.lock().unwrap();
        let absent: Vec<u64> = expected
            .keys()
            .filter(|sequence| !groups.contains_key(sequence))
            .copied()
            .collect();
        let open: Vec<String> = expected
            .iter()
            .filter_map(|(sequence, frames)| {
                let group = groups.get(sequence)?;
                group.end.is_none().then(|| {
                    format!(
                        "{sequence} ({} of {} frames)",
                        group.frames.len(),
                        frames.len()
                    )
                })
            })
            .collect();
        format!(
            "never arrived {absent:?}; never ended [{}]; track end {:?}",
            open.join(", "),
            self.track_end.lock().unwrap()
        )
    }
}
