//! `moq-bench`: the measurement suite every performance claim here stands on.
//!
//! It drives any moq-lite-05 relay with chat, media and fanout load from client sessions
//! in this process, and measures the relay process from `/proc`: CPU per delivered message,
//! context switches, resident memory per connection, and end-to-end latency percentiles.
//! `moq-bench --help` shows the commands; `just bench` runs the suite.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand, ValueEnum};

use moq_bench::chart;
use moq_bench::load::{self, Stream, Target, Workload};
use moq_bench::record::{ComparisonRecord, ProcessCost, RssSample, RunRecord, SCHEMA};
use moq_bench::relay::{self, RelayProcess, Usage};
use moq_bench::stats::{Latency, Paired};
use moq_net::coding::Version;

/// Load and measurement for moq-lite relays: chat, media and fanout profiles against a
/// relay process started for each round, with relay CPU per delivered message (from
/// /proc), latency p50/p99/max, context switches, RSS per connection and the load
/// generator's own CPU. Output: a table, JSON lines (--json), an SVG chart (`chart`).
///
/// The relay is a command template: `{port}` becomes a free loopback port, and
/// `{fingerprint_file}` a file the relay writes its certificate fingerprint to (the bench
/// waits for it and pins it). The default runs this workspace's moq-relay.
#[derive(Debug, Parser)]
#[command(name = "moq-bench", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs one profile against one relay, for --rounds rounds.
    Run(RunArgs),
    /// Runs one profile against two relays in alternating rounds (A B A B …) and reports
    /// B/A per pair: median, spread, and a flag on a side too spread out or split in two.
    Compare(CompareArgs),
    /// Raises a profile's rate step by step until the relay loses messages or falls
    /// behind (p99 latency over --max-p99-ms): the highest rate it sustains.
    Sweep(SweepArgs),
    /// Every profile at a size that fits a 2-core machine; JSON lines and an SVG chart.
    Suite(SuiteArgs),
    /// Draws relay CPU per message against connections from JSON lines, as SVG.
    Chart(ChartArgs),
    /// The driver ablation matrix at one offered load: every --drivers driver × GSO on/off
    /// × GRO on/off × receive batching on/off (where the driver has the choice), each a
    /// fresh relay: relay CPU, system calls and sends per delivery, datagrams per send
    /// and per receive.
    Ablation(AblationArgs),
    /// Chat load with churn (members join, publish, subscribe, leave and come back) for
    /// --minutes against one relay process: relay RSS and CPU and the sessions every
    /// sample, then the verdict (nothing lost, no session ended by the relay, RSS drift
    /// after the warm-up within --max-drift). Exits non-zero if it failed.
    Soak(SoakArgs),
    /// Relays as a network: the failover window when one is killed, the drain window
    /// when one is stopped, over --trials trials (p50, p99, groups lost).
    Cluster(moq_bench::cluster::ClusterArgs),
    /// One round in this process, its record printed as JSON (what the other commands
    /// run in a fresh process per round).
    #[command(hide = true)]
    Round(RoundArgs),
}

#[derive(Debug, Args)]
struct SoakArgs {
    /// How long, in minutes.
    #[arg(long, default_value_t = 30.0)]
    minutes: f64,
    /// Rooms.
    #[arg(long, default_value_t = 20)]
    rooms: usize,
    /// Members per room that stay the whole soak.
    #[arg(long, default_value_t = 10)]
    stable: usize,
    /// Members per room that join, talk and leave over and over.
    #[arg(long, default_value_t = 2)]
    churners: usize,
    /// Messages per second per member.
    #[arg(long, default_value_t = 1.0)]
    rate: f64,
    /// Seconds between samples.
    #[arg(long, default_value_t = 60.0)]
    sample_seconds: f64,
    /// The largest allowed RSS growth after minute 2, as a share.
    #[arg(long, default_value_t = 0.05)]
    max_drift: f64,
    /// The relay command template [default: this workspace's moq-relay].
    #[arg(long, value_name = "COMMAND")]
    relay: Option<String>,
    /// How long the relay may take to start listening, in seconds.
    #[arg(long, default_value_t = 10.0)]
    startup: f64,
    /// Pin the members' moq-lite versions in turn (repeat for mixed rooms, where the relay
    /// translates: `--version 05 --version 04`) [default: offer -05, -04, -03].
    #[arg(long = "version", value_name = "VERSION")]
    versions: Vec<Version>,
    /// Distinct broadcast names announced and withdrawn per second, by one session, to an
    /// observer that follows them (announce churn; 0 for none).
    #[arg(long, default_value_t = 20.0)]
    announce_churn: f64,
    /// Members (one per room, from the first) that keep one group open for the whole
    /// soak, a frame a second: a log track beside the chat (0 for none).
    #[arg(long, default_value_t = 2)]
    long_groups: usize,
}

