//! Whether others can depend on the crates: every published crate packaged and built from
//! its package alone with the Rust version it declares (`publishable`), and the portable
//! crates checked for targets that are not Linux (`portable`).

use std::path::{Path, PathBuf};

use crate::cmd::{Command, Failure, cargo};

/// The crates that claim to build anywhere: no sockets, no system calls of their own.
/// (`moqx-wasm` is checked for the browser by the `wasm` step; `moqx-auth` is portable too,
/// but `ring` needs the target's C toolchain to build, which this machine lacks.)
const PORTABLE: &[&str] = &[
    "moqx-kio",
    "moqx-net",
    "moqx-qmux",
    "moqx-webtransport-wire",
];

/// Targets the portable crates are checked for: a Unix that is not Linux, and Windows.
/// Checking needs only the target's standard library, not its linker.
const OTHER_TARGETS: &[&str] = &["x86_64-apple-darwin", "x86_64-pc-windows-msvc"];

/// `cargo package` for every crate that is published (every workspace member without
/// `publish = false`): each is packaged, unpacked and built from its package alone, in
/// dependency order, so a file outside its folder, a dependency without a version or a
/// missing README fails here and not at `cargo publish`. The build uses the `rustc` of
/// the workspace's `rust-version` (installed with rustup if missing), so the package
/// check is also the check that that version is true.
pub(crate) fn check_packages(root: &Path) -> Result<(), Failure> {
    let manifest = read(&root.join("Cargo.toml"))?;
    let msrv = rust_version(&manifest)
        .ok_or_else(|| Failure("Cargo.toml: no rust-version in [workspace.package]".into()))?;
    Command::new(
        "rustup",
        &["toolchain", "install", &msrv, "--profile", "minimal"],
    )
    .run()?;
    let which = Command::new("rustup", &["which", "rustc", "--toolchain", &msrv]).output()?;
    let rustc = String::from_utf8_lossy(&which.stdout).trim().to_owned();
    if !which.status.success() || rustc.is_empty() {
        return Err(Failure(format!("rustup found no rustc for Rust {msrv}")));
    }

    let mut unpublished = Vec::new();
    let mut published = Vec::new();
    for member in members(&manifest) {
        let text = read(&root.join(&member).join("Cargo.toml"))?;
        let name = package_name(&text).unwrap_or(member);
        if text.lines().any(|line| line.trim() == "publish = false") {
            unpublished.push(name);
        } else {
            published.push(name);
        }
    }
    let mut args = vec!["package", "--workspace", "--locked", "--allow-dirty"];
    for name in &unpublished {
        args.extend(["--exclude", name.as_str()]);
    }
    // Its own target directory: a different rustc would otherwise rebuild (and evict) the
    // workspace's own artifacts.
    let target = root.join("target").join("msrv");
    forget_earlier_packages(&target, &published)?;
    let target = target.to_string_lossy();
    args.extend(["--target-dir", &target]);
    println!(
        "Rust {msrv} ({rustc}); not published: {}",
        unpublished.join(", ")
    );
    cargo(root, &args).env("RUSTC", &rustc).run()
}

/// Removes what an earlier `cargo package` left of our own crates, so that each is built
/// from the package made now.
///
/// Cargo builds a crate's dependencies from a registry it makes of the packages (in
/// `target/…/package/tmp-registry`), and treats them as registry crates: it unpacks each
/// into `$CARGO_HOME/registry/src/<registry>/<name>-<version>` only if that folder is
/// missing, and never rebuilds a registry crate whose version it has built. Our version does
/// not change between commits, so without this a crate is checked against the code of its
/// dependency as it was in an earlier run at the same path (a function added since is "not
/// found"). No crate on crates.io bears these names with our version, so nothing else is
/// removed.
fn forget_earlier_packages(target: &Path, published: &[String]) -> Result<(), Failure> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cargo")))
        .ok_or_else(|| Failure("neither CARGO_HOME nor HOME is set".into()))?;
    // One folder per registry under `registry/src`, each with the crates unpacked from it;
    // one folder per built unit under `.fingerprint`.
    let mut folders: Vec<PathBuf> = children(&cargo_home.join("registry").join("src"));
    folders.push(target.join("debug").join(".fingerprint"));
    let stale = folders
        .iter()
        .flat_map(|folder| children(folder))
        .filter(|path| {
            path.file_name()
                .is_some_and(|name| is_package_of(&name.to_string_lossy(), published))
        });
    for path in stale {
        std::fs::remove_dir_all(&path)
            .map_err(|e| Failure(format!("removing {}: {e}", path.display())))?;
    }
    Ok(())
}

