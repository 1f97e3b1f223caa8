//! The command line: every command and its flags (clap).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use moq_bench::load::{Stream, Workload};
use moqx_net::coding::Version;

/// Load and measurement for moq-lite relays: chat, media and fanout profiles against a
/// relay process started for each round, with relay CPU per delivered message (from
/// /proc), latency p50/p99/max, context switches, RSS per connection and the load
/// generator's own CPU. Output: a table, JSON lines (--json), an SVG chart (`chart`).
///
/// The relay is a command template: `{port}` becomes a free loopback port, and
/// `{fingerprint_file}` a file the relay writes its certificate fingerprint to (the bench
/// waits for it and pins it). The default runs this workspace's moqx-relay.
#[derive(Debug, Parser)]
#[command(name = "moq-bench", version)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
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
pub(crate) struct SoakArgs {
    /// How long, in minutes.
    #[arg(long, default_value_t = 30.0)]
    pub(crate) minutes: f64,
    /// Rooms.
    #[arg(long, default_value_t = 20)]
    pub(crate) rooms: usize,
    /// Members per room that stay the whole soak.
    #[arg(long, default_value_t = 10)]
    pub(crate) stable: usize,
    /// Members per room that join, talk and leave over and over.
    #[arg(long, default_value_t = 2)]
    pub(crate) churners: usize,
    /// Messages per second per member.
    #[arg(long, default_value_t = 1.0)]
    pub(crate) rate: f64,
    /// Seconds between samples.
    #[arg(long, default_value_t = 60.0)]
    pub(crate) sample_seconds: f64,
    /// The largest allowed RSS growth after the baseline sample, as a share.
    #[arg(long, default_value_t = 0.05)]
    pub(crate) max_drift: f64,
    /// The minute whose sample is the baseline for --max-drift: the first sample at or
    /// after it (allocators and caches warm up for the first minutes of a long soak).
    #[arg(long, default_value_t = 2.0, value_name = "MINUTE")]
    pub(crate) baseline_minute: f64,
    /// The relay command template [default: this workspace's moqx-relay].
    #[arg(long, value_name = "COMMAND")]
    pub(crate) relay: Option<String>,
    /// How long the relay may take to start listening, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) startup: f64,
    /// Pin the members' moq-lite versions in turn (repeat for mixed rooms, where the relay
    /// translates: `--version 05 --version 04`) [default: offer -05, -04, -03].
    #[arg(long = "version", value_name = "VERSION")]
    pub(crate) versions: Vec<Version>,
    /// Distinct broadcast names announced and withdrawn per second, by one session, to an
    /// observer that follows them (announce churn; 0 for none).
    #[arg(long, default_value_t = 20.0)]
    pub(crate) announce_churn: f64,
    /// Members (one per room, from the first) that keep one group open for the whole
    /// soak, a frame a second: a log track beside the chat (0 for none).
    #[arg(long, default_value_t = 2)]
    pub(crate) long_groups: usize,
    /// Subscribers of a media broadcast (4 KB frames at 60 fps, a group every 2 s) beside
    /// the chat, every frame accounted (0 for none).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub(crate) media_subscribers: usize,
    /// Put a seeded impairment proxy (moq-impair) between every client and the relay,
    /// doing this to packets both ways (`loss=1%`; see `moq-bench run --help`).
    #[arg(long, value_name = "IMPAIRMENT")]
    pub(crate) impair: Option<moq_impair::Impairment>,
    /// The impairment proxy's seed.
    #[arg(long, default_value_t = 1, value_name = "SEED")]
    pub(crate) impair_seed: u64,
    /// With --impair: every this many seconds the proxy gives every client a new source
    /// port toward the relay, as a NAT rebinding does: the relay sees each connection
    /// migrate to a new address (0 for never).
    #[arg(
        long,
        default_value_t = 0.0,
        value_name = "SECONDS",
        requires = "impair"
    )]
    pub(crate) rebind_seconds: f64,
    /// Every client switches to another connection ID the relay gave it this often, in
    /// seconds (0 for never): the relay retires each and issues another.
    #[arg(long, default_value_t = 0.0, value_name = "SECONDS")]
    pub(crate) rotate_cid_seconds: f64,
}

#[derive(Debug, Args)]
pub(crate) struct RoundArgs {
    #[command(flatten)]
    pub(crate) load: LoadArgs,
    #[command(flatten)]
    pub(crate) output: Output,
    /// The relay command template.
    #[arg(long)]
    pub(crate) relay: String,
    /// The record's label.
    #[arg(long)]
    pub(crate) label: String,
    /// The record's round.
    #[arg(long)]
    pub(crate) round: u32,
}

/// A seeded impairment proxy between the clients and the relay (`--impair`).
#[derive(Debug, Clone)]
pub(crate) struct ImpairedPath {
    /// What it does to packets, both ways.
    pub(crate) impairment: moq_impair::Impairment,
    /// Its seed.
    pub(crate) seed: u64,
}

