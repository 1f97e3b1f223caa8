//! Fanout through a relay **in its own process** on loopback, over real UDP and QUIC with
//! the tokio driver: one publisher, N subscribers, at a fixed offered rate.
//!
//! The bench starts the relay as a child process (this same binary, `--serve-relay`), so
//! the CPU it reports is the relay's alone (the child's `getrusage`, asked over a pipe),
//! not the clients'. Rounds alternate the relay's UDP settings (GSO on/off, GRO on/off)
//! A B C A B C …, so that their ratios are measured side by side on the same machine.
//!
//! Two shapes:
//! - `chat`: 100-byte messages, one per group, to N subscribers on their own sockets (no
//!   two packets of a turn share a destination: GSO cannot batch);
//! - `bulk`: 64 KiB frames to one subscriber (every packet of a turn goes to one
//!   destination: GSO batches them; the subscriber's ACKs are what the relay receives).
//!
//! ```text
//! cargo bench -p moqx-tokio --bench loopback -- [--shape chat|bulk] [--subscribers 100]
//!     [--rate 50] [--seconds 2] [--rounds 3]
//! ```
#![allow(missing_docs, clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use moqx_net::model::{BroadcastProducer, Origin, Track};
use moqx_net::session::SessionConfig;
use moqx_runtime::tls::Certificate;
use moqx_tokio::{ClientConfig, Server, ServerConfig, connect};
use nix::sys::resource::{UsageWho, getrusage};
use nix::sys::time::TimeValLike;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Chat,
    Bulk,
}

struct Options {
    shape: Shape,
    subscribers: usize,
    rate: u64,
    seconds: u64,
    rounds: usize,
    payload: usize,
}

/// The relay's UDP settings a round runs with.
#[derive(Clone, Copy)]
struct Setting {
    name: &'static str,
    gso: bool,
    gro: bool,
}

const SETTINGS: [Setting; 3] = [
    Setting {
        name: "GSO+GRO",
        gso: true,
        gro: true,
    },
    Setting {
        name: "no GSO",
        gso: false,
        gro: true,
    },
    Setting {
        name: "no GRO",
        gso: true,
        gro: false,
    },
];

