//! What CodeMap remembers between calls: each scanned file's outline, line count and a
//! small Bloom filter of its identifiers, keyed by absolute path and validated by the
//! file's (device, inode, size, mtime) from the walk's own `fstatat`.
//!
//! Invalidation: an entry is used only when all four stamps equal the file's current
//! ones, so any write (which moves mtime or size), a replacement (a new inode) or a
//! rename over it rescans the file; entries of deleted files are never looked up again
//! and age out. Bound: at most [`MAX_CACHED_FILES`] entries, least recently used evicted
//! first (`crate::lru`). The cache is owned by the tools' state registry, shared by the
//! sessions of one server process (an entry holds nothing a session could not read from
//! the file itself, and each lookup is for a file that caller's walk reached).

use super::lex::{self, Tk};
use super::walk::{self, Meta, Visit};
use super::{Language, MAX_SCAN_BYTES, Symbol, outline};
use crate::lru::Lru;
use parking_lot::Mutex;
use std::fs::File;
use std::sync::Arc;

/// Files remembered: a 20,000-file repository map stays warm; with a typical few dozen
/// definitions per file this is tens of MiB at most.
pub const MAX_CACHED_FILES: usize = 20_000;
/// Bytes sniffed at the start of a file CodeMap does not outline, to tell text from a
/// binary: enough for any binary format's header and NUL bytes.
pub const SNIFF_BYTES: u64 = 512;
/// Bytes of an outlined file searched for a NUL (git's own binary test uses 8 KiB).
const BINARY_PROBE: usize = 8 * 1024;

/// 512 bits of identifier hashes (two bits each): `references` skips a file whose filter
/// lacks the name without reading it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bloom([u64; 8]);

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl Bloom {
    fn bits(word: &[u8]) -> [usize; 2] {
        let h = fnv(word);
        [(h % 512) as usize, ((h >> 32) % 512) as usize]
    }

    pub fn insert(&mut self, word: &[u8]) {
        for b in Self::bits(word) {
            self.0[b / 64] |= 1 << (b % 64);
        }
    }

    /// False only when `word` was never inserted.
    pub fn may_contain(&self, word: &[u8]) -> bool {
        Self::bits(word)
            .iter()
            .all(|&b| self.0[b / 64] & (1 << (b % 64)) != 0)
    }
}

/// One file as CodeMap sees it.
#[derive(Clone, Debug, Default)]
pub struct Scanned {
    pub lang: Option<Language>,
    /// A NUL byte near the start: not text, not outlined, not listed.
    pub binary: bool,
    /// Over [`MAX_SCAN_BYTES`]: listed by path only.
    pub too_large: bool,
    pub lines: u32,
    pub symbols: Vec<Symbol>,
    pub idents: Bloom,
}

/// Does a file starting with `bytes` hold binary data (a NUL byte near its start)?
pub fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(BINARY_PROBE)].contains(&0)
}

/// Scan `bytes` (the whole file, or its first bytes for a language CodeMap does not read).
pub fn scan(lang: Option<Language>, bytes: &[u8]) -> Scanned {
    let binary = is_binary(bytes);
    let Some(lang) = lang.filter(|_| !binary) else {
        return Scanned {
            lang,
            binary,
            ..Scanned::default()
        };
    };
    scan_lexed(lang, &lex::lex(lang, bytes))
}

/// `scan` of a file already lexed as `lang` (and known not to be binary).
pub fn scan_lexed(lang: Language, lx: &lex::Lexed) -> Scanned {
    let mut idents = Bloom::default();
    for (i, t) in lx.toks.iter().enumerate() {
        if t.kind == Tk::Ident {
            idents.insert(lx.text(i));
        }
    }
    Scanned {
        lang: Some(lang),
        binary: false,
        too_large: false,
        lines: lx.lines,
        symbols: outline::outline_lexed(lang, lx),
        idents,
    }
}

/// The outlines of recently scanned files (see the module docs).
pub struct SymbolCache {
    limit: usize,
    map: Mutex<Lru<String, (Meta, Arc<Scanned>)>>,
}

