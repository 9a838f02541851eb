//! JavaScript and TypeScript bodies with members: classes, object literals with methods,
//! TypeScript interfaces; and stepping over TypeScript type annotations.

use super::js::{Ctx, Reader};
use super::{Id, MAX_DEPTH, skip_angles, to_body};
use crate::codemap::Kind;
use crate::codemap::lex::{LINE_START, Tk};

/// Member modifiers: they precede a member's name without being it.
const MODIFIERS: &[&str] = &[
    "static",
    "async",
    "get",
    "set",
    "readonly",
    "public",
    "private",
    "protected",
    "abstract",
    "override",
    "declare",
    "accessor",
];

impl Reader<'_, '_> {
    /// `class [Name] [<T>] [extends …] [implements …] { members }` from the keyword;
    /// `named` is the declarator of `const X = class { … }`.
    pub(super) fn class(
        &mut self,
        kw: usize,
        hi: usize,
        named: Option<usize>,
        parent: Id,
        depth: usize,
    ) -> usize {
        let lx = self.lx;
        let mut i = kw + 1;
        let name_at = if lx.is_ident(i) && !lx.is_word(i, "extends") && !lx.is_word(i, "implements")
        {
            i += 1;
            Some(i - 1)
        } else {
            named
        };
        let id = match name_at {
            Some(n) => {
                self.declared.insert(lx.name(n));
                self.b.add(lx.name(n), Kind::Class, lx.line(n), parent)
            }
            None => None,
        };
        i = to_body(lx, i, hi);
        if !lx.is(i, b'{') {
            return i;
        }
        let close = lx.partner(i).filter(|&c| c > i).unwrap_or(hi).min(hi);
        let owner = if id.is_some() { id } else { parent };
        if depth <= MAX_DEPTH {
            self.class_body(i + 1, close, owner, depth + 1);
        }
        self.b.end(id, lx.line(close));
        close + 1
    }

    fn class_body(&mut self, mut i: usize, close: usize, owner: Id, depth: usize) {
        let lx = self.lx;
        while i < close {
            if lx.is(i, b';') || lx.is(i, b',') {
                i += 1;
                continue;
            }
            while lx.is(i, b'@') && lx.is_ident(i + 1) {
                i += 2;
                while lx.is(i, b'.') && lx.is_ident(i + 1) {
                    i += 2;
                }
                if lx.is(i, b'(') {
                    i = lx.skip_group(i);
                }
            }
            // Modifiers, unless the word is itself the member's name (`get() {}`).
            loop {
                let modifier = MODIFIERS.iter().any(|w| lx.is_word(i, w)) || lx.is(i, b'*');
                let name_follows = !lx.is(i + 1, b'(')
                    && !lx.is(i + 1, b'=')
                    && !lx.is(i + 1, b';')
                    && !lx.is(i + 1, b':')
                    && !lx.is(i + 1, b'?')
                    && !lx.is(i + 1, b'<')
                    && (lx.flags(i + 1) & LINE_START == 0 || lx.is(i, b'*'));
                if modifier && name_follows && i + 1 < close {
                    i += 1;
                } else {
                    break;
                }
            }
            if lx.is_word(i, "static") && lx.is(i + 1, b'{') {
                i = self.body(i + 1, close, None, owner, depth);
                continue;
            }
            let name_at = if lx.is(i, b'#') && lx.is_ident(i + 1) {
                i += 1;
                Some(i)
            } else if lx.is(i, b'[') {
                None
            } else if lx.kind(i).is_some_and(|k| k != Tk::Punct) {
                Some(i)
            } else {
                i += 1;
                continue;
            };
            i = lx.skip_group(i).max(i + 1);
            if lx.is(i, b'?') || lx.is(i, b'!') {
                i += 1;
            }
            if lx.is(i, b'<') {
                i = skip_angles(lx, i, close);
            }
            if lx.is(i, b'(') {
                let mut after = lx.skip_group(i).min(close);
                if lx.is(after, b':') {
                    after = self.skip_type(after + 1, close, false);
                }
                let id = name_at
                    .and_then(|n| Some((self.member_name(n)?, lx.line(n))))
                    .and_then(|(name, line)| self.b.add(name, Kind::Method, line, owner));
                if lx.is(after, b'{') {
                    i = self.body(after, close, id, owner, depth);
                } else {
                    self.b.end(id, lx.line(after.saturating_sub(1)));
                    i = after;
                }
                continue;
            }
            // A field: `name [: type] [= value]`.
            if lx.is(i, b':') {
                i = self.skip_type(i + 1, close, true);
            }
            if lx.is(i, b'=') {
                i = self.value(i + 1, close, Ctx::Func, owner, depth);
            }
        }
    }

