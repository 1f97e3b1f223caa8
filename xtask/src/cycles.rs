//! The module-cycle check: inside each library crate, module imports run one way, except
//! where a cycle is structural and named here.
//!
//! A module's edges are the modules of the crate it names in `use crate::…`,
//! `use super::…` and inline `crate::…`/`super::…` paths (comments and a file's trailing
//! `#[cfg(test)] mod tests` left out; a module reaching its own ancestors is not counted,
//! as a child module belongs to its parent). A strongly connected set of two or more
//! modules is a cycle; the check fails on any but the allowed ones.
//!
//! Allowed: moqx-net's session machine. Its sub-machines push requests that name each
//! other's types, and `Runtime::spawn` takes a `SessionMachine`: moving the shared types
//! to files of their own keeps the cycle (design review 2026-12-02, §0).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::cmd::Failure;

/// The crates checked, by folder.
const CRATES: &[&str] = &[
    "kio",
    "moq-net",
    "moq-auth",
    "moq-qmux",
    "moq-webtransport-wire",
    "moq-runtime",
    "moq-tokio",
    "moq-uring",
    "moq-wasm",
    "moq-relay",
    "moq-cli",
    "moq-bench",
    "moq-meter",
];

/// A cycle is allowed if every module in it is one of these (folder, module prefix).
const ALLOWED: &[(&str, &[&str])] = &[("moq-net", &["runtime", "session"])];

/// Checks every crate of [`CRATES`] under `root`; the report names each crate's result.
pub(crate) fn check_workspace(root: &Path) -> Result<String, Failure> {
    let mut report = String::new();
    let mut failures = Vec::new();
    for krate in CRATES {
        let src = root.join(krate).join("src");
        if !src.is_dir() {
            continue;
        }
        let graph = graph(&src)?;
        let (allowed, cycles): (Vec<_>, Vec<_>) = cycles(&graph)
            .into_iter()
            .partition(|cycle| allowed(krate, cycle));
        if cycles.is_empty() {
            let allowed = allowed
                .iter()
                .map(|cycle| cycle.join(" <-> "))
                .collect::<Vec<_>>();
            if allowed.is_empty() {
                report.push_str(&format!("  {krate:<22} no import cycle\n"));
            } else {
                report.push_str(&format!(
                    "  {krate:<22} only the allowed: {}\n",
                    allowed.join("; ")
                ));
            }
        }
        for cycle in cycles {
            failures.push(format!("{krate}: {}", cycle.join(" <-> ")));
        }
    }
    if failures.is_empty() {
        Ok(report)
    } else {
        Err(Failure(format!(
            "modules that import each other (make the imports run one way: move what both \
             need into a module of its own, or make one the other's child):\n  {}",
            failures.join("\n  ")
        )))
    }
}

fn allowed(krate: &str, cycle: &[String]) -> bool {
    ALLOWED.iter().any(|(name, prefixes)| {
        *name == krate
            && cycle.iter().all(|module| {
                prefixes
                    .iter()
                    .any(|prefix| module == prefix || module.starts_with(&format!("{prefix}::")))
            })
    })
}

/// Each module of the crate whose source is `src`, with the modules it imports.
fn graph(src: &Path) -> Result<BTreeMap<String, BTreeSet<String>>, Failure> {
    let mut files = Vec::new();
    collect(src, &mut files)?;
    let modules: BTreeMap<String, PathBuf> = files
        .into_iter()
        .map(|file| (module_of(src, &file), file))
        .collect();
    let mut graph = BTreeMap::new();
    for (module, file) in &modules {
        let text = std::fs::read_to_string(file)
            .map_err(|e| Failure(format!("reading {}: {e}", file.display())))?;
        let edges = references(&code_of(&text))
            .into_iter()
            .filter_map(|path| resolve(module, &path, &modules))
            .filter(|target| target != module && !is_ancestor(target, module))
            .collect();
        graph.insert(module.clone(), edges);
    }
    Ok(graph)
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), Failure> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| Failure(format!("reading {}: {e}", dir.display())))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, files)?;
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    Ok(())
}

/// `a/b.rs` and `a/b/mod.rs` are `a::b`; `lib.rs` and `main.rs` the crate root, "".
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = relative
        .components()
        .map(|part| part.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts.join("::")
}

