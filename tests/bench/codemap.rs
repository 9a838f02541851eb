//! `cargo bench --bench codemap` (`make bench`): CodeMap on the real release binary
//! (embedded runtime: CodeMap needs no shell). The outline of a 10,000-line file; the
//! repository map of a generated 5,000-file tree cold (a fresh server process each time,
//! so nothing is cached but the OS page cache) and warm (the same server again); the
//! references of a name across that tree, cold and warm.
//!
//! A report, not a gate (see `report.rs`): figures with targets and PASS/MISS, one JSON
//! line, exit 0 on a MISS; it panics only when the server answers wrongly.

use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

#[path = "report.rs"]
mod report;
use report::{Report, Samples};
#[path = "server.rs"]
mod server;
use server::{Client, Sandbox};

const OUTLINE_CALLS: usize = 100;
const COLD_RUNS: usize = 7;
const WARM_CALLS: usize = 50;
const WARMUP: usize = 3;

const TREE_DIRS: usize = 50;
const FILES_PER_DIR: usize = 100;
const BIG_FUNCTIONS: usize = 1_000;

const OUTLINE_P50_MS: f64 = 5.0;
const MAP_COLD_P50_MS: f64 = 200.0;
const MAP_WARM_P50_MS: f64 = 30.0;
const REFS_P50_MS: f64 = 150.0;

/// One generated source file: a few definitions in one of five languages, ~40 lines.
fn source(dir: usize, i: usize) -> (String, String) {
    let n = dir * FILES_PER_DIR + i;
    match i % 5 {
        0 => (
            format!("m{n}.rs"),
            format!(
                "//! Module {n}.\nuse std::fmt;\n\npub struct Item{n} {{\n    id: u64,\n    name: String,\n}}\n\nimpl Item{n} {{\n    pub fn new(id: u64) -> Self {{\n        Item{n} {{ id, name: format!(\"item {{id}}\") }}\n    }}\n\n    pub fn shared_helper(&self) -> u64 {{\n        self.id * 2\n    }}\n}}\n\nimpl fmt::Display for Item{n} {{\n    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {{\n        write!(f, \"{{}}\", self.name)\n    }}\n}}\n\npub fn build_{n}() -> Vec<Item{n}> {{\n    (0..10).map(Item{n}::new).collect()\n}}\n\n#[cfg(test)]\nmod tests {{\n    #[test]\n    fn builds() {{\n        assert_eq!(super::build_{n}().len(), 10);\n    }}\n}}\n"
            ),
        ),
        1 => (
            format!("m{n}.py"),
            format!(
                "\"\"\"Module {n}.\"\"\"\nimport os\n\nLIMIT_{n} = 10\n\n\nclass Store{n}:\n    def __init__(self):\n        self.items = []\n\n    def add(self, item):\n        self.items.append(item)\n        return shared_helper(item)\n\n    def size(self):\n        return len(self.items)\n\n\ndef shared_helper(x):\n    return x * 2\n\n\ndef load_{n}(path):\n    with open(path) as f:\n        return f.read()\n"
            ),
        ),
        2 => (
            format!("m{n}.js"),
            format!(
                "// Module {n}.\n'use strict';\n\nconst LIMIT = 10;\n\nclass Widget{n} {{\n  constructor(name) {{\n    this.name = name;\n  }}\n\n  render() {{\n    return `<div>${{this.name}}</div>`;\n  }}\n}}\n\nfunction shared_helper(x) {{\n  return x * 2;\n}}\n\nconst make{n} = (n) => new Widget{n}(n);\n\nmodule.exports = {{ Widget{n}, make{n}, shared_helper }};\n"
            ),
        ),
        3 => (
            format!("m{n}.go"),
            format!(
                "// Package m{n}.\npackage m{n}\n\nimport \"fmt\"\n\nconst Limit = 10\n\ntype Server{n} struct {{\n\tname string\n}}\n\nfunc (s *Server{n}) Start() error {{\n\tfmt.Println(s.name)\n\treturn nil\n}}\n\nfunc shared_helper(x int) int {{\n\treturn x * 2\n}}\n\nfunc New{n}(name string) *Server{n} {{\n\treturn &Server{n}{{name: name}}\n}}\n"
            ),
        ),
        _ => (
            format!("m{n}.c"),
            format!(
                "/* Module {n}. */\n#include <stdio.h>\n\n#define LIMIT_{n} 10\n\ntypedef struct record{n} {{\n    int id;\n    char name[32];\n}} record{n}_t;\n\nstatic int shared_helper(int x)\n{{\n    return x * 2;\n}}\n\nint process_{n}(record{n}_t *r)\n{{\n    printf(\"%d\\n\", r->id);\n    return shared_helper(r->id);\n}}\n"
            ),
        ),
    }
}

fn generate_tree(root: &Path) -> usize {
    std::fs::write(root.join(".gitignore"), "target/\n*.tmp\n").expect("write .gitignore");
    let mut files = 1;
    for d in 0..TREE_DIRS {
        let dir = root.join(format!("pkg{d:02}"));
        std::fs::create_dir_all(&dir).expect("mkdir tree dir");
        for i in 0..FILES_PER_DIR - usize::from(d == 0) {
            let (name, body) = source(d, i);
            std::fs::write(dir.join(name), body).expect("write tree file");
            files += 1;
        }
    }
    files
}

