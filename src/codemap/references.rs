//! The references of a name: every identifier token spelled exactly so — never text in a
//! string or a comment — in the files under a directory, definitions first.
//!
//! A file whose cached identifier filter lacks the name is skipped unread; the others are
//! read, lexed and (when their cache entry is stale) re-scanned, so a references search
//! also warms the repository map.
//!
//! Bounds: the walk's limits; at most [`MAX_COLLECTED`] occurrences are kept for sorting
//! (the rest are counted); the answer holds at most `limit`.

use super::cache::{self, SymbolCache};
use super::lex::{self, Tk};
use super::walk::{self, Limits, Walked};
use super::{Kind, Language, MAX_SCAN_BYTES};
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

pub fn references(req: RefRequest, cache: &SymbolCache) -> std::io::Result<Refs> {
    let base_str = req.base.to_string_lossy().into_owned();
    let name = req.name.as_bytes();
    let mut out = Refs::default();
    let mut found: Vec<Occurrence> = Vec::new();
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
        let Some(bytes) = walk::open(v)
            .and_then(|f| walk::read_limited(f, MAX_SCAN_BYTES))
            .ok()
        else {
            return;
        };
        out.files_read += 1;
        if cache::is_binary(&bytes) {
            cache.put(key, v.meta, Arc::new(cache::scan(Some(lang), &bytes)));
            return;
        }
        let lx = lex::lex(lang, &bytes);
        let scanned = match cached {
            Some(s) => s,
            None => {
                let s = Arc::new(cache::scan_lexed(lang, &lx));
                cache.put(key, v.meta, s.clone());
                s
            }
        };
        for (i, t) in lx.toks.iter().enumerate() {
            if t.kind != Tk::Ident || lx.text(i) != name {
                continue;
            }
            out.total += 1;
            if found.len() >= MAX_COLLECTED {
                continue;
            }
            let definition = scanned
                .symbols
                .iter()
                .find(|s| s.line == t.line && s.name.as_bytes() == name)
                .map(|s| s.kind);
            found.push(Occurrence {
                path: v.rel.to_string(),
                line: t.line,
                column: t.col + 1,
                definition,
                text: line_text(&bytes, t.start as usize),
            });
        }
    };
    let walked = walk::walk(req.base, req.root, req.limits, &mut visit)?;
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
