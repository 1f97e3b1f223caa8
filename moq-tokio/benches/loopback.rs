//! Chat-shaped fanout through a relay on loopback, over real UDP and QUIC with the tokio
//! driver: one publisher, N subscribers, 100-byte messages (one per group) at a fixed
//! offered rate.
//!
//! Everything runs in this one process (relay, publisher and subscribers, each client with
//! its own socket and endpoint task), so the CPU figure is the whole process's per
//! delivered message, clients included: an upper bound on the relay's own. Rounds with the
//! relay's GSO on and off alternate, so that their ratio is measured side by side.
//!
//! ```text
//! cargo bench -p moq-tokio --bench loopback [-- --subscribers 100 --rate 50 --seconds 2 --rounds 2]
//! ```
#![allow(missing_docs, clippy::print_stdout, clippy::print_stderr)]

use std::time::{Duration, Instant};

use moq_net::model::{BroadcastProducer, Origin, Track};
use moq_net::session::SessionConfig;
use moq_runtime::tls::Certificate;
use moq_tokio::{ClientConfig, Server, ServerConfig, connect};
use nix::sys::resource::{UsageWho, getrusage};
use nix::sys::time::TimeValLike;

struct Options {
    subscribers: usize,
    rate: u64,
    seconds: u64,
    rounds: usize,
}

struct Outcome {
    offered: u64,
    delivered: u64,
    cpu: Duration,
    wall: Duration,
}

fn main() {
    let options = Options::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    println!(
        "1 publisher -> relay -> {} subscribers, 100-byte messages at {}/s for {} s, {} rounds per setting",
        options.subscribers, options.rate, options.seconds, options.rounds
    );
    println!(
        "{:>5} {:>5} {:>10} {:>11} {:>9} {:>14} {:>12}",
        "round", "gso", "offered", "delivered", "loss %", "cpu us/msg", "deliveries/s"
    );
    let mut per_message = [Vec::new(), Vec::new()];
    for round in 1..=options.rounds {
        for (slot, gso) in [(0, true), (1, false)] {
            let outcome = runtime.block_on(run(&options, gso));
            let expected = outcome.offered * options.subscribers as u64;
            let loss = 100.0 * (expected.saturating_sub(outcome.delivered)) as f64
                / expected.max(1) as f64;
            let us = outcome.cpu.as_secs_f64() * 1e6 / outcome.delivered.max(1) as f64;
            println!(
                "{:>5} {:>5} {:>10} {:>11} {:>9.2} {:>14.2} {:>12.0}",
                round,
                if gso { "on" } else { "off" },
                outcome.offered,
                outcome.delivered,
                loss,
                us,
                outcome.delivered as f64 / outcome.wall.as_secs_f64()
            );
            per_message[slot].push(us);
        }
    }
    let median = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let (on, off) = (median(&mut per_message[0]), median(&mut per_message[1]));
    println!(
        "median cpu per delivered message: GSO on {on:.2} us, off {off:.2} us; off/on = {:.2}x",
        off / on
    );
}

async fn run(options: &Options, gso: bool) -> Outcome {
    let relay_origin = Origin::new();
    let mut config = ServerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        Certificate::self_signed(&["localhost".into()]).unwrap(),
        SessionConfig {
            publish: Some(relay_origin.clone()),
            subscribe: Some(relay_origin),
            ..SessionConfig::default()
        },
    );
    config.udp.gso = gso;
    let mut server = Server::bind(config).await.expect("the relay binds");
    let url = format!("moqt://localhost:{}/", server.local_addr().port());
    let relay = tokio::spawn(async move {
        let mut sessions = Vec::new();
        while let Some(request) = server.accept().await {
            sessions.push(request.accept());
        }
    });

    let published = Origin::new();
    let broadcast = BroadcastProducer::new();
    let mut track = broadcast.create_track(Track::new("chat"));
    published.publish("room", &broadcast);
    let _publisher = connect(
        &url,
        ClientConfig {
            session: SessionConfig {
                publish: Some(published),
                ..SessionConfig::default()
            },
            insecure_skip_verify: true,
            ..ClientConfig::default()
        },
    )
    .await
    .expect("the publisher connects");

    let mut readers = Vec::new();
    let mut clients = Vec::new();
    for _ in 0..options.subscribers {
        let seen = Origin::new();
        clients.push(
            connect(
                &url,
                ClientConfig {
                    session: SessionConfig {
                        subscribe: Some(seen.clone()),
                        ..SessionConfig::default()
                    },
                    insecure_skip_verify: true,
                    ..ClientConfig::default()
                },
            )
            .await
            .expect("a subscriber connects"),
        );
        readers.push(tokio::spawn(async move {
            let broadcast = loop {
                if let Some(broadcast) = seen.consume_broadcast("room") {
                    break broadcast;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            };
            let mut track = broadcast.subscribe_track("chat").await.expect("the track");
            let mut delivered = 0u64;
            while let Ok(Some(mut group)) = track.next_group().await {
                while let Ok(Some(_frame)) = group.read_frame().await {
                    delivered += 1;
                }
            }
            delivered
        }));
    }
    // Everyone subscribed before the clock starts.
    while track.consumer_count() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    let payload = bytes::Bytes::from(vec![b'x'; 100]);
    let before = cpu();
    let start = Instant::now();
    let total = options.rate * options.seconds;
    let mut interval =
        tokio::time::interval(Duration::from_micros(1_000_000 / options.rate.max(1)));
    for timestamp in 0..total {
        interval.tick().await;
        let mut group = track.append_group();
        group.write(timestamp, payload.clone());
        group.finish();
    }
    track.finish();
    let mut delivered = 0;
    for reader in readers {
        if let Ok(Ok(count)) = tokio::time::timeout(Duration::from_secs(10), reader).await {
            delivered += count;
        }
    }
    let wall = start.elapsed();
    let cpu = cpu().saturating_sub(before);
    drop(clients);
    relay.abort();
    Outcome {
        offered: total,
        delivered,
        cpu,
        wall,
    }
}

/// The process's user + system CPU time so far.
fn cpu() -> Duration {
    let usage = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let micros = usage.user_time().num_microseconds() + usage.system_time().num_microseconds();
    Duration::from_micros(micros.max(0) as u64)
}

impl Options {
    fn parse() -> Self {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let value = |flag: &str, default: u64| -> u64 {
            args.iter()
                .position(|arg| arg == flag)
                .and_then(|i| args.get(i + 1))
                .and_then(|text| text.parse().ok())
                .unwrap_or(default)
                .max(1)
        };
        Self {
            subscribers: value("--subscribers", 100) as usize,
            rate: value("--rate", 50),
            seconds: value("--seconds", 2),
            rounds: value("--rounds", 2) as usize,
        }
    }
}