#[derive(Debug, Args)]
struct RoundArgs {
    #[command(flatten)]
    load: LoadArgs,
    #[command(flatten)]
    output: Output,
    /// The relay command template.
    #[arg(long)]
    relay: String,
    /// The record's label.
    #[arg(long)]
    label: String,
    /// The record's round.
    #[arg(long)]
    round: u32,
}

/// The load shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Profile {
    /// Rooms of members, each publishing tiny frames (one per group) and subscribing to
    /// the rest of its room.
    Chat,
    /// One publisher of 4 KB frames at 60 fps, a group every 2 s, to N subscribers.
    Media,
    /// One publisher of chat-sized frames to N subscribers.
    FanoutChat,
    /// One publisher of media-sized frames to N subscribers.
    FanoutMedia,
}

impl Profile {
    fn name(self) -> &'static str {
        match self {
            Profile::Chat => "chat",
            Profile::Media => "media",
            Profile::FanoutChat => "fanout-chat",
            Profile::FanoutMedia => "fanout-media",
        }
    }
}

/// The shape of the load.
#[derive(Debug, Clone, Args)]
struct LoadArgs {
    /// The load shape.
    #[arg(long, value_enum, default_value = "chat")]
    profile: Profile,
    /// chat: client connections.
    #[arg(long, default_value_t = 1000)]
    connections: usize,
    /// chat: members per room.
    #[arg(long, default_value_t = 10)]
    room: usize,
    /// media and fanout: subscribers of the one publisher.
    #[arg(long, default_value_t = 100)]
    subscribers: usize,
    /// Frames per second per publisher, 0 for as fast as possible [default: chat 1,
    /// fanout-chat 10, media 60].
    #[arg(long)]
    rate: Option<f64>,
    /// Payload bytes per frame [default: chat 100, media 4096].
    #[arg(long)]
    frame_bytes: Option<usize>,
    /// media: seconds per group.
    #[arg(long, default_value_t = 2.0)]
    group_seconds: f64,
    /// Length of the measured phase, in seconds.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Pin the clients' moq-lite version (moq-lite-05, moq-lite-04, moq-lite-03,
    /// moq-lite-06-wip, or 05, 04, …); repeat to give members the versions in turn (mixed
    /// rooms, where the relay translates) [default: offer -05, -04, -03; the relay picks].
    #[arg(long = "version", value_name = "VERSION")]
    versions: Vec<Version>,
}

impl LoadArgs {
    /// These arguments as command-line arguments again (for a round's own process).
    fn to_args(&self) -> Vec<String> {
        let mut args = vec![
            "--profile".to_owned(),
            self.profile.name().to_owned(),
            "--connections".into(),
            self.connections.to_string(),
            "--room".into(),
            self.room.to_string(),
            "--subscribers".into(),
            self.subscribers.to_string(),
            "--group-seconds".into(),
            self.group_seconds.to_string(),
            "--seconds".into(),
            self.seconds.to_string(),
        ];
        if let Some(rate) = self.rate {
            args.extend(["--rate".to_owned(), rate.to_string()]);
        }
        if let Some(bytes) = self.frame_bytes {
            args.extend(["--frame-bytes".to_owned(), bytes.to_string()]);
        }
        for version in &self.versions {
            args.extend(["--version".to_owned(), version.alpn().to_owned()]);
        }
        args
    }

    fn workload(&self) -> Workload {
        let chat_bytes = self.frame_bytes.unwrap_or(100);
        let media_bytes = self.frame_bytes.unwrap_or(4096);
        match self.profile {
            Profile::Chat => Workload::chat(
                self.connections,
                self.room,
                Stream {
                    frame_bytes: chat_bytes,
                    rate: self.rate.unwrap_or(1.0),
                    frames_per_group: 1,
                },
                self.seconds,
            ),
            Profile::FanoutChat => Workload::fanout(
                self.subscribers,
                Stream {
                    frame_bytes: chat_bytes,
                    rate: self.rate.unwrap_or(10.0),
                    frames_per_group: 1,
                },
                self.seconds,
            ),
            Profile::Media | Profile::FanoutMedia => {
                let rate = self.rate.unwrap_or(60.0);
                Workload::fanout(
                    self.subscribers,
                    Stream {
                        frame_bytes: media_bytes,
                        rate,
                        frames_per_group: (rate * self.group_seconds).round().max(1.0) as u64,
                    },
                    self.seconds,
                )
            }
        }
    }
}

