//! Reading what callgrind counted: the instructions of each function (its own, not its
//! callees'), and the crate, library or C code each belongs to.
//!
//! Written by hand: the format is a few line kinds (callgrind's "Callgrind Format
//! Specification"), and `callgrind_annotate` prints for people, in a layout that changed
//! between valgrind releases.

use std::collections::HashMap;

/// Instructions by function, from one callgrind output file.
#[derive(Debug, Default)]
pub struct Profile {
    /// Every function with its own instructions, most first.
    pub functions: Vec<Function>,
}

/// One function's own instructions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// Its (demangled) name.
    pub name: String,
    /// Where its code lives: the executable or a shared library.
    pub object: String,
    /// Instructions executed in it, not counting its callees.
    pub instructions: u64,
}

impl Profile {
    /// Reads a callgrind output file's text (one event, `Ir`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut names: HashMap<String, String> = HashMap::new();
        let mut objects: HashMap<String, String> = HashMap::new();
        let mut own: HashMap<(String, String), u64> = HashMap::new();
        let mut object = String::new();
        let mut current: Option<(String, String)> = None;
        let mut after_calls = false;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("ob=") {
                object = resolve(&mut objects, rest);
            } else if let Some(rest) = line.strip_prefix("cob=") {
                resolve(&mut objects, rest);
            } else if let Some(rest) = line.strip_prefix("fn=") {
                current = Some((resolve(&mut names, rest), object.clone()));
            } else if let Some(rest) = line.strip_prefix("cfn=") {
                resolve(&mut names, rest);
            } else if line.starts_with("calls=") {
                // The next cost line is the call's inclusive cost: the callee's, not ours.
                after_calls = true;
            } else if line.starts_with(|c: char| c.is_ascii_digit() || "+-*".contains(c)) {
                if std::mem::take(&mut after_calls) {
                    continue;
                }
                let Some(function) = &current else {
                    return Err(format!("a cost line before any function: {line:?}"));
                };
                let cost = line
                    .split_ascii_whitespace()
                    .nth(1)
                    .map(str::parse::<u64>)
                    .transpose()
                    .map_err(|error| format!("a cost line {line:?}: {error}"))?
                    .unwrap_or(0);
                *own.entry(function.clone()).or_default() += cost;
            }
        }
        let mut functions: Vec<Function> = own
            .into_iter()
            .filter(|(_, instructions)| *instructions > 0)
            .map(|((name, object), instructions)| Function {
                name,
                object,
                instructions,
            })
            .collect();
        functions.sort_by(|a, b| {
            b.instructions
                .cmp(&a.instructions)
                .then_with(|| a.name.cmp(&b.name))
        });
        Ok(Self { functions })
    }

    /// Every instruction counted.
    pub fn total(&self) -> u64 {
        self.functions.iter().map(|f| f.instructions).sum()
    }

    /// Instructions by [`component`], most first.
    pub fn by_component(&self) -> Vec<(String, u64)> {
        let mut sums: HashMap<String, u64> = HashMap::new();
        for function in &self.functions {
            *sums
                .entry(component(&function.name, &function.object))
                .or_default() += function.instructions;
        }
        let mut sums: Vec<(String, u64)> = sums.into_iter().collect();
        sums.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        sums
    }
}

/// What a function belongs to: its crate (the first segment of its path), `malloc` or
/// `memcpy` (libc's allocator, libc's copies), `libc`, or `boringssl` (the C and C++ code
/// quiche's TLS and packet protection are built on: every other function without a Rust
/// path in the executable).
pub fn component(name: &str, object: &str) -> String {
    let base = object.rsplit('/').next().unwrap_or(object);
    if base.starts_with("libc.so") || base.starts_with("ld-linux") {
        let bare = name.trim_start_matches('_');
        let allocator = [
            "malloc",
            "free",
            "realloc",
            "calloc",
            "tcache",
            "unlink_chunk",
        ]
        .iter()
        .any(|part| bare.contains(part));
        return if allocator {
            "malloc".to_owned()
        } else if ["mem", "bcmp", "strlen"]
            .iter()
            .any(|m| bare.starts_with(m))
        {
            "memcpy".to_owned()
        } else {
            "libc".to_owned()
        };
    }
    if name.starts_with("__rust") || name.starts_with("__rdl") || name.starts_with("__rg_") {
        return "alloc".to_owned();
    }
    let mut path = name;
    loop {
        let trimmed = path
            .trim_start_matches(['<', '&', '*', '(', '[', ' '])
            .trim_start_matches("dyn ")
            .trim_start_matches("mut ")
            .trim_start_matches("const ");
        if trimmed.len() == path.len() {
            break;
        }
        path = trimmed;
    }
    // A C++ function's parameters may name a namespace: `f((anonymous namespace)::x)`.
    match path.split_once("::") {
        Some((first, _)) if first != "bssl" && !first.contains('(') => first
            .split(['<', ' ', '>'])
            .next()
            .unwrap_or(first)
            .to_owned(),
        _ => "boringssl".to_owned(),
    }
}

/// A name-compressed field (`(12) name` defines 12, `(12)` refers to it, a bare name is
/// itself) resolved through `table`.
fn resolve(table: &mut HashMap<String, String>, field: &str) -> String {
    let Some(rest) = field.strip_prefix('(') else {
        return field.to_owned();
    };
    let Some((id, name)) = rest.split_once(')') else {
        return field.to_owned();
    };
    let name = name.trim();
    if name.is_empty() {
        table.get(id).cloned().unwrap_or_else(|| field.to_owned())
    } else {
        table.insert(id.to_owned(), name.to_owned());
        name.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_costs_exclude_calls_and_follow_name_compression() {
        let text = "\
version: 1
events: Ir
ob=(1) /bin/relay
fl=(1) ???
fn=(1) quiche::Connection::send
0 100
+2 50
cob=(2) /usr/lib/libc.so.6
cfn=(2) malloc
calls=3 0
0 999
0 7
ob=(2)
fn=(2)
0 40
ob=(1)
fn=(3) <moqx_net::model::Track as core::clone::Clone>::clone
0 5
fn=(1)
0 3
fn=(4) aes_hw_ctr32_encrypt_blocks
* 11
fn=(5) aead_aes_gcm_sealv_impl((anonymous namespace)::aead_aes_gcm_ctx*)
0 2
";
        let profile = Profile::parse(text).unwrap();
        let own: Vec<(&str, u64)> = profile
            .functions
            .iter()
            .map(|f| (f.name.as_str(), f.instructions))
            .collect();
        assert_eq!(
            own,
            [
                ("quiche::Connection::send", 160),
                ("malloc", 40),
                ("aes_hw_ctr32_encrypt_blocks", 11),
                ("<moqx_net::model::Track as core::clone::Clone>::clone", 5),
                (
                    "aead_aes_gcm_sealv_impl((anonymous namespace)::aead_aes_gcm_ctx*)",
                    2
                ),
            ]
        );
        assert_eq!(profile.total(), 218);
        assert_eq!(
            profile.by_component(),
            [
                ("quiche".to_owned(), 160),
                ("malloc".to_owned(), 40),
                ("boringssl".to_owned(), 13),
                ("moqx_net".to_owned(), 5),
            ]
        );
    }

    #[test]
    fn a_cost_line_outside_a_function_is_an_error() {
        assert!(Profile::parse("events: Ir\n0 5\n").is_err());
    }
}
