//! Rust definitions: `fn` (methods inside `impl` and `trait`), `struct`, `enum`, `union`,
//! `trait`, `impl` (named after its type), `mod`, `type`, `const`, `static` and
//! `macro_rules!`, nested ones included (an `fn` inside an `fn`). Macro invocations are
//! opaque: what a macro expands to is not read.

use super::{Builder, Id, MAX_DEPTH, head_end, skip_angles, to_semicolon};
use crate::codemap::Kind;
use crate::codemap::lex::{Lexed, Tk};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// A file, `mod` or `extern` block.
    Module,
    /// Inside `impl` or `trait`: `fn` is a method.
    Members,
    /// A function body or any other block.
    Body,
}

/// A word before an item keyword that does not change what the item is (`unsafe fn`,
/// `const fn`, `extern fn`).
fn qualifier(lx: &Lexed, i: usize) -> bool {
    let plain = ["unsafe", "async", "default", "safe"]
        .iter()
        .any(|w| lx.is_word(i, w))
        && lx.is_ident(i + 1);
    let before_fn = ["fn", "unsafe", "async", "extern"]
        .iter()
        .any(|w| lx.is_word(i + 1, w));
    plain
        || (lx.is_word(i, "const") && before_fn)
        || (lx.is_word(i, "extern") && lx.is_word(i + 1, "fn"))
}

struct Reader<'a, 'l> {
    lx: &'a Lexed<'l>,
    b: &'a mut Builder,
}

pub fn outline(lx: &Lexed, b: &mut Builder) {
    let mut r = Reader { lx, b };
    r.block(0, lx.len(), Scope::Module, None, 0);
}

impl Reader<'_, '_> {
    fn block(&mut self, lo: usize, hi: usize, scope: Scope, parent: Id, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        let mut i = lo;
        while i < hi {
            i = self.item(i, hi, scope, parent, depth).max(i + 1);
        }
    }

    /// The index after the body of the group opened at `open`, reading it as `scope`.
    fn nested(&mut self, open: usize, hi: usize, scope: Scope, parent: Id, depth: usize) -> usize {
        let close = self.lx.partner(open).filter(|&c| c > open).unwrap_or(hi);
        self.block(open + 1, close.min(hi), scope, parent, depth + 1);
        self.b.end(parent, self.lx.line(close));
        close + 1
    }

    fn name_at(&self, i: usize) -> Option<String> {
        (self.lx.kind(i) == Some(Tk::Ident)).then(|| self.lx.name(i))
    }

    /// One item or statement from `i`; returns the index after it.
    fn item(&mut self, mut i: usize, hi: usize, scope: Scope, parent: Id, depth: usize) -> usize {
        let lx = self.lx;
        // Attributes: `#[…]`, `#![…]`.
        while lx.is(i, b'#') {
            let open = if lx.is(i + 1, b'!') { i + 2 } else { i + 1 };
            if !lx.is(open, b'[') {
                break;
            }
            i = lx.skip_group(open);
        }
        // Qualifiers before the keyword.
        loop {
            if lx.is_word(i, "pub") {
                i += 1;
                if lx.is(i, b'(') {
                    i = lx.skip_group(i);
                }
            } else if lx.is_word(i, "extern") && lx.kind(i + 1) == Some(Tk::Str) {
                i += 2;
            } else if qualifier(lx, i) {
                i += 1;
            } else {
                break;
            }
        }
        if i >= hi {
            return hi;
        }
        let word = if lx.is_ident(i) { lx.text(i) } else { b"" };
        match word {
            b"fn" => {
                let kind = if scope == Scope::Members {
                    Kind::Method
                } else {
                    Kind::Function
                };
                self.with_body(i, hi, kind, parent, depth, Scope::Body)
            }
            b"struct" | b"enum" => {
                let kind = if word == b"enum" {
                    Kind::Enum
                } else {
                    Kind::Struct
                };
                self.with_body(i, hi, kind, parent, depth, Scope::Module)
            }
            b"union" if lx.is_ident(i + 1) => {
                self.with_body(i, hi, Kind::Union, parent, depth, Scope::Module)
            }
            b"trait" => self.with_body(i, hi, Kind::Trait, parent, depth, Scope::Members),
            b"mod" => self.with_body(i, hi, Kind::Module, parent, depth, Scope::Module),
            b"impl" => self.impl_block(i, hi, parent, depth),
            b"type" if lx.is_ident(i + 1) => self.until_semicolon(i, hi, Kind::Type, parent),
            b"const" if lx.is_ident(i + 1) && !lx.is_word(i + 1, "_") => {
                self.until_semicolon(i, hi, Kind::Constant, parent)
            }
            b"static" => {
                let at = if lx.is_word(i + 1, "mut") { i + 1 } else { i };
                self.until_semicolon(at, hi, Kind::Static, parent)
            }
            b"macro_rules" if lx.is(i + 1, b'!') => {
                let name = self.name_at(i + 2);
                let id = name.and_then(|n| self.b.add(n, Kind::Macro, lx.line(i + 2), parent));
                let open = i + 3;
                let after = lx.skip_group(open).min(hi);
                self.b.end(id, lx.line(after.saturating_sub(1)));
                if lx.is(after, b';') { after + 1 } else { after }
            }
            b"extern" if lx.is(i + 1, b'{') => {
                self.nested_plain(i + 1, hi, Scope::Module, parent, depth)
            }
            _ => self.statement(i, hi, scope, parent, depth),
        }
    }

