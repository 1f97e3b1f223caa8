//! The browser side: building the chat page (`moqx-wasm` for wasm32, through wasm-bindgen)
//! and serving it from a relay (`cargo xtask web`), and the browser tests
//! (`cargo xtask browser`, part of `cargo xtask test`).

use std::path::{Path, PathBuf};

use crate::WASM_TARGET;
use crate::cmd::{Command, Failure, cargo};

/// Where the built page goes: the files of `moq-wasm/web/`, and the package in `pkg/`.
pub(crate) fn web_root(root: &Path) -> PathBuf {
    root.join("target").join("web")
}

/// Builds the page into [`web_root`]: the wasm32 target and a wasm-bindgen CLI of the
/// version the lockfile pins are installed first if missing.
pub(crate) fn build(root: &Path) -> Result<PathBuf, Failure> {
    Command::new("rustup", &["target", "add", WASM_TARGET]).run()?;
    let bindgen = ensure_wasm_bindgen(root)?;
    cargo(
        root,
        &[
            "build",
            "--release",
            "-p",
            "moqx-wasm",
            "--lib",
            "--target",
            WASM_TARGET,
        ],
    )
    .run()?;
    let module = root
        .join("target")
        .join(WASM_TARGET)
        .join("release")
        .join("moqx_wasm.wasm");
    let out = web_root(root);
    let pkg = out.join("pkg");
    let module = module.to_string_lossy().into_owned();
    let pkg_arg = pkg.to_string_lossy().into_owned();
    Command::new(
        bindgen,
        &["--target", "web", "--out-dir", &pkg_arg, &module],
    )
    .run()?;
    // The package: the generated module beside its entry point, types and error class
    // (`moq-wasm/package/`). wasm-bindgen's own declarations say `any` where ours type.
    copy_files(&root.join("moq-wasm").join("package"), &pkg)?;
    let _ = std::fs::remove_file(pkg.join("moqx_wasm.d.ts"));
    copy_files(&root.join("moq-wasm").join("web"), &out)?;
    println!("the chat page is built in {}", out.display());
    Ok(out)
}

/// Copies the files (not the folders) of `from` into `to`.
fn copy_files(from: &Path, to: &Path) -> Result<(), Failure> {
    let entries =
        std::fs::read_dir(from).map_err(|e| Failure(format!("reading {}: {e}", from.display())))?;
    for entry in entries.flatten() {
        if !entry.file_type().is_ok_and(|kind| kind.is_file()) {
            continue;
        }
        let target = to.join(entry.file_name());
        std::fs::copy(entry.path(), &target)
            .map_err(|e| Failure(format!("copying to {}: {e}", target.display())))?;
    }
    Ok(())
}

/// `cargo xtask types`: the package's declarations against a consumer that uses all of
/// them (and misuses some, which must fail), with `tsc --strict --noImplicitAny`.
pub(crate) fn check_types(root: &Path) -> Result<(), Failure> {
    crate::prerequisites::ensure_packages(crate::prerequisites::TYPES)?;
    let project = root
        .join("moq-wasm")
        .join("package")
        .join("check")
        .join("tsconfig.json");
    let project = project.to_string_lossy().into_owned();
    Command::new("tsc", &["--version"]).run()?;
    Command::new("tsc", &["-p", &project]).run()?;
    println!("the package's declarations type-check a strict consumer");
    Ok(())
}

/// `cargo xtask package`: the package built and packed (`npm pack`), and its size.
pub(crate) fn package(root: &Path) -> Result<(), Failure> {
    crate::prerequisites::ensure_packages(crate::prerequisites::NPM)?;
    let out = build(root)?;
    let pkg = out.join("pkg");
    let destination = out.to_string_lossy().into_owned();
    Command::new("npm", &["pack", "--pack-destination", &destination])
        .current_dir(&pkg)
        .run()?;
    let mut total = (0, 0);
    for file in [
        "moqx_wasm_bg.wasm",
        "moqx_wasm.js",
        "index.js",
        "moq_error.js",
    ] {
        let bytes =
            std::fs::read(pkg.join(file)).map_err(|e| Failure(format!("reading {file}: {e}")))?;
        let gzipped = gzipped_len(&pkg.join(file))?;
        println!(
            "  {file:<18} {:>9} bytes, {gzipped:>8} gzipped",
            bytes.len()
        );
        total = (total.0 + bytes.len(), total.1 + gzipped);
    }
    println!(
        "  {:<18} {:>9} bytes, {:>8} gzipped",
        "the bundle", total.0, total.1
    );
    Ok(())
}