/// The file's code: comment lines and a trailing test module left out.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::…`, `super::…` and `self::…` path in `code`, with `use` groups
/// (`use super::{a, b::C}`) expanded.
fn references(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let bytes = code.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(offset) = code[from..].find(start) {
            let at = from + offset;
            from = at + start.len();
            // A whole word: not `my_crate::` or `$crate::`.
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || b"_$".contains(&bytes[at - 1])) {
                continue;
            }
            let rest = &code[at..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let path = rest[..end].trim_end_matches(':').to_owned();
            if rest[end..].starts_with('{') && rest[..end].ends_with("::") {
                let group_end = rest[end..].find('}').map_or(rest.len(), |at| end + at);
                for item in rest[end + 1..group_end].split(',') {
                    let item = item.trim().split(" as ").next().unwrap_or("").trim();
                    if !item.is_empty() {
                        paths.push(format!("{path}::{item}"));
                    }
                }
            }
            paths.push(path);
        }
    }
    paths
}

/// The module of the crate that `path`, written in `module`, names: its longest prefix
/// that is a module.
fn resolve(module: &str, path: &str, modules: &BTreeMap<String, PathBuf>) -> Option<String> {
    let mut segments: Vec<&str> = path.split("::").collect();
    let mut base: Vec<&str> = if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").collect()
    };
    match segments.first() {
        Some(&"crate") => base.clear(),
        Some(&"super") => {
            base.pop();
        }
        Some(&"self") => {}
        _ => return None,
    }
    segments.remove(0);
    while segments.first() == Some(&"super") {
        base.pop();
        segments.remove(0);
    }
    (0..=segments.len())
        .rev()
        .map(|taken| {
            base.iter()
                .chain(&segments[..taken])
                .copied()
                .collect::<Vec<_>>()
                .join("::")
        })
        .find(|candidate| !candidate.is_empty() && modules.contains_key(candidate))
}

fn is_ancestor(ancestor: &str, module: &str) -> bool {
    module.starts_with(&format!("{ancestor}::"))
}

/// The strongly connected sets of two or more modules (Tarjan's algorithm).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, node: &'g str) {
            let order = self.index.len();
            self.index.insert(node, order);
            self.low.insert(node, order);
            self.stack.push(node);
            self.on_stack.insert(node);
            for next in self.graph.get(node).into_iter().flatten() {
                let next = next.as_str();
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut set = Vec::new();
                while let Some(member) = self.stack.pop() {
                    self.on_stack.remove(member);
                    set.push(member.to_owned());
                    if member == node {
                        break;
                    }
                }
                if set.len() > 1 {
                    set.sort();
                    self.found.push(set);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node.as_str()) {
            walk.visit(node);
        }
    }
    walk.found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-cycles-{name}-{}", std::process::id()));
        std::fs::remove_dir_all(&dir).ok();
        for (path, text) in files {
            let path = dir.join("src").join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn two_modules_importing_each_other_are_a_cycle_and_a_child_reaching_its_parent_is_not() {
        let dir = scratch(
            "pair",
            &[
                ("lib.rs", "mod a;\nmod b;\n"),
                ("a/mod.rs", "use crate::b::Thing;\nmod inner;\n"),
                (
                    "a/inner.rs",
                    "use super::Other;\n// use crate::b::Commented;\n",
                ),
                (
                    "b.rs",
                    "pub struct Thing;\nfn f() -> crate::a::Other { todo() }\n",
                ),
            ],
        );
        let graph = graph(&dir.join("src")).unwrap();
        assert_eq!(cycles(&graph), vec![vec!["a".to_owned(), "b".to_owned()]]);
        assert!(graph["a::inner"].is_empty(), "{graph:?}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn use_groups_are_expanded() {
        let found = references("use super::{alpha::A, beta};\nlet x = crate::gamma::f();");
        for path in ["super::alpha::A", "super::beta", "crate::gamma::f"] {
            assert!(found.iter().any(|p| p == path), "{path} in {found:?}");
        }
    }

    /// The workspace itself: no cycle but the allowed one.
    #[test]
    fn the_workspace_has_no_cycle_but_the_session_machines() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        check_workspace(&root).unwrap();
    }
}
