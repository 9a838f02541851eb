//! Definitions from tokens, one reader per language. Each walks the bracket tree of its
//! file (`lex::Lexed::partner`) a block at a time, recognising item heads at statement
//! starts, and records `{name, kind, line, end_line, parent}`.
//!
//! Invariant: recursion into nested blocks stops at [`MAX_DEPTH`] (deeper blocks are
//! skipped whole), every step advances by at least one token, and at most [`MAX_SYMBOLS`]
//! definitions are kept: arbitrary input gives a bounded outline in linear time.
//! Invariant: `end_line >= line` for every symbol.

mod c;
mod c_function;
mod go;
mod java;
mod js;
mod js_class;
mod js_expr;
mod python;
mod rust;

use super::lex::{self, Lexed};
use super::{Kind, Language, Symbol};

/// Nesting read before blocks are skipped whole: real code rarely nests definitions
/// more than a dozen deep; this bounds the recursion on hostile input.
pub const MAX_DEPTH: usize = 48;
/// Definitions kept per file: a 2 MiB generated file stays a bounded answer.
pub const MAX_SYMBOLS: usize = 20_000;

pub fn outline(lang: Language, src: &[u8]) -> Vec<Symbol> {
    outline_lexed(lang, &lex::lex(lang, src))
}

/// The outline of an already lexed file (`lx` from `lex::lex(lang, …)`).
pub fn outline_lexed(lang: Language, lx: &Lexed) -> Vec<Symbol> {
    let mut b = Builder::default();
    match lang {
        Language::Rust => rust::outline(lx, &mut b),
        Language::Python => python::outline(lx, &mut b),
        Language::JavaScript | Language::TypeScript => js::outline(lx, &mut b, lang),
        Language::Go => go::outline(lx, &mut b),
        Language::C | Language::Cpp => c::outline(lx, &mut b, lang),
        Language::Java => java::outline(lx, &mut b),
    }
    b.finish()
}

struct Entry {
    name: String,
    kind: Kind,
    line: u32,
    end_line: u32,
    parent: Option<usize>,
    /// A parent known by name only (a Go method's receiver type).
    parent_name: Option<String>,
}

/// Symbols as they are found; parents by index until `finish` names them.
#[derive(Default)]
pub struct Builder {
    entries: Vec<Entry>,
}

/// A symbol's handle, for its end line and for children.
pub type Id = Option<usize>;

impl Builder {
    /// Record a definition of `name` (token text) on `line`; returns its handle (`None`
    /// when the cap is reached or the name is empty).
    pub fn add(&mut self, name: String, kind: Kind, line: u32, parent: Id) -> Id {
        if self.entries.len() >= MAX_SYMBOLS || name.is_empty() {
            return None;
        }
        self.entries.push(Entry {
            name,
            kind,
            line,
            end_line: line,
            parent,
            parent_name: None,
        });
        Some(self.entries.len() - 1)
    }

    /// Like `add`, with a parent known only by name (it may be defined elsewhere).
    pub fn add_in(&mut self, name: String, kind: Kind, line: u32, parent: String) -> Id {
        let id = self.add(name, kind, line, None)?;
        self.entries[id].parent_name = Some(parent);
        Some(id)
    }

    /// Set where `id` ends (never before it starts).
    pub fn end(&mut self, id: Id, end_line: u32) {
        if let Some(e) = id.and_then(|i| self.entries.get_mut(i)) {
            e.end_line = end_line.max(e.line);
        }
    }

    /// Name the parent of `id` when it is known only by name (declared elsewhere).
    pub fn set_parent_name(&mut self, id: Id, parent: String) {
        if let Some(e) = id.and_then(|i| self.entries.get_mut(i)) {
            e.parent_name = Some(parent);
        }
    }

    pub fn kind(&self, id: Id) -> Option<Kind> {
        id.and_then(|i| self.entries.get(i)).map(|e| e.kind)
    }

    pub fn name(&self, id: Id) -> Option<&str> {
        id.and_then(|i| self.entries.get(i))
            .map(|e| e.name.as_str())
    }

    /// Symbols in source order (line, then nesting: a parent before its children).
    pub fn finish(self) -> Vec<Symbol> {
        let names: Vec<String> = self.entries.iter().map(|e| e.name.clone()).collect();
        let mut out: Vec<(usize, Symbol)> = self
            .entries
            .into_iter()
            .enumerate()
            .map(|(i, e)| {
                let sym = Symbol {
                    parent: e
                        .parent
                        .and_then(|p| names.get(p).cloned())
                        .or(e.parent_name),
                    name: e.name,
                    kind: e.kind,
                    line: e.line,
                    end_line: e.end_line,
                };
                (i, sym)
            })
            .collect();
        out.sort_by_key(|(i, s)| (s.line, *i));
        out.into_iter().map(|(_, s)| s).collect()
    }
}

/// From `i`, the first `{` or `;` at this level before `hi` (groups of `()` and `[]` are
/// stepped over). `hi` when there is none, or when a `}` closes the block first.
pub(crate) fn head_end(lx: &Lexed, mut i: usize, hi: usize) -> usize {
    while i < hi {
        if lx.is(i, b'{') || lx.is(i, b';') {
            return i;
        }
        if lx.is(i, b'}') {
            return hi;
        }
        i = lx.skip_group(i).max(i + 1);
    }
    hi
}

/// From `i`, the index after the next `;` at this level, stepping over every bracket
/// group (braces included); `hi` when there is none.
pub(crate) fn to_semicolon(lx: &Lexed, mut i: usize, hi: usize) -> usize {
    while i < hi {
        if lx.is(i, b';') {
            return i + 1;
        }
        i = lx.skip_group(i).max(i + 1);
    }
    hi
}

/// The index of the `{` opening a declaration's body, or of the `;` ending a bodiless
/// one, from `i`, stepping over generic lists and bracket groups (`hi` when neither comes).
pub(crate) fn to_body(lx: &Lexed, mut i: usize, hi: usize) -> usize {
    while i < hi && !lx.is(i, b'{') && !lx.is(i, b';') {
        i = if lx.is(i, b'<') {
            skip_angles(lx, i, hi)
        } else {
            lx.skip_group(i).max(i + 1)
        };
    }
    i
}

/// The index after a `<…>` list starting at `i` (which must be `<`), counting nested
/// angles and stepping over bracket groups (an object type `{…}` where a type goes, as
/// in `Foo<{ a: T }>` or `S = {}`); stops at `;`, another `{` or `hi` when unbalanced.
pub(crate) fn skip_angles(lx: &Lexed, mut i: usize, hi: usize) -> usize {
    let mut depth = 0i32;
    while i < hi {
        let type_brace = lx.is(i, b'{')
            && i > 0
            && [b'=', b',', b'<', b':', b'|', b'&']
                .iter()
                .any(|&p| lx.is(i - 1, p));
        if type_brace && depth > 0 {
            i = lx.skip_group(i);
            continue;
        }
        if lx.is(i, b'<') {
            depth += 1;
        } else if lx.is(i, b'>') && !(i > 0 && lx.is(i - 1, b'-') && lx.flags(i) & lex::GLUED != 0)
        {
            depth -= 1;
            if depth <= 0 {
                return i + 1;
            }
        } else if lx.is(i, b';') || lx.is(i, b'{') || lx.is(i, b'}') {
            return i;
        } else if lx.is(i, b'(') || lx.is(i, b'[') {
            i = lx.skip_group(i);
            continue;
        }
        i += 1;
    }
    hi
}

#[cfg(test)]
mod tests;