impl Default for SymbolCache {
    fn default() -> Self {
        SymbolCache::new(MAX_CACHED_FILES)
    }
}

impl SymbolCache {
    pub fn new(limit: usize) -> SymbolCache {
        SymbolCache {
            limit: limit.max(1),
            map: Mutex::new(Lru::default()),
        }
    }

    pub fn len(&self) -> usize {
        self.map.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry of `key` if its stamps are still `meta`.
    pub fn get(&self, key: &String, meta: Meta) -> Option<Arc<Scanned>> {
        let mut map = self.map.lock();
        match map.get(key) {
            Some((m, s)) if *m == meta => Some(s.clone()),
            _ => None,
        }
    }

    pub fn put(&self, key: String, meta: Meta, scanned: Arc<Scanned>) {
        let mut map = self.map.lock();
        map.insert(key, (meta, scanned));
        map.evict(self.limit, |_| true);
    }
}

/// A file to read for the cache: opened (without following a symlink) by the walk,
/// read and scanned later, possibly on another thread.
pub struct Job {
    pub key: String,
    pub meta: Meta,
    pub lang: Option<Language>,
    file: Option<File>,
}

impl Job {
    /// The job for visited file `v` (absolute path `key`); `None` when it cannot be opened
    /// (gone, unreadable, replaced meanwhile).
    pub fn open(key: String, v: &Visit) -> Option<Job> {
        let lang = Language::of_path(std::path::Path::new(v.rel));
        // Over the limit: listed by path only, never read.
        let file = if v.meta.size > MAX_SCAN_BYTES {
            None
        } else {
            Some(walk::open(v).ok()?)
        };
        Some(Job {
            key,
            meta: v.meta,
            lang,
            file,
        })
    }

    /// Read and scan: the whole file for a language CodeMap reads, its first bytes
    /// otherwise. `None` when the read fails.
    pub fn run(self) -> Option<Scanned> {
        let Some(file) = self.file else {
            return Some(Scanned {
                lang: self.lang,
                too_large: true,
                ..Scanned::default()
            });
        };
        let limit = if self.lang.is_some() {
            MAX_SCAN_BYTES
        } else {
            SNIFF_BYTES
        };
        let bytes = walk::read_limited(file, limit).ok()?;
        Some(scan(self.lang, &bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bloom_has_no_false_negatives() {
        let mut b = Bloom::default();
        let words: Vec<String> = (0..100).map(|i| format!("ident_{i}")).collect();
        words.iter().for_each(|w| b.insert(w.as_bytes()));
        assert!(words.iter().all(|w| b.may_contain(w.as_bytes())));
        let misses = (0..1000)
            .filter(|i| !b.may_contain(format!("other_{i}").as_bytes()))
            .count();
        assert!(
            misses > 500,
            "a filter of 100 names rejects most others: {misses}"
        );
    }

    #[test]
    fn entries_are_used_only_while_the_stamps_hold() {
        let c = SymbolCache::new(2);
        let m = Meta {
            dev: 1,
            ino: 2,
            size: 3,
            mtime_ns: 4,
        };
        c.put(
            "/a".into(),
            m,
            Arc::new(scan(Some(Language::Rust), b"fn a() {}")),
        );
        assert_eq!(c.get(&"/a".into(), m).unwrap().symbols[0].name, "a");
        assert!(c.get(&"/a".into(), Meta { mtime_ns: 5, ..m }).is_none());
        assert!(c.get(&"/a".into(), Meta { ino: 9, ..m }).is_none());
        c.put("/b".into(), m, Arc::new(Scanned::default()));
        c.put("/c".into(), m, Arc::new(Scanned::default()));
        assert_eq!(c.len(), 2);
        assert!(c.get(&"/a".into(), m).is_none(), "the oldest is evicted");
    }

    #[test]
    fn binaries_are_not_outlined() {
        let s = scan(Some(Language::C), b"int f(void) { return 0; }\0\x01");
        assert!(s.binary && s.symbols.is_empty());
        let s = scan(None, b"plain text");
        assert!(!s.binary && s.symbols.is_empty());
    }
}
