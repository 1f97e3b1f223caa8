//! What the moq-bench tests share.

use std::path::PathBuf;
use std::process::Command;

/// The relay binary beside this package's, built if it is not there yet (a
/// `cargo test -p moq-bench` alone does not build other packages' binaries).
pub(crate) fn relay_binary() -> PathBuf {
    let relay = PathBuf::from(env!("CARGO_BIN_EXE_moq-bench")).with_file_name("moqx-relay");
    if !relay.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let built = Command::new(cargo)
            .args(["build", "-p", "moqx-relay", "--bin", "moqx-relay"])
            .status()
            .expect("cargo runs");
        assert!(built.success(), "building moqx-relay");
    }
    relay
}
