//! A bounded workspace overview for full `Initialize` answers: a short file tree that
//! honours .gitignore (through `git ls-files` in a repository, a small matcher elsewhere)
//! and the project's agent guidelines.

use std::fs;
use std::path::Path;
use std::process::Command;

/// Most tree lines shown; the rest is summarised in one marker line.
pub const MAX_TREE_LINES: usize = 40;
/// Files considered when building the tree; bounds the work on huge checkouts.
const MAX_FILES_SCANNED: usize = 20_000;
/// Directory depth of the fallback walk outside git.
const MAX_WALK_DEPTH: usize = 4;
/// Largest guideline excerpt per file; the rest is marked, not dropped silently.
pub const MAX_GUIDELINE_BYTES: usize = 8 * 1024;
/// Guideline files read from the workspace root, in this order.
pub const GUIDELINE_FILES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];
/// Directories never listed by the fallback walk.
const ALWAYS_SKIP: [&str; 4] = [".git", "node_modules", "target", ".winx"];

/// The overview pieces, with their sizes for telemetry.
pub struct Overview {
    pub tree: String,
    pub files_seen: usize,
    pub guidelines: Vec<(String, String)>,
}

/// Workspace-relative files, honouring .gitignore; `true` when git listed them.
pub fn list_files(workspace: &Path) -> (Vec<String>, bool) {
    match git_files(workspace) {
        Some(f) => (f, true),
        None => (walk_files(workspace), false),
    }
}

pub fn build(workspace: &Path) -> Overview {
    let (files, from_git) = list_files(workspace);
    let files_seen = files.len();
    let mut tree = render_tree(&files);
    if !from_git && files_seen >= MAX_FILES_SCANNED {
        tree.push_str(&format!("(scan stopped after {MAX_FILES_SCANNED} files)\n"));
    }
    Overview {
        tree,
        files_seen,
        guidelines: guidelines(workspace),
    }
}

