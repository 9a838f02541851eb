//! `report`: offline aggregation of the usage log (JSON, or one HTML page).
//!
//! It opens the active file and its rotated siblings read-only, once each (so a rotation
//! racing the report renames a file it already holds), and reads them oldest first. With
//! `--last N`, a first pass counts the lines the filters select and the second aggregates
//! the last N of them; auxiliary lines (`tool_started`, `tool_phase`) never count towards
//! N (seed 000). Malformed and oversized lines are counted and skipped.
//!
//! Invariant: the report never opens the usage writer and never creates, appends to,
//! renames or prunes a file.

mod aggregate;
mod audit;
mod html;
mod line;
mod sections;
mod stats;
mod svg;

use crate::config::opcli::ReportArgs;
use line::Kind;
use serde_json::{Value, json};
use std::fs::File;
use std::io::{BufRead, BufReader, Seek};
use std::path::{Path, PathBuf};

/// A line longer than this is not one the writer produced (its lines are a few hundred
/// bytes): counted as malformed and skipped without being held in memory.
const MAX_LINE_BYTES: usize = 1 << 20;
const READ_BUFFER: usize = 256 * 1024;

/// What selects lines.
pub struct Filters {
    pub last: Option<u64>,
    /// Only lines stamped at or after this time (Unix ms).
    pub since_ms: Option<i64>,
    pub build: Option<String>,
}

impl Filters {
    /// Whether line `l` of kind `k` passes the time and build filters. Auxiliary lines
    /// carry no build and pass that filter.
    fn keep(&self, k: Kind, l: &line::Line) -> bool {
        if let Some(since) = self.since_ms
            && l.ts_ms.i64().is_none_or(|t| t < since)
        {
            return false;
        }
        match &self.build {
            Some(b) if !k.auxiliary() => l.build.str() == Some(b.as_str()),
            _ => true,
        }
    }
}

/// Per-file and overall line counts.
#[derive(Default)]
struct Tally {
    lines: u64,
    malformed: u64,
    oversized: u64,
    filtered: u64,
}

/// Call `f` with every line of `file` (without its newline); lines longer than
/// `MAX_LINE_BYTES` are skipped and counted in `oversized`.
fn each_line(file: &File, oversized: &mut u64, mut f: impl FnMut(&[u8])) -> std::io::Result<()> {
    let mut r = BufReader::with_capacity(READ_BUFFER, file);
    let mut line = Vec::new();
    let mut skipping = false;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            if !line.is_empty() && !skipping {
                f(&line);
            }
            return Ok(());
        }
        let (chunk, end) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if !skipping {
            if line.len() + chunk.len() > MAX_LINE_BYTES {
                skipping = true;
                *oversized += 1;
                line.clear();
            } else if end.is_some() && line.is_empty() {
                // The whole line is in the buffer: no copy.
                f(chunk);
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = end.unwrap_or(buf.len());
        if end.is_some() {
            if !skipping && !line.is_empty() {
                f(&line);
            }
            line.clear();
            skipping = false;
        }
        r.consume(used);
    }
}

