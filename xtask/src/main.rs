//! Project automation, run as `cargo xtask <command>` (an alias in `.cargo/config.toml`).
//!
//! `cargo xtask test` is the one command CI runs: it installs missing system prerequisites,
//! then runs every check the project has. The other commands are its parts, for use while
//! working. No dependencies beyond std, so it builds in seconds on a fresh machine.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod bench;
mod cmd;
mod cycles;
mod demo;
mod demo_cluster;
mod deps;
mod fuzz;
mod prerequisites;
mod publishable;
mod web;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use cmd::{Failure, cargo};

const HELP: &str = "\
usage: cargo xtask <command>

commands:
  demo       the main job: a relay on loopback with a room of chat users through it, a summary;
             --cluster: the room across three linked relays, one of them killed mid-run
  test       everything CI runs: setup, fmt, deps, wasm, portable, types, clippy, page,
             tests (the browser tests among them), loom, docs, publishable, and every fuzz
             target briefly
  check      the fast static checks: fmt, deps, wasm, portable, clippy, docs
  setup      install missing system packages (cmake, libclang-dev) with apt-get as root
  fmt        cargo fmt --check
  deps       the dependency-direction check (the sans-IO core must not depend on I/O crates)
             and the module-cycle check (no module imports run both ways but the session
             machine's)
  wasm       clippy of kio, moqx-net and moqx-wasm for wasm32-unknown-unknown (the browser
             driver's target; the rustup target is added if missing)
  portable   cargo check of the portable crates (moqx-kio, moqx-net, moqx-qmux,
             moqx-webtransport-wire) for macOS and Windows (adds the rustup targets)
  publishable
             cargo package of every published crate, each built from its package alone
             with the rust-version the workspace declares (installs that toolchain)
  types      the browser package's TypeScript declarations, checked by compiling a consumer
             with tsc --strict --noImplicitAny (installs node-typescript if missing)
  package    builds the browser package (target/web/pkg) and packs it with npm pack
             (installs npm if missing); prints the bundle's size, gzipped
  web        builds the chat page (moqx-wasm through wasm-bindgen; installs the wasm32 target
             and wasm-bindgen-cli if missing) and serves it from a relay on loopback:
             http://127.0.0.1:4443/?room=lobby (--port N for another port)
  browser    the browser tests: the chat page in headless Chromium (installs chromium and
             chromium-driver with apt-get if missing) against the relay and the moqx CLI
  clippy     clippy on every target with warnings denied, in the std and loom builds
  page       installs Chromium and chromium-driver (apt-get) and builds the chat page for the
             browser tests (as `web` does, without serving it)
  unit       cargo test for the whole workspace (unit, integration and doc tests), with the
             browser tests (run `page` first)
  loom       the loom models of kio and moqx-net (RUSTFLAGS=\"--cfg loom\")
  doc        cargo doc with warnings denied
  bench      the benchmarks; add --instructions for callgrind instruction counts
  fuzz       every cargo-fuzz target (nightly) for --seconds N each (default 10) or
             --runs N executions each, with executions and corpus sizes; --target NAME
             for one
  suite      moq-bench's every profile against the relay (release build): a table, JSON
             lines and an SVG chart in target/moq-bench
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(command) = args.first() else {
        eprint!("{HELP}");
        return ExitCode::from(2);
    };
    let rest = &args[1..];
    let steps: &[&str] = match command.as_str() {
        "test" => &[
            "setup",
            "fmt",
            "deps",
            "wasm",
            "portable",
            "types",
            "clippy",
            "page",
            "unit",
            "loom",
            "doc",
            "publishable",
            "fuzz",
        ],
        "check" => &["fmt", "deps", "wasm", "portable", "clippy", "doc"],
        "setup" | "fmt" | "deps" | "wasm" | "portable" | "types" | "clippy" | "page" | "unit"
        | "loom" | "doc" | "publishable" | "bench" | "demo" | "suite" | "fuzz" | "web"
        | "browser" | "package" => std::slice::from_ref(command)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .leak(),
        "help" | "--help" | "-h" => {
            print!("{HELP}");
            return ExitCode::SUCCESS;
        }
        other => {
            eprintln!("unknown command {other:?}\n\n{HELP}");
            return ExitCode::from(2);
        }
    };

    let started = Instant::now();
    let mut timings = Vec::new();
    for step in steps {
        println!("\n==> xtask {step}");
        let step_started = Instant::now();
        let result = run_step(step, rest);
        timings.push((*step, step_started.elapsed()));
        if let Err(failure) = result {
            eprintln!("\nxtask {command}: step `{step}` failed: {failure}");
            return ExitCode::FAILURE;
        }
    }
    if steps.len() > 1 {
        println!("\n==> xtask {command}: all steps passed");
        for (step, elapsed) in &timings {
            println!("    {step:<8} {:>7.1} s", elapsed.as_secs_f64());
        }
        println!(
            "    {:<8} {:>7.1} s",
            "total",
            started.elapsed().as_secs_f64()
        );
    }
    ExitCode::SUCCESS
}

fn run_step(step: &str, args: &[String]) -> Result<(), Failure> {
    let root = workspace_root();
    match step {
        "setup" => prerequisites::ensure(),
        "fmt" => cargo(&root, &["fmt", "--all", "--check"]).run(),
        "deps" => {
            let report = deps::check_workspace(&root.join("Cargo.toml"))?;
            println!("{report}");
            let report = cycles::check_workspace(&root)?;
            println!("{report}");
            Ok(())
        }
        "wasm" => {
            // The sans-IO core must build for the browser (no clock, socket or thread of
            // its own), and the browser driver is linted as the browser runs it. The
            // target comes from rustup, like the toolchain.
            cmd::Command::new("rustup", &["target", "add", WASM_TARGET]).run()?;
            cargo(
                &root,
                &[
                    "clippy",
                    "-p",
                    "moqx-kio",
                    "-p",
                    "moqx-net",
                    "-p",
                    "moqx-wasm",
                    "--target",
                    WASM_TARGET,
                    "--",
                    "-D",
                    "warnings",
                ],
            )
            .run()
        }
        "clippy" => {
            // With the browser tests and the latency benchmark, which are behind a feature
            // (one build: the same features as `unit`).
            cargo(
                &root,
                &[
                    "clippy",
                    "--workspace",
                    "--all-targets",
                    "--features",
                    BROWSER_FEATURE,
                    "--",
                    "-D",
                    "warnings",
                ],
            )
            .run()?;
            loom_cargo(
                &root,
                &[
                    "clippy", "-p", "moqx-kio", "-p", "moqx-net", "--tests", "--", "-D", "warnings",
                ],
            )
            .run()
        }
        // Every test, the browser tests included: `page` built the page they load.
        "unit" => {
            // The tests run other packages' binaries (the `moqx` CLI, the relay), which
            // `cargo test` builds only for packages with integration tests; a test that
            // misses one builds it alone, whose different feature set rebuilds quiche,
            // BoringSSL and tokio (almost four minutes here). So every binary is built
            // first, in one build with the tests' features (`--tests` brings in the
            // dev-dependencies' features, as `cargo test` does), which the tests reuse.
            cargo(
                &root,
                &[
                    "build",
                    "--workspace",
                    "--bins",
                    "--examples",
                    "--tests",
                    "--features",
                    BROWSER_FEATURE,
                ],
            )
            .run()?;
            cargo(
                &root,
                &["test", "--workspace", "--features", BROWSER_FEATURE],
            )
            .env("MOQ_WEB_ROOT", &web::web_root(&root).to_string_lossy())
            .run()
        }
        "page" => web::prepare(&root).map(drop),
        "loom" => loom_cargo(
            &root,
            &[
                "test",
                "-p",
                "moqx-kio",
                "-p",
                "moqx-net",
                "--release",
                "--test",
                "loom",
            ],
        )
        // Each model sets its own bound if it needs a tighter one; this is the default.
        .env("LOOM_MAX_PREEMPTIONS", "3")
        .run(),
        // The tests' features, as clippy had: its checks of the dependencies are reused.
        "doc" => cargo(
            &root,
            &[
                "doc",
                "--workspace",
                "--no-deps",
                "--features",
                BROWSER_FEATURE,
            ],
        )
        .env("RUSTDOCFLAGS", "-D warnings")
        .run(),
        "bench" => bench::run(&root, args),
        "demo" => demo::run(&root, args),
        "suite" => bench::suite(&root, args),
        "fuzz" => fuzz::run(&root, args),
        "web" => web::serve(&root, args),
        "browser" => web::test(&root),
        "types" => web::check_types(&root),
        "portable" => publishable::check_portable(&root),
        "publishable" => publishable::check_packages(&root),
        "package" => web::package(&root),
        other => unreachable!("step {other} is listed in main"),
    }
}

/// The feature that compiles the browser tests and the page latency benchmark.
pub(crate) const BROWSER_FEATURE: &str = "moq-conformance/browser";

/// The browser's target: what `moqx-wasm` builds for.
pub(crate) const WASM_TARGET: &str = "wasm32-unknown-unknown";

/// A cargo command in the loom build: its own target directory, so that switching between
/// the std and loom builds does not rebuild everything each time.
fn loom_cargo(root: &std::path::Path, args: &[&str]) -> cmd::Command {
    let mut args: Vec<&str> = args.to_vec();
    let position = args.iter().position(|a| *a == "--").unwrap_or(args.len());
    let target_dir = root.join("target").join("loom");
    let target_dir = target_dir.to_string_lossy().into_owned();
    args.splice(position..position, ["--target-dir", target_dir.as_str()]);
    cargo(root, &args).env("RUSTFLAGS", "--cfg loom")
}

fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(PathBuf::from)
        .unwrap_or(manifest_dir)
}
