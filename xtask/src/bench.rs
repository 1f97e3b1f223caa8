//! `cargo xtask bench`: wall-clock benchmarks, or instruction counts under callgrind.
//!
//! Wall-clock figures on a shared machine are noisy; instruction counts are repeatable. With
//! `--instructions`, each benchmark runs twice under `valgrind --tool=callgrind`, for `K` and
//! for `2K` rounds, and the difference divided by `K` is the exact cost of one round with
//! process start-up and setup excluded. Then the cost meter (`moq-meter count`) counts the
//! relay's instructions per delivery under chat, fanout and media load.

use std::path::{Path, PathBuf};

use crate::cmd::{Command, Failure, cargo};

/// The benchmark binaries that speak the `--list` / `--only NAME --rounds K` protocol.
const BENCH_TARGETS: &[(&str, &str)] = &[
    ("moqx-kio", "kio"),
    ("moqx-net", "fanout"),
    ("moqx-net", "session"),
];

/// Multi-threaded benchmarks that print their own report (CPU time per round); instruction
/// counts of several threads under callgrind would mean nothing, so they run only without
/// `--instructions`.
const REPORT_TARGETS: &[(&str, &str)] =
    &[("moqx-net", "fanout_threads"), ("moqx-tokio", "loopback")];

pub(crate) fn run(root: &Path, args: &[String]) -> Result<(), Failure> {
    if args.iter().any(|a| a == "--instructions") {
        for (package, bench) in BENCH_TARGETS {
            instructions(root, package, bench)?;
        }
        return meter(root);
    }
    for (package, bench) in BENCH_TARGETS.iter().chain(REPORT_TARGETS) {
        cargo(root, &["bench", "-p", package, "--bench", bench]).run()?;
    }
    Ok(())
}

/// The workloads the cost meter counts, each with its defaults (`moq-meter count --help`).
const METER_WORKLOADS: &[&str] = &["chat", "fanout", "media"];

/// The relay's instructions per delivery under each of [`METER_WORKLOADS`], by crate and by
/// function (the cost meter, release build).
fn meter(root: &Path) -> Result<(), Failure> {
    cargo(root, &["build", "--release", "-p", "moq-meter"]).run()?;
    let binary = root.join("target").join("release").join("moq-meter");
    for workload in METER_WORKLOADS {
        Command::new(&binary, &["count", workload]).run()?;
    }
    Ok(())
}

/// `moq-bench suite`: every load profile against the relay, release build.
pub(crate) fn suite(root: &Path, args: &[String]) -> Result<(), Failure> {
    crate::prerequisites::ensure()?;
    cargo(
        root,
        &["build", "--release", "-p", "moq-bench", "-p", "moqx-relay"],
    )
    .run()?;
    let binary = root.join("target").join("release").join("moq-bench");
    let out = root.join("target").join("moq-bench");
    let out = out.to_string_lossy();
    let mut suite_args = vec!["suite", "--out", out.as_ref()];
    suite_args.extend(args.iter().map(String::as_str));
    Command::new(&binary, &suite_args).current_dir(root).run()
}

fn instructions(root: &Path, package: &str, bench: &str) -> Result<(), Failure> {
    let binary = build(root, package, bench)?;
    let list = Command::new(&binary, &["--list"]).output()?;
    println!(
        "{:<40} {:>14} {:>12} {:>12}",
        format!("{package}: benchmark"),
        "instr/round",
        "instr/op",
        "op"
    );
    for line in String::from_utf8_lossy(&list.stdout).lines() {
        let mut fields = line.split('\t');
        let (Some(name), Some(ops), Some(unit)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let ops: u64 = ops
            .parse()
            .map_err(|_| Failure(format!("bad --list line from {bench}: {line:?}")))?;
        let rounds = (20_000 / ops.max(1)).max(20);
        let once = collected(&binary, name, rounds)?;
        let twice = collected(&binary, name, 2 * rounds)?;
        let per_round = twice.saturating_sub(once) as f64 / rounds as f64;
        println!(
            "{:<40} {:>14.0} {:>12.1} {:>12}",
            name,
            per_round,
            per_round / ops as f64,
            unit
        );
    }
    Ok(())
}

/// Builds the benchmark and returns its executable, as cargo reports it.
fn build(root: &Path, package: &str, bench: &str) -> Result<PathBuf, Failure> {
    let output = cargo(
        root,
        &["bench", "-p", package, "--bench", bench, "--no-run"],
    )
    .output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    stderr
        .lines()
        .filter_map(|line| line.trim().strip_prefix("Executable "))
        .find(|rest| rest.starts_with(&format!("benches/{bench}.rs")))
        .and_then(|rest| {
            rest.rsplit_once('(')
                .map(|(_, path)| path.trim_end_matches(')'))
        })
        .map(|path| root.join(path))
        .ok_or_else(|| {
            Failure(format!(
                "cargo did not report the {bench} benchmark binary:\n{stderr}"
            ))
        })
}

/// Total instructions callgrind collected for `rounds` rounds of benchmark `name`.
fn collected(binary: &Path, name: &str, rounds: u64) -> Result<u64, Failure> {
    let out_file = std::env::temp_dir().join(format!("xtask-callgrind-{}.out", std::process::id()));
    let out_arg = format!("--callgrind-out-file={}", out_file.display());
    let rounds = rounds.to_string();
    let binary = binary.to_string_lossy();
    let output = Command::new(
        "valgrind",
        &[
            "--tool=callgrind",
            &out_arg,
            &binary,
            "--only",
            name,
            "--rounds",
            &rounds,
        ],
    )
    .output()
    .map_err(|Failure(why)| {
        Failure(format!(
            "{why}\n(instruction counts need valgrind: `apt-get install valgrind`)"
        ))
    })?;
    std::fs::remove_file(&out_file).ok();
    let stderr = String::from_utf8_lossy(&output.stderr);
    stderr
        .lines()
        .find_map(|line| line.split("Collected :").nth(1))
        .and_then(|count| count.trim().parse().ok())
        .ok_or_else(|| {
            Failure(format!(
                "no instruction count in callgrind output:\n{stderr}"
            ))
        })
}
