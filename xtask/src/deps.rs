//! The dependency-direction check: the architecture of DESIGN.md, enforced.
//!
//! `kio ← moqx-net ← moqx-qmux ← moqx-runtime ← {moqx-tokio, moqx-uring}`, `moqx-net ← moqx-wasm`, and nothing
//! points the other way. Above all, the sans-IO core (`kio`, `moqx-net`) must not reach a
//! runtime, a QUIC stack or a socket, directly or through any transitive dependency. The
//! check reads `cargo tree` for the normal and build dependencies of each workspace crate
//! (dev-dependencies are free: a core crate's tests may use anything).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use crate::cmd::{Failure, cargo};

/// Crates that do I/O, schedule tasks or own sockets. The sans-IO core depends on none.
const RUNTIME_AND_IO: &[&str] = &[
    "tokio",
    "quiche",
    "io-uring",
    "socket2",
    "mio",
    "libc",
    "nix",
    "rustix",
    "async-std",
    "smol",
    "async-io",
    "polling",
    "web-sys",
    "wasm-bindgen-futures",
];

/// One workspace crate and the crates it must never depend on.
struct Rule {
    krate: &'static str,
    forbidden: &'static [&'static [&'static str]],
    why: &'static str,
    /// Exceptions: `(forbidden crate, the only crate it may be reached through)`.
    allowed_through: &'static [(&'static str, &'static str)],
}

/// `web-transport-proto` (the HTTP/3 and WebTransport framing the issue names) depends on
/// tokio for its optional async read/write helpers, with `io-util` only: no runtime, no
/// reactor. `moqx-runtime` calls only its synchronous encode/decode, so tokio reached
/// through it (and only through it) is allowed.
const WEBTRANSPORT_PROTO: &[(&str, &str)] = &[("tokio", "web-transport-proto")];

const DRIVERS: &[&str] = &["moqx-runtime", "moqx-tokio", "moqx-uring", "moqx-wasm"];

const RULES: &[Rule] = &[
    Rule {
        krate: "moqx-kio",
        forbidden: &[RUNTIME_AND_IO, &["moqx-net"], DRIVERS],
        why: "kio is runtime-free: no executor, no I/O, and below every other crate",
        allowed_through: &[],
    },
    Rule {
        krate: "moqx-net",
        forbidden: &[RUNTIME_AND_IO, DRIVERS],
        why: "moqx-net is the sans-IO core: drivers plug into it, never the reverse",
        allowed_through: &[],
    },
    Rule {
        krate: "moqx-auth",
        forbidden: &[&["tokio", "quiche", "io-uring", "socket2", "mio"], DRIVERS],
        why: "token authorization is policy over paths: a backend signs tokens with it, and \
              the fuzz build reaches it without the relay's runtime and sockets",
        allowed_through: &[],
    },
    Rule {
        krate: "moqx-webtransport-wire",
        forbidden: &[RUNTIME_AND_IO, &["moqx-net"], DRIVERS],
        why: "WebTransport's stream headers and capsules are parsed without I/O: the fuzz \
              build reaches them without a QUIC stack or TLS",
        allowed_through: WEBTRANSPORT_PROTO,
    },
    Rule {
        krate: "moqx-qmux",
        forbidden: &[RUNTIME_AND_IO, DRIVERS],
        why: "QMux is a state machine without I/O: the browser driver runs it too, so it \
              picks no runtime, no socket and no TLS",
        allowed_through: &[],
    },
    Rule {
        krate: "moqx-runtime",
        forbidden: &[&["tokio", "io-uring", "moqx-tokio", "moqx-uring", "moqx-wasm"]],
        why: "moqx-runtime is shared by every socket-owning driver, so it picks no runtime",
        allowed_through: WEBTRANSPORT_PROTO,
    },
    Rule {
        krate: "moqx-tokio",
        forbidden: &[&["io-uring", "moqx-uring", "moqx-wasm"]],
        why: "drivers do not depend on each other",
        allowed_through: &[],
    },
    Rule {
        krate: "moqx-uring",
        forbidden: &[&["tokio", "moqx-tokio", "moqx-wasm"]],
        why: "the io_uring driver runs its own loop (tokio only in its tests)",
        allowed_through: WEBTRANSPORT_PROTO,
    },
    Rule {
        krate: "moqx-wasm",
        forbidden: &[&[
            "tokio",
            "quiche",
            "io-uring",
            "socket2",
            "mio",
            "moqx-runtime",
            "moqx-tokio",
            "moqx-uring",
        ]],
        why: "the browser driver uses the browser's WebTransport, timers and executor",
        allowed_through: &[],
    },
];

/// Checks every rule whose crate exists in the workspace at `manifest`. Returns a report of
/// what was checked, or a failure listing every violation with the path that causes it.
pub(crate) fn check_workspace(manifest: &Path) -> Result<String, Failure> {
    let members = workspace_members(manifest)?;
    let mut report = String::new();
    let mut violations = Vec::new();
    for rule in RULES {
        if !members.contains(rule.krate) {
            let _ = writeln!(report, "  {:<22} not in the workspace yet", rule.krate);
            continue;
        }
        let tree = cargo_tree(manifest, rule.krate)?;
        let found = violations_in(rule, &tree);
        if found.is_empty() {
            let _ = writeln!(report, "  {:<22} ok", rule.krate);
        }
        violations.extend(found);
    }
    if violations.is_empty() {
        Ok(format!("dependency direction ok:\n{report}"))
    } else {
        Err(Failure(format!(
            "dependency-direction check failed:\n{}",
            violations.join("\n")
        )))
    }
}

/// The violations of `rule` in the output of `cargo tree --prefix depth` for its crate.
fn violations_in(rule: &Rule, tree: &str) -> Vec<String> {
    let forbidden: BTreeSet<&str> = rule
        .forbidden
        .iter()
        .flat_map(|set| set.iter().copied())
        .collect();
    let mut path: Vec<&str> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut violations = Vec::new();
    for line in tree.lines() {
        let Some((depth, name)) = parse_tree_line(line) else {
            continue;
        };
        path.truncate(depth);
        path.push(name);
        let parent = depth.checked_sub(1).and_then(|i| path.get(i)).copied();
        let excepted = rule
            .allowed_through
            .iter()
            .any(|&(krate, through)| krate == name && parent == Some(through));
        if depth > 0 && forbidden.contains(name) && !excepted && seen.insert(name) {
            violations.push(format!(
                "  {} must not depend on {name} ({}): {}",
                rule.krate,
                rule.why,
                path.join(" -> ")
            ));
        }
    }
    violations
}

/// `3tokio v1.0.0 (...)` → `(3, "tokio")`.
fn parse_tree_line(line: &str) -> Option<(usize, &str)> {
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    let depth = line.get(..digits)?.parse().ok()?;
    let name = line.get(digits..)?.split_whitespace().next()?;
    Some((depth, name))
}

fn cargo_tree(manifest: &Path, krate: &str) -> Result<String, Failure> {
    tree(
        manifest,
        &[
            "--package",
            krate,
            "--edges",
            "normal,build",
            "--prefix",
            "depth",
        ],
    )
}

fn workspace_members(manifest: &Path) -> Result<BTreeSet<String>, Failure> {
    // `cargo tree --workspace --depth 0` lists exactly the members, one per line, without
    // needing a JSON parser.
    let members = tree(
        manifest,
        &["--workspace", "--depth", "0", "--prefix", "none"],
    )?;
    Ok(members
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(String::from)
        .collect())
}

/// `cargo tree --manifest-path MANIFEST ARGS`, as text.
fn tree(manifest: &Path, args: &[&str]) -> Result<String, Failure> {
    let root = manifest.parent().unwrap_or(Path::new("."));
    let manifest = manifest.to_string_lossy();
    let mut full = vec!["tree", "--manifest-path", manifest.as_ref()];
    full.extend_from_slice(args);
    let output = cargo(root, &full).output()?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(name: &str) -> &'static Rule {
        RULES.iter().find(|r| r.krate == name).unwrap()
    }

