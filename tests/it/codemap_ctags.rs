//! CodeMap's outline against Universal Ctags on real code nobody here wrote: crate sources
//! from the local cargo registry, Python standard-library modules, JavaScript and
//! TypeScript from npm packages, Go, C and C++ found on the machine (issue 17's accuracy
//! bar: recall ≥ 95 % of ctags' definitions, ≤ 2 % spurious ones, per language).
//!
//! Compared: (file, name, line) of the kinds both tools tag. Kinds ctags does not tag for
//! a language (Rust `const` and `union` in ctags 5.9, Python constants) are left out of
//! both sides, and so are kinds we do not outline (fields, variables, enumerators,
//! prototypes). Skipped, with a message, when `ctags` is not on PATH or a language has
//! no file on this machine. Set `WINX_CTAGS_SHOW=N` to print N differences per language.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use winx::codemap::{Kind, Language, outline_of};

const MIN_RECALL: f64 = 0.95;
const MAX_SPURIOUS: f64 = 0.02;
/// Files per language: enough for thousands of definitions, few enough for a quick test.
const MAX_FILES: usize = 120;

struct Case {
    lang: Language,
    /// ctags `kind` names (long form) compared for this language.
    ctags_kinds: &'static [&'static str],
    ours: &'static [Kind],
    files: Vec<PathBuf>,
}

fn has_ctags() -> bool {
    Command::new("ctags")
        .arg("--version")
        .output()
        .is_ok_and(|o| {
            o.status.success() && String::from_utf8_lossy(&o.stdout).contains("Universal")
        })
}

/// Regular files under `dir` (depth-first, sorted) whose name ends with one of `exts`.
fn files_under(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>, limit: usize) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if out.len() >= limit {
            return;
        }
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if meta.is_dir() && !name.starts_with('.') && name != "tests" && name != "test" {
            files_under(&p, exts, out, limit);
        } else if meta.is_file()
            && meta.len() <= winx::codemap::MAX_SCAN_BYTES
            && exts.iter().any(|e| name.ends_with(e))
            && !name.ends_with(".min.js")
        {
            out.push(p);
        }
    }
}

/// Directories matching `pattern` (one `*` in its last component) under `parent`.
fn dirs_like(parent: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(parent)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .collect();
    v.sort();
    v
}

fn registries() -> Vec<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_default();
    dirs_like(&home.join("registry/src"), "")
}

fn collect(roots: &[PathBuf], exts: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for r in roots {
        if r.is_file() {
            if out.len() < MAX_FILES {
                out.push(r.clone());
            }
        } else {
            files_under(r, exts, &mut out, MAX_FILES);
        }
    }
    out
}