/// The report over the log at `path` (active file and rotated siblings).
pub fn build(path: &Path, filters: &Filters) -> Result<Value, String> {
    let paths = crate::usage::file::log_files(path);
    if paths.is_empty() {
        return Err(format!(
            "no usage log at {} (nor rotated files beside it)",
            path.display()
        ));
    }
    let mut files: Vec<(PathBuf, File)> = Vec::new();
    let mut unreadable = Vec::new();
    for p in paths {
        match File::open(&p) {
            Ok(f) => files.push((p, f)),
            Err(e) => unreadable.push(json!({"file": name(&p), "error": e.to_string()})),
        }
    }
    // Pass 1 (only with --last): how many lines the filters select.
    let skip = match filters.last {
        None => 0,
        Some(n) => {
            let mut selected = 0u64;
            let mut ignored = 0u64;
            for (_, f) in &files {
                let _ = each_line(f, &mut ignored, |b| {
                    if let Some(l) = line::parse(b) {
                        let k = l.kind();
                        selected += u64::from(!k.auxiliary() && filters.keep(k, &l));
                    }
                });
            }
            selected.saturating_sub(n)
        }
    };
    let mut agg = aggregate::Agg::default();
    let mut total = Tally::default();
    let mut per_file = Vec::new();
    let mut seen_selected = 0u64;
    for (p, f) in &mut files {
        let mut t = Tally::default();
        let rewound = f.rewind();
        let read = rewound.and_then(|()| {
            each_line(f, &mut t.oversized, |b| {
                t.lines += 1;
                let Some(l) = line::parse(b) else {
                    t.malformed += 1;
                    return;
                };
                let k = l.kind();
                if !filters.keep(k, &l) {
                    t.filtered += 1;
                    return;
                }
                // The window starts at the first selected line: what precedes it is out.
                if !k.auxiliary() {
                    seen_selected += 1;
                }
                if skip > 0 && seen_selected <= skip {
                    t.filtered += 1;
                    return;
                }
                agg.add(k, &l);
            })
        });
        if let Err(e) = read {
            unreadable.push(json!({"file": name(p), "error": e.to_string()}));
        }
        t.lines += t.oversized;
        per_file.push(
            json!({"file": name(p), "lines": t.lines, "malformed": t.malformed + t.oversized}),
        );
        total.lines += t.lines;
        total.malformed += t.malformed + t.oversized;
        total.oversized += t.oversized;
        total.filtered += t.filtered;
    }
    let mut report = agg.to_json();
    report["source"] = json!({
        "files": per_file,
        "unreadableFiles": unreadable,
        "linesSeen": total.lines,
        "malformedLines": total.malformed,
        "oversizedLines": total.oversized,
        "filteredOut": total.filtered,
        "filters": {
            "last": filters.last,
            "sinceMs": filters.since_ms,
            "build": filters.build,
        },
    });
    report["reportSchema"] = json!(1);
    report["usageSchema"] = json!(crate::usage::event::USAGE_SCHEMA);
    Ok(report)
}

/// A file's name, without its directory (the report names files, not paths).
fn name(p: &Path) -> String {
    p.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// The `report` verb: the log of `--log`, else of `WINX_USAGE_LOG`; `now_ms` on the
/// log's clock (for `--since-minutes`).
pub fn run(args: &ReportArgs, configured: Option<&Path>, now_ms: i64) -> Result<String, String> {
    let path = args
        .log
        .as_deref()
        .or(configured)
        .ok_or("no usage log to read: pass --log PATH or set WINX_USAGE_LOG")?;
    let filters = Filters {
        last: args.last,
        since_ms: args
            .since_minutes
            .filter(|m| *m > 0)
            .map(|m| now_ms - (m as i64).saturating_mul(60_000)),
        build: args.build.clone(),
    };
    let report = build(path, &filters)?;
    Ok(match args.html {
        true => html::render(&report),
        false => serde_json::to_string_pretty(&report).unwrap_or_default() + "\n",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn lines_are_split_bounded_and_the_last_one_needs_no_newline() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("f");
        let mut f = File::create(&p).unwrap();
        f.write_all(b"a\n\nbb\n").unwrap();
        f.write_all(&vec![b'x'; MAX_LINE_BYTES + 10]).unwrap();
        f.write_all(b"\nccc").unwrap();
        let mut lines = Vec::new();
        let mut over = 0;
        each_line(&File::open(&p).unwrap(), &mut over, |l| {
            lines.push(l.to_vec())
        })
        .unwrap();
        assert_eq!(
            lines,
            [b"a".to_vec(), b"".to_vec(), b"bb".to_vec(), b"ccc".to_vec()]
        );
        assert_eq!(over, 1);
    }
}
