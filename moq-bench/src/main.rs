//! `moq-bench`: the measurement suite every performance claim here stands on.
//!
//! It drives any moq-lite-05 relay with chat, media and fanout load from client sessions
//! in this process, and measures the relay process from `/proc`: CPU per delivered message,
//! context switches, resident memory per connection, and end-to-end latency percentiles.
//! `moq-bench --help` shows the commands; `just bench` runs the suite.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;

use moq_bench::chart;
use moq_bench::load::Target;
use moq_bench::record::{ComparisonRecord, RunRecord, SCHEMA};
use moq_bench::relay::RelayProcess;
use moq_bench::stats::Paired;

mod args;
mod round;

use args::{
    AblationArgs, Cli, Command, CompareArgs, LoadArgs, Output, Profile, RunArgs, Scheme, SoakArgs,
    SuiteArgs, SweepArgs,
};
use round::{measure_round, round_of};

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
                    &args.load,
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
    let mut target = Target::of(&relay, "soak", &args.versions)?;
    if args.rotate_cid_seconds > 0.0 {
        target.cid_rotation = Some(Duration::from_secs_f64(args.rotate_cid_seconds));
    }
    // Through an impairment proxy, if asked: every client's packets, both ways.
    let proxy = match &args.impair {
        Some(impairment) => {
            let upstream = std::net::SocketAddr::from(([127, 0, 0, 1], relay.port));
            let mut config =
                moq_impair::ProxyConfig::new(upstream, impairment.clone(), args.impair_seed);
            // Churners come back after seconds away: a flow is forgotten only well after.
            config.flow_idle_timeout = Duration::from_secs(300);
            let proxy = moq_impair::Proxy::start(config)
                .map_err(|e| format!("starting the impairment proxy: {e}"))?;
            println!("through `{impairment}` (seed {})", args.impair_seed);
            Some(Arc::new(proxy))
        }
        None => None,
    };
    let target = match &proxy {
        Some(proxy) => target.through(proxy.local_addr()),
        None => target,
    };
    let rebinds = match (&proxy, args.rebind_seconds > 0.0) {
        (Some(proxy), true) => {
            let proxy = proxy.clone();
            let every = Duration::from_secs_f64(args.rebind_seconds);
            Some(tokio::spawn(async move {
                let mut ticks =
                    tokio::time::interval_at(tokio::time::Instant::now() + every, every);
                loop {
                    ticks.tick().await;
                    proxy.rebind();
                }
            }))
        }
        _ => None,
    };
    let config = moq_bench::soak::SoakConfig {
        minutes: args.minutes,
        rooms: args.rooms,
        stable_per_room: args.stable,
        churners_per_room: args.churners,
        rate: args.rate,
        sample_seconds: args.sample_seconds,
        max_drift: args.max_drift,
        baseline_minute: args.baseline_minute,
        announce_churn: args.announce_churn,
        long_groups: args.long_groups,
        media_subscribers: args.media_subscribers,
        ..moq_bench::soak::SoakConfig::default()
    };
    println!(
        "{:>7} {:>10} {:>8} {:>9} {:>11} {:>6} {:>7} {:>9} {:>12} {:>11}",
        "minute",
        "rss_mib",
        "cpu_s",
        "sessions",
        "delivered",
        "lost",
        "churns",
        "announced",
        "accounted_kib",
        "media"
    );
    let print = |sample: &moq_bench::soak::SoakSample| {
        println!(
            "{:>7.1} {:>10.1} {:>8.2} {:>9} {:>11} {:>6} {:>7} {:>9} {:>12} {:>11}",
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
                .map_or_else(|| "-".to_owned(), |bytes| (bytes / 1024).to_string()),
            sample.media_delivered
        );
    };
    let outcome = tokio::select! {
        report = moq_bench::soak::run(&relay, &target, &config, print) => report,
        report = relay.exited("during the soak") => Err(report),
    };
    relay.stop();
    if let Some(rebinds) = rebinds {
        rebinds.abort();
    }
    if let Some(proxy) = &proxy {
        let stats = proxy.stats();
        println!(
            "the proxy lost {} of {} packets to the relay and {} of {} to the clients, over {} flows",
            stats.to_server.lost + stats.to_server.overflowed,
            stats.to_server.received,
            stats.to_client.lost + stats.to_client.overflowed,
            stats.to_client.received,
            stats.flows
        );
    }
    let report = outcome?;
    if let Some(media) = &report.media {
        println!(
            "media: sent {} frames, delivered {} (all subscribers), lost {}, errors {}",
            media.sent,
            media.delivered,
            media.lost,
            media.errors.len()
        );
        for error in media.errors.iter().take(20) {
            println!("  media error: {error}");
        }
        for loss in &media.losses {
            println!("  media lost: {loss}");
        }
    }
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
    if let Some((migrations, fallbacks)) = report.migrations {
        println!("relay: peer migrations {migrations}, path fallbacks {fallbacks}");
    }
    for loss in &report.losses {
        println!("  lost: {loss}");
    }
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
        .map(|exe| exe.with_file_name("moqx-relay"))
        .filter(|path| path.exists())
        .map_or_else(|| "moqx-relay".to_owned(), |p| p.display().to_string());
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
            ("a", &args.a, &args.a_version, args.a_scheme, &mut a),
            ("b", &args.b, &args.b_version, args.b_scheme, &mut b),
        ];
        for (label, command, pins, scheme, side) in sides {
            let load = LoadArgs {
                versions: match pins.is_empty() {
                    true => args.load.versions.clone(),
                    false => pins.clone(),
                },
                scheme: scheme.unwrap_or(args.load.scheme),
                ..args.load.clone()
            };
            let record = round_of(&workload, &load, command, label, round, &args.output).await?;
            emit_run(&record, &args.output)?;
            side.push(record);
        }
    }
    // An idle round delivers nothing: only its memory compares.
    let metrics: &[&str] = match args.load.profile {
        Profile::Idle => &["relay_rss_bytes_per_connection"],
        _ => &[
            "relay_cpu_us_per_delivery",
            "latency_p50_us",
            "relay_rss_bytes_per_connection",
        ],
    };
    for &metric in metrics {
        let value = |record: &RunRecord| match metric {
            "relay_cpu_us_per_delivery" => record.relay.cpu_us_per_delivery,
            "relay_rss_bytes_per_connection" => record.relay.rss_bytes_per_connection as f64,
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
            .map(|exe| exe.with_file_name("moqx-relay"))
            .filter(|path| path.exists())
            .map_or_else(|| "moqx-relay".to_owned(), |p| p.display().to_string())
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
        "{:<34} {:>11} {:>9} {:>10} {:>10} {:>9} {:>9} {:>10} {:>8}",
        "configuration",
        "relay µs/d",
        "loss",
        "syscall/d",
        "sends/d",
        "dgram/snd",
        "dgram/rcv",
        "dgram/park",
        "p50 ms"
    );
    for (label, record) in &rows {
        let io = record.relay_io.clone().unwrap_or_default();
        println!(
            "{:<34} {:>11.2} {:>8.2}% {:>10} {:>10.3} {:>9.2} {:>9.2} {:>10} {:>8.2}",
            label,
            record.relay.cpu_us_per_delivery,
            record.loss * 100.0,
            io.syscalls_per_delivery
                .map_or_else(|| "n/a".to_owned(), |calls| format!("{calls:.3}")),
            io.send_calls_per_delivery,
            io.datagrams_per_send,
            io.datagrams_per_receive,
            io.datagrams_per_park
                .map_or_else(|| "n/a".to_owned(), |per| format!("{per:.2}")),
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
        scheme: Scheme::Moqt,
        impair: None,
        impair_seed: 1,
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

fn emit_run(record: &RunRecord, output: &Output) -> Result<(), String> {
    println!("{}", record.table_row());
    if let Some(path) = &record.path {
        println!(
            "              through `{}` (seed {}): {} of {} packets lost ({} to the relay, {} to the clients, {} of them at a full queue); relay's bursts to a client: {:.1} packets on average, {} at most",
            path.impairment,
            path.seed,
            path.lost_to_relay + path.lost_to_clients,
            path.packets,
            path.lost_to_relay,
            path.lost_to_clients,
            path.overflowed_to_clients,
            path.mean_burst_to_clients,
            path.largest_burst_to_clients,
        );
    }
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
