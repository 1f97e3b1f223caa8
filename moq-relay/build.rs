//! Sets `cfg(uring)` where the io_uring driver is built in, and records the commit the relay is built from, for `moq_relay_build_info`:
//! `MOQ_BUILD_COMMIT` if set (a container build without `.git`), else `git rev-parse`, else
//! `unknown`.

use std::process::Command;

fn main() {
    // `cfg(uring)`: the io_uring driver is in this build (the `uring` feature, on Linux).
    println!("cargo::rustc-check-cfg=cfg(uring)");
    if std::env::var_os("CARGO_FEATURE_URING").is_some()
        && std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
    {
        println!("cargo:rustc-cfg=uring");
    }
    println!("cargo:rerun-if-env-changed=MOQ_BUILD_COMMIT");
    for path in ["../.git/HEAD", "../.git/refs/heads"] {
        if std::path::Path::new(path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    let commit = std::env::var("MOQ_BUILD_COMMIT")
        .ok()
        .filter(|commit| !commit.is_empty())
        .or_else(|| {
            let output = Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .output()
                .ok()?;
            output
                .status
                .success()
                .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        })
        .filter(|commit| commit.chars().all(|c| c.is_ascii_alphanumeric()))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=MOQ_BUILD_COMMIT={commit}");
}