    #[test]
    fn tokio_is_allowed_in_moq_runtime_only_through_web_transport_proto() {
        let through = "0moqx-runtime v0.1.0\n1web-transport-proto v0.6.3\n2tokio v1.0.0\n";
        assert!(violations_in(rule("moqx-runtime"), through).is_empty());
        let direct = "0moqx-runtime v0.1.0\n1web-transport-proto v0.6.3\n1tokio v1.0.0\n";
        let found = violations_in(rule("moqx-runtime"), direct);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("moqx-runtime -> tokio"), "{found:?}");
    }

    #[test]
    fn a_clean_tree_has_no_violations() {
        let tree = "0moqx-kio v0.1.0 (/w/kio)\n";
        assert!(violations_in(rule("moqx-kio"), tree).is_empty());
    }

    #[test]
    fn a_transitive_runtime_dependency_is_reported_with_its_path() {
        let tree = "0moqx-net v0.1.0 (/w/moq-net)\n1moqx-kio v0.1.0 (/w/kio)\n1helper v1.0.0\n2tokio v1.40.0\n3mio v1.0.0\n";
        let found = violations_in(rule("moqx-net"), tree);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].contains("moqx-net -> helper -> tokio"),
            "{found:?}"
        );
        assert!(
            found[1].contains("moqx-net -> helper -> tokio -> mio"),
            "{found:?}"
        );
    }

    #[test]
    fn the_core_may_not_point_at_a_driver() {
        let tree = "0moqx-kio v0.1.0\n1moqx-tokio v0.1.0\n";
        let found = violations_in(rule("moqx-kio"), tree);
        assert_eq!(found.len(), 1);
        assert!(found[0].contains("moqx-kio must not depend on moqx-tokio"));
    }

    /// The check itself, end to end: a scratch workspace whose `kio` depends on a crate named
    /// `tokio` makes the real `cargo tree` based check fail, naming the crate and the reason.
    #[test]
    fn the_check_fails_on_a_workspace_where_kio_depends_on_tokio() {
        let dir = scratch_dir("kio-depends-on-tokio");
        write(
            &dir.join("Cargo.toml"),
            "[workspace]\nresolver = \"2\"\nmembers = [\"kio\", \"tokio\"]\n",
        );
        write(
            &dir.join("kio/Cargo.toml"),
            "[package]\nname = \"moqx-kio\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\ntokio = { path = \"../tokio\" }\n",
        );
        write(&dir.join("kio/src/lib.rs"), "");
        write(
            &dir.join("tokio/Cargo.toml"),
            "[package]\nname = \"tokio\"\nversion = \"1.0.0\"\nedition = \"2021\"\n",
        );
        write(&dir.join("tokio/src/lib.rs"), "");

        let failure = check_workspace(&dir.join("Cargo.toml")).unwrap_err().0;
        assert!(
            failure.contains("moqx-kio must not depend on tokio"),
            "{failure}"
        );
        assert!(failure.contains("kio is runtime-free"), "{failure}");

        // And the same workspace without the dependency passes.
        write(
            &dir.join("kio/Cargo.toml"),
            "[package]\nname = \"moqx-kio\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        );
        let report = check_workspace(&dir.join("Cargo.toml")).unwrap();
        assert!(
            report
                .lines()
                .any(|line| line.split_whitespace().eq(["moqx-kio", "ok"])),
            "{report}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    fn scratch_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-{name}-{}", std::process::id()));
        std::fs::remove_dir_all(&dir).ok();
        dir
    }

    fn write(path: &Path, contents: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }
}
