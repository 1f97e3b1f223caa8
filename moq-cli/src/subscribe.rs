//! `moqx subscribe URL PATH`

use std::io::Write;

use clap::Args;
use moqx_net::model::{Announcement, BroadcastConsumer, FollowedTrack, Origin, Path, TrackFrames};
use moqx_net::session::SessionConfig;

use crate::client::{Connection, close, ended};

/// Arguments of `moqx subscribe`.
#[derive(Debug, Args)]
pub(crate) struct SubscribeArgs {
    #[command(flatten)]
    connection: Connection,
    /// The broadcast, relative to the URL's root.
    path: String,
    /// The track to read.
    #[arg(long, default_value = "data")]
    track: String,
    /// Write each frame's bytes as they are, without a newline after each.
    #[arg(long)]
    raw: bool,
    /// Exit after this many frames.
    #[arg(long, value_name = "N")]
    count: Option<u64>,
}

pub(crate) async fn run(args: SubscribeArgs) -> Result<(), String> {
    let origin = Origin::new();
    let path = Path::new(&args.path);
    if args.connection.reconnect {
        let reconnect = args
            .connection
            .keep_connected({
                let mut session_config = SessionConfig::default();
                session_config.subscribe = Some(origin.clone());
                session_config.subscribe_prefix = path.clone();
                session_config
            })
            .await?;
        // The track follows the broadcast from session to session.
        let outcome = tokio::select! {
            outcome = read_followed(&origin, &path, &args) => outcome,
            _ = tokio::signal::ctrl_c() => Ok(()),
        };
        reconnect.close();
        return outcome;
    }
    let session = args
        .connection
        .connect({
            let mut session_config = SessionConfig::default();
            session_config.subscribe = Some(origin.clone());
            session_config.subscribe_prefix = path.clone();
            session_config
        })
        .await?;
    tokio::select! {
        outcome = read(&origin, &path, &args) => {
            // A track that ended because the session did: the session's end is the story.
            if outcome.is_err() && session.is_closed() {
                return ended(session.closed().await);
            }
            close(&session).await;
            // A track that ended after the relay's GOAWAY (a SUBSCRIBE it came before is
            // never sent): say so, and what follows a relay that goes away.
            match (outcome, session.peer_goaway()) {
                (Err(error), Some(_)) => Err(format!(
                    "{error} (the relay is going away: it sent GOAWAY; --reconnect follows the track to a new session)"
                )),
                (outcome, _) => outcome,
            }
        }
        error = session.closed() => ended(error),
        _ = tokio::signal::ctrl_c() => {
            close(&session).await;
            Ok(())
        }
    }
}

/// Waits for the broadcast, then copies its track to stdout until it ends.
async fn read(origin: &Origin, path: &Path, args: &SubscribeArgs) -> Result<(), String> {
    let broadcast = announced(origin, path).await;
    let track = broadcast
        .subscribe_track(&args.track)
        .await
        .map_err(|error| format!("subscribing to {path}/{}: {error}", args.track))?;
    copy(FollowedTrack::fixed(track), args).await
}

/// As [`read`], following the broadcast across sessions (--reconnect).
async fn read_followed(origin: &Origin, path: &Path, args: &SubscribeArgs) -> Result<(), String> {
    let track = origin
        .follow_track(path.clone(), &args.track)
        .await
        .map_err(|error| format!("subscribing to {path}/{}: {error}", args.track))?;
    copy(track, args).await
}

/// Copies `track` to stdout until it ends, each frame as it arrives from whichever group
/// is open (`TrackFrames`: a group whose end is late, as a browser publisher's often is,
/// never holds the next group's frames).
async fn copy(track: FollowedTrack, args: &SubscribeArgs) -> Result<(), String> {
    let mut stdout = std::io::stdout();
    let mut frames = TrackFrames::new(track);
    let mut count = 0u64;
    loop {
        let frame = match frames.read_frame().await {
            Ok(Some((_, frame))) => frame,
            Ok(None) => return Ok(()), // the publisher finished the track
            Err(error) => return Err(format!("the track ended: {error}")),
        };
        stdout
            .write_all(&frame.payload)
            .and_then(|()| {
                if args.raw {
                    Ok(())
                } else {
                    stdout.write_all(b"\n")
                }
            })
            .and_then(|()| stdout.flush())
            .map_err(|e| format!("writing stdout: {e}"))?;
        count += 1;
        if args.count.is_some_and(|limit| count >= limit) {
            return Ok(());
        }
    }
}

/// The broadcast at `path`, once announced.
pub(crate) async fn announced(origin: &Origin, path: &Path) -> BroadcastConsumer {
    let mut announced = origin.announced(path.clone());
    loop {
        if let Announcement::Active {
            path: active,
            broadcast,
        } = announced.next().await
            && &active == path
        {
            return broadcast;
        }
    }
}
