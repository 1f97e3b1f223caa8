//! Chat through a relay: users in one room, each publishing messages and receiving
//! everyone else's.
//!
//! Every user is its own session, doing what a chat client does:
//!
//! 1. publish a broadcast named after itself (`alice`) with one track, `chat`, where each
//!    message is a group of one frame (so a late joiner starts at the latest message, and
//!    a lost message never holds up the next);
//! 2. follow the room's announcements and subscribe to every other user's `chat` track;
//! 3. say hello until it has heard everyone (presence: nobody's first message is sent
//!    before everyone listens), then send its messages at a steady rate.
//!
//! Each frame carries its send time in microseconds, so every delivery is timed end to
//! end. At the end it prints what was delivered, the rate and the latency percentiles.
//!
//! ```text
//! cargo run -p moqx-relay -- --bind 127.0.0.1:4443
//! cargo run -p moq-examples --example chat -- --insecure moqt://127.0.0.1:4443/room \
//!     --users 5 --messages 50 --rate 20 --progress
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use moq_examples::{RelayArgs, now_micros, quantile};
use moqx_net::model::{Announcement, BroadcastConsumer, BroadcastProducer, Origin};
use moqx_net::session::{Session, SessionConfig};

/// N users chatting in one room through a relay; prints deliveries, rate and latency.
#[derive(Debug, Clone, Parser)]
struct Args {
    #[command(flatten)]
    relay: RelayArgs,
    /// Users in the room, each with a connection of its own.
    #[arg(long, default_value_t = 3)]
    users: usize,
    /// Messages each user sends.
    #[arg(long, default_value_t = 20)]
    messages: u64,
    /// Messages per second each user sends.
    #[arg(long, default_value_t = 10.0)]
    rate: f64,
    /// Show a live progress line on stderr.
    #[arg(long)]
    progress: bool,
    /// Print the summary as one JSON object instead of a sentence.
    #[arg(long)]
    json: bool,
    /// After the last message is sent, how long to wait for deliveries still on their
    /// way, in seconds.
    #[arg(long, default_value_t = 5.0)]
    patience: f64,
    /// Another relay of the same network (repeatable): users are spread over the URL and
    /// these, in turn.
    #[arg(long = "relay", value_name = "URL")]
    relays: Vec<String>,
    /// Keep each user's session up across relays (`moqx_tokio::Reconnect`): a user whose
    /// relay goes away or is lost moves to the next one, its broadcast and subscriptions
    /// carried over. Lost relays are noticed after --timeout seconds.
    #[arg(long)]
    reconnect: bool,
    /// With --reconnect: seconds of silence after which a user's connection is lost.
    #[arg(long, default_value_t = 2.0)]
    timeout: f64,
}

/// What the users of this process share: the presence barrier and the deliveries.
#[derive(Debug, Default)]
struct Room {
    /// Users that have heard everyone else.
    ready: AtomicUsize,
    /// Messages delivered (hellos not counted).
    delivered: AtomicU64,
    /// Each delivery's latency, in microseconds.
    latencies: Mutex<Vec<u64>>,
    /// Set when the run is over: readers stop.
    over: AtomicBool,
}

#[tokio::main]
async fn main() {
    // RUST_LOG=debug (or moqx_net=debug, …) shows why a session ended or a subscription
    // moved; nothing without it.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let args = Args::parse();
    if let Err(message) = run(args).await {
        eprintln!("chat: {message}");
        std::process::exit(1);
    }
}