fn cases() -> Vec<Case> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut rust_roots = Vec::new();
    for reg in registries() {
        for krate in [
            "serde_core-",
            "regex-lite-",
            "rusqlite-",
            "lexopt-",
            "crossbeam-channel-",
        ] {
            rust_roots.extend(dirs_like(&reg, krate).into_iter().map(|d| d.join("src")));
        }
    }
    let mut py_roots = Vec::new();
    for lib in dirs_like(Path::new("/usr/lib"), "python3") {
        for m in [
            "argparse.py",
            "json",
            "dataclasses.py",
            "textwrap.py",
            "configparser.py",
        ] {
            py_roots.push(lib.join(m));
        }
    }
    let node = manifest.join("target/node/node_modules");
    // Packages whose syntax ctags 5.9 follows to the end. In zod v3's `types.js`, npm's
    // own sources and ajv's generated code it loses its place (at getters and methods
    // named `get`, `set`, `if`, `const`) and then tags function locals as module
    // constants; those files would measure ctags, not us.
    let js_roots = vec![
        node.join("express/lib"),
        node.join("body-parser/lib"),
        node.join("qs/lib"),
        node.join("raw-body/index.js"),
        node.join("zod/v4/core/schemas.js"),
        node.join("ajv/dist/core.js"),
        node.join("send/index.js"),
        node.join("router/lib"),
    ];
    // Declaration files: ctags 5.9's TypeScript parser loses its place in TypeScript
    // sources at the first return-type annotation (`function f(): T {`) and then tags
    // every local as a module constant (measured on zod's and ajv-formats' sources).
    let ts_roots = vec![
        node.join("zod/v4/core/schemas.d.ts"),
        node.join("zod/v4/core/checks.d.ts"),
        node.join("zod/v4/core/core.d.ts"),
        node.join("zod/v4/core/errors.d.ts"),
        node.join("json-schema-typed/draft_2020_12.d.ts"),
        node.join("hono/dist/types/types.d.ts"),
        node.join("hono/dist/types/context.d.ts"),
        node.join("hono/dist/types/hono-base.d.ts"),
        node.join("eventsource-parser/src/types.ts"),
    ];
    let go_roots = vec![PathBuf::from("/usr/share/doc/git/contrib")];
    let c_roots = vec![
        PathBuf::from("/usr/share/doc/zlib1g-dev/examples"),
        PathBuf::from("/usr/share/doc/nettle-dev/examples"),
        PathBuf::from("/usr/include/zlib.h"),
        PathBuf::from("/usr/include/stdio.h"),
        PathBuf::from("/usr/include/string.h"),
        PathBuf::from("/usr/include/stdlib.h"),
    ];
    let mut cpp_roots = vec![PathBuf::from("/usr/include/cursesapp.h")];
    for reg in registries() {
        cpp_roots.extend(dirs_like(&reg, "cc-").into_iter().map(|d| d.join("src")));
    }
    for v in dirs_like(Path::new("/usr/include/c++"), "") {
        for f in ["bits/stl_list.h", "bits/stl_vector.h", "bits/unique_ptr.h"] {
            cpp_roots.push(v.join(f));
        }
    }
    vec![
        Case {
            lang: Language::Rust,
            ctags_kinds: &[
                "function",
                "method",
                "implementation",
                "enum",
                "interface",
                "module",
                "struct",
                "typedef",
                "macro",
                "variable",
            ],
            ours: &[
                Kind::Function,
                Kind::Method,
                Kind::Impl,
                Kind::Enum,
                Kind::Trait,
                Kind::Module,
                Kind::Struct,
                Kind::Type,
                Kind::Macro,
                Kind::Static,
            ],
            files: collect(&rust_roots, &[".rs"]),
        },
        Case {
            lang: Language::Python,
            ctags_kinds: &["class", "function", "member"],
            ours: &[Kind::Class, Kind::Function, Kind::Method],
            files: collect(&py_roots, &[".py"]),
        },
        Case {
            lang: Language::JavaScript,
            ctags_kinds: &[
                "function",
                "class",
                "method",
                "generator",
                "getter",
                "setter",
                "constant",
            ],
            ours: &[
                Kind::Function,
                Kind::Class,
                Kind::Method,
                Kind::Object,
                Kind::Constant,
            ],
            files: collect(&js_roots, &[".js", ".mjs", ".cjs"]),
        },
        Case {
            lang: Language::TypeScript,
            ctags_kinds: &[
                "function",
                "class",
                "interface",
                "enum",
                "method",
                "namespace",
                "alias",
                "generator",
                "constant",
            ],
            ours: &[
                Kind::Function,
                Kind::Class,
                Kind::Interface,
                Kind::Enum,
                Kind::Method,
                Kind::Namespace,
                Kind::Type,
                Kind::Constant,
                Kind::Object,
            ],
            files: collect(&ts_roots, &[".ts"]),
        },
        Case {
            lang: Language::Go,
            ctags_kinds: &[
                "func",
                "type",
                "struct",
                "interface",
                "const",
                "talias",
                "methodSpec",
            ],
            ours: &[
                Kind::Function,
                Kind::Method,
                Kind::Type,
                Kind::Struct,
                Kind::Interface,
                Kind::Constant,
            ],
            files: collect(&go_roots, &[".go"]),
        },
        Case {
            lang: Language::C,
            ctags_kinds: &["function", "struct", "union", "enum", "typedef", "macro"],
            ours: &[
                Kind::Function,
                Kind::Struct,
                Kind::Union,
                Kind::Enum,
                Kind::Type,
                Kind::Macro,
            ],
            files: collect(&c_roots, &[".c", ".h"]),
        },
        Case {
            lang: Language::Cpp,
            ctags_kinds: &[
                "function",
                "class",
                "struct",
                "union",
                "enum",
                "typedef",
                "macro",
                "namespace",
            ],
            ours: &[
                Kind::Function,
                Kind::Method,
                Kind::Class,
                Kind::Struct,
                Kind::Union,
                Kind::Enum,
                Kind::Type,
                Kind::Macro,
                Kind::Namespace,
            ],
            files: collect(&cpp_roots, &[".cpp", ".cc", ".h", ".hpp"]),
        },
        Case {
            lang: Language::Java,
            ctags_kinds: &["class", "interface", "enum", "method", "annotation"],
            ours: &[Kind::Class, Kind::Interface, Kind::Enum, Kind::Method],
            files: Vec::new(),
        },
    ]
}

