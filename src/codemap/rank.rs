//! Ranking a repository's files for a query: terms matched against each file's path and
//! the names of the definitions it holds, then what the session touched recently, then
//! path heuristics (sources before tests and vendored code, entry points, shallow paths).
//! Scores are integers so equal inputs always rank equally; ties fall back to the path.

use super::Symbol;
use super::cache::Scanned;

/// Query terms kept: a sentence-long query is still a handful of words.
pub const MAX_TERMS: usize = 16;

/// A query split into lower-case terms: on anything not alphanumeric, on `_`, and at
/// camelCase boundaries (`GuardianClient` → `guardian`, `client`, and the whole word).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Query {
    pub terms: Vec<String>,
}

impl Query {
    pub fn parse(q: &str) -> Query {
        let mut terms: Vec<String> = Vec::new();
        let mut push = |t: String| {
            if t.chars().count() >= 2 && !terms.contains(&t) && terms.len() < MAX_TERMS {
                terms.push(t);
            }
        };
        for word in q.split(|c: char| !c.is_alphanumeric() && c != '_') {
            push(word.to_lowercase());
            let mut part = String::new();
            let mut prev_lower = false;
            for c in word.chars() {
                if c == '_' || (c.is_uppercase() && prev_lower) {
                    push(std::mem::take(&mut part).to_lowercase());
                }
                if c != '_' {
                    part.push(c);
                }
                prev_lower = c.is_lowercase() || c.is_ascii_digit();
            }
            push(part.to_lowercase());
        }
        Query { terms }
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// How well `name` answers the query (0 when no term is in it). Compared without
    /// allocating: a map scores every definition of thousands of files.
    pub fn name_score(&self, name: &str) -> i64 {
        let name = name.as_bytes();
        self.terms
            .iter()
            .map(|t| {
                let t = t.as_bytes();
                if ci_eq(name, t) {
                    12
                } else if name.len() >= t.len() && ci_eq(&name[..t.len()], t) {
                    8
                } else if name.len() > t.len() && name.windows(t.len()).any(|w| ci_eq(w, t)) {
                    4
                } else {
                    0
                }
            })
            .sum()
    }
}

/// `a` equals the lower-case `b`, ignoring ASCII case.
fn ci_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_ascii_lowercase() == *y)
}

/// Path segments that mark code read less often than sources.
const SECONDARY: &[&str] = &[
    "test",
    "tests",
    "spec",
    "specs",
    "fixtures",
    "testdata",
    "vendor",
    "third_party",
    "node_modules",
    "dist",
    "build",
    "target",
    "examples",
    "docs",
    "benches",
    "bench",
];
/// File names that are a module's or program's entry point.
const ENTRY_POINTS: &[&str] = &[
    "main.rs",
    "lib.rs",
    "mod.rs",
    "index.js",
    "index.ts",
    "__init__.py",
    "main.go",
    "main.py",
    "app.py",
    "main.c",
    "main.cpp",
    "Main.java",
];

/// The score of one file. `recent` is its rank among the files the session read or
/// edited most recently (0 = the latest), if it is one.
pub fn score(q: &Query, rel: &str, s: &Scanned, recent: Option<usize>) -> i64 {
    let lower = rel.to_lowercase();
    let segments: Vec<&str> = lower.split('/').collect();
    let file = segments.last().copied().unwrap_or_default();
    let stem = file.split('.').next().unwrap_or(file);
    let dirs = &segments[..segments.len().saturating_sub(1)];
    let mut total = 0i64;
    for t in &q.terms {
        let t = t.as_str();
        total += if stem == t {
            30
        } else if stem.contains(t) {
            15
        } else {
            0
        };
        total += if dirs.contains(&t) {
            25
        } else if dirs.iter().any(|d| d.contains(t)) {
            10
        } else {
            0
        };
        // The definitions: the best match (types above members), plus a little for each
        // further one — a file defining the thing weighs about as much as one named so.
        let one = Query {
            terms: vec![t.to_string()],
        };
        let mut best = 0;
        let mut count = 0;
        for sym in &s.symbols {
            let n = one.name_score(&sym.name);
            if n > 0 {
                best = best.max(n + i64::from(sym.kind.weight()) - 1);
                count += 1;
            }
        }
        total += best + count.min(5);
    }
    total += match recent {
        Some(r) if r < 5 => 10,
        Some(_) => 5,
        None => 0,
    };
    if dirs.iter().any(|d| SECONDARY.contains(d))
        || file.contains(".min.")
        || file.contains("_test.")
        || file.starts_with("test_")
    {
        total -= 6;
    }
    if dirs
        .first()
        .is_some_and(|d| matches!(*d, "src" | "lib" | "pkg" | "cmd" | "app"))
    {
        total += 2;
    }
    if ENTRY_POINTS.iter().any(|e| e.eq_ignore_ascii_case(file)) {
        total += 3;
    }
    if s.lang.is_some() {
        total += 4 + (usize::BITS - s.symbols.len().leading_zeros()).min(10) as i64;
    }
    total - dirs.len() as i64
}

/// The `n` definitions that best present a file: those matching the query first, then
/// top-level types and functions before members, then in source order; test modules and
/// what they hold last.
pub fn top_symbols<'s>(q: &Query, symbols: &'s [Symbol], n: usize) -> Vec<&'s Symbol> {
    let mut order: Vec<(i64, u32, u32, &Symbol)> = symbols
        .iter()
        .map(|s| {
            let nested = u32::from(s.parent.is_some());
            let test = s.name == "tests" || s.parent.as_deref() == Some("tests");
            let rank = 3 - s.kind.weight() + 3 * nested + 10 * u32::from(test);
            (-q.name_score(&s.name), rank, s.line, s)
        })
        .collect();
    order.sort_by_key(|&(m, w, line, _)| (m, w, line));
    order.into_iter().take(n).map(|(.., s)| s).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codemap::Language;
    use crate::codemap::cache::scan;

    #[test]
    fn queries_split_into_terms() {
        assert_eq!(
            Query::parse("GuardianClient spawn_pty!").terms,
            [
                "guardianclient",
                "guardian",
                "client",
                "spawn_pty",
                "spawn",
                "pty"
            ]
        );
        assert!(Query::parse(" a ").is_empty());
    }

    #[test]
    fn paths_and_definitions_both_count() {
        let q = Query::parse("guardian");
        let code = scan(Some(Language::Rust), b"pub struct Guardian;\nfn run() {}\n");
        let other = scan(Some(Language::Rust), b"fn unrelated() {}\n");
        let in_dir = score(&q, "src/guardian/event_loop.rs", &other, None);
        let by_symbol = score(&q, "src/ipc/client.rs", &code, None);
        let neither = score(&q, "src/ipc/other.rs", &other, None);
        assert!(in_dir > neither && by_symbol > neither);
        let test = score(&q, "tests/guardian/x.rs", &other, None);
        assert!(in_dir > test, "sources rank above tests");
        let recent = score(&q, "src/ipc/other.rs", &other, Some(0));
        assert!(recent > neither);
    }
}