    /// `keyword name … {body}` or `keyword name …;`: record it and read the body as
    /// `inner` (or skip it for a `struct`/`enum`/`union`, whose body holds fields).
    fn with_body(
        &mut self,
        kw: usize,
        hi: usize,
        kind: Kind,
        parent: Id,
        depth: usize,
        inner: Scope,
    ) -> usize {
        let lx = self.lx;
        let Some(name) = self.name_at(kw + 1) else {
            return kw + 1;
        };
        let id = self.b.add(name, kind, lx.line(kw + 1), parent);
        let end = head_end(lx, kw + 2, hi);
        if lx.is(end, b'{') {
            if matches!(kind, Kind::Struct | Kind::Enum | Kind::Union) {
                let after = lx.skip_group(end).min(hi);
                self.b.end(id, lx.line(after.saturating_sub(1)));
                return after;
            }
            return self.nested(end, hi, inner, id, depth);
        }
        self.b.end(id, lx.line(end.min(hi.saturating_sub(1))));
        end + 1
    }

    /// `type`, `const`, `static`: the name after the keyword, up to the `;`.
    fn until_semicolon(&mut self, kw: usize, hi: usize, kind: Kind, parent: Id) -> usize {
        let lx = self.lx;
        let Some(name) = self.name_at(kw + 1) else {
            return kw + 1;
        };
        let id = self.b.add(name, kind, lx.line(kw + 1), parent);
        let after = to_semicolon(lx, kw + 2, hi);
        self.b.end(id, lx.line(after.saturating_sub(1)));
        after
    }

    /// `impl<…> [Trait for] Type<…> [where …] { members }`, named after `Type` as ctags
    /// names it: the last identifier of the type outside its generic arguments
    /// (`fmt::Display` → `Display`, `[&(dyn A + Sync); 0]` → `Sync`), or the trait's for
    /// a type without one (`impl Serialize for ()` → `Serialize`).
    fn impl_block(&mut self, kw: usize, hi: usize, parent: Id, depth: usize) -> usize {
        let lx = self.lx;
        let mut i = kw + 1;
        if lx.is(i, b'<') {
            i = skip_angles(lx, i, hi);
        }
        let end = head_end(lx, i, hi);
        let (mut trait_name, mut type_name) = (String::new(), String::new());
        let mut angle = 0i32;
        for k in i..end {
            if lx.is(k, b'<') {
                angle += 1;
            } else if lx.is(k, b'>') && !lx.is_op(k.saturating_sub(1), "->") {
                angle -= 1;
            } else if angle > 0 {
                continue;
            } else if lx.is_word(k, "for") {
                trait_name = std::mem::take(&mut type_name);
            } else if lx.is_word(k, "where") {
                break;
            } else if lx.is_ident(k)
                && !["dyn", "mut", "impl", "const"]
                    .iter()
                    .any(|w| lx.is_word(k, w))
            {
                type_name = lx.name(k);
            }
        }
        let name = if type_name.is_empty() {
            trait_name
        } else {
            type_name
        };
        let id = self.b.add(name, Kind::Impl, lx.line(kw), parent);
        if lx.is(end, b'{') {
            return self.nested(end, hi, Scope::Members, id, depth);
        }
        end + 1
    }

    /// Any other statement: up to its `;`, or through its first brace block (read as a
    /// body: items may nest in blocks and closures). A macro call's group is skipped.
    fn statement(
        &mut self,
        mut i: usize,
        hi: usize,
        scope: Scope,
        parent: Id,
        depth: usize,
    ) -> usize {
        let lx = self.lx;
        while i < hi {
            if lx.is(i, b';') {
                return i + 1;
            }
            if lx.is(i, b'}') {
                return i + 1;
            }
            if lx.is_ident(i) && lx.is(i + 1, b'!') && matches!(lx.text(i + 2), b"(" | b"[" | b"{")
            {
                let after = lx.skip_group(i + 2);
                if lx.is(i + 2, b'{') && scope != Scope::Body {
                    return after;
                }
                i = after;
                continue;
            }
            if lx.is(i, b'{') {
                let inner = if scope == Scope::Body {
                    Scope::Body
                } else {
                    scope
                };
                let after = self.nested_plain(i, hi, inner, parent, depth);
                return after;
            }
            i = lx.skip_group(i).max(i + 1);
        }
        hi
    }

    /// A block that is not a definition's body: read for nested items, nothing recorded.
    fn nested_plain(
        &mut self,
        open: usize,
        hi: usize,
        scope: Scope,
        parent: Id,
        depth: usize,
    ) -> usize {
        let close = self.lx.partner(open).filter(|&c| c > open).unwrap_or(hi);
        let inner = if scope == Scope::Members {
            Scope::Body
        } else {
            scope
        };
        self.block(open + 1, close.min(hi), inner, parent, depth + 1);
        close + 1
    }
}