/// The relay and where results go.
#[derive(Debug, Clone, Args)]
struct Output {
    /// Append every record as a JSON line to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// How long a relay without {fingerprint_file} gets to start, in seconds.
    #[arg(long, default_value_t = 2.0)]
    startup: f64,
    /// How long the warm-up may take before the round fails, in seconds.
    #[arg(long, default_value_t = 120.0)]
    warmup_limit: f64,
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    load: LoadArgs,
    #[command(flatten)]
    output: Output,
    /// The relay command template [default: this workspace's moq-relay].
    #[arg(long, value_name = "COMMAND")]
    relay: Option<String>,
    /// Rounds, each with a fresh relay process.
    #[arg(long, default_value_t = 1)]
    rounds: u32,
}

#[derive(Debug, Args)]
struct CompareArgs {
    #[command(flatten)]
    load: LoadArgs,
    #[command(flatten)]
    output: Output,
    /// Relay A's command template.
    #[arg(long, value_name = "COMMAND")]
    a: String,
    /// Relay B's command template.
    #[arg(long, value_name = "COMMAND")]
    b: String,
    /// Side A's clients pin these versions instead of `--version`'s (repeatable; to
    /// compare versions on one relay).
    #[arg(long, value_name = "VERSION")]
    a_version: Vec<Version>,
    /// Side B's clients pin these versions instead of `--version`'s.
    #[arg(long, value_name = "VERSION")]
    b_version: Vec<Version>,
    /// A/B pairs (at least 5 for a verdict worth reading).
    #[arg(long, default_value_t = 5)]
    pairs: u32,
}

#[derive(Debug, Args)]
struct SweepArgs {
    #[command(flatten)]
    load: LoadArgs,
    #[command(flatten)]
    output: Output,
    /// The relay command template [default: this workspace's moq-relay].
    #[arg(long, value_name = "COMMAND")]
    relay: Option<String>,
    /// Rates per publisher to try, in order.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32")]
    rates: Vec<f64>,
    /// A rate counts as sustained with at most this share of deliveries lost...
    #[arg(long, default_value_t = 0.001)]
    max_loss: f64,
    /// ...and a p99 latency at most this many milliseconds (a relay that loses nothing
    /// but queues ever longer is not keeping up).
    #[arg(long, default_value_t = 250.0)]
    max_p99_ms: f64,
}

#[derive(Debug, Args)]
struct SuiteArgs {
    #[command(flatten)]
    output: Output,
    /// Where the JSON lines and the chart go.
    #[arg(long, default_value = "target/moq-bench")]
    out: PathBuf,
    /// The relay command template [default: this workspace's moq-relay].
    #[arg(long, value_name = "COMMAND")]
    relay: Option<String>,
    /// Seconds per measured phase.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
}

#[derive(Debug, Args)]
struct AblationArgs {
    #[command(flatten)]
    load: LoadArgs,
    #[command(flatten)]
    output: Output,
    /// The moq-relay binary [default: the one beside moq-bench].
    #[arg(long, value_name = "FILE")]
    relay_binary: Option<String>,
    /// The drivers to measure.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "tokio,tokio-per-core,uring"
    )]
    drivers: Vec<String>,
    /// Workers of the thread-per-core drivers.
    #[arg(long, default_value_t = 2)]
    workers: usize,
}

