//! `moq-meter`: a relay's instructions per delivery, counted (see the crate docs).
#![allow(clippy::print_stdout, clippy::print_stderr)] // a meter's output is its product

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use moq_meter::callgrind::Profile;
use moq_meter::members::Transport;
use moq_meter::workload::Workload;

/// The deterministic cost meter: a relay and its clients in one process.
#[derive(Debug, Parser)]
#[command(version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs a workload (no valgrind): every message delivered or an error; the relay's
    /// wall-clock time per delivery, indicative only.
    Run(RunArgs),
    /// Runs a workload under callgrind and reports the relay's instructions per
    /// delivery, by crate and by function.
    Count {
        #[command(flatten)]
        run: RunArgs,
        /// Keep callgrind's output file here (for callgrind_annotate or kcachegrind).
        #[arg(long)]
        keep: Option<PathBuf>,
        /// How many functions to list.
        #[arg(long, default_value_t = 25)]
        top: usize,
    },
    /// Reports a callgrind output file that `count --keep` kept, again.
    Report {
        /// The file.
        file: PathBuf,
        /// The deliveries its run measured (its `deliveries:` line).
        #[arg(long)]
        deliveries: u64,
        /// How many functions to list.
        #[arg(long, default_value_t = 25)]
        top: usize,
    },
}