async fn run(args: Args) -> Result<(), String> {
    if args.users == 0 || args.rate <= 0.0 {
        return Err("--users and --rate must be above zero".into());
    }
    let room = Arc::new(Room::default());
    let mut users = Vec::new();
    for index in 0..args.users {
        users.push(Arc::new(join(index, &args, room.clone()).await?));
    }
    let offered = args.users as u64 * args.messages;
    let expected = offered * (args.users as u64 - 1);
    let progress = args
        .progress
        .then(|| tokio::spawn(show_progress(room.clone(), expected)));

    let started = Instant::now();
    let mut senders = Vec::new();
    for user in &users {
        senders.push(tokio::spawn(user.clone().chat(args.clone(), room.clone())));
    }
    for sender in senders {
        sender.await.map_err(|e| e.to_string())??;
    }
    // Deliveries still on their way.
    let patience = Instant::now() + Duration::from_secs_f64(args.patience);
    while room.delivered.load(Ordering::Relaxed) < expected && Instant::now() < patience {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let elapsed = started.elapsed();
    room.over.store(true, Ordering::Relaxed);
    if let Some(progress) = progress {
        progress.abort();
        eprintln!();
    }
    for user in &users {
        user.session.close();
    }
    for user in &users {
        let _ = tokio::time::timeout(Duration::from_secs(1), user.session.closed()).await;
    }
    summarize(&args, &room, offered, expected, elapsed);
    Ok(())
}

/// One user: its session, and the track it writes its messages to.
struct User {
    name: String,
    session: Link,
    /// Published for as long as the user exists.
    _broadcast: BroadcastProducer,
    track: Mutex<moqx_net::model::TrackProducer>,
}

/// A user's connection: one session, or one kept up across relays.
enum Link {
    Session(Session),
    Reconnect(moqx_tokio::Reconnect),
}

impl Link {
    fn close(&self) {
        match self {
            Link::Session(session) => session.close(moqx_net::Error::Cancel),
            Link::Reconnect(reconnect) => reconnect.close(),
        }
    }

    async fn closed(&self) {
        if let Link::Session(session) = self {
            session.closed().await;
        }
    }
}

/// Connects user number `index`: publishes its broadcast and starts following the room.
async fn join(index: usize, args: &Args, room: Arc<Room>) -> Result<User, String> {
    let name = format!("user{index}");
    let published = Origin::new();
    let broadcast = BroadcastProducer::new();
    let track = broadcast.create_track(moqx_net::model::Track {
        timescale: 1_000_000, // frame timestamps are microseconds
        // A user that moves to another relay is asked for what its readers missed
        // meanwhile: keep a few seconds of messages.
        cache_groups: 512,
        ..moqx_net::model::Track::new("chat")
    });
    published
        .publish(name.as_str(), &broadcast)
        .map_err(|e| e.to_string())?;
    let others = Origin::new();
    let session = SessionConfig::default()
        .with_publisher(&published)
        .with_subscriber(&others);
    // Users are spread over the relays in turn; each moves on to the next ones.
    let mut relays = vec![args.relay.url.clone()];
    relays.extend(args.relays.iter().cloned());
    let turn = index % relays.len();
    relays.rotate_left(turn);
    let link = match args.reconnect {
        true => {
            let mut config = args.relay.client_config(session)?;
            config.limits.idle_timeout = Duration::from_secs_f64(args.timeout.max(0.1));
            let reconnect = moqx_tokio::Reconnect::new(relays, config);
            reconnect
                .connected()
                .await
                .ok_or("the session closed before it started")?;
            Link::Reconnect(reconnect)
        }
        false => Link::Session(args.relay.connect_to(&relays[0], session).await?),
    };
    tokio::spawn(follow(
        name.clone(),
        others,
        args.users,
        room,
        args.reconnect,
    ));
    Ok(User {
        name,
        session: link,
        _broadcast: broadcast,
        track: Mutex::new(track),
    })
}

/// Subscribes to every other user's `chat` track as they are announced; with `follows`,
/// once per user, following it across sessions and relays.
async fn follow(me: String, others: Origin, users: usize, room: Arc<Room>, follows: bool) {
    let heard = Arc::new(Mutex::new(HashSet::new()));
    if users == 1 {
        room.ready.fetch_add(1, Ordering::Relaxed);
    }
    let mut reading = HashSet::new();
    let mut announced = others.announced("");
    loop {
        if let Announcement::Active { path, broadcast } = announced.next().await {
            if path.as_str() == me || (follows && !reading.insert(path.clone())) {
                continue;
            }
            let (heard, room) = (heard.clone(), room.clone());
            let track = match follows {
                true => Track::Followed(others.clone(), path.to_string()),
                false => Track::Once(broadcast),
            };
            tokio::spawn(read(path.to_string(), track, users, heard, room));
        }
    }
}

/// Which track a reader reads.
enum Track {
    /// The broadcast announced.
    Once(BroadcastConsumer),
    /// The broadcast at this path, followed across sessions and relays.
    Followed(Origin, String),
}

/// Reads one other user's messages: hellos count toward presence, messages are timed.
async fn read(
    sender: String,
    track: Track,
    users: usize,
    heard: Arc<Mutex<HashSet<String>>>,
    room: Arc<Room>,
) {
    let track = match track {
        Track::Once(broadcast) => broadcast
            .subscribe_track("chat")
            .await
            .map(moqx_net::model::FollowedTrack::fixed),
        Track::Followed(origin, path) => origin.follow_track(path, "chat").await,
    };
    let Ok(track) = track else {
        return;
    };
    // Frames as they arrive from every group open: a message (a group) whose end comes
    // late, as a browser user's often does, never holds up the next one.
    let mut frames = moqx_net::model::TrackFrames::new(track);
    while let Ok(Some((_group, frame))) = frames.read_frame().await {
        if room.over.load(Ordering::Relaxed) {
            return;
        }
        if frame.payload.starts_with(b"hello") {
            let mut heard = heard.lock().unwrap_or_else(|e| e.into_inner());
            if heard.insert(sender.clone()) && heard.len() == users - 1 {
                room.ready.fetch_add(1, Ordering::Relaxed);
            }
            continue;
        }
        let latency = now_micros().saturating_sub(frame.timestamp);
        room.latencies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(latency);
        room.delivered.fetch_add(1, Ordering::Relaxed);
    }
}

impl User {
    /// Says hello until everyone has heard everyone, then sends the messages.
    async fn chat(self: Arc<Self>, args: Args, room: Arc<Room>) -> Result<(), String> {
        let users = args.users;
        let wait_until = Instant::now() + Duration::from_secs(30);
        while room.ready.load(Ordering::Relaxed) < users {
            if Instant::now() > wait_until {
                return Err(format!(
                    "{}: the room did not come together within 30 s ({} of {users} users heard everyone)",
                    self.name,
                    room.ready.load(Ordering::Relaxed)
                ));
            }
            self.say("hello");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / args.rate));
        for number in 0..args.messages {
            ticks.tick().await;
            self.say(&format!("{}: message {number}", self.name));
        }
        Ok(())
    }

    /// One message: a group of one frame, stamped with the time it is sent.
    fn say(&self, text: &str) {
        let mut track = self.track.lock().unwrap_or_else(|e| e.into_inner());
        track.write_group(now_micros(), text.to_owned());
    }
}

