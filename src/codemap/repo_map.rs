//! The repository map: every file under a directory, ranked for a query, a page at a
//! time, each with its top definitions.
//!
//! A map is cut from a snapshot: the walk's list of files with their sizes, mtimes and
//! inodes, hashed with the query into `snapshot_hash`. A page's `next_cursor` names that
//! snapshot; a cursor from another snapshot (a file changed, appeared or went away, or
//! another query) is refused as stale rather than silently paging a different list.
//!
//! Bounds: the walk's entry budget and deadline (`walk::Limits`); files past
//! [`MAX_SCANNED_FILES`] are ranked by path alone; a page holds at most `limit` files and
//! stops early at [`MAX_PAGE_BYTES`] of estimated output.

use super::batch::{self, BATCH};
use super::cache::{Job, Scanned, SymbolCache};
use super::rank::{Query, score, top_symbols};
use super::walk::{self, Limits, Walked};
use super::{Language, Symbol, cursor};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Files scanned for definitions per map: a 20,000-file tree is mapped whole; beyond it,
/// files are ranked by their paths (and say so).
pub const MAX_SCANNED_FILES: usize = 20_000;
/// Estimated output of one page: a few thousand tokens of context.
pub const MAX_PAGE_BYTES: usize = 16 * 1024;
/// Definitions shown per file.
pub const TOP_SYMBOLS: usize = 8;

pub struct MapRequest<'a> {
    /// Canonical workspace (paths are relative to it; its `.gitignore` applies).
    pub base: &'a Path,
    /// Canonical directory mapped: `base` or a directory inside it.
    pub root: &'a Path,
    pub query: &'a str,
    pub cursor: Option<&'a str>,
    /// Files per page.
    pub limit: usize,
    /// Files the session read or edited, most recent first (absolute canonical paths).
    pub recent: &'a [PathBuf],
    /// Threads that read and scan files the cache lacks.
    pub threads: usize,
    pub limits: Limits,
}

/// One file of a page.
#[derive(Clone, Debug)]
pub struct MapFile {
    pub path: String,
    pub lang: Option<Language>,
    pub score: i64,
    pub lines: u32,
    pub symbol_count: usize,
    pub top: Vec<Symbol>,
    pub too_large: bool,
}

#[derive(Clone, Debug)]
pub struct MapPage {
    pub files: Vec<MapFile>,
    /// Files in the whole map (all pages).
    pub total: usize,
    pub offset: usize,
    pub next_cursor: Option<String>,
    pub snapshot: String,
    pub walked: Walked,
    pub binaries: usize,
    /// Files ranked by path only because the scan budget ran out.
    pub unscanned: usize,
}

#[derive(Debug)]
pub enum MapError {
    /// Not a cursor this server makes.
    BadCursor,
    /// A cursor of another snapshot; carries the current one.
    StaleCursor {
        current: String,
    },
    Io(std::io::Error),
}

struct Found {
    rel: String,
    scanned: Option<Arc<Scanned>>,
}

/// Scan the pending jobs on `threads` threads; remember each result and give it to its
/// file.
fn scan_batch(
    jobs: &mut Vec<(usize, Job)>,
    found: &mut [Found],
    cache: &SymbolCache,
    threads: usize,
) {
    let batch = std::mem::take(jobs);
    let done = batch::map_in_order(batch, threads, |(index, job)| {
        let (key, meta) = (job.key.clone(), job.meta);
        (index, key, meta, job.run())
    });
    for (index, key, meta, scanned) in done {
        if let Some(s) = scanned {
            let s = Arc::new(s);
            cache.put(key, meta, s.clone());
            found[index].scanned = Some(s);
        }
    }
}

pub fn map(req: MapRequest, cache: &SymbolCache) -> Result<MapPage, MapError> {
    let wanted = match req.cursor {
        Some(c) => Some(cursor::decode(c).map_err(|_| MapError::BadCursor)?),
        None => None,
    };
    let base_str = req.base.to_string_lossy().into_owned();
    let mut found: Vec<Found> = Vec::new();
    let mut hash = Sha256::new();
    hash.update(req.root.as_os_str().as_encoded_bytes());
    hash.update([0]);
    hash.update(req.query.as_bytes());
    // Files the cache lacks, opened by the walk and scanned a batch at a time.
    let mut jobs: Vec<(usize, Job)> = Vec::new();
    let mut visit = |v: &walk::Visit| {
        hash.update(v.rel.as_bytes());
        hash.update(v.meta.size.to_le_bytes());
        hash.update(v.meta.mtime_ns.to_le_bytes());
        hash.update(v.meta.ino.to_le_bytes());
        let index = found.len();
        let mut scanned = None;
        if index < MAX_SCANNED_FILES {
            let key = format!("{base_str}/{}", v.rel);
            scanned = cache.get(&key, v.meta);
            if scanned.is_none()
                && let Some(job) = Job::open(key, v)
            {
                jobs.push((index, job));
            }
        }
        found.push(Found {
            rel: v.rel.to_string(),
            scanned,
        });
        if jobs.len() >= BATCH {
            scan_batch(&mut jobs, &mut found, cache, req.threads);
        }
    };
    let walked = walk::walk(req.base, req.root, req.limits, &mut visit).map_err(MapError::Io)?;
    scan_batch(&mut jobs, &mut found, cache, req.threads);
    let snapshot = crate::hex::lower(&hash.finalize()[..8]);
    let offset = match wanted {
        Some((s, _)) if s != snapshot => return Err(MapError::StaleCursor { current: snapshot }),
        Some((_, o)) => o,
        None => 0,
    };
    let q = Query::parse(req.query);
    let empty = Scanned::default();
    let binaries = found
        .iter()
        .filter(|f| f.scanned.as_ref().is_some_and(|s| s.binary))
        .count();
    let unscanned = found.len().saturating_sub(MAX_SCANNED_FILES);
    // Recent files by path relative to the base, with their recency rank.
    let recent: std::collections::HashMap<String, usize> = req
        .recent
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            Some((
                p.strip_prefix(req.base)
                    .ok()?
                    .to_string_lossy()
                    .into_owned(),
                i,
            ))
        })
        .collect();
    let mut ranked: Vec<(i64, &Found)> = found
        .iter()
        .filter(|f| !f.scanned.as_ref().is_some_and(|s| s.binary))
        .map(|f| {
            let s = f.scanned.as_deref().unwrap_or(&empty);
            (score(&q, &f.rel, s, recent.get(&f.rel).copied()), f)
        })
        .collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.rel.cmp(&b.1.rel)));
    let total = ranked.len();
    let mut files = Vec::new();
    let mut bytes = 0;
    for (sc, f) in ranked.iter().skip(offset) {
        if files.len() >= req.limit.max(1) || (bytes > MAX_PAGE_BYTES && !files.is_empty()) {
            break;
        }
        let s = f.scanned.as_deref().unwrap_or(&empty);
        let top: Vec<Symbol> = top_symbols(&q, &s.symbols, TOP_SYMBOLS)
            .into_iter()
            .cloned()
            .collect();
        bytes += f.rel.len() + 64 + top.iter().map(|t| t.name.len() + 48).sum::<usize>();
        files.push(MapFile {
            path: f.rel.clone(),
            lang: s.lang,
            score: *sc,
            lines: s.lines,
            symbol_count: s.symbols.len(),
            top,
            too_large: s.too_large,
        });
    }
    let next = offset + files.len();
    Ok(MapPage {
        next_cursor: (next < total).then(|| cursor::encode(&snapshot, next)),
        files,
        total,
        offset,
        snapshot,
        walked,
        binaries,
        unscanned,
    })
}
