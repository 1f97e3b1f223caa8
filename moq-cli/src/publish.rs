//! `moqx publish URL PATH`

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use clap::Args;
use moqx_net::model::{
    BroadcastProducer, Frame, GroupProducer, Origin, Path, Track, TrackProducer,
};
use moqx_net::session::{Session, SessionConfig};
use tokio::io::AsyncBufReadExt;

use crate::client::{Connection, close, ended};

/// Arguments of `moqx publish`.
#[derive(Debug, Args)]
pub(crate) struct PublishArgs {
    #[command(flatten)]
    connection: Connection,
    /// The broadcast, relative to the URL's root.
    path: String,
    /// The track's name.
    #[arg(long, default_value = "data")]
    track: String,
    /// Send this file as one frame instead of reading stdin.
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// Lines per group. A subscriber that joins late starts at the first line of the
    /// group being written; 1 gives every line a group of its own (chat: a late joiner
    /// gets only the latest line, and a lost line never holds up the next).
    #[arg(long, default_value_t = 1000, value_name = "LINES")]
    group_size: u64,
    /// Wait for a first subscriber before sending anything.
    #[arg(long)]
    wait: bool,
    /// At the end of input, how long to wait for subscribers to have everything before
    /// leaving anyway, in seconds: until a subscriber came and every one read to the end
    /// (with no subscriber, the whole linger: one may be on its way through the relay).
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    linger: f64,
}

pub(crate) async fn run(args: PublishArgs) -> Result<(), String> {
    let origin = Origin::new();
    let broadcast = BroadcastProducer::new();
    let track = broadcast.create_track(Track {
        // Timestamps are microseconds since the Unix epoch: a subscriber can tell latency.
        timescale: 1_000_000,
        ..Track::new(args.track.as_str())
    });
    origin
        .publish(Path::new(&args.path), &broadcast)
        .map_err(|e| format!("publishing {}: {e}", args.path))?;
    if args.connection.reconnect {
        // The broadcast is announced on every session the relays give it; its groups
        // are numbered on, so subscribers that follow it lose nothing as it moves.
        let reconnect = args
            .connection
            .keep_connected(SessionConfig::default().with_publisher(&origin))
            .await?;
        let outcome = tokio::select! {
            outcome = send(track, &args) => match (outcome, reconnect.session()) {
                (Ok(track), Some(session)) => finish(&session, &broadcast, track, &args).await,
                (Ok(_), None) => Ok(()),
                (Err(error), _) => Err(error),
            },
            _ = tokio::signal::ctrl_c() => Ok(()),
        };
        reconnect.close();
        return outcome;
    }
    let session = args
        .connection
        .connect(SessionConfig::default().with_publisher(&origin))
        .await?;
    tokio::select! {
        outcome = send(track, &args) => finish(&session, &broadcast, outcome?, &args).await,
        error = session.closed() => ended(error),
        _ = tokio::signal::ctrl_c() => {
            close(&session).await;
            Ok(())
        }
    }
}

/// Writes the input as frames; the track stays open, for [`finish`] to end.
async fn send(mut track: TrackProducer, args: &PublishArgs) -> Result<TrackProducer, String> {
    if args.wait {
        while track.consumer_count() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    match &args.file {
        Some(path) => {
            let bytes = tokio::fs::read(path)
                .await
                .map_err(|e| format!("reading {}: {e}", path.display()))?;
            track.write_group(now_micros(), Bytes::from(bytes));
        }
        None => {
            let group_size = args.group_size.max(1);
            let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
            let mut group: Option<GroupProducer> = None;
            while let Some(line) = lines
                .next_line()
                .await
                .map_err(|e| format!("reading stdin: {e}"))?
            {
                let current = group.get_or_insert_with(|| track.append_group());
                let frame = Frame {
                    timestamp: now_micros(),
                    payload: Bytes::from(line),
                };
                // A full group's last frame and its end in one go (`finish_with`).
                if current.frame_count() + 1 >= group_size {
                    if let Some(full) = group.take() {
                        full.finish_with(frame);
                    }
                } else {
                    current.write_frame(frame);
                }
            }
            if let Some(last) = group {
                last.finish();
            }
        }
    }
    Ok(track)
}

/// Microseconds since the Unix epoch: each frame's timestamp, so a reader can tell latency.
fn now_micros() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros();
    u64::try_from(now).unwrap_or(u64::MAX)
}

/// How long a track must keep a consumer to count as subscribed, or have none to count as
/// left: a few round trips to the relay, which asks about a track before it subscribes,
/// with room for a busy relay (at 250 ms, one on a loaded machine could subscribe after the
/// track had ended, and its subscriber found it "not found").
const QUIET: Duration = Duration::from_secs(1);

/// Resolves once a subscriber came and stayed for [`QUIET`], or came and went and none
/// came back within it.
async fn subscribers_came(track: &TrackProducer) {
    track.used().await;
    loop {
        if tokio::time::timeout(QUIET, track.unused()).await.is_err() {
            return; // subscribed
        }
        if tokio::time::timeout(QUIET, track.used()).await.is_err() {
            return; // came and went
        }
    }
}

/// Ends the track once subscribers can have everything, stays until they do or the
/// linger is over, then closes the session.
///
/// A track that ends is gone for anyone who subscribes after: such a subscriber finds it
/// "not found". A subscriber reading now is subscribed, so the track ends at once. But a
/// subscriber may also have been waiting at the relay before this publisher started: it
/// subscribes only once the announcement reached it, and the relay first asks about the
/// track, then subscribes. So with no subscriber yet, the track stays open until one came
/// and either stayed (a subscription) or came and went and nobody came back within
/// [`QUIET`] (it read what it wanted); then it ends.
async fn finish(
    session: &Session,
    broadcast: &BroadcastProducer,
    track: TrackProducer,
    args: &PublishArgs,
) -> Result<(), String> {
    let linger = Duration::from_secs_f64(args.linger.max(0.0));
    let deadline = tokio::time::Instant::now() + linger;
    if track.consumer_count() == 0 {
        let _ = tokio::time::timeout_at(deadline, subscribers_came(&track)).await;
    }
    track.finish();
    let _ = tokio::time::timeout_at(deadline, broadcast.unused()).await;
    // The last group streams may still be in flight behind the subscription's end.
    tokio::time::sleep(Duration::from_millis(200).min(linger)).await;
    close(session).await;
    Ok(())
}
