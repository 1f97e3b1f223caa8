//! `examples/embed.rs`, run as a user runs it: it publishes a track through an embedded
//! relay and reads it back, and exits non-zero if the message does not come back.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn the_embed_example_reads_back_what_it_published() {
    // target/<profile>/deps/<this test> → target/<profile>/examples/embed (`cargo test`
    // builds the examples before it runs the tests).
    let exe = std::env::current_exe().expect("the test's own path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(PathBuf::from);
    let example = dir
        .expect("a target directory")
        .join("examples")
        .join("embed");
    let mut child = Command::new(&example)
        .spawn()
        .unwrap_or_else(|error| panic!("running {}: {error}", example.display()));
    // A generous bound that only a hang reaches: the program itself takes milliseconds.
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for it") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the embed example hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "the embed example failed: {status}");
}