/// The size of `file` compressed with `gzip -9` (Debian's, always present).
fn gzipped_len(file: &Path) -> Result<usize, Failure> {
    let output = std::process::Command::new("gzip")
        .args(["-9", "-c"])
        .arg(file)
        .output()
        .map_err(|e| Failure(format!("running gzip: {e}")))?;
    Ok(output.stdout.len())
}

/// `cargo xtask web`: builds the page and the relay, and serves the page from a relay on
/// loopback until interrupted.
pub(crate) fn serve(root: &Path, args: &[String]) -> Result<(), Failure> {
    crate::prerequisites::ensure()?;
    let port = match args.iter().position(|a| a == "--port") {
        Some(i) => args
            .get(i + 1)
            .and_then(|p| p.parse::<u16>().ok())
            .ok_or_else(|| Failure("--port needs a port number".into()))?,
        None => 4443,
    };
    let out = build(root)?;
    cargo(root, &["build", "--release", "-p", "moqx-relay"]).run()?;
    let relay = root.join("target").join("release").join("moqx-relay");
    let bind = format!("127.0.0.1:{port}");
    println!(
        "\nthe chat page: http://127.0.0.1:{port}/?room=lobby  (open it in two windows; \
         Chromium or another browser with WebTransport)\nCtrl-C stops the relay.\n"
    );
    let out = out.to_string_lossy().into_owned();
    Command::new(relay, &["--bind", &bind, "--web-root", &out]).run()
}

/// What the browser tests need: Chromium and its WebDriver installed, and the page built.
/// (The relay and the CLI they run are built by the test build itself: building them here
/// would resolve features without the dev-dependencies, and build everything twice.)
pub(crate) fn prepare(root: &Path) -> Result<PathBuf, Failure> {
    crate::prerequisites::ensure_packages(crate::prerequisites::BROWSER)?;
    build(root)
}

/// `cargo xtask browser`: the browser tests alone, in headless Chromium against the relay.
pub(crate) fn test(root: &Path) -> Result<(), Failure> {
    let out = prepare(root)?;
    let out = out.to_string_lossy().into_owned();
    cargo(
        root,
        &[
            "test",
            "--workspace",
            "--features",
            crate::BROWSER_FEATURE,
            "--test",
            "browser",
        ],
    )
    .env("MOQ_WEB_ROOT", &out)
    .run()
}

/// The `wasm-bindgen` CLI whose version is the `wasm-bindgen` crate's in Cargo.lock (the
/// two must match exactly), installed with `cargo install` if it is missing or another
/// version.
fn ensure_wasm_bindgen(root: &Path) -> Result<PathBuf, Failure> {
    let version = locked_version(root, "wasm-bindgen")?;
    let installed = std::process::Command::new("wasm-bindgen")
        .arg("--version")
        .output()
        .ok()
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned());
    let wanted = format!("wasm-bindgen {version}");
    if installed.as_deref() != Some(wanted.as_str()) {
        println!(
            "installing wasm-bindgen-cli {version} (found: {}); this takes a few minutes once",
            installed.as_deref().unwrap_or("none")
        );
        cargo(
            root,
            &[
                "install",
                "wasm-bindgen-cli",
                "--version",
                &version,
                "--force",
            ],
        )
        .run()?;
    }
    Ok(PathBuf::from("wasm-bindgen"))
}

/// The version of `package` in the workspace's Cargo.lock.
fn locked_version(root: &Path, package: &str) -> Result<String, Failure> {
    let lock = root.join("Cargo.lock");
    let text = std::fs::read_to_string(&lock)
        .map_err(|e| Failure(format!("reading {}: {e}", lock.display())))?;
    let name = format!("name = \"{package}\"");
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() == name
            && let Some(version) = lines
                .next()
                .and_then(|line| line.trim().strip_prefix("version = \""))
                .and_then(|rest| rest.strip_suffix('"'))
        {
            return Ok(version.to_owned());
        }
    }
    Err(Failure(format!("{package} is not in {}", lock.display())))
}