struct Outcome {
    offered: u64,
    delivered: u64,
    bytes: u64,
    relay_cpu: Duration,
    client_cpu: Duration,
    wall: Duration,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|arg| arg == "--serve-relay") {
        serve_relay(&args);
        return;
    }
    let options = Options::parse(&args);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    println!(
        "{}: 1 publisher -> relay process -> {} subscriber(s), {}-byte frames at {}/s for {} s, {} rounds of {} settings",
        match options.shape {
            Shape::Chat => "chat",
            Shape::Bulk => "bulk",
        },
        options.subscribers,
        options.payload,
        options.rate,
        options.seconds,
        options.rounds,
        SETTINGS.len()
    );
    println!(
        "{:>5} {:>8} {:>8} {:>10} {:>7} {:>16} {:>14} {:>13} {:>13}",
        "round",
        "relay",
        "offered",
        "delivered",
        "loss %",
        "relay us/msg",
        "relay us/MB",
        "deliveries/s",
        "clients us/msg"
    );
    let mut per_message: Vec<Vec<f64>> = vec![Vec::new(); SETTINGS.len()];
    for round in 1..=options.rounds {
        for (slot, setting) in SETTINGS.iter().enumerate() {
            let outcome = runtime.block_on(run(&options, *setting));
            let expected = outcome.offered * options.subscribers as u64;
            let loss = 100.0 * (expected.saturating_sub(outcome.delivered)) as f64
                / expected.max(1) as f64;
            let delivered = outcome.delivered.max(1) as f64;
            let relay_us = outcome.relay_cpu.as_secs_f64() * 1e6 / delivered;
            let relay_us_per_mb =
                outcome.relay_cpu.as_secs_f64() * 1e6 / (outcome.bytes.max(1) as f64 / 1e6);
            let client_us = outcome.client_cpu.as_secs_f64() * 1e6 / delivered;
            println!(
                "{:>5} {:>8} {:>8} {:>10} {:>7.2} {:>16.2} {:>14.0} {:>13.0} {:>13.2}",
                round,
                setting.name,
                outcome.offered,
                outcome.delivered,
                loss,
                relay_us,
                relay_us_per_mb,
                outcome.delivered as f64 / outcome.wall.as_secs_f64(),
                client_us
            );
            per_message[slot].push(relay_us);
        }
    }
    let median = |values: &[f64]| {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        sorted[sorted.len() / 2]
    };
    println!(
        "median relay CPU per delivered message: {}",
        SETTINGS
            .iter()
            .zip(&per_message)
            .map(|(setting, values)| format!("{} {:.2} us", setting.name, median(values)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // Paired by round: each setting against GSO+GRO of the same round.
    for (slot, setting) in SETTINGS.iter().enumerate().skip(1) {
        let ratios: Vec<f64> = per_message[slot]
            .iter()
            .zip(&per_message[0])
            .map(|(this, baseline)| this / baseline)
            .collect();
        let text: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
        println!(
            "{} / GSO+GRO per round: [{}], median {:.2}x",
            setting.name,
            text.join(", "),
            median(&ratios)
        );
    }
}

async fn run(options: &Options, setting: Setting) -> Outcome {
    let mut relay = RelayProcess::start(setting);
    let url = format!("moqt://localhost:{}/", relay.port);

    let published = Origin::new();
    let broadcast = BroadcastProducer::new();
    let mut track = broadcast.create_track(Track::new("data"));
    published.publish("room", &broadcast).unwrap();
    let _publisher = connect(
        &url,
        ClientConfig::default()
            .with_session(SessionConfig::default().with_publisher(&published))
            .with_insecure_skip_verify(),
    )
    .await
    .expect("the publisher connects");

    // Counted as frames arrive, so a subscriber that stalls still reports what it got.
    let counts = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
    let mut readers = Vec::new();
    let mut clients = Vec::new();
    for _ in 0..options.subscribers {
        let seen = Origin::new();
        clients.push(
            connect(
                &url,
                ClientConfig::default()
                    .with_session(SessionConfig::default().with_subscriber(&seen))
                    .with_insecure_skip_verify(),
            )
            .await
            .expect("a subscriber connects"),
        );
        let counts = counts.clone();
        readers.push(tokio::spawn(async move {
            let broadcast = loop {
                if let Some(broadcast) = seen.consume_broadcast("room") {
                    break broadcast;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            };
            let mut track = broadcast.subscribe_track("data").await.expect("the track");
            while let Ok(Some(mut group)) = track.next_group().await {
                while let Ok(Some(frame)) = group.read_frame().await {
                    counts.0.fetch_add(1, Ordering::Relaxed);
                    counts
                        .1
                        .fetch_add(frame.payload.len() as u64, Ordering::Relaxed);
                }
            }
        }));
    }
    // Everyone subscribed before the clock starts.
    while track.consumer_count() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    let payload = bytes::Bytes::from(vec![b'x'; options.payload]);
    let relay_before = relay.cpu();
    let clients_before = own_cpu();
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
    // One deadline for all readers: a reader that never ends must not hold up the rest.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    for reader in readers {
        let _ = tokio::time::timeout_at(deadline, reader).await;
    }
    let wall = start.elapsed();
    let delivered = counts.0.load(Ordering::Relaxed);
    let bytes = counts.1.load(Ordering::Relaxed);
    let relay_cpu = relay.cpu().saturating_sub(relay_before);
    let client_cpu = own_cpu().saturating_sub(clients_before);
    drop(clients);
    relay.stop();
    Outcome {
        offered: total,
        delivered,
        bytes,
        relay_cpu,
        client_cpu,
        wall,
    }
}

/// The relay child: this binary with `--serve-relay`, answering `cpu` on its stdin with its
/// CPU time in microseconds; it exits when its stdin closes.
struct RelayProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    port: u16,
}

impl RelayProcess {
    fn start(setting: Setting) -> Self {
        let mut child = Command::new(std::env::current_exe().expect("this binary"))
            .args([
                "--serve-relay",
                "--gso",
                if setting.gso { "1" } else { "0" },
                "--gro",
                if setting.gro { "1" } else { "0" },
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the relay process starts");
        let stdin = child.stdin.take().expect("piped");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("the relay's port");
        let port = line.trim().parse().expect("a port number");
        Self {
            child,
            stdin,
            stdout,
            port,
        }
    }

    fn cpu(&mut self) -> Duration {
        writeln!(self.stdin, "cpu").expect("the relay is running");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("the relay answers");
        Duration::from_micros(line.trim().parse().expect("microseconds"))
    }

    fn stop(mut self) {
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

/// The child's side: a relay (sessions sharing one origin) until stdin closes.
fn serve_relay(args: &[String]) {
    let flag = |name: &str| {
        args.iter()
            .position(|arg| arg == name)
            .and_then(|i| args.get(i + 1))
            .is_none_or(|value| value != "0")
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let origin = Origin::new();
    let mut config = ServerConfig::new(
        "127.0.0.1:0".parse().expect("an address"),
        Certificate::self_signed(&["localhost".into()]).expect("a certificate"),
        SessionConfig::default()
            .with_publisher(&origin)
            .with_subscriber(&origin),
    );
    config.udp.gso = flag("--gso");
    config.udp.gro = flag("--gro");
    let mut server = runtime
        .block_on(Server::bind(config))
        .expect("the relay binds");
    println!("{}", server.local_addr().port());
    std::io::stdout().flush().expect("stdout");
    runtime.spawn(async move {
        let mut sessions = Vec::new();
        while let Some(request) = server.accept().await {
            sessions.push(request.accept());
        }
    });
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim() == "cpu" {
            println!("{}", own_cpu().as_micros());
            std::io::stdout().flush().expect("stdout");
        }
    }
}

/// This process's user + system CPU time so far.
fn own_cpu() -> Duration {
    let usage = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let micros = usage.user_time().num_microseconds() + usage.system_time().num_microseconds();
    Duration::from_micros(micros.max(0) as u64)
}

impl Options {
    fn parse(args: &[String]) -> Self {
        let text = |flag: &str| {
            args.iter()
                .position(|arg| arg == flag)
                .and_then(|i| args.get(i + 1))
                .cloned()
        };
        let value = |flag: &str, default: u64| -> u64 {
            text(flag)
                .and_then(|text| text.parse().ok())
                .unwrap_or(default)
                .max(1)
        };
        let shape = match text("--shape").as_deref() {
            Some("bulk") => Shape::Bulk,
            _ => Shape::Chat,
        };
        let (subscribers, rate, payload) = match shape {
            Shape::Chat => (100, 50, 100),
            Shape::Bulk => (1, 100, 64 * 1024),
        };
        Self {
            shape,
            subscribers: value("--subscribers", subscribers) as usize,
            rate: value("--rate", rate),
            seconds: value("--seconds", 2),
            rounds: value("--rounds", 3) as usize,
            payload,
        }
    }
}