fn git_files(ws: &Path) -> Option<Vec<String>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(ws)
        .args(["ls-files", "-co", "--exclude-standard", "-z"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(
        out.stdout
            .split(|&b| b == 0)
            .filter(|s| !s.is_empty())
            .take(MAX_FILES_SCANNED)
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect(),
    )
}

fn walk_files(ws: &Path) -> Vec<String> {
    let ignore = IgnoreRules::load(ws);
    let mut out = Vec::new();
    let mut stack = vec![(ws.to_path_buf(), String::new(), 0usize)];
    while let Some((dir, rel, depth)) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            if out.len() >= MAX_FILES_SCANNED {
                return out;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let path = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let Ok(ft) = e.file_type() else { continue };
            if ALWAYS_SKIP.contains(&name.as_str()) || ignore.ignored(&name, ft.is_dir()) {
                continue;
            }
            if ft.is_dir() {
                if depth + 1 < MAX_WALK_DEPTH {
                    stack.push((e.path(), path, depth + 1));
                }
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// The root .gitignore, reduced to name patterns (`*` and `?` wildcards, trailing `/`
/// for directories). Negations and nested ignore files are not interpreted: outside git
/// the overview is a hint, not an index.
struct IgnoreRules {
    patterns: Vec<(String, bool)>,
}

impl IgnoreRules {
    fn load(ws: &Path) -> IgnoreRules {
        let text = fs::read_to_string(ws.join(".gitignore")).unwrap_or_default();
        let patterns = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
            .map(|l| {
                let dir_only = l.ends_with('/');
                let p = l.trim_end_matches('/').trim_start_matches('/');
                (p.rsplit('/').next().unwrap_or(p).to_string(), dir_only)
            })
            .filter(|(p, _)| !p.is_empty())
            .collect();
        IgnoreRules { patterns }
    }

    fn ignored(&self, name: &str, is_dir: bool) -> bool {
        self.patterns
            .iter()
            .any(|(p, dir_only)| (!dir_only || is_dir) && glob_match(p.as_bytes(), name.as_bytes()))
    }
}

/// `*` matches any run, `?` one byte; everything else literally.
pub fn glob_match(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si, mut star, mut mark) = (0, 0, None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Top-level files, then each directory (to depth two) with its recursive file count.
fn render_tree(files: &[String]) -> String {
    use std::collections::BTreeMap;
    let mut root_files = Vec::new();
    let mut dirs: BTreeMap<String, usize> = BTreeMap::new();
    for f in files {
        let parts: Vec<&str> = f.split('/').collect();
        if parts.len() == 1 {
            root_files.push(f.as_str());
            continue;
        }
        for depth in 1..parts.len().min(3) {
            *dirs.entry(parts[..depth].join("/")).or_default() += 1;
        }
    }
    root_files.sort_unstable();
    let mut lines: Vec<String> = dirs
        .iter()
        .map(|(d, n)| {
            let indent = "  ".repeat(d.matches('/').count());
            let noun = if *n == 1 { "file" } else { "files" };
            format!("{indent}{d}/ ({n} {noun})")
        })
        .collect();
    lines.extend(root_files.iter().map(|f| f.to_string()));
    let total = lines.len();
    let mut out = String::new();
    for l in lines.iter().take(MAX_TREE_LINES) {
        out.push_str(l);
        out.push('\n');
    }
    if total > MAX_TREE_LINES {
        out.push_str(&format!(
            "… {} more entries not shown\n",
            total - MAX_TREE_LINES
        ));
    }
    if total == 0 {
        out.push_str("(empty)\n");
    }
    out
}

fn guidelines(ws: &Path) -> Vec<(String, String)> {
    GUIDELINE_FILES
        .iter()
        .filter_map(|name| {
            let bytes = fs::read(ws.join(name)).ok()?;
            let mut text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_GUIDELINE_BYTES)])
                .into_owned();
            if bytes.len() > MAX_GUIDELINE_BYTES {
                text.push_str(&format!(
                    "\n… [{name} truncated: {} of {} bytes shown; read the file for the rest]",
                    MAX_GUIDELINE_BYTES,
                    bytes.len()
                ));
            }
            Some((name.to_string(), text))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob() {
        assert!(glob_match(b"*.log", b"a.log"));
        assert!(!glob_match(b"*.log", b"a.txt"));
        assert!(glob_match(b"b?n", b"bin"));
        assert!(glob_match(b"*", b""));
        assert!(!glob_match(b"x", b""));
    }

    #[test]
    fn fallback_walk_honours_root_gitignore() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path();
        fs::create_dir_all(ws.join("src/deep")).unwrap();
        fs::create_dir_all(ws.join("build")).unwrap();
        fs::write(ws.join(".gitignore"), "build/\n*.log\n").unwrap();
        fs::write(ws.join("src/main.rs"), "").unwrap();
        fs::write(ws.join("src/deep/x.rs"), "").unwrap();
        fs::write(ws.join("build/out.o"), "").unwrap();
        fs::write(ws.join("debug.log"), "").unwrap();
        fs::write(ws.join("README.md"), "").unwrap();
        fs::write(ws.join("AGENTS.md"), "be nice").unwrap();
        let files = walk_files(ws);
        assert!(files.contains(&"src/deep/x.rs".to_string()));
        assert!(
            !files
                .iter()
                .any(|f| f.starts_with("build") || f.ends_with(".log"))
        );
        let o = build(ws);
        assert!(o.tree.contains("src/ (2 files)"), "{}", o.tree);
        assert!(o.tree.contains("  src/deep/ (1 file)"), "{}", o.tree);
        assert_eq!(o.guidelines, vec![("AGENTS.md".into(), "be nice".into())]);
    }

    #[test]
    fn tree_and_guidelines_are_bounded_with_markers() {
        let files: Vec<String> = (0..100).map(|i| format!("f{i:03}.txt")).collect();
        let tree = render_tree(&files);
        assert_eq!(tree.lines().count(), MAX_TREE_LINES + 1);
        assert!(tree.contains("60 more entries not shown"));
        let tmp = tempfile::tempdir().unwrap();
        fs::write(
            tmp.path().join("CLAUDE.md"),
            "x".repeat(MAX_GUIDELINE_BYTES + 10),
        )
        .unwrap();
        let g = guidelines(tmp.path());
        assert!(g[0].1.contains("truncated"));
    }
}
