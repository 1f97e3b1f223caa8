//! `cargo xtask demo --cluster`: the demo's chat room across a network of three relays.
//! A, B and C are linked (B dials A, C dials A and B); the room's users are spread over
//! them and keep their sessions up across relays (`chat --reconnect`). Mid-run relay B is
//! killed (SIGKILL: no GOAWAY); its users move to the other relays, every reader follows
//! them there, and the summary says what was delivered and lost.

use std::path::Path;
use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};

use crate::cmd::Failure;
use crate::demo::{Relay, build, free_port, http_get, json_number};

/// The room: two users on each relay, 20 messages a second each for 15 s.
const USERS: &str = "6";
const MESSAGES: &str = "300";
const RATE: &str = "20";
/// When relay B is killed, after the room came together.
const KILL_AFTER: Duration = Duration::from_secs(5);

pub(crate) fn run(root: &Path) -> Result<(), Failure> {
    crate::prerequisites::ensure()?;
    println!(
        "building the relay and the chat example (release; the first build takes a few minutes)"
    );
    build(root)?;
    let release = root.join("target").join("release");
    let scratch = std::env::temp_dir().join(format!("moq-demo-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| Failure(format!("creating {scratch:?}: {e}")))?;

    // The three relays, each dialing the ones before it.
    let mut relays: Vec<(char, Relay)> = Vec::new();
    for (index, name) in ['A', 'B', 'C'].into_iter().enumerate() {
        let port = free_port()?;
        let mut extra = vec![
            "--cluster-id".to_owned(),
            (index + 1).to_string(),
            // Self-signed relays on loopback: links do not verify certificates.
            "--cluster-insecure-skip-verify".to_owned(),
            // What was sent while B's users moved is fetched again from caches: at 20
            // messages a second and 2⅔ s to notice a dead relay, 32 groups a track (the
            // default) would not hold it (README, "A network of relays").
            "--cache-groups".to_owned(),
            "256".to_owned(),
        ];
        for (_, peer) in &relays {
            extra.push("--cluster-connect".to_owned());
            extra.push(format!("moqt://127.0.0.1:{}/", peer.port));
        }
        let fingerprint_file = scratch.join(format!("fingerprint-{name}"));
        let mut relay = Relay::start_with(&release, port, &fingerprint_file, &extra)?;
        relay.wait_ready(&fingerprint_file)?;
        println!("relay {name} on 127.0.0.1:{port} (hop id {})", index + 1);
        relays.push((name, relay));
    }
    let urls: Vec<String> = relays
        .iter()
        .map(|(_, relay)| format!("moqt://127.0.0.1:{}/demo", relay.port))
        .collect();
    println!(
        "chat: {USERS} users spread over A, B and C, {MESSAGES} messages each at {RATE}/s; relay B is killed {} s in",
        KILL_AFTER.as_secs()
    );

    let chat = Process::new(release.join("examples").join("chat"))
        .args([
            "--insecure",
            &urls[0],
            "--relay",
            &urls[1],
            "--relay",
            &urls[2],
        ])
        .args(["--reconnect", "--users", USERS, "--messages", MESSAGES])
        .args(["--rate", RATE, "--patience", "10", "--progress", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| Failure(format!("running the chat example: {e}")))?;
    let started = Instant::now();
    std::thread::sleep(KILL_AFTER);
    let (_, mut b) = relays.remove(1);
    let _ = b.child.kill();
    let _ = b.child.wait();
    eprintln!(
        "\n  relay B killed at {:.1} s (SIGKILL): its users move, its links time out",
        started.elapsed().as_secs_f64()
    );
    let output = chat
        .wait_with_output()
        .map_err(|e| Failure(format!("waiting for the chat example: {e}")))?;
    let summary = String::from_utf8_lossy(&output.stdout).into_owned();
    let links: Vec<String> = relays
        .iter()
        .map(|(name, relay)| {
            let up = http_get(relay.port, "/cluster")
                .map_or(0, |text| text.matches("\"state\": \"up\"").count());
            format!("{name}: {up} link(s) up")
        })
        .collect();
    let mut stopped = Vec::new();
    for (name, relay) in relays {
        stopped.push(format!("{name} {}", relay.stop()?));
    }
    if !output.status.success() {
        return Err(Failure(format!(
            "the chat example failed ({})",
            output.status
        )));
    }

    let number = |key: &str| json_number(&summary, key).unwrap_or(0.0);
    println!("\n==> demo summary (cluster)");
    println!(
        "  deliveries   {:.0} of {:.0} ({:.0} lost) in {:.1} s, across relay B's death",
        number("delivered"),
        number("expected_deliveries"),
        number("lost"),
        number("seconds"),
    );
    println!(
        "  latency      p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (the max includes the users moving)",
        number("p50"),
        number("p99"),
        number("max")
    );
    println!("  after        {}", links.join(", "));
    for line in stopped {
        println!("  relay        {line}");
    }
    println!("\nnext: README.md, \"A network of relays\"; `moq-bench cluster failover|drain`");
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}