    /// The entries of the object literal at `open` as members of `owner`: methods are
    /// recorded, every value's function bodies read. Returns the index after it.
    pub(super) fn object_members(
        &mut self,
        open: usize,
        hi: usize,
        owner: Id,
        depth: usize,
    ) -> usize {
        let lx = self.lx;
        let close = lx.partner(open).filter(|&c| c > open).unwrap_or(hi).min(hi);
        let mut i = open + 1;
        while i < close && depth <= MAX_DEPTH {
            let mut k = i;
            while (lx.is_word(k, "async")
                || lx.is_word(k, "get")
                || lx.is_word(k, "set")
                || lx.is(k, b'*'))
                && !lx.is(k + 1, b'(')
                && !lx.is(k + 1, b':')
            {
                k += 1;
            }
            let f = if lx.is_word(k + 2, "async") {
                k + 3
            } else {
                k + 2
            };
            let name = self.member_name(k);
            if let Some(name) = name
                .clone()
                .filter(|_| lx.is(k + 1, b'(') && lx.is(lx.skip_group(k + 1), b'{'))
            {
                let id = self.b.add(name, Kind::Method, lx.line(k), owner);
                i = self.function_rest(k + 1, close, id, owner, depth + 1);
            } else if let Some(name) =
                name.filter(|_| lx.is(k + 1, b':') && lx.is_word(f, "function"))
            {
                // `key: function () {…}` is the method `key`; a named function expression
                // is tagged by its own name.
                if lx.is_ident(f + 1) {
                    i = self
                        .function(f, close, Some(Kind::Method), owner, depth + 1)
                        .0;
                } else {
                    let id = self.b.add(name, Kind::Method, lx.line(k), owner);
                    let (after, _) = self.function(f, close, None, id, depth + 1);
                    self.b.end(id, lx.line(after.saturating_sub(1)));
                    i = after;
                }
            } else if lx.is_ident(k)
                && lx.is(k + 1, b':')
                && lx.is(k + 2, b'{')
                && self.keyed_object(k + 2)
            {
                // A nested object literal: an object of its own (as ctags has it).
                let id = self.b.add(lx.name(k), Kind::Object, lx.line(k), owner);
                i = self.object_members(k + 2, close, id, depth + 1);
            } else {
                let start = i;
                i = self
                    .value(i, close, Ctx::Func, owner, depth + 1)
                    .max(start + 1);
            }
            while i < close && !lx.is(i, b',') {
                i = lx.skip_group(i).max(i + 1);
            }
            i += 1;
        }
        self.b.end(owner, lx.line(close));
        close + 1
    }

    /// `interface Name [<T>] [extends …] { members }`: method signatures are methods.
    pub(super) fn interface(&mut self, kw: usize, hi: usize, parent: Id) -> usize {
        let lx = self.lx;
        let id = self
            .b
            .add(lx.name(kw + 1), Kind::Interface, lx.line(kw + 1), parent);
        let mut i = kw + 2;
        i = to_body(lx, i, hi);
        if !lx.is(i, b'{') {
            return i;
        }
        let close = lx.partner(i).filter(|&c| c > i).unwrap_or(hi).min(hi);
        let mut k = i + 1;
        while k < close {
            let start = k;
            if lx.is_word(k, "readonly") && lx.is_ident(k + 1) {
                k += 1;
            }
            let mut p = k + 1;
            if lx.is(p, b'?') {
                p += 1;
            }
            if lx.is(p, b'<') {
                p = skip_angles(lx, p, close);
            }
            if lx.is_ident(k) && lx.is(p, b'(') {
                let m = self.b.add(lx.name(k), Kind::Method, lx.line(k), id);
                self.b.end(m, lx.line(lx.skip_group(p).saturating_sub(1)));
            }
            // The next member: after `;` or `,`, or at a new line.
            k = start;
            loop {
                k = lx.skip_group(k).max(k + 1);
                if k >= close || lx.flags(k) & LINE_START != 0 {
                    break;
                }
                if lx.is(k, b';') || lx.is(k, b',') {
                    k += 1;
                    break;
                }
            }
        }
        self.b.end(id, lx.line(close));
        close + 1
    }

    /// Step over a type annotation from `i` (after its `:`). It ends at a `,` `;` `)`
    /// `]` `}` or `=` at this level, at a `{` that is a body rather than an object type,
    /// at a line break after a complete type, and — for a return type (`in_decl` false)
    /// — at `=>`.
    pub(super) fn skip_type(&self, mut i: usize, hi: usize, in_decl: bool) -> usize {
        let lx = self.lx;
        let mut angle = 0i32;
        let mut expect_type = true;
        while i < hi {
            if lx.is(i, b'<') {
                angle += 1;
                expect_type = true;
                i += 1;
                continue;
            }
            if lx.is(i, b'>') && !lx.is_op(i.saturating_sub(1), "=>") {
                angle = (angle - 1).max(0);
                expect_type = false;
                i += 1;
                continue;
            }
            if angle == 0 {
                if lx.is_op(i, "=>") {
                    if !in_decl {
                        return i;
                    }
                    expect_type = true;
                    i += 2;
                    continue;
                }
                if lx.is(i, b',')
                    || lx.is(i, b';')
                    || lx.is(i, b')')
                    || lx.is(i, b']')
                    || lx.is(i, b'}')
                    || lx.is(i, b'=')
                {
                    return i;
                }
                if lx.is(i, b'{') && !expect_type {
                    return i;
                }
                if !expect_type
                    && lx.flags(i) & LINE_START != 0
                    && !lx.is(i, b'|')
                    && !lx.is(i, b'&')
                {
                    return i;
                }
            }
            expect_type = lx.is(i, b'|')
                || lx.is(i, b'&')
                || lx.is(i, b':')
                || lx.is(i, b'?')
                || lx.is(i, b',')
                || [
                    "keyof", "typeof", "infer", "readonly", "unique", "is", "extends", "new",
                ]
                .iter()
                .any(|w| lx.is_word(i, w));
            i = lx.skip_group(i).max(i + 1);
        }
        hi
    }
}
