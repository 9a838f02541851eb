//! The import graph of `src/` (used by `tests/it/tidy.rs`): every `crate::`, `super::` and
//! `self::` path in `use` items and inline paths, resolved to the module file that defines
//! it. `#[cfg(test)]` modules are tests, not structure, and are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module path (`["tools", "files", "edits"]`); the crate root is empty.
pub type Module = Vec<String>;

/// The layer order, lowest first (docs/architecture.md, "Layers"). A top-level module may
/// import modules of lower layers only: never one of its own layer, never a higher one.
pub const LAYERS: &[&[&str]] = &[
    &[
        "alloc",
        "build_info",
        "deadline",
        "process",
        "fsutil",
        "hex",
        "lru",
        "sandbox",
    ],
    &["wire", "jsonrpc", "shell", "codex"],
    &["ipc", "store", "usage", "temporary"],
    &["guardian"],
    &["runtime", "daemon"],
    &["session", "tasks", "history", "requests"],
    &["files"],
    &["edit", "codemap"],
    &["tools"],
    &["config"],
    &["mcp", "operator"],
    &["adapter"],
];

pub fn layer_of(top: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&top))
}

fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut m: Module = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(m.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        m.pop();
    }
    m
}

fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |i| &after[i..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |i| &after[i + 2..]);
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// `text` without its inline `#[cfg(test)] mod … { … }` blocks (brace-matched, so code
/// after a test module still counts).
fn without_test_modules(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..i]);
        let after = rest[i + "#[cfg(test)]".len()..].trim_start();
        let is_inline_mod = after.starts_with("mod ")
            && after
                .find(['{', ';'])
                .is_some_and(|j| after.as_bytes()[j] == b'{');
        if !is_inline_mod {
            out.push_str("#[cfg(test)]");
            rest = &rest[i + "#[cfg(test)]".len()..];
            continue;
        }
        let open = after.find('{').unwrap();
        let mut depth = 0usize;
        let mut end = after.len();
        for (j, c) in after.char_indices().skip(open) {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = j + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Expand a use tree (`a::{b, c::{d, e}}`) into paths.
fn expand_use(tree: &str, prefix: &str, out: &mut Vec<String>) {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        for part in tree.split(',') {
            let p = part.split(" as ").next().unwrap().trim();
            if !p.is_empty() {
                out.push(format!("{prefix}{p}"));
            }
        }
        return;
    };
    let head = &tree[..open];
    let (mut depth, mut start) = (0usize, open + 1);
    let mut parts = Vec::new();
    for (i, c) in tree.char_indices().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    parts.push(&tree[start..i]);
                    break;
                }
            }
            ',' if depth == 1 => {
                parts.push(&tree[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    for p in parts {
        if !p.trim().is_empty() {
            expand_use(p, &format!("{prefix}{head}"), out);
        }
    }
}

/// Paths named in `text` (`use` trees and inline `crate::`/`super::`/`self::` paths).
fn paths_in(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("use ") {
        let before = rest[..i].chars().last();
        rest = &rest[i + 4..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let end = rest.find(';').unwrap_or(rest.len());
        let tree: String = rest[..end].split_whitespace().collect();
        expand_use(&tree, "", &mut out);
    }
    let bytes = text.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        for (i, _) in text.match_indices(start) {
            if i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_') {
                continue;
            }
            let end = text[i..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .map_or(text.len(), |e| i + e);
            out.push(text[i..end].trim_end_matches(':').to_string());
        }
    }
    out
}

/// Every module and the modules it imports.
pub fn graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut files = Vec::new();
    collect(src, src, &mut files);
    let modules: BTreeMap<Module, String> = files
        .into_iter()
        .map(|(m, text)| (m, without_test_modules(&strip_comments(&text))))
        .collect();
    let resolve = |segs: &[String]| -> Option<Module> {
        (1..=segs.len())
            .rev()
            .map(|k| segs[..k].to_vec())
            .find(|m| modules.contains_key(m))
    };
    let mut edges = BTreeMap::new();
    for (m, text) in &modules {
        let mut targets = BTreeSet::new();
        for p in paths_in(text) {
            let segs: Vec<String> = p.split("::").map(str::to_string).collect();
            let full: Vec<String> = match segs[0].as_str() {
                "crate" => segs[1..].to_vec(),
                "self" => m.iter().chain(&segs[1..]).cloned().collect(),
                "super" => {
                    let ups = segs.iter().take_while(|s| *s == "super").count();
                    let keep = m.len().saturating_sub(ups);
                    m[..keep].iter().chain(&segs[ups..]).cloned().collect()
                }
                _ => continue,
            };
            if let Some(t) = resolve(&full).filter(|t| t != m && !t.is_empty()) {
                targets.insert(t);
            }
        }
        edges.insert(m.clone(), targets);
    }
    edges
}

fn collect(src: &Path, dir: &Path, out: &mut Vec<(Module, String)>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            if p != src.join("bin") {
                collect(src, &p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs")
            && p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                n != "build.rs" && !n.ends_with("tests.rs")
            })
        {
            out.push((module_of(src, &p), std::fs::read_to_string(&p).unwrap()));
        }
    }
}

/// Strongly connected components with more than one member (Tarjan).
pub fn circles<T: Ord + Clone>(graph: &BTreeMap<T, BTreeSet<T>>) -> Vec<Vec<T>> {
    struct St<T> {
        index: BTreeMap<T, usize>,
        low: BTreeMap<T, usize>,
        stack: Vec<T>,
        on: BTreeSet<T>,
        out: Vec<Vec<T>>,
    }
    fn visit<T: Ord + Clone>(v: &T, g: &BTreeMap<T, BTreeSet<T>>, st: &mut St<T>) {
        let n = st.index.len();
        st.index.insert(v.clone(), n);
        st.low.insert(v.clone(), n);
        st.stack.push(v.clone());
        st.on.insert(v.clone());
        for w in g.get(v).into_iter().flatten() {
            if !st.index.contains_key(w) {
                visit(w, g, st);
                let lw = st.low[w];
                let lv = st.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if st.on.contains(w) {
                let iw = st.index[w];
                let lv = st.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if st.low[v] == st.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = st.stack.pop().unwrap();
                st.on.remove(&w);
                let done = &w == v;
                comp.push(w);
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                st.out.push(comp);
            }
        }
    }
    let mut st = St {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !st.index.contains_key(v) {
            visit(v, graph, &mut st);
        }
    }
    st.out
}
