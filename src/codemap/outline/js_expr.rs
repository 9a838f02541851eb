//! JavaScript and TypeScript expressions: where a statement ends (`;` or automatic
//! semicolon insertion), and the function bodies, classes and object literals inside an
//! expression, whose definitions are read too.

use super::Id;
use super::MAX_DEPTH;
use super::js::{Ctx, Reader};
use crate::codemap::Kind;
use crate::codemap::lex::{LINE_START, Tk};

impl Reader<'_, '_> {
    /// An expression statement from `i`: up to its end (`;`, or a line break where
    /// automatic semicolon insertion applies), reading the function bodies inside it.
    pub(super) fn expression(
        &mut self,
        i: usize,
        hi: usize,
        ctx: Ctx,
        parent: Id,
        depth: usize,
    ) -> usize {
        let end = self.value(i, hi, ctx, parent, depth);
        if self.lx.is(end, b';') { end + 1 } else { end }
    }

    /// An expression from `i`, up to (not including) a `,` `;` or statement end at this
    /// level; function bodies and nested groups inside it are read.
    pub(super) fn value(
        &mut self,
        mut i: usize,
        hi: usize,
        ctx: Ctx,
        parent: Id,
        depth: usize,
    ) -> usize {
        let lx = self.lx;
        let start = i;
        while i < hi {
            if lx.is(i, b';')
                || lx.is(i, b',')
                || lx.is(i, b'}')
                || lx.is(i, b')')
                || lx.is(i, b']')
            {
                return i;
            }
            if i > start && self.ends_before(i) {
                return i;
            }
            if lx.is_word(i, "function") {
                // A named function expression is tagged by its name, except at the end of
                // a chained assignment (`a.b = c.d = function d() {}`), which ctags skips.
                let kind = (i == 0 || !lx.is(i - 1, b'=')).then_some(Kind::Function);
                let (after, _) = self.function(i, hi, kind, parent, depth);
                i = after;
                continue;
            }
            if lx.is_word(i, "class") && (lx.is_ident(i + 1) || lx.is(i + 1, b'{')) {
                i = self.class(i, hi, None, parent, depth);
                continue;
            }
            if lx.is(i, b'{') {
                let after_body = i >= 2 && (lx.is(i - 1, b')') || lx.is_op(i - 2, "=>"));
                if after_body {
                    i = self.body(i, hi, None, parent, depth);
                } else {
                    i = self.group(i, hi, ctx, parent, depth);
                }
                continue;
            }
            if lx.is(i, b'(') || lx.is(i, b'[') {
                i = self.group(i, hi, ctx, parent, depth);
                continue;
            }
            i += 1;
        }
        hi
    }

    /// The inside of a `()`, `[]` or object-literal `{}` group: comma-separated values.
    pub(super) fn group(
        &mut self,
        open: usize,
        hi: usize,
        ctx: Ctx,
        parent: Id,
        depth: usize,
    ) -> usize {
        let close = self
            .lx
            .partner(open)
            .filter(|&c| c > open)
            .unwrap_or(hi)
            .min(hi);
        if depth > MAX_DEPTH {
            return close + 1;
        }
        let mut i = open + 1;
        while i < close {
            let next = self.value_in_group(i, close, ctx, parent, depth + 1);
            i = next.max(i + 1);
        }
        close + 1
    }

    fn value_in_group(&mut self, i: usize, hi: usize, ctx: Ctx, parent: Id, depth: usize) -> usize {
        let lx = self.lx;
        // A method in an object literal (`m(a) {…}`, `get x() {…}`): its body is code.
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
        if lx.kind(k).is_some_and(|t| t != Tk::Punct) && lx.is(k + 1, b'(') {
            let after = lx.skip_group(k + 1);
            if lx.is(after, b'{') {
                return self.body(after, hi, None, parent, depth);
            }
        }
        let mut end = self.value(i, hi, ctx, parent, depth);
        // `value` stops at a line break that could end a statement; in a group it cannot.
        while end < hi && !lx.is(end, b',') && end == i {
            end += 1;
        }
        if lx.is(end, b',') { end + 1 } else { end }
    }

    /// Would automatic semicolon insertion end the statement before token `i`? Only at
    /// a line start, after a token that can end an expression, before one that cannot
    /// continue it.
    fn ends_before(&self, i: usize) -> bool {
        let lx = self.lx;
        if lx.flags(i) & LINE_START == 0 || i == 0 {
            return false;
        }
        let prev_ends = match lx.kind(i - 1) {
            Some(Tk::Ident) => !matches!(
                lx.text(i - 1),
                b"return" | b"else" | b"new" | b"typeof" | b"await" | b"yield" | b"extends"
            ),
            Some(Tk::Punct) => matches!(lx.text(i - 1), b")" | b"]" | b"}"),
            Some(_) => true,
            None => false,
        };
        let continues = match lx.kind(i) {
            Some(Tk::Punct) => !matches!(lx.text(i), b"{" | b"!" | b"@" | b"#" | b"~"),
            Some(Tk::Ident) => matches!(
                lx.text(i),
                b"in" | b"of" | b"instanceof" | b"as" | b"satisfies"
            ),
            Some(Tk::Str) => lx.src.get(lx.toks[i].start as usize) == Some(&b'`'),
            _ => false,
        };
        prev_ends && !continues
    }
}
