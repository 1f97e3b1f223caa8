//! `cargo xtask fuzz`: every cargo-fuzz target in `fuzz/`, each for a while, with a table
//! of what each did.
//!
//! Installs what it needs (the nightly toolchain must be there; cargo-fuzz is installed
//! from crates.io if missing). Each target starts from its committed seeds
//! (`fuzz/seeds/<target>`, made from the spec's byte vectors by `fuzz/make_seeds.py`) and
//! its own growing corpus (`fuzz/corpus/<target>`, not committed), and replays the inputs
//! that once failed it (`fuzz/regressions/<target>`, committed, each named for its bug). A
//! crash, or an input running longer than [`HANG_SECONDS`], fails the command and leaves
//! its input in `fuzz/artifacts/<target>`.
//!
//! `--seconds N` (default 10) per target, or `--runs N` executions per target instead;
//! `--target NAME` runs one.

use std::path::Path;

use crate::cmd::{Command, Failure};

/// An input that runs this long is a hang (every target's slowest input takes well under
/// a second); libFuzzer's default would wait twenty minutes.
const HANG_SECONDS: u32 = 60;

/// The targets, in the order they run.
const TARGETS: &[&str] = &[
    "control_messages",
    "group_stream",
    "datagram",
    "webtransport",
    "token",
    "server_session",
    "moqt_control",
    "moqt_data",
];

pub(crate) fn run(root: &Path, args: &[String]) -> Result<(), Failure> {
    let mut seconds = 10u64;
    let mut runs: Option<u64> = None;
    let mut only = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => {
                seconds = args
                    .next()
                    .and_then(|value| value.parse().ok())
                    .ok_or_else(|| Failure("--seconds needs a whole number".into()))?;
            }
            "--runs" => {
                runs = Some(
                    args.next()
                        .and_then(|value| value.parse().ok())
                        .ok_or_else(|| Failure("--runs needs a whole number".into()))?,
                );
            }
            "--target" => {
                let name = args
                    .next()
                    .ok_or_else(|| Failure("--target needs a name".into()))?;
                if !TARGETS.contains(&name.as_str()) {
                    return Err(Failure(format!(
                        "no fuzz target {name:?}; the targets are {TARGETS:?}"
                    )));
                }
                only = Some(name.clone());
            }
            other => return Err(Failure(format!("unknown fuzz argument {other:?}"))),
        }
    }
    ensure_cargo_fuzz()?;
    let fuzz = root.join("fuzz");
    let mut rows = Vec::new();
    for target in TARGETS
        .iter()
        .filter(|t| only.as_deref().is_none_or(|o| o == **t))
    {
        let corpus = fuzz.join("corpus").join(target);
        std::fs::create_dir_all(&corpus)
            .map_err(|e| Failure(format!("creating {}: {e}", corpus.display())))?;
        let log = root.join("target").join(format!("fuzz-{target}.log"));
        std::fs::create_dir_all(root.join("target")).ok();
        let corpus_arg = format!("corpus/{target}");
        let seeds_arg = format!("seeds/{target}");
        let regressions = fuzz.join("regressions").join(target);
        let regressions_arg = format!("regressions/{target}");
        let hang_arg = format!("-timeout={HANG_SECONDS}");
        let budget = match runs {
            Some(runs) => format!("-runs={runs}"),
            None => format!("-max_total_time={seconds}"),
        };
        let mut args = vec![
            "+nightly",
            "fuzz",
            "run",
            "--release",
            target,
            &corpus_arg,
            &seeds_arg,
        ];
        if regressions.is_dir() {
            args.push(&regressions_arg);
        }
        args.extend([
            "--",
            &budget,
            &hang_arg,
            "-print_final_stats=1",
            "-rss_limit_mb=4096",
        ]);
        let output = Command::new("cargo", &args)
            .current_dir(&fuzz)
            .output_to(&log)?;
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let executions = stat(&text, "stat::number_of_executed_units:");
        let corpus_size = std::fs::read_dir(&corpus).map(|d| d.count()).unwrap_or(0);
        rows.push((*target, executions, corpus_size));
        if !output {
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(Failure(format!(
                "fuzz target {target} failed (log {}):\n{}",
                log.display(),
                tail.join("\n")
            )));
        }
    }
    println!("\n{:<18} {:>14} {:>8}", "target", "executions", "corpus");
    for (target, executions, corpus) in rows {
        let executions = executions.map_or("?".to_owned(), |n| n.to_string());
        println!("{target:<18} {executions:>14} {corpus:>8}");
    }
    match runs {
        Some(runs) => println!("({runs} runs per target)"),
        None => println!("({seconds} s per target; `cargo xtask fuzz --seconds N` for longer)"),
    }
    Ok(())
}

/// The number after `name` in libFuzzer's final stats.
fn stat(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .rev()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|value| value.trim().parse().ok())
}

/// cargo-fuzz on the nightly toolchain, installed from crates.io if missing.
fn ensure_cargo_fuzz() -> Result<(), Failure> {
    let present = std::process::Command::new("cargo")
        .args(["+nightly", "fuzz", "--version"])
        .output()
        .is_ok_and(|output| output.status.success());
    if present {
        return Ok(());
    }
    Command::new(
        "cargo",
        &[
            "+nightly",
            "install",
            "cargo-fuzz",
            "--locked",
            "--version",
            "0.13.2",
        ],
    )
    .run()
}
