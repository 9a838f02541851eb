//! Suggestions for a CodeMap path that does not exist: files of the same name elsewhere in
//! the workspace, else what the nearest existing parent directory holds. A bounded walk
//! (entries and time), skipping hidden directories and build output, so a huge tree costs
//! no more than `MAX_ENTRIES` directory entries.

use crate::deadline::Deadline;
use std::path::Path;
use std::time::Duration;

/// Most directory entries looked at.
const MAX_ENTRIES: usize = 20_000;
/// Most time spent looking.
const BUDGET: Duration = Duration::from_millis(200);
/// Most suggestions given.
pub const MAX_SUGGESTIONS: usize = 5;
/// Directories never descended into.
const SKIPPED: [&str; 3] = ["target", "node_modules", "__pycache__"];

/// Up to `MAX_SUGGESTIONS` existing paths (relative to `workspace`) near `missing`.
pub fn suggestions(workspace: &Path, missing: &Path) -> Vec<String> {
    let rel = |p: &Path| {
        p.strip_prefix(workspace)
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned()
    };
    // Only plain paths inside the workspace are looked around (never `..`).
    let plain = !missing
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir));
    if !plain || !missing.starts_with(workspace) {
        return Vec::new();
    }
    let same_name = missing
        .file_name()
        .map(|name| same_named(workspace, name))
        .unwrap_or_default();
    if !same_name.is_empty() {
        return same_name.iter().map(|p| rel(p)).collect();
    }
    // The nearest existing ancestor inside the workspace, and what it holds.
    let mut dir = missing.parent();
    while let Some(d) = dir {
        if !d.starts_with(workspace) {
            break;
        }
        if d.is_dir() {
            let mut names: Vec<String> = std::fs::read_dir(d)
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .map(|e| rel(&e.path()))
                .collect();
            names.sort();
            names.truncate(MAX_SUGGESTIONS);
            return names;
        }
        dir = d.parent();
    }
    Vec::new()
}

/// Files named `name` under `root`, breadth first (shallowest first), bounded.
fn same_named(root: &Path, name: &std::ffi::OsStr) -> Vec<std::path::PathBuf> {
    let deadline = Deadline::after("CodeMap path suggestions", BUDGET);
    let mut queue = std::collections::VecDeque::from([root.to_path_buf()]);
    let (mut seen, mut found) = (0, Vec::new());
    while let Some(dir) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES || deadline.expired() {
                return found;
            }
            let file_name = e.file_name();
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() {
                let n = file_name.to_string_lossy();
                if !n.starts_with('.') && !SKIPPED.contains(&n.as_ref()) {
                    queue.push_back(e.path());
                }
            } else if kind.is_file() && file_name == name {
                found.push(e.path());
                if found.len() == MAX_SUGGESTIONS {
                    return found;
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_named_files_first_else_the_nearest_directory() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path();
        std::fs::create_dir_all(ws.join("src/bin/tool")).unwrap();
        std::fs::create_dir_all(ws.join("target/debug")).unwrap();
        std::fs::write(ws.join("src/bin/tool/main.rs"), "").unwrap();
        std::fs::write(ws.join("target/debug/main.rs"), "").unwrap();
        std::fs::write(ws.join("src/lib.rs"), "").unwrap();
        assert_eq!(
            suggestions(ws, &ws.join("src/main.rs")),
            ["src/bin/tool/main.rs"]
        );
        assert_eq!(
            suggestions(ws, &ws.join("src/nothing/x.rs")),
            ["src/bin", "src/lib.rs"]
        );
        assert!(suggestions(ws, &ws.join("../elsewhere/x.rs")).is_empty());
    }
}
