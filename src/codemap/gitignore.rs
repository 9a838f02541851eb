//! `.gitignore` rules, hand-written for the syntax repositories use: comments, blank
//! lines, `!` negation, a trailing `/` for directories only, a leading or inner `/` to
//! anchor a pattern to its file's directory, `*`, `?`, `[a-z]`/`[!x]` classes, `**` (in
//! front, at the end, and between slashes), and `\` escapes.
//!
//! Precedence is git's: the deepest `.gitignore` with a matching rule decides, and within
//! a file the last matching rule. A path below an ignored directory is never reached (the
//! walk does not descend), which is git's "cannot re-include under an excluded parent".
//!
//! Invariant: matching is bounded — a pathological pattern (`*a*a*a*…`) gives up after
//! [`MATCH_STEPS`] steps and does not match, so no input can make a walk slow.

/// Steps one pattern may take against one path before it is taken as not matching.
pub const MATCH_STEPS: u32 = 10_000;

/// How a rule is compared: most rules are a literal name or an extension, compared
/// without the general matcher.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Shape {
    /// No wildcard: the whole name (or anchored path) equals it.
    Exact(Vec<u8>),
    /// `*.ext`: the name ends with `.ext`.
    Suffix(Vec<u8>),
    /// Anything else, matched by `glob`.
    Glob(Vec<u8>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    shape: Shape,
    negate: bool,
    dir_only: bool,
    /// Compared with the path relative to the file's directory, not just the name.
    anchored: bool,
}

/// The rules of one `.gitignore`, and the directory (relative to the walk's base, `""`
/// for the base itself, else ending in `/`) they apply under.
#[derive(Clone, Debug, Default)]
pub struct Ignore {
    base: String,
    rules: Vec<Rule>,
}

fn has_wildcard(p: &[u8]) -> bool {
    p.iter().any(|b| matches!(b, b'*' | b'?' | b'[' | b'\\'))
}