type Tag = (String, String, u32);

/// Disagreements read one by one in the source and found to be ctags 5.9.0's mistakes;
/// left out of both sides of the comparison (the raw figures are printed too). Each group:
/// a file (path suffix), its (line, name) pairs, and what ctags gets wrong there.
/// A file (path suffix), its (line, name) pairs, and what ctags gets wrong there.
type Defects = (&'static str, &'static [(u32, &'static str)], &'static str);

const CTAGS_DEFECTS: &[Defects] = &[
    (
        "express/lib/application.js",
        &[(351, "set"), (472, "app")],
        "reads `app.set =` as a setter keyword; tags the object of `app[method] = function`",
    ),
    (
        "express/lib/response.js",
        &[(702, "get"), (702, "res")],
        "reads `res.get =` as a getter keyword and tags `res` instead",
    ),
    (
        "qs/lib/stringify.js",
        &[
            (8, "arrayPrefixGenerators"),
            (9, "brackets"),
            (13, "indices"),
            (16, "repeat"),
            (49, "serializeDate"),
        ],
        "drops an object literal whose first value is a named function expression",
    ),
    (
        "qs/lib/parse.js",
        &[(48, "queue")],
        "tags the array of `queue[queue.length] = {…}`",
    ),
    (
        "qs/lib/utils.js",
        &[(453, "queue")],
        "tags the array of `queue[queue.length] = {…}`",
    ),
    (
        "router/lib/route.js",
        &[(223, "Route"), (125, "next")],
        "tags the object of `Route.prototype[method] =`; loses a nested function after a statement without `;`",
    ),
    (
        "router/lib/layer.js",
        &[(248, "rejected")],
        "loses a nested function after a statement without `;`",
    ),
    (
        "router/lib/tracing.js",
        &[(141, "invoke"), (155, "settle")],
        "loses nested functions after a statement without `;`",
    ),
    (
        "send/index.js",
        &[(155, "inherits"), (618, "next"), (685, "cleanup")],
        "tags the call `util.inherits(…)`; loses nested functions after a statement without `;`",
    ),
    (
        "body-parser/lib/types/json.js",
        &[(103, "parse")],
        "tags one `return function parse` per function",
    ),
    (
        "zod/v4/core/schemas.js",
        &[(134, "ctx"), (140, "ctx"), (187, "versionMap")],
        "reads the key `async:` as a keyword and drops the object; skips objects in arrow callbacks",
    ),
    (
        "hono/dist/types/context.d.ts",
        &[
            (58, "Function"),
            (58, "extends"),
            (233, "req"),
            (240, "event"),
            (247, "executionCtx"),
            (252, "res"),
            (258, "res"),
            (377, "var"),
        ],
        "tags the words of a conditional type `A extends Function ? …`; drops body-less accessors `get x(): T;`",
    ),
    (
        "hono/dist/types/hono-base.d.ts",
        &[(104, "route"), (118, "basePath"), (188, "mount")],
        "drops generic method signatures `m<T>(…)` and ones with function-typed parameters",
    ),
    (
        "hono/dist/types/types.d.ts",
        &[(210, "passThroughOnException"), (211, "waitUntil")],
        "drops `abstract` methods after the first",
    ),
    (
        "zod/v4/core/core.d.ts",
        &[
            (22, "$brand"),
            (23, "$brand"),
            (50, "$ZodEncodeError"),
            (51, "constructor"),
            (53, "input"),
        ],
        "drops the declarations after a multi-line `declare function` signature",
    ),
    (
        "zod/v4/core/errors.d.ts",
        &[
            (159, "_ZodFormattedError"),
            (171, "$ZodErrorTree"),
            (223, "toDotPath"),
            (224, "prettifyError"),
        ],
        "drops the declaration after an overloaded `declare function` and after `readonly (…)[]` parameters",
    ),
    (
        "zod/v4/core/schemas.d.ts",
        &[
            (194, "validateURL"),
            (196, "parseURLObject"),
            (198, "stripTabAndNewline"),
            (199, "urlHostnameOk"),
            (200, "urlProtocolOk"),
            (201, "$ZodURL"),
            (202, "$ZodEmojiDef"),
            (338, "$ZodIPv6"),
            (339, "$ZodMACDef"),
            (369, "$ZodCIDRv6"),
            (370, "isValidBase64"),
            (371, "$ZodBase64Def"),
            (382, "$ZodBase64URLDef"),
            (399, "$ZodCreditCardDef"),
            (409, "$ZodIBANDef"),
            (419, "$ZodJWTDef"),
            (759, "$ZodDiscriminatedUnion"),
        ],
        "drops the declaration after a `declare function f(…): boolean;` (and after `typeof A | typeof B` results)",
    ),
    (
        "/usr/include/zlib.h",
        &[
            (81, "voidpf"),
            (81, "alloc_func"),
            (82, "free_func"),
            (1094, "in_func"),
            (1096, "out_func"),
        ],
        "names `typedef voidpf (*alloc_func) OF((…))` after its return type, not its declarator",
    ),
    (
        "bits/stl_list.h",
        &[(455, "_GLIBCXX_NOEXCEPT_IF"), (455, "_List_impl")],
        "names a constructor followed by `_GLIBCXX_NOEXCEPT_IF(…)` after the macro",
    ),
];

fn known_defect(t: &Tag) -> bool {
    CTAGS_DEFECTS.iter().any(|(file, tags, _)| {
        t.0.ends_with(file) && tags.iter().any(|&(line, name)| line == t.2 && name == t.1)
    })
}

/// ctags' TypeScript parser tags the names of `import type … from` lines as aliases;
/// imports define nothing.
fn import_line(v: &serde_json::Value) -> bool {
    let pattern = v["pattern"].as_str().unwrap_or_default();
    let line = pattern.trim_start_matches("/^").trim_start();
    line.starts_with("import ") || (line.starts_with("export ") && line.contains(" from "))
}

/// ctags' definitions of the compared kinds, as (file, name, line).
fn ctags_tags(case: &Case) -> BTreeSet<Tag> {
    let lang = match case.lang {
        Language::Cpp => "C++",
        Language::Rust => "Rust",
        Language::Python => "Python",
        Language::JavaScript => "JavaScript",
        Language::TypeScript => "TypeScript",
        Language::Go => "Go",
        Language::C => "C",
        Language::Java => "Java",
    };
    let out = Command::new("ctags")
        .args(["--output-format=json", "--fields=+nKzZe", "-f", "-"])
        .arg(format!("--language-force={lang}"))
        .args(&case.files)
        .output()
        .expect("run ctags");
    let mut tags = BTreeSet::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let kind = v["kind"].as_str().unwrap_or_default();
        if v["_type"] != "tag" || !case.ctags_kinds.contains(&kind) {
            continue;
        }
        let name = v["name"].as_str().unwrap_or_default();
        // Anonymous types and functions (`__anon…`, `AnonymousFunction…`) have no name to
        // compare.
        if name.starts_with("__anon") || name.starts_with("AnonymousFunction") || import_line(&v) {
            continue;
        }
        tags.insert((
            v["path"].as_str().unwrap_or_default().to_string(),
            name.to_string(),
            v["line"].as_u64().unwrap_or(0) as u32,
        ));
    }
    tags
}

fn our_tags(case: &Case) -> BTreeSet<Tag> {
    let mut tags = BTreeSet::new();
    for f in &case.files {
        let bytes = std::fs::read(f).unwrap_or_default();
        for s in outline_of(case.lang, &bytes) {
            if case.ours.contains(&s.kind) {
                tags.insert((f.to_string_lossy().into_owned(), s.name, s.line));
            }
        }
    }
    tags
}

/// `WINX_CTAGS_DUMP=<file>`: print our outline of one file and ctags' tags, for debugging.
fn dump(path: &str) {
    let p = Path::new(path);
    let lang = Language::of_path(p).expect("a supported extension");
    let bytes = std::fs::read(p).expect("read the file");
    for s in outline_of(lang, &bytes) {
        eprintln!(
            "ours  {:>6}-{:<6} {:<10} {} (in {:?})",
            s.line,
            s.end_line,
            s.kind.as_str(),
            s.name,
            s.parent
        );
    }
    let out = Command::new("ctags")
        .args(["--output-format=json", "--fields=+nKzZe", "-f", "-", path])
        .output()
        .expect("run ctags");
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
        eprintln!(
            "ctags {:>6} {:<10} {}",
            v["line"],
            v["kind"].as_str().unwrap_or(""),
            v["name"].as_str().unwrap_or("")
        );
    }
}

