//! `strict-relay`: a moq-lite-05 relay on raw QUIC as strict as a deployed one, for tests
//! and for running `moq-bench` profiles through (`--relay "strict-relay --bind
//! 127.0.0.1:{port} --fingerprint-file {fingerprint_file}"`). It exits with status 1 at
//! the first protocol violation a client commits, printing it.
#![allow(clippy::print_stderr)]

use std::process::ExitCode;

use moq_conformance::strict::{Config, StrictRelay};

fn main() -> ExitCode {
    let mut bind = "127.0.0.1:4443".to_owned();
    let mut fingerprint_file = None;
    let mut verbose = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--bind" => bind = args.next().unwrap_or_default(),
            "--fingerprint-file" => fingerprint_file = args.next(),
            "--verbose" => verbose = true,
            other => {
                eprintln!(
                    "strict-relay: unknown argument {other:?}\n\
                     usage: strict-relay [--bind ADDR] [--fingerprint-file FILE] [--verbose]"
                );
                return ExitCode::from(2);
            }
        }
    }
    let Ok(bind) = bind.parse() else {
        eprintln!("strict-relay: --bind: {bind:?} is not an address");
        return ExitCode::from(2);
    };
    let config = Config {
        bind,
        exit_on_violation: true,
        verbose,
    };
    let (relay, fingerprint) = match StrictRelay::bind(config) {
        Ok(bound) => bound,
        Err(error) => {
            eprintln!("strict-relay: {error}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(path) = fingerprint_file
        && let Err(error) = std::fs::write(&path, &fingerprint)
    {
        eprintln!("strict-relay: writing {path}: {error}");
        return ExitCode::FAILURE;
    }
    eprintln!("strict-relay: listening on {}", relay.local_addr());
    relay.run()
}