/// The entries of a folder (none if it cannot be read: nothing was left there).
fn children(folder: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(folder)
        .map(|entries| entries.flatten().map(|entry| entry.path()).collect())
        .unwrap_or_default()
}

/// Whether a folder name is `<name>-<version or hash>` for one of `names`.
fn is_package_of(folder: &str, names: &[String]) -> bool {
    names.iter().any(|name| {
        folder
            .strip_prefix(name.as_str())
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_alphanumeric()))
    })
}

/// `cargo check` of the portable crates for each of [`OTHER_TARGETS`] (the target's
/// standard library is added with rustup if missing).
pub(crate) fn check_portable(root: &Path) -> Result<(), Failure> {
    for target in OTHER_TARGETS {
        Command::new("rustup", &["target", "add", target]).run()?;
        let mut args = vec!["check", "--target", target];
        for krate in PORTABLE {
            args.extend(["-p", krate]);
        }
        args.extend(["--features", "moqx-net/test-runtime"]);
        cargo(root, &args).env("RUSTFLAGS", "-D warnings").run()?;
    }
    Ok(())
}

fn read(path: &Path) -> Result<String, Failure> {
    std::fs::read_to_string(path).map_err(|e| Failure(format!("reading {}: {e}", path.display())))
}

/// `rust-version = "X"` of a manifest.
fn rust_version(manifest: &str) -> Option<String> {
    value_of(manifest, "rust-version")
}

/// `name = "X"`: the first one, which is `[package]`'s.
fn package_name(manifest: &str) -> Option<String> {
    value_of(manifest, "name")
}

fn value_of(manifest: &str, key: &str) -> Option<String> {
    manifest.lines().find_map(|line| {
        let (name, value) = line.split_once('=')?;
        (name.trim() == key).then(|| value.trim().trim_matches('"').to_owned())
    })
}

/// The folders of `[workspace] members`.
fn members(manifest: &str) -> Vec<String> {
    let Some(start) = manifest.find("members = [") else {
        return Vec::new();
    };
    let list = &manifest[start + "members = [".len()..];
    let list = &list[..list.find(']').unwrap_or(list.len())];
    list.split(',')
        .map(|entry| entry.trim().trim_matches('"').to_owned())
        .filter(|entry| !entry.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = "[workspace]\nmembers = [\n    \"kio\",\n    \"moq-net\",\n]\n\n\
                            [workspace.package]\nrust-version = \"1.88\"\n";

    #[test]
    fn only_folders_of_our_packages_are_forgotten() {
        let ours = ["moqx-net".to_owned(), "moqx-runtime".to_owned()];
        assert!(is_package_of("moqx-net-0.1.0", &ours));
        assert!(is_package_of("moqx-runtime-5f2a9c1e", &ours));
        assert!(!is_package_of("moqx-netx-0.1.0", &ours));
        assert!(!is_package_of("moqx-net", &ours));
        assert!(!is_package_of("quiche-0.24.6", &ours));
    }

    #[test]
    fn the_members_and_the_rust_version_are_read_from_the_manifest() {
        assert_eq!(members(MANIFEST), ["kio", "moq-net"]);
        assert_eq!(rust_version(MANIFEST).as_deref(), Some("1.88"));
        assert_eq!(
            package_name("[package]\nname = \"moqx-kio\"\n").as_deref(),
            Some("moqx-kio")
        );
    }

    /// The real workspace: its own manifest names a rust-version, and the members this
    /// step reads include the core.
    #[test]
    fn the_workspace_manifest_parses() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let manifest = read(&root.join("Cargo.toml")).unwrap();
        assert!(rust_version(&manifest).is_some());
        assert!(members(&manifest).iter().any(|m| m == "moq-net"));
    }
}
