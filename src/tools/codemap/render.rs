//! CodeMap's answers: the text an agent reads (compact, one definition or file per line)
//! and the envelope's `data` (the same facts, structured).

use crate::codemap::references::Refs;
use crate::codemap::repo_map::MapPage;
use crate::codemap::walk::Truncated;
use crate::codemap::{Kind, Language, MAX_SCAN_BYTES, Symbol};
use crate::tools::envelope::{Envelope, NextAction, ToolOutput};
use crate::tools::name::ToolName;
use serde_json::{Value, json};
use std::fmt::Write;
use std::path::Path;

const TOOL: ToolName = ToolName::CodeMap;
/// Definitions listed in one file's outline: a 10,000-line file's whole outline is a few
/// hundred; a generated one is cut here (and says how many were left out).
pub const MAX_OUTLINE_SYMBOLS: usize = 500;

fn output(text: String, message: String, data: Value, next: Option<NextAction>) -> ToolOutput {
    let mut envelope = Envelope::completed(TOOL, message, data);
    envelope.next_action = next;
    ToolOutput {
        text,
        envelope,
        images: Vec::new(),
    }
}

fn read_next(path: &Path, instruction: &str) -> NextAction {
    NextAction {
        tool: "ReadFiles".into(),
        instruction: instruction.into(),
        arguments: json!({"file_paths": [path.display().to_string()]}),
    }
}

fn symbol_json(s: &Symbol) -> Value {
    json!({"name": s.name, "kind": s.kind.as_str(), "line": s.line, "end_line": s.end_line, "parent": s.parent})
}

/// A file's outline, nested by line ranges.
pub fn outline(
    shown: &str,
    canonical: &Path,
    lang: Language,
    lines: u32,
    symbols: &[Symbol],
) -> ToolOutput {
    let kept = &symbols[..symbols.len().min(MAX_OUTLINE_SYMBOLS)];
    let mut text = format!(
        "## {shown} ({}, {lines} lines, {} definitions)\n",
        lang.as_str(),
        symbols.len()
    );
    // Indentation: how many kept definitions enclose this one.
    let mut open: Vec<u32> = Vec::new();
    for s in kept {
        while open.last().is_some_and(|&end| end < s.line) {
            open.pop();
        }
        let indent = "  ".repeat(open.len());
        let _ = writeln!(
            text,
            "{:>6}-{:<6} {indent}{} {}",
            s.line,
            s.end_line,
            s.kind.as_str(),
            s.name
        );
        if s.end_line > s.line {
            open.push(s.end_line);
        }
    }
    let omitted = symbols.len() - kept.len();
    if omitted > 0 {
        let _ = writeln!(text, "… {omitted} more definitions not shown");
    }
    // The example read: a function's body if there is one, not a whole module.
    let spans = |s: &&Symbol| s.end_line > s.line;
    let first = kept
        .iter()
        .filter(spans)
        .find(|s| matches!(s.kind, Kind::Function | Kind::Method))
        .or_else(|| {
            kept.iter()
                .filter(spans)
                .find(|s| !matches!(s.kind, Kind::Module | Kind::Namespace | Kind::Impl))
        })
        .or(kept.first());
    let next = first.map(|s| {
        let mut n = read_next(canonical, "Read only the definition you need.");
        n.arguments =
            json!({"file_paths": [format!("{}:{}-{}", canonical.display(), s.line, s.end_line)]});
        n
    });
    if let Some(s) = first {
        let _ = writeln!(
            text,
            "Read one: ReadFiles \"{shown}:{}-{}\"",
            s.line, s.end_line
        );
    }
    let data = json!({
        "operation": "outline", "path": shown, "language": lang.as_str(), "language_supported": true,
        "lines": lines, "total_symbols": symbols.len(), "omitted": omitted,
        "symbols": kept.iter().map(symbol_json).collect::<Vec<_>>(),
    });
    let message = format!("CodeMap: {} definitions in {shown}", symbols.len());
    output(text, message, data, next)
}

/// A file no scanner reads.
pub fn unsupported(shown: &str, canonical: &Path) -> ToolOutput {
    let langs: Vec<&str> = Language::ALL.iter().map(|l| l.as_str()).collect();
    let text = format!(
        "## {shown}\nNo outline: CodeMap reads {}. Read the file with ReadFiles.\n",
        langs.join(", ")
    );
    let data = json!({"operation": "outline", "path": shown, "language": null, "language_supported": false});
    let next = read_next(
        canonical,
        "CodeMap does not outline this language; read the file.",
    );
    output(
        text,
        format!("CodeMap: {shown} is not in a supported language"),
        data,
        Some(next),
    )
}

pub fn binary(shown: &str, lang: Language) -> ToolOutput {
    let text = format!("## {shown}\nBinary data (a NUL byte near the start): not outlined.\n");
    let data = json!({"operation": "outline", "path": shown, "language": lang.as_str(),
        "language_supported": true, "binary": true, "symbols": []});
    output(text, format!("CodeMap: {shown} is binary"), data, None)
}

