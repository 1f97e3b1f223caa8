//! `moq-bench cluster`: how long a network of relays takes to carry on when one of its
//! relays is killed (`failover`) or stopped (`drain`), over repeated trials.
//!
//! Each trial starts fresh relay processes of this workspace on loopback, a chat publisher
//! (a group every 50 ms) and subscribers, then kills or stops one relay and measures, per
//! subscriber, the time from that moment until it receives the first group published
//! after it: the **window** of the trial is the longest of them. It also counts the groups
//! a subscriber never received (from its first group to the last published).
//!
//! - `failover`: a redundant mesh (A; B and C dial A; D dials B and C). The publisher is
//!   on A, the subscribers on D; the relay D serves them through is killed (SIGKILL: no
//!   GOAWAY, its links go silent). D notices when the link times out
//!   (`cluster.peer_timeout_secs`) and moves its subscriptions to the other route.
//! - `drain`: X and Y dial P. The publisher is on P, the subscribers on X with
//!   [`moqx_tokio::Reconnect`] over [X, Y]; X is stopped (SIGTERM: GOAWAY, then its drain).
//! - `fanout`: no failure; a tier (A the origin, B, C and D its edges with the
//!   subscribers) against one relay serving them all: each relay's CPU per frame it
//!   delivered.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use moqx_net::model::{BroadcastProducer, Origin, Track};
use moqx_net::session::{Session, SessionConfig};
use moqx_tokio::ClientConfig;

/// Arguments of `moq-bench cluster`.
#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// What happens to the relay: killed (`failover`) or stopped (`drain`).
    #[arg(value_enum)]
    pub scenario: Scenario,
    /// Trials.
    #[arg(long, default_value_t = 20)]
    pub trials: usize,
    /// Subscribers per trial.
    #[arg(long, default_value_t = 10)]
    pub subscribers: usize,
    /// The relays' driver (`moqx-relay --driver`).
    #[arg(long, default_value = "tokio")]
    pub driver: String,
    /// Groups the relays cache per track (`moqx-relay --cache-groups`): what a moved
    /// subscription can recover of what was published while its link was failing.
    #[arg(long)]
    pub cache_groups: Option<usize>,
}

/// What a trial does to a relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// SIGKILL of the relay the subscribers' relay serves them through.
    Failover,
    /// SIGTERM of the relay the subscribers are on.
    Drain,
    /// A tiered fanout: one publisher on A; B, C and D dial A, each with --subscribers
    /// viewers. Relay CPU per delivery on each relay, beside one relay serving all the
    /// viewers alone.
    Fanout,
}

/// How often the publisher sends a group.
const INTERVAL: Duration = Duration::from_millis(50);

