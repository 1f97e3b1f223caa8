//! The comparison mode on two real relay commands: alternating rounds, one JSON line per
//! round, and a paired verdict per metric.
#![allow(missing_docs)]

mod common;

use std::process::Command;

use common::relay_binary;

/// The relay binary's command line for `compare`, with `extra` arguments.
fn relay_command(extra: &str) -> String {
    let relay = relay_binary().display().to_string();
    format!(
        "{relay} --bind 127.0.0.1:{{port}} --no-http --fingerprint-file {{fingerprint_file}} {extra}"
    )
}

/// Runs `moq-bench compare` with `args` (and a JSON file), expects it to succeed, and
/// returns what it printed and its JSON lines.
fn compare(args: &[&str]) -> (String, Vec<serde_json::Value>) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("compare.jsonl");
    let output = Command::new(env!("CARGO_BIN_EXE_moq-bench"))
        .arg("compare")
        .args(args)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines = std::fs::read_to_string(&json)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (stdout, lines)
}

#[test]
fn compare_alternates_two_relays_and_pairs_their_rounds() {
    let (a, b) = (relay_command(""), relay_command("--cache-groups 4"));
    let (stdout, lines) = compare(&[
        "--profile",
        "fanout-chat",
        "--subscribers",
        "2",
        "--seconds",
        "0.5",
        "--pairs",
        "5",
        "--a",
        &a,
        "--b",
        &b,
    ]);
    let runs: Vec<&serde_json::Value> = lines.iter().filter(|l| l["kind"] == "run").collect();
    let labels: Vec<&str> = runs.iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["a", "b", "a", "b", "a", "b", "a", "b", "a", "b"]);
    for run in &runs {
        assert_eq!(run["schema"], "moq-bench/1");
        assert!(run["delivered"].as_u64().unwrap() > 0, "{run}");
        // Nanosecond accounting: a relay that delivered anything spent measurable CPU.
        assert!(run["relay"]["cpu_seconds"].as_f64().unwrap() > 0.0, "{run}");
        assert!(
            run["relay"]["rss_bytes_at_start"].as_u64().unwrap() > 0,
            "{run}"
        );
    }
    let verdicts: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["kind"] == "comparison").collect();
    let metrics: Vec<&str> = verdicts
        .iter()
        .map(|verdict| verdict["metric"].as_str().unwrap())
        .collect();
    assert_eq!(
        metrics,
        [
            "relay_cpu_us_per_delivery",
            "latency_p50_us",
            "relay_rss_bytes_per_connection"
        ]
    );
    // Every pair has a CPU and a latency ratio. (Three connections may grow the relay's
    // resident memory by nothing a page shows, and a pair without memory on A has no
    // ratio: the memory verdict is only checked to be there.)
    for verdict in &verdicts[..2] {
        let ratios = verdict["paired"]["ratios"].as_array().unwrap();
        assert_eq!(ratios.len(), 5, "{verdict}");
        assert!(verdict["paired"]["median"].as_f64().unwrap() > 0.0);
    }
    assert!(stdout.contains("B/A per pair"), "{stdout}");
}

/// An idle round connects sessions that only listen: nothing is delivered, nothing is
/// counted lost, and only the relay's memory per connection is compared.
#[test]
fn an_idle_comparison_compares_memory_alone() {
    let relay = relay_command("");
    let (_, lines) = compare(&[
        "--profile",
        "idle",
        "--connections",
        "12",
        "--room",
        "5",
        "--seconds",
        "0.3",
        "--pairs",
        "1",
        "--a",
        &relay,
        "--b",
        &relay,
    ]);
    let runs: Vec<&serde_json::Value> = lines.iter().filter(|l| l["kind"] == "run").collect();
    assert_eq!(runs.len(), 2);
    for run in runs {
        assert_eq!(run["profile"], "idle");
        assert_eq!(run["connections"], 12, "{run}");
        assert_eq!(run["publishers"], 0, "{run}");
        assert_eq!(run["delivered"], 0, "{run}");
        assert_eq!(run["loss"], 0.0, "{run}");
        assert_eq!(run["relay"]["cpu_us_per_delivery"], 0.0, "{run}");
    }
    let metrics: Vec<&str> = lines
        .iter()
        .filter(|l| l["kind"] == "comparison")
        .map(|verdict| verdict["metric"].as_str().unwrap())
        .collect();
    assert_eq!(metrics, ["relay_rss_bytes_per_connection"]);
}
