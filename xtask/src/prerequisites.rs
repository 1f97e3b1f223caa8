//! System packages the build needs beyond the Rust toolchain, installed when missing.
//!
//! The quiche build (BoringSSL) needs `cmake`, and its bindings need `libclang`. On a fresh
//! Debian machine of this project's kind neither is present. As root we install them with
//! apt-get; otherwise we stop with one message naming the packages.

use std::path::Path;

use crate::cmd::{Command, Failure};

/// A system package and how to tell whether it is present.
pub(crate) struct Package {
    name: &'static str,
    present: fn() -> bool,
}

/// What every build needs (quiche's BoringSSL and its bindings).
pub(crate) const BUILD: &[Package] = &[
    Package {
        name: "cmake",
        present: || program_runs("cmake"),
    },
    Package {
        name: "libclang-dev",
        present: libclang_present,
    },
];

/// What the browser tests need: Debian's Chromium and its WebDriver.
pub(crate) const BROWSER: &[Package] = &[
    Package {
        name: "chromium",
        present: || program_runs("chromium"),
    },
    Package {
        name: "chromium-driver",
        present: || program_runs("chromedriver"),
    },
];

/// What the package's type check needs: TypeScript's compiler (Debian's, with Node).
pub(crate) const TYPES: &[Package] = &[Package {
    name: "node-typescript",
    present: || program_runs("tsc"),
}];

/// What `cargo xtask package` needs besides: npm, for `npm pack`.
pub(crate) const NPM: &[Package] = &[Package {
    name: "npm",
    present: || program_runs("npm"),
}];

/// Installs what the build needs, if it is missing.
pub(crate) fn ensure() -> Result<(), Failure> {
    ensure_packages(BUILD)
}

/// Installs `packages` that are missing (as root, with apt-get), or says how to.
pub(crate) fn ensure_packages(packages: &[Package]) -> Result<(), Failure> {
    let missing = missing_packages(packages);
    if missing.is_empty() {
        println!("system prerequisites present: {}", names(packages));
        return Ok(());
    }
    let list = missing.join(" ");
    if !is_root() || !program_runs("apt-get") {
        return Err(Failure(format!(
            "missing system packages: {list}. Install them (Debian/Ubuntu: \
             `sudo apt-get install -y {list}`) and run this command again."
        )));
    }
    println!("installing missing system packages: {list}");
    Command::new("apt-get", &["update", "-qq"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .run()?;
    let mut args = vec!["install", "-y", "-qq", "--no-install-recommends"];
    args.extend(&missing);
    Command::new("apt-get", &args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .run()?;
    let still_missing = missing_packages(packages);
    if still_missing.is_empty() {
        Ok(())
    } else {
        Err(Failure(format!(
            "apt-get finished but these packages are still not usable: {}",
            still_missing.join(" ")
        )))
    }
}

/// The packages that are not usable right now.
fn missing_packages(packages: &[Package]) -> Vec<&'static str> {
    packages
        .iter()
        .filter(|package| !(package.present)())
        .map(|package| package.name)
        .collect()
}

fn names(packages: &[Package]) -> String {
    packages
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

fn program_runs(program: &str) -> bool {
    std::process::Command::new(program)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// bindgen finds `libclang.so` under an LLVM prefix; `LIBCLANG_PATH` overrides the search.
fn libclang_present() -> bool {
    if let Some(path) = std::env::var_os("LIBCLANG_PATH") {
        return has_libclang(Path::new(&path));
    }
    let Ok(entries) = std::fs::read_dir("/usr/lib") else {
        return false;
    };
    entries
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("llvm-"))
        .any(|entry| has_libclang(&entry.path().join("lib")))
}

/// The unversioned `libclang.so` is what `libclang-dev` adds and what bindgen loads first.
fn has_libclang(dir: &Path) -> bool {
    dir.join("libclang.so").exists()
}

fn is_root() -> bool {
    // The effective uid, read from /proc: no libc dependency for one number.
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|line| line.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            == Some("0")
    })
}
