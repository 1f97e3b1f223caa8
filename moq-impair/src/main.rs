//! `moq-impair`: the impairment proxy from the command line. It forwards UDP from
//! `--listen` to `--upstream` and back, impaired, and prints what it did every
//! `--stats-every` and when stopped (Ctrl-C).

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use moq_impair::{DirectionStats, Impairment, Proxy, ProxyConfig};

/// A seeded UDP impairment proxy: clients send to --listen, the proxy forwards to
/// --upstream, and both directions cross an impaired link.
#[derive(Debug, Parser)]
#[command(version, after_help = IMPAIRMENT_HELP)]
struct Args {
    /// Where clients send.
    #[arg(long, default_value = "127.0.0.1:4444")]
    listen: SocketAddr,
    /// The server.
    #[arg(long, default_value = "127.0.0.1:4443")]
    upstream: SocketAddr,
    /// What the link does, both ways (see below).
    #[arg(long, default_value = "")]
    impair: Impairment,
    /// What the link does to packets toward the server, instead of --impair.
    #[arg(long)]
    to_server: Option<Impairment>,
    /// What the link does to packets toward clients, instead of --impair.
    #[arg(long)]
    to_client: Option<Impairment>,
    /// The seed of every random decision.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How often to print the counters (seconds; 0: only at the end).
    #[arg(long, default_value_t = 5)]
    stats_every: u64,
}

const IMPAIRMENT_HELP: &str = "An impairment is a comma-separated list of key=value: \
loss=1% burst=3 reorder=2% reorder_delay=10ms duplicate=1% corrupt=1% delay=50ms \
jitter=5ms rate=10mbit queue=100ms mtu=1280 blackhole=true \
(e.g. --impair loss=1%,delay=50ms,rate=10mbit). Delay is one way.";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args = Args::parse();
    let config = ProxyConfig {
        listen: args.listen,
        upstream: args.upstream,
        to_server: args.to_server.unwrap_or_else(|| args.impair.clone()),
        to_client: args.to_client.unwrap_or_else(|| args.impair.clone()),
        seed: args.seed,
        flow_idle_timeout: Duration::from_secs(60),
        upstream_bind: None,
    };
    let mut out = std::io::stdout();
    writeln!(
        out,
        "moq-impair: {} -> {} (seed {}); to server: {}; to client: {}",
        args.listen, args.upstream, config.seed, config.to_server, config.to_client
    )?;
    let proxy = Proxy::start(config)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let every = Duration::from_secs(args.stats_every.max(1));
        let mut ticks = tokio::time::interval(every);
        ticks.tick().await;
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => break,
                _ = ticks.tick(), if args.stats_every > 0 => print(&proxy),
            }
        }
    });
    print(&proxy);
    Ok(())
}

fn print(proxy: &Proxy) {
    let stats = proxy.stats();
    let line = |name: &str, d: &DirectionStats| {
        format!(
            "{name}: received {} delivered {} ({} B) lost {} too_big {} overflowed {} \
             blackholed {} reordered {} duplicated {} corrupted {} send_errors {}",
            d.received,
            d.delivered,
            d.delivered_bytes,
            d.lost,
            d.too_big,
            d.overflowed,
            d.blackholed,
            d.reordered,
            d.duplicated,
            d.corrupted,
            d.send_errors
        )
    };
    let _ = writeln!(
        std::io::stdout(),
        "flows {}\n  {}\n  {}",
        stats.flows,
        line("to server", &stats.to_server),
        line("to client", &stats.to_client)
    );
}
