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
        let reads_env = code.contains("env::var");
        let allowed = path.starts_with("src/config/")
            || path.starts_with("src/bin/")
            || path == "src/build.rs";
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