#[derive(Debug, Args)]
struct ChartArgs {
    /// JSON lines written by `run`, `compare`, `sweep` or `suite`.
    #[arg(long, value_name = "FILE")]
    json: PathBuf,
    /// The SVG to write.
    #[arg(long, value_name = "FILE", default_value = "moq-bench.svg")]
    out: PathBuf,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("moq-bench: starting tokio: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => run(args).await,
            Command::Compare(args) => compare(args).await,
            Command::Sweep(args) => sweep(args).await,
            Command::Suite(args) => suite(args).await,
            Command::Chart(args) => chart_from(&args.json, &args.out),
            Command::Ablation(args) => ablation(args).await,
            Command::Soak(args) => soak(args).await,
            Command::Cluster(args) => moq_bench::cluster::run(args).await,
            Command::Round(args) => {
                let record = measure_round(
                    &args.load.workload(),
                    args.load.profile,
                    &args.load.versions,
                    &args.relay,
                    &args.label,
                    args.round,
                    &args.output,
                )
                .await?;
                println!("{}", record.to_json());
                Ok(())
            }
        }
    });
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("moq-bench: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A soak against a fresh relay process; an error if it did not pass.
async fn soak(args: SoakArgs) -> Result<(), String> {
    let command = args.relay.clone().unwrap_or_else(default_relay);
    let template: Vec<String> = command.split_whitespace().map(str::to_owned).collect();
    let relay = RelayProcess::start(&template, Duration::from_secs_f64(args.startup))?;
    let target = Target::of(&relay, "soak", &args.versions)?;
    let config = moq_bench::soak::SoakConfig {
        minutes: args.minutes,
        rooms: args.rooms,
        stable_per_room: args.stable,
        churners_per_room: args.churners,
        rate: args.rate,
        sample_seconds: args.sample_seconds,
        max_drift: args.max_drift,
        announce_churn: args.announce_churn,
        long_groups: args.long_groups,
        ..moq_bench::soak::SoakConfig::default()
    };
    println!(
        "{:>7} {:>10} {:>8} {:>9} {:>11} {:>6} {:>7} {:>9} {:>12}",
        "minute",
        "rss_mib",
        "cpu_s",
        "sessions",
        "delivered",
        "lost",
        "churns",
        "announced",
        "accounted_kib"
    );
    let print = |sample: &moq_bench::soak::SoakSample| {
        println!(
            "{:>7.1} {:>10.1} {:>8.2} {:>9} {:>11} {:>6} {:>7} {:>9} {:>12}",
            sample.minute,
            sample.rss_bytes as f64 / (1 << 20) as f64,
            sample.cpu_seconds,
            sample.sessions,
            sample.delivered,
            sample.lost,
            sample.churn_cycles,
            sample.announcements,
            sample
                .accounted_bytes
                .map_or_else(|| "-".to_owned(), |bytes| (bytes / 1024).to_string())
        );
    };
    let outcome = tokio::select! {
        report = moq_bench::soak::run(&relay, &target, &config, print) => report,
        report = relay.exited("during the soak") => Err(report),
    };
    relay.stop();
    let report = outcome?;
    println!(
        "sent {} delivered {} lost {} churn cycles {} announcements {} long-group frames {} errors {} rss drift after minute {} {:+.2} % (max {:.1} %) accounted bytes {}",
        report.sent,
        report.delivered,
        report.lost,
        report.churn_cycles,
        report.announcements,
        report.long_group_frames,
        report.errors.len(),
        config.baseline_minute,
        report.drift * 100.0,
        report.max_drift * 100.0,
        report.accounted_range.map_or_else(
            || "not read".to_owned(),
            |(low, high)| format!("{low}..{high} after the baseline")
        ),
    );
    for error in report.errors.iter().take(20) {
        println!("  error: {error}");
    }
    if report.passed() {
        println!("soak passed");
        Ok(())
    } else {
        Err("soak failed".into())
    }
}

/// This workspace's relay, beside this binary, listening on `{port}`.
fn default_relay() -> String {
    let relay = std::env::current_exe()
        .ok()
        .map(|exe| exe.with_file_name("moq-relay"))
        .filter(|path| path.exists())
        .map_or_else(|| "moq-relay".to_owned(), |p| p.display().to_string());
    format!(
        "{relay} --bind 127.0.0.1:{{port}} --http-bind 127.0.0.1:{{http_port}} --fingerprint-file {{fingerprint_file}} --max-sessions 100000 --max-subscriptions 100000"
    )
}

async fn run(args: RunArgs) -> Result<(), String> {
    let command = args.relay.clone().unwrap_or_else(default_relay);
    let workload = args.load.workload();
    println!("{}", RunRecord::table_header());
    for round in 1..=args.rounds {
        let record = round_of(
            &workload,
            &args.load,
            &command,
            "relay",
            round,
            &args.output,
        )
        .await?;
        emit_run(&record, &args.output)?;
    }
    Ok(())
}

async fn compare(args: CompareArgs) -> Result<(), String> {
    let workload = args.load.workload();
    println!("{}", RunRecord::table_header());
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for round in 1..=args.pairs {
        let sides = [
            ("a", &args.a, &args.a_version, &mut a),
            ("b", &args.b, &args.b_version, &mut b),
        ];
        for (label, command, pins, side) in sides {
            let load = LoadArgs {
                versions: match pins.is_empty() {
                    true => args.load.versions.clone(),
                    false => pins.clone(),
                },
                ..args.load.clone()
            };
            let record = round_of(&workload, &load, command, label, round, &args.output).await?;
            emit_run(&record, &args.output)?;
            side.push(record);
        }
    }
    for metric in ["relay_cpu_us_per_delivery", "latency_p50_us"] {
        let value = |record: &RunRecord| match metric {
            "relay_cpu_us_per_delivery" => record.relay.cpu_us_per_delivery,
            _ => record.latency_us.p50 as f64,
        };
        let paired = Paired::of(
            &a.iter().map(value).collect::<Vec<_>>(),
            &b.iter().map(value).collect::<Vec<_>>(),
        );
        println!(
            "{metric}: B/A per pair {:?}; median {:.3}, range {:.3}..{:.3}; spread A {:.1} %, B {:.1} %{}",
            paired
                .ratios
                .iter()
                .map(|r| (r * 1000.0).round() / 1000.0)
                .collect::<Vec<_>>(),
            paired.median,
            paired.min,
            paired.max,
            paired.a_spread * 100.0,
            paired.b_spread * 100.0,
            if paired.flags.is_empty() {
                String::new()
            } else {
                format!(
                    "; FLAGGED: {} (the median alone misleads)",
                    paired.flags.join(", ")
                )
            }
        );
        let record = ComparisonRecord {
            schema: SCHEMA.into(),
            kind: "comparison".into(),
            profile: args.load.profile.name().into(),
            a: args.a.clone(),
            b: args.b.clone(),
            metric: metric.into(),
            paired,
        };
        append_json(&args.output, &record.to_json())?;
    }
    Ok(())
}

async fn ablation(args: AblationArgs) -> Result<(), String> {
    let binary = args.relay_binary.clone().unwrap_or_else(|| {
        std::env::current_exe()
            .ok()
            .map(|exe| exe.with_file_name("moq-relay"))
            .filter(|path| path.exists())
            .map_or_else(|| "moq-relay".to_owned(), |p| p.display().to_string())
    });
    let workload = args.load.workload();
    let mut rows = Vec::new();
    println!("{}", RunRecord::table_header());
    for configuration in moq_bench::ablation::Configuration::matrix(&args.drivers) {
        let template = configuration.template(&binary, args.workers);
        let label = configuration.label();
        let record = round_of(&workload, &args.load, &template, &label, 1, &args.output).await?;
        emit_run(&record, &args.output)?;
        rows.push((label, record));
    }
    println!();
    println!(
        "{:<34} {:>11} {:>9} {:>10} {:>10} {:>9} {:>9} {:>8}",
        "configuration",
        "relay µs/d",
        "loss",
        "syscall/d",
        "sends/d",
        "dgram/snd",
        "dgram/rcv",
        "p50 ms"
    );
    for (label, record) in &rows {
        let io = record.relay_io.clone().unwrap_or_default();
        println!(
            "{:<34} {:>11.2} {:>8.2}% {:>10} {:>10.3} {:>9.2} {:>9.2} {:>8.2}",
            label,
            record.relay.cpu_us_per_delivery,
            record.loss * 100.0,
            io.syscalls_per_delivery
                .map_or_else(|| "n/a".to_owned(), |calls| format!("{calls:.3}")),
            io.send_calls_per_delivery,
            io.datagrams_per_send,
            io.datagrams_per_receive,
            record.latency_us.p50 as f64 / 1000.0,
        );
    }
    Ok(())
}

async fn sweep(args: SweepArgs) -> Result<(), String> {
    let command = args.relay.clone().unwrap_or_else(default_relay);
    println!("{}", RunRecord::table_header());
    let mut sustained = None;
    for (index, rate) in args.rates.iter().enumerate() {
        let mut load = args.load.clone();
        load.rate = Some(*rate);
        let workload = load.workload();
        let record = round_of(
            &workload,
            &load,
            &command,
            "relay",
            index as u32 + 1,
            &args.output,
        )
        .await?;
        emit_run(&record, &args.output)?;
        // Sustained: nothing (to speak of) lost, and the offered load actually went out.
        let offered_ok = record.offered as f64 >= 0.95 * record.offered_rate * record.seconds;
        let keeps_up = record.latency_us.p99 as f64 <= args.max_p99_ms * 1000.0;
        if record.loss <= args.max_loss && offered_ok && keeps_up {
            sustained = Some((*rate, record));
        } else {
            break;
        }
    }
    match sustained {
        Some((rate, record)) => println!(
            "highest sustained: {rate} frames/s per publisher ({:.0} offered/s, {:.0} deliveries/s, relay {:.1} µs per delivery, {:.2} cores)",
            record.offered_rate,
            record.delivered as f64 / record.seconds,
            record.relay.cpu_us_per_delivery,
            record.relay.cores
        ),
        None => println!("no rate tried was sustained"),
    }
    Ok(())
}

async fn suite(args: SuiteArgs) -> Result<(), String> {
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("creating {}: {e}", args.out.display()))?;
    let json = args.out.join("suite.jsonl");
    let _ = std::fs::remove_file(&json);
    let output = Output {
        json: Some(json.clone()),
        ..args.output.clone()
    };
    let command = args.relay.clone().unwrap_or_else(default_relay);
    let base = LoadArgs {
        profile: Profile::Chat,
        connections: 1000,
        room: 10,
        subscribers: 100,
        rate: None,
        frame_bytes: None,
        group_seconds: 2.0,
        seconds: args.seconds,
        versions: Vec::new(),
    };
    // Sizes that fit a 2-core machine running relay and clients together.
    let mut plan = vec![
        LoadArgs {
            connections: 100,
            ..base.clone()
        },
        LoadArgs {
            connections: 1000,
            ..base.clone()
        },
        LoadArgs {
            profile: Profile::Media,
            subscribers: 100,
            ..base.clone()
        },
    ];
    for subscribers in [10, 100, 1000] {
        plan.push(LoadArgs {
            profile: Profile::FanoutChat,
            subscribers,
            ..base.clone()
        });
    }
    for subscribers in [10, 100] {
        plan.push(LoadArgs {
            profile: Profile::FanoutMedia,
            subscribers,
            ..base.clone()
        });
    }
    println!("{}", RunRecord::table_header());
    let mut records = Vec::new();
    for (index, load) in plan.iter().enumerate() {
        let record = round_of(
            &load.workload(),
            load,
            &command,
            "relay",
            index as u32 + 1,
            &output,
        )
        .await?;
        emit_run(&record, &output)?;
        records.push(record);
    }
    let svg = args.out.join("relay-cpu-per-message.svg");
    chart::draw(&records, &svg)?;
    println!("JSON lines: {}\nchart: {}", json.display(), svg.display());
    Ok(())
}