/// A 10,050-line Rust file: 1,000 functions of 10 lines in 10 impl blocks.
fn big_file() -> String {
    let mut s = String::new();
    for b in 0..BIG_FUNCTIONS / 100 {
        s.push_str(&format!("pub struct S{b};\n\nimpl S{b} {{\n"));
        for f in 0..100 {
            s.push_str(&format!(
                "    /// Function {f}.\n    pub fn f{f}(&self, x: u64) -> u64 {{\n        let s = \"fn fake() {{}}\";\n        // a comment\n        let y = x + {f};\n        let z = y.wrapping_mul(3);\n        let w = z ^ 0x5a;\n        w * 2 + s.len() as u64\n    }}\n\n"
            ));
        }
        s.push_str("}\n\n");
    }
    s
}

/// A client on a fresh server, with a session on `ws`.
fn session(sb: &Sandbox, ws: &Path) -> (Client, Value) {
    let mut c = Client::start(sb.server("embedded"));
    let first = json!({"type": "first_call", "workspace_root": ws});
    let (_, v) = c.timed(
        "tools/call",
        json!({"name": "Initialize", "arguments": first}),
    );
    let d = &v["result"]["structuredContent"]["data"];
    assert!(d["thread_id"].is_string(), "no session: {v}");
    let pair = json!({"thread_id": d["thread_id"], "workspace_root": d["workspace_root"]});
    (c, pair)
}

fn code_map(c: &mut Client, pair: &Value, mut args: Value) -> (Duration, Value) {
    for (k, v) in pair.as_object().expect("pair") {
        args[k] = v.clone();
    }
    let (t, v) = c.timed("tools/call", json!({"name": "CodeMap", "arguments": args}));
    let sc = v["result"]["structuredContent"].clone();
    assert_eq!(sc["status"], "completed", "CodeMap failed: {sc}");
    (t, sc)
}

fn main() {
    let sb = Sandbox::new();
    let mut r = Report::new("codemap");
    eprintln!("winx codemap bench (sandbox {})", sb.dir.path().display());
    let ws = sb.workspace.join("tree");
    std::fs::create_dir_all(&ws).expect("mkdir tree");
    let files = generate_tree(&ws);
    std::fs::write(ws.join("big.rs"), big_file()).expect("write big.rs");

    // 1. Outline of the 10,000-line file.
    let (mut c, pair) = session(&sb, &ws);
    let outline = json!({"operation": "outline", "path": "big.rs"});
    let mut samples = Vec::new();
    for i in 0..WARMUP + OUTLINE_CALLS {
        let (t, sc) = code_map(&mut c, &pair, outline.clone());
        assert_eq!(
            sc["data"]["lines"],
            json!(BIG_FUNCTIONS * 10 + BIG_FUNCTIONS / 100 * 5)
        );
        if i >= WARMUP {
            samples.push(t);
        }
    }
    r.latency(
        "outline.10k_lines",
        &Samples::new(samples),
        Some(OUTLINE_P50_MS),
    );
    drop(c);

    // 2. The map, cold: a fresh server (empty cache) per run.
    let map = json!({"operation": "outline", "query": "shared helper store"});
    let mut cold = Vec::new();
    let mut refs_cold = Vec::new();
    let refs = json!({"operation": "references", "name": "shared_helper"});
    for _ in 0..COLD_RUNS {
        let (mut c, pair) = session(&sb, &ws);
        let (t, sc) = code_map(&mut c, &pair, map.clone());
        assert_eq!(
            sc["data"]["total_files"],
            json!(files + 1),
            "{}",
            sc["data"]
        );
        cold.push(t);
        let (mut c, pair) = session(&sb, &ws);
        let (t, sc) = code_map(&mut c, &pair, refs.clone());
        assert!(
            sc["data"]["total"].as_u64().unwrap_or(0) >= (files as u64 - 1),
            "{}",
            sc["data"]
        );
        refs_cold.push(t);
    }
    r.latency(
        "map.5000_files.cold",
        &Samples::new(cold),
        Some(MAP_COLD_P50_MS),
    );

    // 3. Warm: the same server again (cached outlines, stat per file).
    let (mut c, pair) = session(&sb, &ws);
    let mut warm = Vec::new();
    let mut bytes = 0;
    for i in 0..WARMUP + WARM_CALLS {
        let (t, sc) = code_map(&mut c, &pair, map.clone());
        bytes = serde_json::to_vec(&sc).map_or(0, |v| v.len());
        if i >= WARMUP {
            warm.push(t);
        }
    }
    r.latency(
        "map.5000_files.warm",
        &Samples::new(warm),
        Some(MAP_WARM_P50_MS),
    );
    r.add("map.page.structured", bytes as f64, "B", None);

    // 4. References across the tree: cold above, warm here.
    r.latency(
        "references.5000_files.cold",
        &Samples::new(refs_cold),
        Some(REFS_P50_MS),
    );
    let mut warm_refs = Vec::new();
    for i in 0..WARMUP + WARM_CALLS {
        let (t, _) = code_map(&mut c, &pair, refs.clone());
        if i >= WARMUP {
            warm_refs.push(t);
        }
    }
    r.latency(
        "references.5000_files.warm",
        &Samples::new(warm_refs),
        Some(REFS_P50_MS),
    );
    let (_, sc) = code_map(
        &mut c,
        &pair,
        json!({"operation": "references", "name": "process_4"}),
    );
    r.add(
        "references.rare.files_read",
        sc["data"]["files_read"].as_f64().unwrap_or(0.0),
        "",
        None,
    );
    r.add("server.vm_rss", c.rss_mib(), "MiB", None);
    drop(c);
    r.print();
}
