//! The comparison mode on two real relay commands: alternating rounds, one JSON line per
//! round, and a paired verdict per metric.
#![allow(missing_docs)]

mod common;

use std::process::Command;

use common::relay_binary;

#[test]
fn compare_alternates_two_relays_and_pairs_their_rounds() {
    let relay = relay_binary().display().to_string();
    let command = |extra: &str| {
        format!(
            "{relay} --bind 127.0.0.1:{{port}} --no-http --fingerprint-file {{fingerprint_file}} {extra}"
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("compare.jsonl");
    let output = Command::new(env!("CARGO_BIN_EXE_moq-bench"))
        .args([
            "compare",
            "--profile",
            "fanout-chat",
            "--subscribers",
            "2",
            "--seconds",
            "0.5",
        ])
        .args([
            "--pairs",
            "5",
            "--a",
            &command(""),
            "--b",
            &command("--cache-groups 4"),
        ])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&json)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
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
    for verdict in verdicts {
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
    let relay = relay_binary().display().to_string();
    let command = format!(
        "{relay} --bind 127.0.0.1:{{port}} --no-http --fingerprint-file {{fingerprint_file}}"
    );
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("idle.jsonl");
    let output = Command::new(env!("CARGO_BIN_EXE_moq-bench"))
        .args(["compare", "--profile", "idle", "--connections", "12"])
        .args(["--room", "5", "--seconds", "0.3", "--pairs", "1"])
        .args(["--a", &command, "--b", &command, "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&json)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
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