fn chart_from(json: &std::path::Path, out: &std::path::Path) -> Result<(), String> {
    let text =
        std::fs::read_to_string(json).map_err(|e| format!("reading {}: {e}", json.display()))?;
    let runs: Vec<RunRecord> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<RunRecord>(line).ok())
        .filter(|record| record.kind == "run")
        .collect();
    chart::draw(&runs, out)?;
    println!("chart: {}", out.display());
    Ok(())
}

/// One round in a fresh `moq-bench` process (the hidden `round` command), so that no
/// round inherits the previous one's client connections, tasks or memory: its record.
async fn round_of(
    _workload: &Workload,
    load: &LoadArgs,
    command: &str,
    label: &str,
    round: u32,
    output: &Output,
) -> Result<RunRecord, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding moq-bench itself: {e}"))?;
    let mut args = vec![
        "round".to_owned(),
        "--relay".into(),
        command.to_owned(),
        "--label".into(),
        label.to_owned(),
        "--round".into(),
        round.to_string(),
        "--startup".into(),
        output.startup.to_string(),
        "--warmup-limit".into(),
        output.warmup_limit.to_string(),
    ];
    args.extend(load.to_args());
    let child = tokio::process::Command::new(exe)
        .args(&args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .output()
        .await
        .map_err(|e| format!("running a round: {e}"))?;
    let stdout = String::from_utf8_lossy(&child.stdout);
    if !child.status.success() {
        return Err(format!("round {round} ({label}) failed ({})", child.status));
    }
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .map_err(|e| format!("round {round} printed no record ({e}): {line:?}"))
}

