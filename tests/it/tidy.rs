//! Tidy checks that keep the architecture's invariants true (docs/architecture.md).

use std::fs;
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 600;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            (rel, fs::read_to_string(&p).unwrap())
        })
        .collect()
}

#[test]
fn source_files_stay_small() {
    for (path, text) in sources() {
        let n = text.lines().count();
        assert!(
            n <= MAX_LINES,
            "{path} has {n} lines; split it by concern (cap {MAX_LINES})"
        );
    }
}

#[test]
fn banned_calls_stay_out_of_src() {
    for (path, text) in sources() {
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        if path != "src/deadline.rs" {
            assert!(
                !code.contains("Instant::now"),
                "{path}: use deadline::Deadline/Stopwatch"
            );
        }
        assert!(
            !code.contains("thread::sleep"),
            "{path}: wait on a channel, never sleep"
        );
        // The binaries too take their environment from `config::process_env()`.
        let reads_env = code.contains("env::var");
        let allowed = path.starts_with("src/config/") || path == "src/build.rs";
        assert!(
            !reads_env || allowed,
            "{path}: configuration is read only in config/"
        );
        assert!(
            !code.contains("todo!(") && !code.contains("unimplemented!("),
            "{path}: no stubs"
        );
    }
}

/// The files that choose an envelope's `errorCode`: `tools/error.rs` (`ToolError` and
/// `mark` for tool-specific outcomes), `tools/files/edit_error.rs` (every edit failure),
/// plus the envelope's own definition (`completed` starts with none).
const ERROR_CODE_WRITERS: [&str; 3] = [
    "src/tools/error.rs",
    "src/tools/files/edit_error.rs",
    "src/tools/envelope.rs",
];