/// A live line: deliveries so far, the rate over the last interval, the latency so far.
async fn show_progress(room: Arc<Room>, expected: u64) {
    let mut last = 0;
    let mut ticks = tokio::time::interval(Duration::from_millis(250));
    loop {
        ticks.tick().await;
        let delivered = room.delivered.load(Ordering::Relaxed);
        let rate = (delivered - last) * 4;
        last = delivered;
        let p50 = {
            let mut latencies = room
                .latencies
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            latencies.sort_unstable();
            quantile(&latencies, 0.5).unwrap_or(0)
        };
        eprint!(
            "\r  delivered {delivered:>7} / {expected}   {rate:>6} msg/s   p50 {:.2} ms   ",
            p50 as f64 / 1000.0
        );
    }
}

fn summarize(args: &Args, room: &Room, offered: u64, expected: u64, elapsed: Duration) {
    let delivered = room.delivered.load(Ordering::Relaxed);
    let mut latencies = room
        .latencies
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    latencies.sort_unstable();
    let ms = |q: f64| quantile(&latencies, q).map_or(0.0, |us| us as f64 / 1000.0);
    let seconds = elapsed.as_secs_f64();
    let per_second = delivered as f64 / seconds.max(1e-9);
    if args.json {
        let summary = serde_json::json!({
            "users": args.users,
            "messages_per_user": args.messages,
            "offered": offered,
            "expected_deliveries": expected,
            "delivered": delivered,
            "lost": expected.saturating_sub(delivered),
            "seconds": seconds,
            "deliveries_per_second": per_second,
            "latency_ms": { "p50": ms(0.5), "p99": ms(0.99), "max": ms(1.0) },
        });
        println!("{summary}");
    } else {
        println!(
            "{} users sent {offered} messages; {delivered} of {expected} deliveries arrived \
             ({} lost) in {seconds:.1} s, {per_second:.0} deliveries/s; latency p50 {:.2} ms, \
             p99 {:.2} ms, max {:.2} ms",
            args.users,
            expected.saturating_sub(delivered),
            ms(0.5),
            ms(0.99),
            ms(1.0)
        );
    }
}
