//! Golden files: tool texts whose exact wording is the contract with the agent, kept under
//! `tests/golden/<name>.txt`. What changes from run to run (temp paths, content revisions,
//! ids, durations) is normalised to a placeholder first; a mismatch prints the expected and
//! the actual block. `WINX_UPDATE_GOLDEN=1` rewrites the files instead of comparing.
#![allow(dead_code)]

use regex_lite::Regex;
use std::path::PathBuf;

/// Set to rewrite the golden files from the actual texts (then review the diff in git).
pub const UPDATE_ENV: &str = "WINX_UPDATE_GOLDEN";

pub fn golden_dir() -> PathBuf {
    super::manifest_dir().join("tests/golden")
}

/// `text` with what varies between runs replaced: each of `known` (a test's own paths and
/// ids, most specific first) by its placeholder, then any other temp directory by `<TMP>`,
/// `sha256:` revisions by `sha256:<REV>`, execution ids by `<ID>`, durations by `<DUR>`,
/// thread ids by `<THREAD>`.
pub fn normalise(text: &str, known: &[(&str, &str)]) -> String {
    let mut out = text.to_string();
    for (value, placeholder) in known {
        if !value.is_empty() {
            out = out.replace(value, placeholder);
        }
    }
    let rules = [
        (r"/tmp/\.tmp[A-Za-z0-9]+", "<TMP>"),
        (r"sha256:[0-9a-f]{64}", "sha256:<REV>"),
        (r"\b[0-9a-f]{8,}-[0-9]+\b", "<ID>"),
        (r"\b[0-9]+(\.[0-9]+)?(ms|s)\b", "<DUR>"),
        (r"\bws_[A-Za-z0-9_-]*_[0-9a-f]{12}\b", "<THREAD>"),
    ];
    for (pattern, placeholder) in rules {
        out = Regex::new(pattern)
            .unwrap()
            .replace_all(&out, placeholder)
            .into_owned();
    }
    out
}

/// Compare `actual` (already normalised) with `tests/golden/<name>.txt`, or rewrite that
/// file when `WINX_UPDATE_GOLDEN` is set.
pub fn assert_golden(name: &str, actual: &str) {
    let path = golden_dir().join(format!("{name}.txt"));
    if std::env::var_os(UPDATE_ENV).is_some() {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, actual).unwrap();
        eprintln!("rewrote {}", path.display());
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "no golden file {} ({e}); run with {UPDATE_ENV}=1 to create it.\n\
             ---- actual ----\n{actual}\n---- end ----",
            path.display()
        )
    });
    if expected != actual {
        panic!(
            "{}",
            mismatch(&path.display().to_string(), &expected, actual)
        );
    }
}

/// The failure message of a mismatch: where the texts first differ, then both blocks.
fn mismatch(file: &str, expected: &str, actual: &str) -> String {
    let first = expected
        .lines()
        .zip(actual.lines())
        .position(|(e, a)| e != a)
        .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
    format!(
        "{file} differs from the actual text (first at line {}); if the change is \
         intended, rerun with {UPDATE_ENV}=1 and review the diff.\n\
         ---- expected ----\n{expected}\n---- actual ----\n{actual}\n---- end ----",
        first + 1
    )
}

/// A tool result's text as stored in a golden file: normalised, with `a`'s workspace shown
/// as `<WS>` and its temp directory as `<TMP>`.
pub fn agent_text(a: &super::Agent, result: &serde_json::Value) -> String {
    let ws = a.ws();
    let dir = a.dir.path().to_string_lossy().into_owned();
    normalise(super::text(result), &[(&ws, "<WS>"), (&dir, "<TMP>")])
}