/// One round in this process: a fresh relay, the clients, warm-up, the measured phase,
/// the record. A relay that exits at any point fails the round at once, with its exit
/// status and the tail of its stderr; connecting and warming up together may take at most
/// `--warmup-limit`.
async fn measure_round(
    workload: &Workload,
    profile: Profile,
    versions: &[Version],
    command: &str,
    label: &str,
    round: u32,
    output: &Output,
) -> Result<RunRecord, String> {
    let template: Vec<String> = command.split_whitespace().map(str::to_owned).collect();
    let relay = RelayProcess::start(&template, Duration::from_secs_f64(output.startup))?;
    let outcome = tokio::select! {
        outcome = measure(workload, profile, versions, &relay, label, round, output) => outcome,
        report = relay.exited("during the round") => Err(report),
    };
    relay.stop();
    outcome
}

/// What [`measure_round`] does while its relay lives.
async fn measure(
    workload: &Workload,
    profile: Profile,
    versions: &[Version],
    relay: &RelayProcess,
    label: &str,
    round: u32,
    output: &Output,
) -> Result<RunRecord, String> {
    let target = Target::of(relay, "bench", versions)?;
    let idle = relay.usage()?;
    let limit = Duration::from_secs_f64(output.warmup_limit);
    let setup_deadline = tokio::time::Instant::now() + limit;
    let clients = tokio::time::timeout_at(setup_deadline, load::connect(workload, &target))
        .await
        .map_err(|_| format!("connecting every client took longer than {limit:?}"))??;
    let tally = clients.tally.clone();
    let left = setup_deadline.saturating_duration_since(tokio::time::Instant::now());
    if let Err(error) = load::warm_up(&tally, workload.pairs(), left).await {
        clients.close().await;
        return Err(error);
    }

    // The relay's system calls, counted from just before the window (perf takes a moment
    // to attach) to the end of the drain, as its CPU is.
    let syscalls = relay
        .http_port
        .and_then(|_| moq_bench::io::SyscallCount::start(relay.pid));
    // One window for every publisher, starting a moment from now so that all see it first.
    let started = Instant::now() + Duration::from_millis(50);
    let window_end = started + Duration::from_secs_f64(workload.seconds);
    let _ = tally.window.set((started, window_end));
    tally.measuring.store(true, Ordering::Relaxed);
    tokio::time::sleep_until(tokio::time::Instant::from_std(started)).await;
    let io_before = relay
        .http_port
        .map(moq_bench::io::driver_counters)
        .transpose()?;
    let relay_before = relay.usage()?;
    let client_before = client_usage();
    let progress = progress_bar(workload.seconds);
    let mut rss = Vec::new();
    let mut next_sample = started + RSS_SAMPLE_INTERVAL;
    while Instant::now() < window_end {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if Instant::now() >= next_sample {
            next_sample += RSS_SAMPLE_INTERVAL;
            if let Ok(usage) = relay.usage() {
                rss.push(RssSample {
                    seconds: started.elapsed().as_secs_f64(),
                    bytes: usage.rss_bytes,
                });
            }
        }
        if let Some(bar) = &progress {
            bar.set_position((started.elapsed().as_secs_f64() * 10.0) as u64);
            bar.set_message(format!(
                "{} delivered",
                tally.delivered.load(Ordering::Relaxed)
            ));
        }
    }
    // Frames still on their way: up to 3 s more.
    let drain = Instant::now() + Duration::from_secs(3);
    while tally.delivered.load(Ordering::Relaxed) < tally.expected.load(Ordering::Relaxed)
        && Instant::now() < drain
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let relay_cost = relay_before.until(&relay.usage()?);
    let io_after = relay
        .http_port
        .map(moq_bench::io::driver_counters)
        .transpose()?;
    let syscalls = syscalls.and_then(moq_bench::io::SyscallCount::stop);
    let client_cost = client_before.until(&client_usage());
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    let delivered = tally.delivered.load(Ordering::Relaxed);
    let expected = tally.expected.load(Ordering::Relaxed);
    let offered = tally.offered.load(Ordering::Relaxed);
    let latency = Latency::of(tally.latencies());
    clients.close().await;

    let connections = workload.connections() as u64;
    let cost = |usage: Usage, start: &Usage, rss_idle: u64| ProcessCost {
        cpu_seconds: usage.cpu_seconds,
        cpu_us_per_delivery: usage.cpu_seconds * 1e6 / delivered.max(1) as f64,
        cores: usage.cpu_seconds / elapsed.max(1e-9),
        voluntary_switches: usage.voluntary_switches,
        involuntary_switches: usage.involuntary_switches,
        rss_bytes: usage.rss_bytes,
        rss_bytes_at_start: start.rss_bytes,
        rss_bytes_per_connection: usage.rss_bytes.saturating_sub(rss_idle) / connections.max(1),
    };
    Ok(RunRecord {
        schema: SCHEMA.into(),
        kind: "run".into(),
        profile: profile.name().into(),
        label: label.into(),
        round,
        connections,
        publishers: workload.publishers() as u64,
        offered_rate: workload.publishers() as f64 * workload.stream.rate,
        frame_bytes: workload.stream.frame_bytes as u64,
        frames_per_group: workload.stream.frames_per_group,
        seconds: workload.seconds,
        offered,
        expected,
        delivered,
        loss: 1.0 - delivered as f64 / expected.max(1) as f64,
        latency_us: latency,
        relay: cost(relay_cost, &relay_before, idle.rss_bytes),
        client: ProcessCost {
            rss_bytes_per_connection: 0,
            ..cost(client_cost, &client_before, 0)
        },
        relay_rss: rss,
        relay_io: io_before
            .zip(io_after)
            .map(|(before, after)| moq_bench::io::RelayIo::of(before, after, syscalls, delivered)),
    })
}