#[test]
fn outlines_match_universal_ctags_on_real_code() {
    if let Ok(path) = std::env::var("WINX_CTAGS_DUMP") {
        dump(&path);
        return;
    }
    if !has_ctags() {
        eprintln!("SKIP: Universal Ctags (`ctags`) is not on PATH (`make test` installs it)");
        return;
    }
    let show: usize = std::env::var("WINX_CTAGS_SHOW")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut failures = Vec::new();
    for case in cases() {
        let name = case.lang.as_str();
        if case.files.is_empty() {
            eprintln!("{name:<10} SKIP: no file of this language on this machine");
            continue;
        }
        let (theirs_raw, ours_raw) = (ctags_tags(&case), our_tags(&case));
        let raw_found = theirs_raw.intersection(&ours_raw).count();
        let raw_recall = raw_found as f64 / theirs_raw.len().max(1) as f64;
        let raw_extra =
            ours_raw.difference(&theirs_raw).count() as f64 / ours_raw.len().max(1) as f64;
        let theirs: BTreeSet<Tag> = theirs_raw
            .iter()
            .filter(|t| !known_defect(t))
            .cloned()
            .collect();
        let ours: BTreeSet<Tag> = ours_raw
            .iter()
            .filter(|t| !known_defect(t))
            .cloned()
            .collect();
        let found = theirs.intersection(&ours).count();
        let spurious: Vec<&Tag> = ours.difference(&theirs).collect();
        let missed: Vec<&Tag> = theirs.difference(&ours).collect();
        let recall = found as f64 / theirs.len().max(1) as f64;
        let extra = spurious.len() as f64 / ours.len().max(1) as f64;
        eprintln!(
            "{name:<10} files {:>4}  ctags {:>6}  ours {:>6}  recall {:>6.2} %  spurious {:>5.2} %  \
             (raw, before {} known ctags defects: {:.2} % / {:.2} %)",
            case.files.len(),
            theirs.len(),
            ours.len(),
            recall * 100.0,
            extra * 100.0,
            theirs_raw.len() + ours_raw.len() - theirs.len() - ours.len(),
            raw_recall * 100.0,
            raw_extra * 100.0
        );
        for t in missed.iter().take(show) {
            eprintln!("    missed   {}:{} {}", t.0, t.2, t.1);
        }
        for t in spurious.iter().take(show) {
            eprintln!("    spurious {}:{} {}", t.0, t.2, t.1);
        }
        if theirs.is_empty() {
            continue;
        }
        if recall < MIN_RECALL || extra > MAX_SPURIOUS {
            failures.push(format!(
                "{name}: recall {:.2} % (min {:.0} %), spurious {:.2} % (max {:.0} %)",
                recall * 100.0,
                MIN_RECALL * 100.0,
                extra * 100.0,
                MAX_SPURIOUS * 100.0
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
