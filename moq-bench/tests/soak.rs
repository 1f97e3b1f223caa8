//! The soak, two minutes of it: what CI runs of the long soaks in RELIABILITY.md.
//!
//! Every load the soak has, on the workspace's relay (tokio): rooms of chat with members
//! joining and leaving, announce churn, a group kept open for the whole run, media
//! 1 -> 10, -05 and -04 clients in the same rooms (the relay translates), all through the
//! impairment proxy at 1 % loss both ways, every client rotating its connection ID and
//! every client's address rebound (a NAT's new mapping) twice. Nothing may be lost, no
//! session may fail, and the relay must have followed clients to new addresses. Memory drift is the long soaks' to judge: two minutes are all
//! warm-up (the baseline is the last sample, so the check passes by construction here).
#![allow(missing_docs)]

mod common;

use std::process::Command;

use common::relay_binary;

#[test]
fn two_minutes_of_every_load_through_a_lossy_rebinding_path_lose_nothing() {
    let relay = relay_binary().display().to_string();
    let relay_command = format!(
        "{relay} --bind 127.0.0.1:{{port}} --http-bind 127.0.0.1:{{http_port}} \
         --fingerprint-file {{fingerprint_file}}"
    );
    let output = Command::new(env!("CARGO_BIN_EXE_moq-bench"))
        .args([
            "soak",
            "--minutes",
            "2",
            "--sample-seconds",
            "30",
            "--rooms",
            "2",
        ])
        .args(["--version", "05", "--version", "04"])
        .args(["--media-subscribers", "10", "--impair", "loss=1%"])
        .args(["--rotate-cid-seconds", "20", "--rebind-seconds", "45"])
        .args(["--relay", &relay_command])
        .output()
        .expect("moq-bench runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("soak passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The rebindings moved the clients' connections (the relay followed them), so the
    // soak tested what it says it did.
    let migrations: u64 = stdout
        .lines()
        .find_map(|line| line.strip_prefix("relay: peer migrations "))
        .and_then(|rest| rest.split(',').next())
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("no migration count in:\n{stdout}"));
    assert!(migrations > 0, "no connection followed a client: {stdout}");
}