/// How often the relay's RSS is sampled during the measured phase.
const RSS_SAMPLE_INTERVAL: Duration = Duration::from_secs(1);

/// This process's CPU and context switches (`getrusage`), and its RSS.
fn client_usage() -> Usage {
    use nix::sys::resource::{UsageWho, getrusage};
    use nix::sys::time::TimeValLike;
    let Ok(usage) = getrusage(UsageWho::RUSAGE_SELF) else {
        return Usage::default();
    };
    let cpu = (usage.user_time().num_microseconds() + usage.system_time().num_microseconds())
        as f64
        / 1e6;
    Usage {
        cpu_seconds: cpu,
        voluntary_switches: usage.voluntary_context_switches() as u64,
        involuntary_switches: usage.involuntary_context_switches() as u64,
        rss_bytes: relay::usage_of(std::process::id()).map_or(0, |u| u.rss_bytes),
    }
}

/// A progress bar on stderr for runs of 3 s or more (hidden when stderr is not a terminal).
fn progress_bar(seconds: f64) -> Option<indicatif::ProgressBar> {
    if seconds < 3.0 {
        return None;
    }
    let bar = indicatif::ProgressBar::new((seconds * 10.0) as u64);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("  measuring [{bar:30}] {elapsed} {msg}")
    {
        bar.set_style(style);
    }
    Some(bar)
}

