//! A clock: one side publishes the time as a track, the other prints it.
//!
//! The publisher writes one group per minute and one frame per second into it, so a
//! subscriber that joins mid-minute first gets the seconds of the current minute already
//! written (the group's cached frames), then each new second as it comes.
//!
//! ```text
//! cargo run -p moqx-relay -- --bind 127.0.0.1:4443
//! cargo run -p moq-examples --example clock -- --insecure moqt://127.0.0.1:4443/ publish
//! cargo run -p moq-examples --example clock -- --insecure moqt://127.0.0.1:4443/ subscribe
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::Duration;

use clap::{Parser, ValueEnum};
use moq_examples::{RelayArgs, now_micros};
use moqx_net::model::{Announcement, BroadcastProducer, Origin, Track};
use moqx_net::session::SessionConfig;

/// Publishes the time, or prints it.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    relay: RelayArgs,
    /// Which side to run.
    role: Role,
    /// The broadcast's path under the URL's root.
    #[arg(long, default_value = "clock")]
    broadcast: String,
    /// Stop after this many seconds (published or printed).
    #[arg(long)]
    count: Option<u64>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Role {
    /// Write the time, every second.
    Publish,
    /// Print the time as it arrives.
    Subscribe,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let outcome = match args.role {
        Role::Publish => publish(&args).await,
        Role::Subscribe => subscribe(&args).await,
    };
    if let Err(message) = outcome {
        eprintln!("clock: {message}");
        std::process::exit(1);
    }
}

async fn publish(args: &Args) -> Result<(), String> {
    let origin = Origin::new();
    let broadcast = BroadcastProducer::new();
    let mut track = broadcast.create_track(Track {
        timescale: 1_000_000,
        ..Track::new("seconds")
    });
    origin
        .publish(args.broadcast.as_str(), &broadcast)
        .map_err(|e| e.to_string())?;
    let session = args
        .relay
        .connect(SessionConfig::default().with_publisher(&origin))
        .await?;
    let mut group = None;
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    for _ in 0..args.count.unwrap_or(u64::MAX) {
        ticks.tick().await;
        let now = now_micros();
        let seconds = now / 1_000_000;
        // A new group at the top of every minute (and for the first second).
        if seconds.is_multiple_of(60) || group.is_none() {
            if let Some(previous) = group.take() {
                moqx_net::model::GroupProducer::finish(previous);
            }
            group = Some(track.append_group());
        }
        if let Some(group) = group.as_mut() {
            group.write(now, clock_text(seconds));
        }
        if session.is_closed() {
            return Err("the relay closed the session".into());
        }
    }
    if let Some(group) = group {
        group.finish();
    }
    track.finish();
    tokio::time::sleep(Duration::from_millis(200)).await;
    session.close(moqx_net::Error::Cancel);
    let _ = session.closed().await;
    Ok(())
}

async fn subscribe(args: &Args) -> Result<(), String> {
    let origin = Origin::new();
    let session = args
        .relay
        .connect(SessionConfig::default().with_subscriber(&origin))
        .await?;
    let mut announced = origin.announced(args.broadcast.as_str());
    let broadcast = loop {
        if let Announcement::Active { path, broadcast } = announced.next().await
            && path.as_str() == args.broadcast
        {
            break broadcast;
        }
    };
    let mut track = broadcast
        .subscribe_track("seconds")
        .await
        .map_err(|e| format!("subscribing: {e}"))?;
    let mut printed = 0;
    while let Ok(Some(mut group)) = track.next_group().await {
        while let Ok(Some(frame)) = group.read_frame().await {
            println!("{}", String::from_utf8_lossy(&frame.payload));
            printed += 1;
            if args.count.is_some_and(|count| printed >= count) {
                session.close(moqx_net::Error::Cancel);
                let _ = session.closed().await;
                return Ok(());
            }
        }
    }
    Ok(())
}

/// `HH:MM:SS` (UTC) of a time in seconds since the Unix epoch.
fn clock_text(seconds: u64) -> String {
    let day = seconds % 86_400;
    format!("{:02}:{:02}:{:02}", day / 3600, day % 3600 / 60, day % 60)
}