pub fn too_large(shown: &str, canonical: &Path) -> ToolOutput {
    let text = format!(
        "## {shown}\nOver {MAX_SCAN_BYTES} bytes: not outlined (usually generated). Search it with `grep -n` or read ranges.\n"
    );
    let data = json!({"operation": "outline", "path": shown, "too_large": true, "limit_bytes": MAX_SCAN_BYTES, "symbols": []});
    let next = read_next(canonical, "Read the ranges you need.");
    output(
        text,
        format!("CodeMap: {shown} is too large to outline"),
        data,
        Some(next),
    )
}

fn truncation(t: Option<Truncated>) -> Value {
    match t {
        None => Value::Null,
        Some(Truncated::Entries(n)) => json!(format!("entry budget ({n} directory entries)")),
        Some(Truncated::Deadline) => json!("time budget"),
        Some(Truncated::Depth) => json!("directory depth"),
    }
}

/// One page of a repository map.
pub fn map(shown: &str, query: &str, page: &MapPage) -> ToolOutput {
    let mut text = format!(
        "## map of {shown}{} — files {}-{} of {} (snapshot {})\n",
        if query.is_empty() {
            String::new()
        } else {
            format!(" for \"{query}\"")
        },
        page.offset + usize::from(!page.files.is_empty()),
        page.offset + page.files.len(),
        page.total,
        page.snapshot
    );
    let mut files = Vec::new();
    for f in &page.files {
        let lang = f.lang.map_or("-", Language::as_str);
        let syms: Vec<String> = f
            .top
            .iter()
            .map(|s| format!("{} {}:{}", s.kind.as_str(), s.name, s.line))
            .collect();
        let more = f.symbol_count.saturating_sub(f.top.len());
        let _ = write!(text, "{} ({lang}, {} lines)", f.path, f.lines);
        if !syms.is_empty() {
            let _ = write!(text, ": {}", syms.join(", "));
        }
        if more > 0 {
            let _ = write!(text, " +{more}");
        }
        if f.too_large {
            text.push_str(" [too large to outline]");
        }
        text.push('\n');
        files.push(json!({
            "path": f.path, "language": f.lang.map(Language::as_str), "lines": f.lines,
            "symbols": f.symbol_count, "top": f.top.iter().map(symbol_json).collect::<Vec<_>>(),
            "too_large": f.too_large,
        }));
    }
    if let Some(c) = &page.next_cursor {
        let _ = writeln!(text, "Next page: CodeMap with cursor \"{c}\"");
    }
    if let Some(t) = page.walked.truncated {
        let _ = writeln!(
            text,
            "Walk stopped early ({}); map a subdirectory for the rest.",
            truncation(Some(t)).as_str().unwrap_or("")
        );
    }
    let data = json!({
        "operation": "outline", "path": shown, "query": query, "files": files,
        "total_files": page.total, "offset": page.offset, "next_cursor": page.next_cursor,
        "snapshot_hash": page.snapshot, "truncated": truncation(page.walked.truncated),
        "unscanned_files": page.unscanned,
        "skipped": {"binary": page.binaries, "ignored": page.walked.ignored, "symlinks": page.walked.symlinks},
    });
    let message = format!(
        "CodeMap: {} of {} files of {shown}",
        page.files.len(),
        page.total
    );
    output(text, message, data, None)
}

/// The references of `name`.
pub fn references(name: &str, shown: &str, refs: &Refs) -> ToolOutput {
    let mut text = format!(
        "## references of {name} in {shown}: {} ({} definitions){}\n",
        refs.total,
        refs.definitions,
        if refs.total > refs.occurrences.len() {
            format!(", first {} shown", refs.occurrences.len())
        } else {
            String::new()
        }
    );
    for o in &refs.occurrences {
        let def = o
            .definition
            .map(|k| format!("[{}] ", k.as_str()))
            .unwrap_or_default();
        let _ = writeln!(text, "{}:{}:{} {def}{}", o.path, o.line, o.column, o.text);
    }
    if refs.files_filtered > 0 {
        let _ = writeln!(
            text,
            "{} file(s) read; {} skipped unread: their cached identifier index (from an \
             earlier scan, still current) shows they cannot contain {name}.",
            refs.files_read, refs.files_filtered
        );
    }
    if let Some(t) = refs.walked.truncated {
        let _ = writeln!(
            text,
            "Search stopped early ({}).",
            truncation(Some(t)).as_str().unwrap_or("")
        );
    }
    let occurrences: Vec<Value> = refs
        .occurrences
        .iter()
        .map(|o| {
            json!({"path": o.path, "line": o.line, "column": o.column,
            "definition": o.definition.map(|k| k.as_str()), "text": o.text})
        })
        .collect();
    let data = json!({
        "operation": "references", "name": name, "path": shown, "total": refs.total,
        "definitions": refs.definitions, "occurrences": occurrences,
        "truncated": refs.total > refs.occurrences.len() || refs.walked.truncated.is_some(),
        "files_read": refs.files_read, "files_skipped_unread": refs.files_filtered,
    });
    let message = format!("CodeMap: {} references of {name}", refs.total);
    output(text, message, data, None)
}