fn emit_run(record: &RunRecord, output: &Output) -> Result<(), String> {
    println!("{}", record.table_row());
    append_json(output, &record.to_json())
}

fn append_json(output: &Output, line: &str) -> Result<(), String> {
    let Some(path) = &output.json else {
        return Ok(());
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("opening {}: {e}", path.display()))?;
    writeln!(file, "{line}").map_err(|e| format!("writing {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// clap checks a command line's definition only when it is built: a flag defined
    /// twice would panic at the first run.
    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    /// A round's own process must get exactly the load its parent was asked for.
    #[test]
    fn load_arguments_survive_the_trip_to_a_round_process() {
        for argv in [
            vec![
                "--profile",
                "chat",
                "--connections",
                "250",
                "--room",
                "5",
                "--rate",
                "2.5",
            ],
            vec![
                "--profile",
                "media",
                "--subscribers",
                "7",
                "--frame-bytes",
                "1000",
            ],
            vec![
                "--profile",
                "fanout-chat",
                "--rate",
                "0",
                "--seconds",
                "1.5",
            ],
            vec![
                "--profile",
                "chat",
                "--version",
                "05",
                "--version",
                "moq-lite-04",
            ],
        ] {
            let mut first = vec!["moq-bench", "run"];
            first.extend(&argv);
            let Command::Run(original) = Cli::try_parse_from(&first).unwrap().command else {
                panic!("parsed as run");
            };
            let mut second = vec!["moq-bench".to_owned(), "round".into()];
            second.extend(["--relay", "r", "--label", "a", "--round", "1"].map(String::from));
            second.extend(original.load.to_args());
            let Command::Round(round) = Cli::try_parse_from(&second).unwrap().command else {
                panic!("parsed as round");
            };
            assert_eq!(round.load.workload(), original.load.workload(), "{argv:?}");
            assert_eq!(round.load.profile, original.load.profile);
            assert_eq!(round.load.versions, original.load.versions, "{argv:?}");
        }
    }
}