#[test]
fn only_the_error_mappings_set_an_error_code() {
    // An assignment or a struct-literal field (`error_code = …`, `error_code: …`,
    // shorthand `error_code,` inside `Envelope { … }`), and any `Envelope {` literal.
    let writes = regex_lite::Regex::new(r"\berror_code\s*(=[^=]|:[^:]|,)|\bEnvelope\s*\{").unwrap();
    let mut wrong = Vec::new();
    for (path, text) in sources() {
        if ERROR_CODE_WRITERS.contains(&path.as_str()) {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if writes.is_match(code) {
                wrong.push(format!("{path}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "set errorCode through ToolError, EditFailure or tools::error::mark:\n{}",
        wrong.join("\n")
    );
}

/// The one file under `tests/` allowed to pause: `eventually` polls from there.
const WAIT_HELPER: &str = "tests/support/wait.rs";

/// Tests synchronise on events (a line, a socket, a FIFO gate); what has no event is polled
/// through `support::wait::eventually`, whose short back-off is the only sleep in `tests/`
/// (benches included).
#[test]
fn tests_never_sleep_outside_the_wait_helper() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("tests"), &mut files);
    let strings = regex_lite::Regex::new(r#""([^"\\]|\\.)*""#).unwrap();
    let sleep = regex_lite::Regex::new(r"\bsleep\s*\(|thread::sleep\b").unwrap();
    let mut wrong = Vec::new();
    let mut in_helper = 0;
    for p in files {
        let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        for (n, line) in fs::read_to_string(&p).unwrap().lines().enumerate() {
            // Shell commands (`"sleep 100"`) and comments may name a sleep; code may not.
            let code = strings.replace_all(line, "\"\"");
            let code = code.split("//").next().unwrap_or("");
            if !sleep.is_match(code) {
                continue;
            }
            if rel == WAIT_HELPER {
                in_helper += 1;
            } else {
                wrong.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "tests sleep; wait for an event, or poll with support::wait::eventually:\n{}",
        wrong.join("\n")
    );
    assert_eq!(
        in_helper, 1,
        "{WAIT_HELPER} pauses in exactly one place, between two polls"
    );
}

#[test]
fn no_async_runtime_in_the_manifest() {
    let manifest =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    for banned in [
        "tokio",
        "async-std",
        "smol",
        "futures",
        "hyper",
        "axum",
        "rmcp",
        "tower",
    ] {
        assert!(
            !manifest.lines().any(|l| l.trim_start().starts_with(banned)),
            "Cargo.toml names {banned}; the design card forbids an async runtime"
        );
    }
}

#[test]
fn the_guardian_never_opens_sqlite() {
    for (path, text) in sources() {
        if path.starts_with("src/guardian/")
            || path.starts_with("src/shell/")
            || path.starts_with("src/daemon/")
        {
            assert!(
                !text.contains("rusqlite")
                    && !text.contains("store::Store")
                    && !text.contains("Store::open"),
                "{path}: guardians and winxd never open SQLite"
            );
        }
    }
}

/// SQLite is the store's and the history's: everyone else reads and writes through their
/// typed functions (`store::Store`, `history::Catalog`), so no tool runs a query. Test
/// modules (`*tests.rs`) may open a raw connection to hold a database locked.
#[test]
fn only_store_and_history_use_rusqlite() {
    for (path, text) in sources() {
        let owner = path.starts_with("src/store/") || path.starts_with("src/history/");
        if !owner && !path.ends_with("tests.rs") {
            assert!(
                !text.contains("rusqlite"),
                "{path} uses rusqlite; only src/store and src/history do"
            );
        }
    }
}

#[test]
fn only_the_adapter_and_jsonrpc_know_the_wire() {
    for (path, text) in sources() {
        if path.starts_with("src/tools/")
            || path.starts_with("src/session/")
            || path.starts_with("src/store/")
        {
            assert!(!text.contains("jsonrpc"), "{path} must not know JSON-RPC");
        }
    }
}

#[path = "../layers/mod.rs"]
mod layers;

fn src_graph()
-> std::collections::BTreeMap<layers::Module, std::collections::BTreeSet<layers::Module>> {
    layers::graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

/// Imports run down the layer order only: a top-level module never imports one of its own
/// layer or a higher one, so no circle between top-level modules can form.
#[test]
fn imports_follow_the_layer_order() {
    let mut wrong = Vec::new();
    for (from, targets) in src_graph() {
        let Some(top) = from.first() else { continue };
        let Some(mine) = layers::layer_of(top) else {
            wrong.push(format!(
                "{top} has no layer in docs/architecture.md (Layers)"
            ));
            continue;
        };
        for to in targets.iter().filter(|t| t[0] != *top) {
            match layers::layer_of(&to[0]) {
                Some(theirs) if theirs < mine => {}
                _ => wrong.push(format!(
                    "{} imports {}: {} may import only lower layers",
                    from.join("/"),
                    to.join("/"),
                    top
                )),
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(
        wrong.is_empty(),
        "imports against the layer order:\n{}",
        wrong.join("\n")
    );
}

/// Inside a top-level module too, files form no import circle.
#[test]
fn no_import_circle_between_files() {
    let circles: Vec<String> = layers::circles(&src_graph())
        .into_iter()
        .map(|c| {
            let mut names: Vec<String> = c.iter().map(|m| m.join("/")).collect();
            names.sort();
            names.join(" <-> ")
        })
        .collect();
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

/// The layer diagram in docs/architecture.md is the one the test enforces.
#[test]
fn the_documented_layers_are_the_enforced_ones() {
    let doc =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
            .unwrap();
    let block = doc
        .split("<!-- layers -->")
        .nth(1)
        .expect("docs/architecture.md has a <!-- layers --> block");
    let documented: Vec<Vec<&str>> = block
        .lines()
        .filter_map(|l| l.trim().strip_prefix('L'))
        .map(|l| l.split_whitespace().skip(1).collect())
        .collect();
    let enforced: Vec<Vec<&str>> = layers::LAYERS.iter().map(|l| l.to_vec()).rev().collect();
    assert_eq!(
        documented, enforced,
        "docs/architecture.md's layer block is out of date"
    );
}

/// One side of a documented limit: a count or size, or a duration in seconds.
#[derive(Debug, PartialEq)]
enum Quantity {
    Number(f64),
    Seconds(f64),
}

/// A number as Rust writes it in a constant: literals (`64`, `1_024`, `50.0`) joined by
/// `*` and `<<`, or `Duration::from_secs|millis|micros(…)` of such a product.
fn eval_const(expr: &str) -> Option<Quantity> {
    let expr = expr.trim().trim_start_matches("std::time::");
    for (ctor, unit) in [
        ("Duration::from_secs(", 1.0),
        ("Duration::from_millis(", 1e-3),
        ("Duration::from_micros(", 1e-6),
    ] {
        if let Some(inner) = expr.strip_prefix(ctor).and_then(|e| e.strip_suffix(')')) {
            return match eval_const(inner)? {
                Quantity::Number(n) => Some(Quantity::Seconds(n * unit)),
                Quantity::Seconds(_) => None,
            };
        }
    }
    let mut value = None;
    for shifted in expr.split("<<") {
        let mut product = 1.0;
        for factor in shifted.split('*') {
            product *= factor.trim().replace('_', "").parse::<f64>().ok()?;
        }
        value = Some(match value {
            None => product,
            Some(v) => v * 2f64.powf(product),
        });
    }
    value.map(Quantity::Number)
}

/// A value as the map writes it: `64 MiB`, `1,024`, `100 ms`, `24 h`.
fn eval_doc(text: &str) -> Option<Quantity> {
    let (number, unit) = text.trim().split_once(' ').unwrap_or((text.trim(), ""));
    let n: f64 = number.replace(',', "").parse().ok()?;
    Some(match unit {
        "" => Quantity::Number(n),
        "KiB" => Quantity::Number(n * 1024.0),
        "MiB" => Quantity::Number(n * 1024.0 * 1024.0),
        "µs" => Quantity::Seconds(n * 1e-6),
        "ms" => Quantity::Seconds(n * 1e-3),
        "s" => Quantity::Seconds(n),
        "min" => Quantity::Seconds(n * 60.0),
        "h" => Quantity::Seconds(n * 3600.0),
        _ => return None,
    })
}

/// The limits table in docs/architecture.md quotes the code: each row names a constant by
/// its module path (`adapter::http::wire::MAX_HEAD_BYTES`), found in `src/<path>.rs` or
/// `src/<path>/mod.rs`, and its value must be the constant's. An integer constant named
/// `…_MS` or `…_SECS` is a duration in that unit.
#[test]
fn the_documented_constants_are_the_codes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let block = doc
        .split("<!-- constants -->")
        .nth(1)
        .expect("docs/architecture.md has a <!-- constants --> block");
    let mut wrong = Vec::new();
    let mut rows = 0;
    for line in block.lines().filter(|l| l.starts_with("| `")) {
        rows += 1;
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (path, documented) = (cells[1].trim_matches('`'), cells[2]);
        let (module, name) = path.rsplit_once("::").unwrap_or(("", path));
        let dir = root.join("src").join(module.replace("::", "/"));
        let text = [dir.with_extension("rs"), dir.join("mod.rs")]
            .iter()
            .find_map(|f| fs::read_to_string(f).ok());
        let Some(text) = text else {
            wrong.push(format!(
                "{path}: no module src/{}",
                module.replace("::", "/")
            ));
            continue;
        };
        let def = regex_lite::Regex::new(&format!(r"const {name}\s*:[^=]*=([^;]*);")).unwrap();
        let Some(expr) = def.captures(&text).map(|c| c[1].to_string()) else {
            wrong.push(format!("{path}: no `const {name}` in that module"));
            continue;
        };
        let code = match eval_const(&expr) {
            Some(Quantity::Number(n)) if name.ends_with("_MS") => Some(Quantity::Seconds(n / 1e3)),
            Some(Quantity::Number(n)) if name.ends_with("_SECS") || name.ends_with("_SECONDS") => {
                Some(Quantity::Seconds(n))
            }
            other => other,
        };
        match (code, eval_doc(documented)) {
            (Some(c), Some(d)) if c == d => {}
            (None, _) => wrong.push(format!("{path}: cannot evaluate `{}`", expr.trim())),
            (_, None) => wrong.push(format!("{path}: cannot read the value `{documented}`")),
            _ => wrong.push(format!(
                "{path}: the map says {documented}, the code `{}`",
                expr.trim()
            )),
        }
    }
    assert!(rows > 0, "the <!-- constants --> block lists no constant");
    assert!(
        wrong.is_empty(),
        "docs/architecture.md's limits disagree with src/:\n{}",
        wrong.join("\n")
    );
}
