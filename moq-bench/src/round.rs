//! One measured round: a relay started for it, the clients, warm-up, the measured phase,
//! and its record; in this process or in a fresh one (the hidden `round` command).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use moq_bench::load::{self, Target, Workload};
use moq_bench::record::{PathRecord, ProcessCost, RssSample, RunRecord, SCHEMA};
use moq_bench::relay::{self, RelayProcess, Usage};
use moq_bench::stats::Latency;
use moq_impair::{Proxy, ProxyConfig};
use moqx_net::coding::Version;

use crate::args::{ImpairedPath, LoadArgs, Output, Profile, Scheme};

/// One round in a fresh `moq-bench` process (the hidden `round` command), so that no
/// round inherits the previous one's client connections, tasks or memory: its record.
pub(crate) async fn round_of(
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
/// `--warmup-limit`. With `--impair`, the clients reach the relay through an impairment
/// proxy started for the round.
pub(crate) async fn measure_round(
    load: &LoadArgs,
    command: &str,
    label: &str,
    round: u32,
    output: &Output,
) -> Result<RunRecord, String> {
    let (workload, profile, versions) = (&load.workload(), load.profile, &load.versions);
    let path = load.path();
    let path = path.as_ref();
    let template: Vec<String> = command.split_whitespace().map(str::to_owned).collect();
    let relay = RelayProcess::start(&template, Duration::from_secs_f64(output.startup))?;
    let outcome = tokio::select! {
        outcome = measure(workload, profile, versions, load.scheme, path, &relay, label, round, output) => outcome,
        report = relay.exited("during the round") => Err(report),
    };
    relay.stop();
    outcome
}

/// What [`measure_round`] does while its relay lives.
#[allow(clippy::too_many_arguments)] // one round's whole description
async fn measure(
    workload: &Workload,
    profile: Profile,
    versions: &[Version],
    scheme: Scheme,
    path: Option<&ImpairedPath>,
    relay: &RelayProcess,
    label: &str,
    round: u32,
    output: &Output,
) -> Result<RunRecord, String> {
    if path.is_some() && !scheme.is_udp() {
        return Err(format!(
            "--impair needs a UDP scheme (moqt, https), not {}",
            scheme.name()
        ));
    }
    let target =
        Target::of(relay, "bench", versions)?.over(scheme.name(), scheme.is_udp(), relay.http_port);
    let proxy = path.map(|path| impairment_proxy(relay, path)).transpose()?;
    let target = match &proxy {
        Some(proxy) => target.through(proxy.local_addr()),
        None => target,
    };
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
        // Nothing delivered (an idle round): no cost per delivery to speak of.
        cpu_us_per_delivery: if delivered == 0 {
            0.0
        } else {
            usage.cpu_seconds * 1e6 / delivered as f64
        },
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
        loss: if expected == 0 {
            0.0
        } else {
            1.0 - delivered as f64 / expected as f64
        },
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
        path: path.zip(proxy.as_ref()).map(|(path, proxy)| {
            let stats = proxy.stats();
            PathRecord {
                impairment: path.impairment.to_string(),
                seed: path.seed,
                lost_to_relay: stats.to_server.lost + stats.to_server.overflowed,
                lost_to_clients: stats.to_client.lost + stats.to_client.overflowed,
                packets: stats.to_server.received + stats.to_client.received,
                overflowed_to_clients: stats.to_client.overflowed,
                mean_burst_to_clients: stats.to_client.received as f64
                    / stats
                        .to_client
                        .received
                        .saturating_sub(stats.to_client.back_to_back)
                        .max(1) as f64,
                largest_burst_to_clients: stats.to_client.largest_burst,
            }
        }),
    })
}

/// An impairment proxy in front of `relay`'s port, with `path`'s impairment both ways.
fn impairment_proxy(relay: &RelayProcess, path: &ImpairedPath) -> Result<Proxy, String> {
    let upstream = std::net::SocketAddr::from(([127, 0, 0, 1], relay.port));
    let mut config = ProxyConfig::new(upstream, path.impairment.clone(), path.seed);
    // A round's clients may sit idle between frames longer than a lossy handshake takes,
    // but never as long as this: a flow forgotten mid-round would look like a migration.
    config.flow_idle_timeout = Duration::from_secs(3600);
    Proxy::start(config).map_err(|e| format!("starting the impairment proxy: {e}"))
}

/// How often the relay's RSS is sampled during the measured phase.
const RSS_SAMPLE_INTERVAL: Duration = Duration::from_secs(1);

/// This process's CPU and context switches (`getrusage`), and its RSS.
pub(crate) fn client_usage() -> Usage {
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
pub(crate) fn progress_bar(seconds: f64) -> Option<indicatif::ProgressBar> {
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