impl Ignore {
    /// Parse the text of the `.gitignore` in directory `base` (`""` or `dir/sub/`).
    pub fn parse(base: &str, text: &[u8]) -> Ignore {
        let mut rules = Vec::new();
        for raw in text.split(|&b| b == b'\n') {
            let mut line = raw.strip_suffix(b"\r").unwrap_or(raw);
            // Trailing spaces are dropped unless escaped.
            while line.ends_with(b" ") && !line.ends_with(b"\\ ") {
                line = &line[..line.len() - 1];
            }
            if line.is_empty() || line.starts_with(b"#") {
                continue;
            }
            let negate = line.starts_with(b"!");
            if negate {
                line = &line[1..];
            }
            if line.starts_with(b"\\!") || line.starts_with(b"\\#") {
                line = &line[1..];
            }
            let dir_only = line.ends_with(b"/");
            if dir_only {
                line = &line[..line.len() - 1];
            }
            let anchored = line.contains(&b'/');
            let line = line.strip_prefix(b"/").unwrap_or(line);
            if line.is_empty() {
                continue;
            }
            let shape = if !has_wildcard(line) {
                Shape::Exact(line.to_vec())
            } else if !anchored && line.starts_with(b"*.") && !has_wildcard(&line[1..]) {
                Shape::Suffix(line[1..].to_vec())
            } else {
                Shape::Glob(line.to_vec())
            };
            rules.push(Rule {
                shape,
                negate,
                dir_only,
                anchored,
            });
        }
        Ignore {
            base: base.to_string(),
            rules,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// This file's verdict on `path` (relative to the walk's base; a directory without a
    /// trailing slash): `Some(true)` ignored, `Some(false)` re-included, `None` no rule.
    pub fn decide(&self, path: &str, is_dir: bool) -> Option<bool> {
        let rel = path.strip_prefix(self.base.as_str())?.as_bytes();
        let name = rel.rsplit(|&b| b == b'/').next().unwrap_or(rel);
        self.rules.iter().rev().find_map(|r| {
            if r.dir_only && !is_dir {
                return None;
            }
            let subject = if r.anchored { rel } else { name };
            let hit = match &r.shape {
                Shape::Exact(p) => subject == p.as_slice(),
                Shape::Suffix(s) => subject.ends_with(s),
                Shape::Glob(p) => glob(p, subject, &mut { MATCH_STEPS }),
            };
            hit.then_some(!r.negate)
        })
    }
}

/// Is `path` ignored by the stack of `.gitignore` files (shallowest first)?
pub fn ignored(stack: &[Ignore], path: &str, is_dir: bool) -> bool {
    stack
        .iter()
        .rev()
        .find_map(|ig| ig.decide(path, is_dir))
        .unwrap_or(false)
}

/// Match a gitignore glob against `t`: `*` and `?` stop at `/`, `**` crosses it, and
/// `**/` may match no directory at all.
fn glob(p: &[u8], t: &[u8], steps: &mut u32) -> bool {
    if *steps == 0 {
        return false;
    }
    *steps -= 1;
    let Some(&c) = p.first() else {
        return t.is_empty();
    };
    match c {
        b'*' if p.get(1) == Some(&b'*') => {
            let rest = &p[2..];
            if let Some(after) = rest.strip_prefix(b"/")
                && glob(after, t, steps)
            {
                return true;
            }
            (0..=t.len()).any(|k| glob(rest, &t[k..], steps))
        }
        b'*' => {
            for k in 0..=t.len() {
                if glob(&p[1..], &t[k..], steps) {
                    return true;
                }
                if t.get(k) == Some(&b'/') {
                    break;
                }
            }
            false
        }
        b'?' => t.first().is_some_and(|&b| b != b'/') && glob(&p[1..], &t[1..], steps),
        b'[' => match class(p, t.first().copied()) {
            Some((true, len)) => glob(&p[len..], &t[1..], steps),
            Some((false, _)) => false,
            // An unclosed `[` is a literal.
            None => t.first() == Some(&b'[') && glob(&p[1..], &t[1..], steps),
        },
        b'\\' if p.len() > 1 => t.first() == Some(&p[1]) && glob(&p[2..], &t[1..], steps),
        _ => t.first() == Some(&c) && glob(&p[1..], &t[1..], steps),
    }
}

/// A `[…]` class at the start of `p` against byte `b`: (matched, the class's length), or
/// `None` when the class is not closed.
fn class(p: &[u8], b: Option<u8>) -> Option<(bool, usize)> {
    let mut i = 1;
    let negate = matches!(p.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let start = i;
    let mut hit = false;
    while let Some(&c) = p.get(i) {
        if c == b']' && i > start {
            let byte = b.is_some_and(|b| b != b'/');
            return Some((byte && hit != negate, i + 1));
        }
        if p.get(i + 1) == Some(&b'-') && p.get(i + 2).is_some_and(|&e| e != b']') {
            let (lo, hi) = (c, p[i + 2]);
            hit |= b.is_some_and(|b| lo <= b && b <= hi);
            i += 3;
        } else {
            hit |= b == Some(c);
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ig(text: &str) -> Vec<Ignore> {
        vec![Ignore::parse("", text.as_bytes())]
    }

    #[test]
    fn common_patterns() {
        let s = ig("# comment\ntarget/\n*.log\n/build\nnode_modules\n!keep.log\ndocs/**/*.tmp\n");
        assert!(ignored(&s, "target", true));
        assert!(!ignored(&s, "target", false), "dir-only rule");
        assert!(ignored(&s, "src/target", true), "unanchored: any depth");
        assert!(ignored(&s, "a/b/x.log", false));
        assert!(
            !ignored(&s, "a/keep.log", false),
            "negation, last rule wins"
        );
        assert!(ignored(&s, "build", true));
        assert!(!ignored(&s, "src/build", true), "anchored to the root");
        assert!(ignored(&s, "web/node_modules", true));
        assert!(ignored(&s, "docs/x.tmp", false), "**/ matches no directory");
        assert!(ignored(&s, "docs/a/b/x.tmp", false));
        assert!(!ignored(&s, "other/x.tmp", false));
    }

    #[test]
    fn classes_wildcards_and_escapes() {
        let s = ig("file[0-9].txt\n?.c\n\\#hash\nlogs/**\na/*/c\n[!x]y\n");
        assert!(ignored(&s, "file7.txt", false) && !ignored(&s, "filex.txt", false));
        assert!(ignored(&s, "a.c", false) && !ignored(&s, "ab.c", false));
        assert!(ignored(&s, "#hash", false));
        assert!(ignored(&s, "logs/a/b", false) && !ignored(&s, "logs", true));
        assert!(ignored(&s, "a/b/c", false) && !ignored(&s, "a/b/d/c", false));
        assert!(ignored(&s, "zy", false) && !ignored(&s, "xy", false));
    }

    #[test]
    fn deeper_files_take_precedence() {
        let stack = vec![
            Ignore::parse("", b"*.gen\n"),
            Ignore::parse("sub/", b"!keep.gen\n/local\n"),
        ];
        assert!(ignored(&stack, "x.gen", false));
        assert!(ignored(&stack, "sub/other.gen", false));
        assert!(!ignored(&stack, "sub/keep.gen", false));
        assert!(ignored(&stack, "sub/local", false));
        assert!(!ignored(&stack, "local", false), "anchored to sub/");
    }

    #[test]
    fn pathological_patterns_give_up() {
        let p = "*a".repeat(40) + "b";
        let s = ig(&p);
        let t = "a".repeat(200);
        assert!(!ignored(&s, &t, false));
    }
}
