//! The references of a name: every identifier token spelled exactly so — never text in a
//! string or a comment — in the files under a directory, definitions first.
//!
//! A file whose cached identifier filter lacks the name is skipped unread; the others are
//! read, lexed and (when their cache entry is stale) re-scanned, so a references search
//! also warms the repository map.
//!
//! Bounds: the walk's limits; at most [`MAX_COLLECTED`] occurrences are kept for sorting
//! (the rest are counted); the answer holds at most `limit`.

use super::batch::{self, BATCH};
use super::cache::{self, Scanned, SymbolCache};
use super::lex::{self, Tk};
use super::walk::{self, Limits, Meta, Walked};
use super::{Kind, Language, MAX_SCAN_BYTES};
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

/// Occurrences gathered before the rest are only counted.
pub const MAX_COLLECTED: usize = 10_000;
/// Characters of a line shown with an occurrence.
pub const MAX_LINE_CHARS: usize = 160;

pub struct RefRequest<'a> {
    pub base: &'a Path,
    pub root: &'a Path,
    pub name: &'a str,
    /// Search this one file (path relative to `base`) instead of all of `root`.
    pub only: Option<&'a str>,
    pub limit: usize,
    /// Threads that read and lex files.
    pub threads: usize,
    pub limits: Limits,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Occurrence {
    pub path: String,
    pub line: u32,
    /// 1-based byte column.
    pub column: u32,
    /// The kind of definition made here, if this occurrence defines the name.
    pub definition: Option<Kind>,
    /// The line, trimmed and cut to [`MAX_LINE_CHARS`].
    pub text: String,
}

#[derive(Clone, Debug, Default)]
pub struct Refs {
    pub occurrences: Vec<Occurrence>,
    /// Occurrences found in all (the answer may hold fewer).
    pub total: usize,
    pub definitions: usize,
    pub files_read: usize,
    /// Files skipped unread because their identifier filter lacks the name.
    pub files_filtered: usize,
    pub walked: Walked,
}

/// A file to search, opened by the walk.
struct Job {
    rel: String,
    key: String,
    meta: Meta,
    lang: Language,
    file: File,
    cached: Option<Arc<Scanned>>,
}

/// What one file gave: its occurrences (at most [`MAX_COLLECTED`]), how many there were,
/// and its scan when the cache lacked it.
struct Done {
    occurrences: Vec<Occurrence>,
    count: usize,
    fresh: Option<(String, Meta, Arc<Scanned>)>,
}

fn search(job: Job, name: &[u8]) -> Option<Done> {
    let bytes = walk::read_limited(job.file, MAX_SCAN_BYTES).ok()?;
    if cache::is_binary(&bytes) {
        let fresh = (job.cached.is_none()).then(|| {
            (
                job.key,
                job.meta,
                Arc::new(cache::scan(Some(job.lang), &bytes)),
            )
        });
        return Some(Done {
            occurrences: Vec::new(),
            count: 0,
            fresh,
        });
    }
    let lx = lex::lex(job.lang, &bytes);
    let (scanned, fresh) = match job.cached {
        Some(s) => (s, None),
        None => {
            let s = Arc::new(cache::scan_lexed(job.lang, &lx));
            (s.clone(), Some((job.key, job.meta, s)))
        }
    };
    let mut done = Done {
        occurrences: Vec::new(),
        count: 0,
        fresh,
    };
    if !scanned.idents.may_contain(name) {
        return Some(done);
    }
    for (i, t) in lx.toks.iter().enumerate() {
        if t.kind != Tk::Ident || lx.text(i) != name {
            continue;
        }
        done.count += 1;
        if done.occurrences.len() >= MAX_COLLECTED {
            continue;
        }
        let definition = scanned
            .symbols
            .iter()
            .find(|s| s.line == t.line && s.name.as_bytes() == name)
            .map(|s| s.kind);
        done.occurrences.push(Occurrence {
            path: job.rel.clone(),
            line: t.line,
            column: t.col + 1,
            definition,
            text: line_text(&bytes, t.start as usize),
        });
    }
    Some(done)
}

pub fn references(req: RefRequest, cache: &SymbolCache) -> std::io::Result<Refs> {
    let base_str = req.base.to_string_lossy().into_owned();
    let name = req.name.as_bytes();
    let mut out = Refs::default();
    let mut found: Vec<Occurrence> = Vec::new();
    let mut jobs: Vec<Job> = Vec::new();
    let flush = |jobs: &mut Vec<Job>, out: &mut Refs, found: &mut Vec<Occurrence>| {
        let done = batch::map_in_order(std::mem::take(jobs), req.threads, |job| search(job, name));
        for d in done.into_iter().flatten() {
            out.files_read += 1;
            out.total += d.count;
            if let Some((key, meta, s)) = d.fresh {
                cache.put(key, meta, s);
            }
            let room = MAX_COLLECTED.saturating_sub(found.len());
            found.extend(d.occurrences.into_iter().take(room));
        }
    };
    let mut visit = |v: &walk::Visit| {
        if req.only.is_some_and(|o| o != v.rel) {
            return;
        }
        let Some(lang) = Language::of_path(Path::new(v.rel)) else {
            return;
        };
        if v.meta.size > MAX_SCAN_BYTES {
            return;
        }
        let key = format!("{base_str}/{}", v.rel);
        let cached = cache.get(&key, v.meta);
        if cached
            .as_ref()
            .is_some_and(|s| s.binary || !s.idents.may_contain(name))
        {
            out.files_filtered += 1;
            return;
        }
        let Ok(file) = walk::open(v) else {
            return;
        };
        jobs.push(Job {
            rel: v.rel.to_string(),
            key,
            meta: v.meta,
            lang,
            file,
            cached,
        });
        if jobs.len() >= BATCH {
            flush(&mut jobs, &mut out, &mut found);
        }
    };
    let walked = walk::walk(req.base, req.root, req.limits, &mut visit)?;
    flush(&mut jobs, &mut out, &mut found);
    // One definition per (file, line): a name repeated on its own definition line (a
    // recursive call) is a use.
    let mut seen = std::collections::HashSet::new();
    for o in &mut found {
        if o.definition.is_some() && !seen.insert((o.path.clone(), o.line)) {
            o.definition = None;
        }
    }
    out.definitions = found.iter().filter(|o| o.definition.is_some()).count();
    // Definitions first; then in walk order (path, line), which `found` already has.
    found.sort_by_key(|o| o.definition.is_none());
    found.truncate(req.limit);
    out.occurrences = found;
    out.walked = walked;
    Ok(out)
}

/// The line around byte `at`, trimmed and cut at a character boundary.
fn line_text(src: &[u8], at: usize) -> String {
    let start = src[..at]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let end = src[at..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(src.len(), |i| at + i);
    let line = String::from_utf8_lossy(&src[start..end]);
    let line = line.trim();
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_string(),
    }
}
