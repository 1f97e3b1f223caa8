//! `moqx`: the command line for trying any moq-lite relay. `moqx --help` says how.

mod announced;
mod client;
mod interop;
mod publish;
mod subscribe;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Publish, subscribe and watch announcements on a Media over QUIC (moq-lite) relay.
///
/// URL is moqt://host:port/root for raw QUIC or https://host:port/root for WebTransport;
/// the root (and ?jwt=TOKEN, if the relay wants a token) scopes what the session sees, and
/// PATH names a broadcast under it. A relay with a self-signed certificate needs
/// --fingerprint (it prints it, and serves it at http://host:port/certificate.sha256) or,
/// on your own machine, --insecure.
///
/// Try it against a local relay (`cargo run -p moqx-relay`):
///
///   moqx subscribe --insecure moqt://localhost:4443/demo clock
///
///   date | moqx publish --insecure moqt://localhost:4443/demo clock
#[derive(Debug, Parser)]
#[command(name = "moqx", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Publishes a broadcast at PATH with one track: each line of stdin becomes a frame
    /// (1000 lines to a group; see --group-size), or --file sends a whole file as one
    /// frame. At the end of input the track finishes and the command exits once
    /// subscribers have it.
    Publish(publish::PublishArgs),
    /// Subscribes to a track of the broadcast at PATH and writes each frame to stdout, one
    /// per line. Waits for the broadcast to be announced; exits when the track ends.
    Subscribe(subscribe::SubscribeArgs),
    /// Prints the broadcasts under PREFIX as they come and go: `+path` and `-path`, one per
    /// line, starting with those already live.
    Announced(announced::AnnouncedArgs),
    /// The IETF MoQ interop runner's test client: runs its test cases (setup-only,
    /// announce-only, publish-namespace-done, subscribe-error, announce-subscribe,
    /// subscribe-before-announce) against a relay on a moq-transport draft, TAP 14 on
    /// stdout; exit 0 when all pass, 1 when one fails, 127 for a case it does not know.
    Interop(interop::InteropArgs),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        // Colors only for a person at a terminal, never into a log file or a pipe.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            report(&format!("starting tokio: {error}"));
            return ExitCode::FAILURE;
        }
    };
    let command = match cli.command {
        // Its exit code is the interop runner's contract.
        Command::Interop(args) => return runtime.block_on(interop::run(args)),
        command => command,
    };
    let outcome = runtime.block_on(async {
        match command {
            Command::Publish(args) => publish::run(args).await,
            Command::Subscribe(args) => subscribe::run(args).await,
            Command::Announced(args) => announced::run(args).await,
            Command::Interop(_) => Ok(()),
        }
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            report(&message);
            ExitCode::FAILURE
        }
    }
}

/// One line to stderr: what went wrong.
fn report(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "moqx: {message}");
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// clap checks a command line's definition only when it is built: a flag defined
    /// twice (ours and clap's own `--version`) would panic at the first run.
    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