/// The load shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Profile {
    /// Rooms of members, each publishing tiny frames (one per group) and subscribing to
    /// the rest of its room.
    Chat,
    /// One publisher of 4 KB frames at 60 fps, a group every 2 s, to N subscribers.
    Media,
    /// One publisher of chat-sized frames to N subscribers.
    FanoutChat,
    /// One publisher of media-sized frames to N subscribers.
    FanoutMedia,
    /// Connections that only listen: each member's session asks for its room's
    /// announcements and nobody publishes (what an idle connection costs the relay).
    Idle,
}

impl Profile {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Profile::Chat => "chat",
            Profile::Media => "media",
            Profile::FanoutChat => "fanout-chat",
            Profile::FanoutMedia => "fanout-media",
            Profile::Idle => "idle",
        }
    }
}

/// The shape of the load.
#[derive(Debug, Clone, Args)]
pub(crate) struct LoadArgs {
    /// The load shape.
    #[arg(long, value_enum, default_value = "chat")]
    pub(crate) profile: Profile,
    /// chat and idle: client connections.
    #[arg(long, default_value_t = 1000)]
    pub(crate) connections: usize,
    /// chat and idle: members per room.
    #[arg(long, default_value_t = 10)]
    pub(crate) room: usize,
    /// media and fanout: subscribers of the one publisher.
    #[arg(long, default_value_t = 100)]
    pub(crate) subscribers: usize,
    /// Frames per second per publisher, 0 for as fast as possible [default: chat 1,
    /// fanout-chat 10, media 60].
    #[arg(long)]
    pub(crate) rate: Option<f64>,
    /// Payload bytes per frame [default: chat 100, media 4096].
    #[arg(long)]
    pub(crate) frame_bytes: Option<usize>,
    /// media: seconds per group.
    #[arg(long, default_value_t = 2.0)]
    pub(crate) group_seconds: f64,
    /// Length of the measured phase, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) seconds: f64,
    /// Pin the clients' moq-lite version (moq-lite-05, moq-lite-04, moq-lite-03,
    /// moq-lite-06-wip, or 05, 04, …); repeat to give members the versions in turn (mixed
    /// rooms, where the relay translates) [default: offer -05, -04, -03; the relay picks].
    #[arg(long = "version", value_name = "VERSION")]
    pub(crate) versions: Vec<Version>,
    /// How the clients reach the relay: `moqt` (raw QUIC), `https` (WebTransport), `ws`
    /// (QMux over a WebSocket on the relay's TCP web port), `tls` (QMux over TLS there) or
    /// `tcp`. The relay must serve HTTP for `ws` and `tls` (no `--no-http`).
    #[arg(long, value_enum, default_value = "moqt")]
    pub(crate) scheme: Scheme,
    /// Put a seeded impairment proxy (moq-impair) between the clients and the relay,
    /// doing this to packets both ways: `loss=1%`, `loss=5%,burst=4`,
    /// `delay=50ms,jitter=10ms`, `rate=10mbit,queue=50ms` … (`moq-impair --help`). It runs
    /// in the load generator's process: its CPU counts as the clients'.
    #[arg(long, value_name = "IMPAIRMENT")]
    pub(crate) impair: Option<moq_impair::Impairment>,
    /// The impairment proxy's seed: the same seed makes the same decisions for the same
    /// packets of each flow.
    #[arg(long, default_value_t = 1, value_name = "SEED")]
    pub(crate) impair_seed: u64,
}

impl LoadArgs {
    /// The impaired path the clients reach the relay through, if any.
    pub(crate) fn path(&self) -> Option<ImpairedPath> {
        self.impair.clone().map(|impairment| ImpairedPath {
            impairment,
            seed: self.impair_seed,
        })
    }

    /// These arguments as command-line arguments again (for a round's own process).
    pub(crate) fn to_args(&self) -> Vec<String> {
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
        args.extend(["--scheme".to_owned(), self.scheme.name().to_owned()]);
        if let Some(impairment) = &self.impair {
            args.extend([
                "--impair".to_owned(),
                impairment.to_string(),
                "--impair-seed".into(),
                self.impair_seed.to_string(),
            ]);
        }
        args
    }