#[derive(Debug, Clone, clap::Args)]
struct RunArgs {
    /// The load.
    #[arg(value_enum)]
    workload: Kind,
    /// Chat: members in all (default 100).
    #[arg(long)]
    members: Option<usize>,
    /// Chat: members per room (default 10).
    #[arg(long)]
    room: Option<usize>,
    /// Fanout, media: readers of the one track (default 64 for fanout, 100 for media).
    #[arg(long)]
    subscribers: Option<usize>,
    /// Bytes per message or frame (default 100; media 4,000).
    #[arg(long)]
    size: Option<usize>,
    /// Media: frames per group (default 60).
    #[arg(long)]
    group_frames: Option<u64>,
    /// Messages delivered before the measured part (default: the workload's own).
    #[arg(long)]
    warm: Option<u64>,
    /// Messages measured (default: the workload's own).
    #[arg(long)]
    messages: Option<u64>,
    /// How the members reach the relay: `moqt` (raw QUIC) or `https` (WebTransport, as
    /// browsers and the deployed relay's own clients do).
    #[arg(long, value_enum, default_value_t = Transport::Quic)]
    scheme: Transport,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Kind {
    Chat,
    Fanout,
    Media,
}

fn main() -> ExitCode {
    tracing_subscriber_init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run(&args),
        Command::Count { run, keep, top } => count(&run, keep, top),
        Command::Report {
            file,
            deliveries,
            top,
        } => read_profile(&file).map(|profile| report(&profile, deliveries, top)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("moq-meter: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Log lines as `RUST_LOG` asks (warnings by default), on stderr: stdout is the report.
fn tracing_subscriber_init() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
}

impl RunArgs {
    fn workload(&self) -> Workload {
        match self.workload {
            Kind::Chat => Workload::Chat {
                members: self.members.unwrap_or(100),
                room: self.room.unwrap_or(10),
                size: self.size.unwrap_or(100),
            },
            Kind::Fanout => Workload::Fanout {
                subscribers: self.subscribers.unwrap_or(64),
                size: self.size.unwrap_or(100),
            },
            Kind::Media => Workload::Media {
                subscribers: self.subscribers.unwrap_or(100),
                size: self.size.unwrap_or(4_000),
                group_frames: self.group_frames.unwrap_or(60),
            },
        }
    }

    /// Warm-up and measured messages: every chat member publishes once to warm up and
    /// three times measured; fanout 20 and 200; media one group and two.
    fn messages(&self, workload: &Workload) -> (u64, u64) {
        let (warm, measured) = match *workload {
            Workload::Chat { members, .. } => (members as u64, 3 * members as u64),
            Workload::Fanout { .. } => (20, 200),
            Workload::Media { group_frames, .. } => (group_frames, 2 * group_frames),
        };
        (self.warm.unwrap_or(warm), self.messages.unwrap_or(measured))
    }

    /// The arguments that make `moq-meter run` do this run.
    fn command_line(&self) -> Vec<String> {
        let mut args = vec![
            "run".to_owned(),
            format!("{:?}", self.workload).to_lowercase(),
        ];
        let options = [
            ("--members", self.members.map(|v| v as u64)),
            ("--room", self.room.map(|v| v as u64)),
            ("--subscribers", self.subscribers.map(|v| v as u64)),
            ("--size", self.size.map(|v| v as u64)),
            ("--group-frames", self.group_frames),
            ("--warm", self.warm),
            ("--messages", self.messages),
        ];
        for (flag, value) in options {
            if let Some(value) = value {
                args.extend([flag.to_owned(), value.to_string()]);
            }
        }
        if let Some(scheme) = self.scheme.to_possible_value() {
            args.extend(["--scheme".to_owned(), scheme.get_name().to_owned()]);
        }
        args
    }
}

fn run(args: &RunArgs) -> Result<(), String> {
    let workload = args.workload();
    let (warm, messages) = args.messages(&workload);
    let measured =
        moq_meter::run(workload.clone(), args.scheme, warm, messages).map_err(|e| e.to_string())?;
    let per_delivery = measured.relay_time.as_secs_f64() * 1e6 / measured.deliveries.max(1) as f64;
    println!("{}, over {}", workload.describe(), args.scheme.describe());
    println!(
        "deliveries: {} ({} messages measured after {warm} warm-up)",
        measured.deliveries, measured.messages
    );
    let per_message = |n: u64| n as f64 / measured.messages.max(1) as f64;
    println!(
        "relay datagrams per message: {:.2} in, {:.2} out",
        per_message(measured.datagrams_in),
        per_message(measured.datagrams_out)
    );
    println!("relay wall clock: {per_delivery:.2} µs per delivery (indicative only)");
    Ok(())
}

fn count(args: &RunArgs, keep: Option<PathBuf>, top: usize) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("the meter's own path: {e}"))?;
    let kept = keep.is_some();
    let out = keep.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("moq-meter-{}.callgrind", std::process::id()))
    });
    let output = std::process::Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg("--toggle-collect=*relay_turn_measured*")
        .arg("--zero-before=*measurement_starts*")
        .arg(&exe)
        .args(args.command_line())
        .output()
        .map_err(|e| {
            format!("valgrind: {e} (instruction counts need it: `apt-get install valgrind`)")
        })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "the run under callgrind failed:\n{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let deliveries: u64 = stdout
        .lines()
        .find_map(|line| line.strip_prefix("deliveries: "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("the run printed no delivery count:\n{stdout}"))?;
    let profile = read_profile(&out);
    if !kept {
        let _ = std::fs::remove_file(&out);
    }
    let profile = profile?;
    // The run's own lines, less its wall clock: under callgrind it means nothing.
    for line in stdout
        .lines()
        .filter(|line| !line.starts_with("relay wall clock"))
    {
        println!("{line}");
    }
    report(&profile, deliveries, top);
    Ok(())
}

/// The profile in callgrind output file `file`.
fn read_profile(file: &std::path::Path) -> Result<Profile, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("callgrind's output {}: {e}", file.display()))?;
    Profile::parse(&text)
}

fn report(profile: &Profile, deliveries: u64, top: usize) {
    let total = profile.total();
    let per = |n: u64| n as f64 / deliveries.max(1) as f64;
    let share = |n: u64| 100.0 * n as f64 / total.max(1) as f64;
    println!(
        "relay instructions: {total} in all, {:.0} per delivery",
        per(total)
    );
    println!("\nby crate                 per delivery   share");
    for (component, instructions) in profile.by_component() {
        println!(
            "  {component:<22} {:>12.0} {:>6.1} %",
            per(instructions),
            share(instructions)
        );
    }
    println!("\ntop functions (own instructions)   per delivery   share");
    for function in profile.functions.iter().take(top) {
        println!(
            "  {:>10.0} {:>6.1} %  {}",
            per(function.instructions),
            share(function.instructions),
            function.name
        );
    }
}