/// Runs the trials and prints each, then the summary (what the command is for).
#[allow(clippy::print_stdout)]
pub async fn run(args: ClusterArgs) -> Result<(), String> {
    let mut windows = Vec::new();
    let mut lost_total = 0;
    for trial in 0..args.trials {
        let outcome = match args.scenario {
            Scenario::Failover => failover(&args).await?,
            Scenario::Drain => drain(&args).await?,
            // Rounds of its own, and its own report.
            Scenario::Fanout => return fanout(&args).await,
        };
        println!(
            "trial {:>2}: window {:>6.0} ms (median subscriber {:>6.0} ms), {} groups lost",
            trial + 1,
            outcome.window.as_secs_f64() * 1000.0,
            outcome.median.as_secs_f64() * 1000.0,
            outcome.lost
        );
        windows.push(outcome.window);
        lost_total += outcome.lost;
    }
    windows.sort();
    let at = |q: f64| windows[((windows.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "{:?} over {} trials, {} subscribers each: window p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms; {} groups lost in all",
        args.scenario,
        args.trials,
        args.subscribers,
        at(0.5).as_secs_f64() * 1000.0,
        at(0.99).as_secs_f64() * 1000.0,
        at(1.0).as_secs_f64() * 1000.0,
        lost_total
    );
    Ok(())
}

/// What one trial measured.
struct Outcome {
    window: Duration,
    median: Duration,
    lost: u64,
}

/// A trial of `failover`.
async fn failover(args: &ClusterArgs) -> Result<Outcome, String> {
    let extra = cache_args(args);
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let mut a = RelayNode::start_with(1, &args.driver, &[], &extra)?;
    let b = RelayNode::start_with(2, &args.driver, &[&a], &extra)?;
    let c = RelayNode::start_with(3, &args.driver, &[&a], &extra)?;
    let d = RelayNode::start_with(4, &args.driver, &[&b, &c], &extra)?;
    let publisher = Publisher::start(&a).await?;
    let subscribers = subscribe_all(&d, args.subscribers).await?;
    // The relay D serves from: the second hop of its route.
    let middle = wait_for(|| route_via(&d))
        .await
        .ok_or("D never had a route")?;
    let mut nodes = vec![b, c];
    tokio::time::sleep(Duration::from_secs(1)).await;
    let killed = Instant::now();
    for node in nodes.iter_mut().filter(|node| node.id == middle) {
        node.kill();
    }
    tokio::time::sleep(Duration::from_secs(8)).await;
    let outcome = measure(&publisher, &subscribers, killed);
    a.kill();
    drop((nodes, d));
    Ok(outcome)
}

/// A trial of `drain`.
async fn drain(args: &ClusterArgs) -> Result<Outcome, String> {
    let extra = cache_args(args);
    let mut draining: Vec<&str> = extra.iter().map(String::as_str).collect();
    let extra = draining.clone();
    draining.extend(["--drain", "3"]);
    let p = RelayNode::start_with(1, &args.driver, &[], &extra)?;
    let x = RelayNode::start_with(2, &args.driver, &[&p], &draining)?;
    let y = RelayNode::start_with(3, &args.driver, &[&p], &extra)?;
    let publisher = Publisher::start(&p).await?;
    let urls = vec![x.url(), y.url()];
    let subscribers = subscribe_reconnecting(&urls, args.subscribers).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let stopped = Instant::now();
    x.terminate();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let outcome = measure(&publisher, &subscribers, stopped);
    drop((p, x, y));
    Ok(outcome)
}

/// How long the fanout is measured, after a warm-up.
const FANOUT_WINDOW: Duration = Duration::from_secs(10);

/// `fanout`: each relay's CPU per frame it delivered, tiered and single.
#[allow(clippy::print_stdout)]
async fn fanout(args: &ClusterArgs) -> Result<(), String> {
    let extra = cache_args(args);
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    println!(
        "tiered fanout: 1 publisher (1 KB frames, a group each, 30 a second) on A; B, C and D dial A with {} subscribers each; {} s measured",
        args.subscribers,
        FANOUT_WINDOW.as_secs()
    );
    for round in 0..args.trials.max(1) {
        let a = RelayNode::start_with(1, &args.driver, &[], &extra)?;
        let edges = [
            RelayNode::start_with(2, &args.driver, &[&a], &extra)?,
            RelayNode::start_with(3, &args.driver, &[&a], &extra)?,
            RelayNode::start_with(4, &args.driver, &[&a], &extra)?,
        ];
        let publisher = Publisher::start_media(&a).await?;
        let mut subscribers = Vec::new();
        for edge in &edges {
            subscribers.extend(subscribe_all(edge, args.subscribers).await?);
        }
        let mut relays = vec![("A (origin)", &a)];
        relays.extend(["B (edge)", "C (edge)", "D (edge)"].into_iter().zip(&edges));
        let tiered = measure_cpu(&relays, &publisher, &subscribers).await?;
        drop((publisher, subscribers, edges, a));

        let single = RelayNode::start_with(1, &args.driver, &[], &extra)?;
        let publisher = Publisher::start_media(&single).await?;
        let subscribers = subscribe_all(&single, 3 * args.subscribers).await?;
        let alone = measure_cpu(&[("single relay", &single)], &publisher, &subscribers).await?;
        drop((publisher, subscribers, single));

        println!("round {}:", round + 1);
        let per_delivery = alone[0].1 * 1e6 / alone[0].2.max(1) as f64;
        for (name, cpu, deliveries) in tiered.iter().chain(&alone) {
            let us = cpu * 1e6 / (*deliveries).max(1) as f64;
            println!(
                "  {name:<14} {cpu:>6.2} s CPU, {deliveries:>8} frames delivered, {us:>6.2} us per delivery ({:.2}x the single relay's)",
                us / per_delivery
            );
        }
    }
    Ok(())
}

/// Each relay's CPU seconds over [`FANOUT_WINDOW`] and the frames it delivered: to the
/// subscribers connected to it (an even share each), or, for a tier's origin (the first
/// of several), one per edge per frame.
async fn measure_cpu(
    relays: &[(&'static str, &RelayNode)],
    publisher: &Publisher,
    subscribers: &[Subscriber],
) -> Result<Vec<(&'static str, f64, u64)>, String> {
    tokio::time::sleep(Duration::from_secs(2)).await; // warm-up: everyone subscribed
    let count = |subscribers: &[Subscriber]| -> u64 {
        subscribers
            .iter()
            .map(|s| s.received.lock().unwrap_or_else(|e| e.into_inner()).len() as u64)
            .sum()
    };
    let sent = || {
        publisher
            .sent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len() as u64
    };
    let before: Vec<f64> = relays
        .iter()
        .map(|(_, relay)| relay.cpu_seconds())
        .collect::<Result<_, _>>()?;
    let (received_before, sent_before) = (count(subscribers), sent());
    tokio::time::sleep(FANOUT_WINDOW).await;
    let after: Vec<f64> = relays
        .iter()
        .map(|(_, relay)| relay.cpu_seconds())
        .collect::<Result<_, _>>()?;
    let received = count(subscribers) - received_before;
    let frames = sent() - sent_before;
    let edges = relays.len().saturating_sub(1) as u64;
    Ok(relays
        .iter()
        .zip(before.iter().zip(&after))
        .enumerate()
        .map(|(index, ((name, _), (before, after)))| {
            let deliveries = match (relays.len(), index) {
                (1, _) => received,
                (_, 0) => frames * edges,
                _ => received / edges.max(1),
            };
            (*name, after - before, deliveries)
        })
        .collect())
}

/// `--cache-groups N` for the relays, if set.
fn cache_args(args: &ClusterArgs) -> Vec<String> {
    match args.cache_groups {
        Some(groups) => vec!["--cache-groups".into(), groups.to_string()],
        None => Vec::new(),
    }
}

/// Per subscriber, the first group published after `at` and when it arrived.
fn measure(publisher: &Publisher, subscribers: &[Subscriber], at: Instant) -> Outcome {
    let sent = publisher
        .sent
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let first_after = sent
        .iter()
        .position(|time| *time > at)
        .unwrap_or(sent.len()) as u64;
    let mut waits = Vec::new();
    let mut lost = 0;
    for subscriber in subscribers {
        let received = subscriber
            .received
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let arrival = received
            .iter()
            .filter(|(sequence, _)| *sequence >= first_after)
            .map(|(_, time)| *time)
            .min();
        waits.push(arrival.map_or(Duration::MAX, |time| time.saturating_duration_since(at)));
        let first = received
            .iter()
            .map(|(sequence, _)| *sequence)
            .min()
            .unwrap_or(0);
        let seen: std::collections::HashSet<u64> =
            received.iter().map(|(sequence, _)| *sequence).collect();
        lost += (first..sent.len() as u64)
            .filter(|sequence| !seen.contains(sequence))
            .count() as u64;
    }
    waits.sort();
    Outcome {
        window: waits.last().copied().unwrap_or(Duration::MAX),
        median: waits.get(waits.len() / 2).copied().unwrap_or(Duration::MAX),
        lost,
    }
}

/// The publisher: one broadcast, one chat track, a group every [`INTERVAL`], each send
/// time kept by sequence.
struct Publisher {
    sent: Arc<Mutex<Vec<Instant>>>,
    _session: Session,
    task: tokio::task::JoinHandle<()>,
}

impl Publisher {
    async fn start(relay: &RelayNode) -> Result<Self, String> {
        Self::start_with(relay, INTERVAL, 7).await
    }

    /// A group of one `size`-byte frame every `interval`.
    async fn start_with(
        relay: &RelayNode,
        interval: Duration,
        size: usize,
    ) -> Result<Self, String> {
        let origin = Origin::new();
        let broadcast = BroadcastProducer::new();
        let mut track = broadcast.create_track(Track::new("chat"));
        origin
            .publish("room/alice", &broadcast)
            .map_err(|e| e.to_string())?;
        let session = moqx_tokio::connect(
            &relay.url(),
            client(SessionConfig::default().with_publisher(&origin)),
        )
        .await
        .map_err(|e| format!("the publisher: {e}"))?;
        let sent = Arc::new(Mutex::new(Vec::new()));
        let times = sent.clone();
        let task = tokio::spawn(async move {
            let _broadcast = broadcast;
            let payload = bytes::Bytes::from(vec![b'm'; size]);
            for n in 0u64.. {
                track.write_group(n, payload.clone());
                times
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(Instant::now());
                tokio::time::sleep(interval).await;
            }
        });
        Ok(Self {
            sent,
            _session: session,
            task,
        })
    }
}

impl Publisher {
    /// A publisher of 1 KB frames, a group each, 30 a second (each send time kept).
    async fn start_media(relay: &RelayNode) -> Result<Self, String> {
        Self::start_with(relay, Duration::from_millis(33), 1000).await
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One subscriber: each group's sequence and arrival time.
struct Subscriber {
    received: Arc<Mutex<Vec<(u64, Instant)>>>,
    _keep: Box<dyn std::any::Any + Send>,
}

/// `count` subscribers on `relay`, each reading the chat track.
async fn subscribe_all(relay: &RelayNode, count: usize) -> Result<Vec<Subscriber>, String> {
    let mut subscribers = Vec::new();
    for _ in 0..count {
        let origin = Origin::new();
        let session = moqx_tokio::connect(
            &relay.url(),
            client(SessionConfig::default().with_subscriber(&origin)),
        )
        .await
        .map_err(|e| format!("a subscriber: {e}"))?;
        subscribers.push(read(origin, Box::new(session)).await?);
    }
    Ok(subscribers)
}

/// `count` subscribers keeping a session up over `urls`, each following the chat track.
async fn subscribe_reconnecting(urls: &[String], count: usize) -> Result<Vec<Subscriber>, String> {
    let mut subscribers = Vec::new();
    for _ in 0..count {
        let origin = Origin::new();
        let reconnect = moqx_tokio::Reconnect::new(
            urls.to_vec(),
            client(SessionConfig::default().with_subscriber(&origin)),
        );
        reconnect
            .connected()
            .await
            .ok_or("a subscriber never connected")?;
        subscribers.push(read(origin, Box::new(reconnect)).await?);
    }
    Ok(subscribers)
}

/// Follows the chat track in `origin`, recording each group, while `keep` lives.
async fn read(origin: Origin, keep: Box<dyn std::any::Any + Send>) -> Result<Subscriber, String> {
    let mut track = tokio::time::timeout(
        Duration::from_secs(10),
        origin.follow_track("room/alice", "chat"),
    )
    .await
    .map_err(|_| "the broadcast was never announced")?
    .map_err(|e| format!("subscribing: {e}"))?;
    let received = Arc::new(Mutex::new(Vec::new()));
    let out = received.clone();
    tokio::spawn(async move {
        while let Ok(Some(group)) = track.next_group().await {
            out.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((group.sequence(), Instant::now()));
        }
    });
    Ok(Subscriber {
        received,
        _keep: keep,
    })
}

/// A client configuration for these loopback relays (self-signed, not verified).
fn client(session: SessionConfig) -> ClientConfig {
    ClientConfig::default()
        .with_session(session)
        .with_insecure_skip_verify()
}

/// Polls `probe` every 50 ms for up to 10 s.
async fn wait_for<T>(mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    for _ in 0..200 {
        if let Some(value) = probe() {
            return Some(value);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// The relay (hop id) through which `relay` serves the broadcast.
fn route_via(relay: &RelayNode) -> Option<u64> {
    let text = crate::io::http_get(relay.port, "/cluster").ok()?;
    let body = text.split_once("\r\n\r\n")?.1;
    let topology: serde_json::Value = serde_json::from_str(body).ok()?;
    let hops = topology["routes"].as_array()?.first()?["hops"]
        .as_array()?
        .clone();
    (hops.len() == 2).then(|| hops[1].as_u64())?
}

/// A relay of this workspace as a process, in a cluster.
struct RelayNode {
    id: u64,
    port: u16,
    child: Option<Child>,
    _scratch: PathBuf,
}

impl RelayNode {
    fn start_with(
        id: u64,
        driver: &str,
        peers: &[&RelayNode],
        extra: &[&str],
    ) -> Result<Self, String> {
        let exe = std::env::current_exe()
            .map_err(|e| e.to_string())?
            .with_file_name("moqx-relay");
        let port = crate::relay::free_port()?;
        let scratch =
            std::env::temp_dir().join(format!("moq-bench-cluster-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&scratch).map_err(|e| e.to_string())?;
        let fingerprint = scratch.join("fingerprint");
        let mut command = Command::new(&exe);
        command
            .args(["--bind", &format!("127.0.0.1:{port}")])
            .arg("--fingerprint-file")
            .arg(&fingerprint)
            .args(["--cluster-id", &id.to_string(), "--driver", driver])
            .arg("--cluster-insecure-skip-verify")
            .args(extra)
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for peer in peers {
            command.args(["--cluster-connect", &peer.url()]);
        }
        let child = command
            .spawn()
            .map_err(|e| format!("starting {}: {e}", exe.display()))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !std::fs::read_to_string(&fingerprint).is_ok_and(|text| !text.is_empty()) {
            if Instant::now() > deadline {
                return Err("a relay did not start listening".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(Self {
            id,
            port,
            child: Some(child),
            _scratch: scratch,
        })
    }

    fn url(&self) -> String {
        format!("moqt://127.0.0.1:{}/", self.port)
    }

    /// The process's CPU seconds so far (user and system).
    fn cpu_seconds(&self) -> Result<f64, String> {
        let child = self.child.as_ref().ok_or("the relay was stopped")?;
        Ok(crate::relay::usage_of(child.id())?.cpu_seconds)
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn terminate(&self) {
        if let Some(child) = &self.child {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
    }
}

impl Drop for RelayNode {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self._scratch);
    }
}