    pub(crate) fn workload(&self) -> Workload {
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
            Profile::Idle => Workload::idle(self.connections, self.room, self.seconds),
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
pub(crate) struct Output {
    /// Append every record as a JSON line to this file.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// How long a relay without {fingerprint_file} gets to start, in seconds.
    #[arg(long, default_value_t = 2.0)]
    pub(crate) startup: f64,
    /// How long the warm-up may take before the round fails, in seconds.
    #[arg(long, default_value_t = 120.0)]
    pub(crate) warmup_limit: f64,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) load: LoadArgs,
    #[command(flatten)]
    pub(crate) output: Output,
    /// The relay command template [default: this workspace's moqx-relay].
    #[arg(long, value_name = "COMMAND")]
    pub(crate) relay: Option<String>,
    /// Rounds, each with a fresh relay process.
    #[arg(long, default_value_t = 1)]
    pub(crate) rounds: u32,
}

#[derive(Debug, Args)]
pub(crate) struct CompareArgs {
    #[command(flatten)]
    pub(crate) load: LoadArgs,
    #[command(flatten)]
    pub(crate) output: Output,
    /// Relay A's command template.
    #[arg(long, value_name = "COMMAND")]
    pub(crate) a: String,
    /// Relay B's command template.
    #[arg(long, value_name = "COMMAND")]
    pub(crate) b: String,
    /// Side A's clients pin these versions instead of `--version`'s (repeatable; to
    /// compare versions on one relay).
    #[arg(long, value_name = "VERSION")]
    pub(crate) a_version: Vec<Version>,
    /// Side B's clients pin these versions instead of `--version`'s.
    #[arg(long, value_name = "VERSION")]
    pub(crate) b_version: Vec<Version>,
    /// Side A's clients reach the relay this way instead of `--scheme`'s (to compare
    /// transports on one relay: `--a-scheme moqt --b-scheme ws`).
    #[arg(long, value_enum)]
    pub(crate) a_scheme: Option<Scheme>,
    /// Side B's clients reach the relay this way instead of `--scheme`'s.
    #[arg(long, value_enum)]
    pub(crate) b_scheme: Option<Scheme>,
    /// A/B pairs (at least 5 for a verdict worth reading).
    #[arg(long, default_value_t = 5)]
    pub(crate) pairs: u32,
}

#[derive(Debug, Args)]
pub(crate) struct SweepArgs {
    #[command(flatten)]
    pub(crate) load: LoadArgs,
    #[command(flatten)]
    pub(crate) output: Output,
    /// The relay command template [default: this workspace's moqx-relay].
    #[arg(long, value_name = "COMMAND")]
    pub(crate) relay: Option<String>,
    /// Rates per publisher to try, in order.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32")]
    pub(crate) rates: Vec<f64>,
    /// A rate counts as sustained with at most this share of deliveries lost...
    #[arg(long, default_value_t = 0.001)]
    pub(crate) max_loss: f64,
    /// ...and a p99 latency at most this many milliseconds (a relay that loses nothing
    /// but queues ever longer is not keeping up).
    #[arg(long, default_value_t = 250.0)]
    pub(crate) max_p99_ms: f64,
}

#[derive(Debug, Args)]
pub(crate) struct SuiteArgs {
    #[command(flatten)]
    pub(crate) output: Output,
    /// Where the JSON lines and the chart go.
    #[arg(long, default_value = "target/moq-bench")]
    pub(crate) out: PathBuf,
    /// The relay command template [default: this workspace's moqx-relay].
    #[arg(long, value_name = "COMMAND")]
    pub(crate) relay: Option<String>,
    /// Seconds per measured phase.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) seconds: f64,
}

#[derive(Debug, Args)]
pub(crate) struct AblationArgs {
    #[command(flatten)]
    pub(crate) load: LoadArgs,
    #[command(flatten)]
    pub(crate) output: Output,
    /// The moqx-relay binary [default: the one beside moq-bench].
    #[arg(long, value_name = "FILE")]
    pub(crate) relay_binary: Option<String>,
    /// The drivers to measure.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "tokio,tokio-per-core,uring"
    )]
    pub(crate) drivers: Vec<String>,
    /// Workers of the thread-per-core drivers.
    #[arg(long, default_value_t = 2)]
    pub(crate) workers: usize,
}

#[derive(Debug, Args)]
pub(crate) struct ChartArgs {
    /// JSON lines written by `run`, `compare`, `sweep` or `suite`.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: PathBuf,
    /// The SVG to write.
    #[arg(long, value_name = "FILE", default_value = "moq-bench.svg")]
    pub(crate) out: PathBuf,
}

/// How a load generator's clients reach the relay: the URL scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Scheme {
    /// Raw QUIC.
    Moqt,
    /// WebTransport over HTTP/3.
    Https,
    /// QMux over a WebSocket.
    Ws,
    /// QMux over TLS over TCP.
    Tls,
    /// QMux over plain TCP.
    Tcp,
}

impl Scheme {
    /// The URL scheme.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Moqt => "moqt",
            Self::Https => "https",
            Self::Ws => "ws",
            Self::Tls => "tls",
            Self::Tcp => "tcp",
        }
    }

    /// Whether it runs over UDP (an impairment proxy can stand in its path).
    pub(crate) fn is_udp(self) -> bool {
        matches!(self, Self::Moqt | Self::Https)
    }
}
