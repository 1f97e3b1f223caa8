//! `moq publish URL PATH`

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use clap::Args;
use moq_net::model::{BroadcastProducer, Origin, Path, Track, TrackProducer};
use moq_net::session::{Session, SessionConfig};
use tokio::io::AsyncBufReadExt;

use crate::client::{Connection, close, ended};

/// Arguments of `moq publish`.
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
    /// Wait for a first subscriber before sending anything (a subscriber joining later
    /// starts at the latest group, so this is how piped input reaches one in full).
    #[arg(long)]
    wait: bool,
    /// At the end of input, how long to wait for subscribers to have everything before
    /// leaving anyway, in seconds.
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
    let session = args
        .connection
        .connect(SessionConfig {
            publish: Some(origin),
            ..SessionConfig::default()
        })
        .await?;
    tokio::select! {
        outcome = send(track, &args) => {
            outcome?;
            finish(&session, &broadcast, &args).await
        }
        error = session.closed() => ended(error),
        _ = tokio::signal::ctrl_c() => {
            close(&session).await;
            Ok(())
        }
    }
}

/// Writes the input as frames, then finishes the track.
async fn send(mut track: TrackProducer, args: &PublishArgs) -> Result<(), String> {
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
            write(&mut track, Bytes::from(bytes));
        }
        None => {
            let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
            while let Some(line) = lines
                .next_line()
                .await
                .map_err(|e| format!("reading stdin: {e}"))?
            {
                write(&mut track, Bytes::from(line));
            }
        }
    }
    track.finish();
    Ok(())
}

/// One frame in a group of its own, stamped with the time it was sent.
fn write(track: &mut TrackProducer, payload: Bytes) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros();
    let mut group = track.append_group();
    group.write(u64::try_from(now).unwrap_or(u64::MAX), payload);
    group.finish();
}

/// Stays until no subscriber is reading (they have the end of the track) or the linger is
/// over, then closes the session.
async fn finish(
    session: &Session,
    broadcast: &BroadcastProducer,
    args: &PublishArgs,
) -> Result<(), String> {
    let linger = Duration::from_secs_f64(args.linger.max(0.0));
    let _ = tokio::time::timeout(linger, broadcast.unused()).await;
    // The last group streams may still be in flight behind the subscription's end.
    tokio::time::sleep(Duration::from_millis(200).min(linger)).await;
    close(session).await;
    Ok(())
}
