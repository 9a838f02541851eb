//! JavaScript and TypeScript definitions: function declarations and named function
//! expressions, classes and their members, module-level `const`s (an arrow function
//! assigned to one is a function), object literals with methods assigned to a name (read
//! as classes, as ctags has them), `X.prototype.m = function`, `this.m = function` and
//! `a.b = function` assignments; TypeScript adds interfaces, type aliases, enums and
//! namespaces. Statements end at `;` or where automatic semicolon insertion would put one.

use super::{Builder, Id, MAX_DEPTH, skip_angles};
use crate::codemap::lex::{Lexed, Tk};
use crate::codemap::{Kind, Language};
use std::collections::HashSet;

/// Where a statement stands: at module level (its `const`s are outlined) or in a body.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Ctx {
    Top,
    Func,
}

pub(super) struct Reader<'a, 'l> {
    pub lx: &'a Lexed<'l>,
    pub b: &'a mut Builder,
    pub ts: bool,
    /// Classes created by `X.prototype.m = …`, so each is recorded once.
    pub protos: HashSet<String>,
    /// Names declared by `function` or `class` at any level.
    pub declared: HashSet<String>,
    /// The last function signature without a body (a TypeScript overload): the
    /// declarations of the same name that follow are the same function.
    pub overload: Option<String>,
}

pub fn outline(lx: &Lexed, b: &mut Builder, lang: Language) {
    let mut r = Reader {
        lx,
        b,
        ts: lang == Language::TypeScript,
        protos: HashSet::new(),
        declared: HashSet::new(),
        overload: None,
    };
    r.block(0, lx.len(), Ctx::Top, None, 0);
}

/// Words that may precede a declaration without changing what it declares.
const PREFIXES: &[&str] = &["export", "default", "declare", "abstract"];

impl Reader<'_, '_> {
    pub(super) fn block(&mut self, lo: usize, hi: usize, ctx: Ctx, parent: Id, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        let mut i = lo;
        while i < hi {
            i = self.statement(i, hi, ctx, parent, depth).max(i + 1);
        }
    }

    /// The body of the group opened at `open`, read as statements of a function (`id`);
    /// returns the index after it and records where `id` ends.
    pub(super) fn body(
        &mut self,
        open: usize,
        hi: usize,
        id: Id,
        parent: Id,
        depth: usize,
    ) -> usize {
        let close = self.lx.partner(open).filter(|&c| c > open).unwrap_or(hi);
        let owner = if id.is_some() { id } else { parent };
        self.block(open + 1, close.min(hi), Ctx::Func, owner, depth + 1);
        self.b.end(id, self.lx.line(close));
        close + 1
    }

    /// A member's name: an identifier, or a quoted string's contents (`"~validate"() {}`).
    pub(super) fn member_name(&self, i: usize) -> Option<String> {
        match self.lx.kind(i)? {
            Tk::Ident => Some(self.lx.name(i)),
            Tk::Str => {
                let t = self.lx.text(i);
                let quoted = t.len() >= 2 && matches!(t[0], b'"' | b'\'') && t[t.len() - 1] == t[0];
                quoted.then(|| String::from_utf8_lossy(&t[1..t.len() - 1]).into_owned())
            }
            _ => None,
        }
    }

    pub(super) fn word(&self, i: usize) -> &[u8] {
        if self.lx.is_ident(i) {
            self.lx.text(i)
        } else {
            b""
        }
    }

    fn statement(&mut self, mut i: usize, hi: usize, ctx: Ctx, parent: Id, depth: usize) -> usize {
        let lx = self.lx;
        let start = i;
        while PREFIXES.iter().any(|w| lx.is_word(i, w)) && i + 1 < hi && !lx.is(i + 1, b'(') {
            i += 1;
        }
        // Decorators (`@Component({…})`) before a class.
        while lx.is(i, b'@') && lx.is_ident(i + 1) {
            i += 2;
            while lx.is(i, b'.') && lx.is_ident(i + 1) {
                i += 2;
            }
            if lx.is(i, b'(') {
                i = lx.skip_group(i);
            }
        }
        let async_fn = lx.is_word(i, "async") && lx.is_word(i + 1, "function");
        let k = if async_fn { i + 1 } else { i };
        match self.word(k) {
            b"function" => {
                let (after, _) = self.function(k, hi, Some(Kind::Function), parent, depth);
                after
            }
            b"class" => self.class(k, hi, None, parent, depth),
            b"const" | b"let" | b"var" if !lx.is_word(k + 1, "enum") => {
                self.declarators(k, hi, ctx, parent, depth)
            }
            b"interface" if self.ts && lx.is_ident(k + 1) => self.interface(k, hi, parent),
            b"type"
                if self.ts && lx.is_ident(k + 1) && (lx.is(k + 2, b'=') || lx.is(k + 2, b'<')) =>
            {
                let id = self
                    .b
                    .add(lx.name(k + 1), Kind::Type, lx.line(k + 1), parent);
                let after = self.expression(k + 2, hi, ctx, parent, depth);
                self.b.end(id, lx.line(after.saturating_sub(1)));
                after
            }
            b"enum" | b"const" if self.ts => {
                let e = if lx.is_word(k, "const") { k + 1 } else { k };
                if !lx.is_ident(e + 1) {
                    return self.expression(start, hi, ctx, parent, depth);
                }
                let id = self
                    .b
                    .add(lx.name(e + 1), Kind::Enum, lx.line(e + 1), parent);
                let mut j = e + 2;
                if lx.is(j, b'{') {
                    j = lx.skip_group(j);
                }
                self.b.end(id, lx.line(j.saturating_sub(1)));
                j
            }
            b"namespace" | b"module" if self.ts && lx.is_ident(k + 1) => {
                // `namespace A.B.C {`: the last segment names it.
                let mut n = k + 1;
                while lx.is(n + 1, b'.') && lx.is_ident(n + 2) {
                    n += 2;
                }
                if !lx.is(n + 1, b'{') {
                    return self.expression(start, hi, ctx, parent, depth);
                }
                let id = self.b.add(lx.name(n), Kind::Namespace, lx.line(n), parent);
                let close = lx.partner(n + 1).filter(|&c| c > n + 1).unwrap_or(hi);
                self.block(n + 2, close.min(hi), Ctx::Top, id, depth + 1);
                self.b.end(id, lx.line(close));
                close + 1
            }
            b"if" | b"for" | b"while" | b"switch" | b"with" | b"catch" if lx.is(k + 1, b'(') => {
                let after = self.group(k + 1, hi, ctx, parent, depth);
                self.controlled(after, hi, ctx, parent, depth)
            }
            b"else" | b"try" | b"finally" | b"do" => self.controlled(k + 1, hi, ctx, parent, depth),
            b"import" if !lx.is(k + 1, b'(') && !lx.is(k + 1, b'.') => {
                self.expression(k + 1, hi, ctx, parent, depth)
            }
            _ if lx.is(i, b'{') => {
                let close = lx.partner(i).filter(|&c| c > i).unwrap_or(hi);
                self.block(i + 1, close.min(hi), ctx, parent, depth + 1);
                close + 1
            }
            _ => {
                self.assignment(i, hi, ctx, parent, depth);
                self.expression(start, hi, ctx, parent, depth)
            }
        }
    }

    /// The statement a control keyword governs: a block read in the same context, or a
    /// single statement.
    fn controlled(&mut self, i: usize, hi: usize, ctx: Ctx, parent: Id, depth: usize) -> usize {
        let lx = self.lx;
        if lx.is(i, b'{') {
            let close = lx.partner(i).filter(|&c| c > i).unwrap_or(hi);
            self.block(i + 1, close.min(hi), ctx, parent, depth + 1);
            return close + 1;
        }
        if i >= hi || depth > MAX_DEPTH {
            return i;
        }
        self.statement(i, hi, ctx, parent, depth + 1)
    }

    /// `function [*] [name] [<T>] (params) [: type] {body}` from the `function` keyword:
    /// records `name` as `kind` (`None`: a function expression, whose own name ctags does
    /// not tag either); returns the index after it and its handle.
    pub(super) fn function(
        &mut self,
        kw: usize,
        hi: usize,
        kind: Option<Kind>,
        parent: Id,
        depth: usize,
    ) -> (usize, Id) {
        let lx = self.lx;
        let mut i = kw + 1;
        if lx.is(i, b'*') {
            i += 1;
        }
        let mut signature = None;
        let id = match kind {
            Some(_) if lx.is_ident(i) && self.overload.as_deref() == Some(&*lx.name(i)) => {
                i += 1;
                None
            }
            Some(kind) if lx.is_ident(i) => {
                let name = lx.name(i);
                self.declared.insert(name.clone());
                signature = Some(name.clone());
                let id = self.b.add(name, kind, lx.line(i), parent);
                i += 1;
                id
            }
            _ if lx.is_ident(i) => {
                i += 1;
                None
            }
            _ => None,
        };
        let after = self.function_rest(i, hi, id, parent, depth);
        // A signature (no body) starts an overload set; a body ends it.
        let bodiless = after > 0 && !lx.is(after - 1, b'}');
        if bodiless && signature.is_some() {
            self.overload = signature;
        } else if !bodiless {
            self.overload = None;
        }
        (after, id)
    }

    /// From after a function's name: generics, parameters, return type, then the body
    /// (or the `;` of a signature without one).
    pub(super) fn function_rest(
        &mut self,
        mut i: usize,
        hi: usize,
        id: Id,
        parent: Id,
        depth: usize,
    ) -> usize {
        let lx = self.lx;
        if lx.is(i, b'<') {
            i = skip_angles(lx, i, hi);
        }
        if !lx.is(i, b'(') {
            return i;
        }
        let params = i;
        i = lx.skip_group(i).min(hi);
        if lx.is(i, b':') {
            i = self.skip_type(i + 1, hi, false);
        }
        if lx.is(i, b'{') {
            return self.body(i, hi, id, parent, depth);
        }
        self.b.end(id, lx.line(i.saturating_sub(1).max(params)));
        if lx.is(i, b';') { i + 1 } else { i }
    }

    /// `const|let|var` declarators: `a = …, b = …`. A function, class or arrow function
    /// assigned names a function (an arrow one only in a module-level `const`, as ctags
    /// has it); an object literal with methods names a class; any other module-level
    /// `const` a constant.
    fn declarators(&mut self, kw: usize, hi: usize, ctx: Ctx, parent: Id, depth: usize) -> usize {
        let lx = self.lx;
        let is_const = lx.is_word(kw, "const");
        let mut i = kw + 1;
        loop {
            if lx.is(i, b'{') || lx.is(i, b'[') {
                // Destructuring: no single name.
                i = lx.skip_group(i);
                if lx.is(i, b':') {
                    i = self.skip_type(i + 1, hi, true);
                }
                if lx.is(i, b'=') {
                    i = self.value(i + 1, hi, ctx, parent, depth);
                }
            } else if lx.is_ident(i) {
                let name_at = i;
                i += 1;
                if lx.is(i, b'!') {
                    i += 1;
                }
                if lx.is(i, b':') {
                    i = self.skip_type(i + 1, hi, true);
                }
                if lx.is(i, b'=') && !lx.is_op(i, "=>") {
                    i = self.declared_value(name_at, i + 1, hi, (is_const, ctx), parent, depth);
                } else if is_const && ctx == Ctx::Top {
                    let id = self
                        .b
                        .add(lx.name(name_at), Kind::Constant, lx.line(name_at), parent);
                    self.b.end(id, lx.line(i.saturating_sub(1)));
                }
            } else {
                return self.expression(i, hi, ctx, parent, depth);
            }
            if lx.is(i, b',') {
                i += 1;
                continue;
            }
            if lx.is(i, b';') {
                return i + 1;
            }
            return i;
        }
    }

    /// The value of declarator `name_at`, from `v`; returns the index after it.
    fn declared_value(
        &mut self,
        name_at: usize,
        v: usize,
        hi: usize,
        (is_const, ctx): (bool, Ctx),
        parent: Id,
        depth: usize,
    ) -> usize {
        let lx = self.lx;
        let name = lx.name(name_at);
        let line = lx.line(name_at);
        let mut f = if lx.is_word(v, "async") && lx.is_word(v + 1, "function") {
            v + 1
        } else {
            v
        };
        if lx.is(f, b'(') && lx.is_word(f + 1, "function") {
            // `var x = (function () { … }())`: the function's result, a function to ctags.
            f += 1;
        }
        if lx.is_word(f, "function") {
            let id = self.b.add(name, Kind::Function, line, parent);
            let (after, _) = self.function(f, hi, Some(Kind::Function), id, depth);
            self.b.end(id, lx.line(after.saturating_sub(1)));
            return self.value(after, hi, ctx, parent, depth);
        }
        if lx.is_word(v, "class") {
            return self.class(v, hi, Some(name_at), parent, depth);
        }
        if lx.is(v, b'{') && self.keyed_object(v) {
            let id = self.b.add(name, Kind::Object, line, parent);
            let after = self.object_members(v, hi, id, depth);
            return self.value(after, hi, ctx, parent, depth);
        }
        if is_const && ctx == Ctx::Top {
            let kind = if self.arrow_at(v, hi) {
                Kind::Function
            } else {
                Kind::Constant
            };
            let id = self.b.add(name, kind, line, parent);
            let after = self.value(v, hi, ctx, id, depth);
            self.b.end(id, lx.line(after.saturating_sub(1)));
            return after;
        }
        self.value(v, hi, ctx, parent, depth)
    }

    /// Is the object literal at `open` one ctags tags: its first entry a `key: value` or a
    /// method (not empty, not a spread or a shorthand property)?
    pub(super) fn keyed_object(&self, open: usize) -> bool {
        let lx = self.lx;
        let mut k = open + 1;
        while (lx.is_word(k, "async")
            || lx.is_word(k, "get")
            || lx.is_word(k, "set")
            || lx.is(k, b'*'))
            && !lx.is(k + 1, b'(')
            && !lx.is(k + 1, b':')
        {
            k += 1;
        }
        let key = lx.kind(k).is_some_and(|t| t != Tk::Punct) || lx.is(k, b'[');
        let after = if lx.is(k, b'[') {
            lx.skip_group(k)
        } else {
            k + 1
        };
        key && (lx.is(after, b':') || lx.is(after, b'('))
    }

    /// Does an arrow function start at `i` (`async`? then `x =>` or `(…) [: T] =>`)?
    fn arrow_at(&self, mut i: usize, hi: usize) -> bool {
        let lx = self.lx;
        if lx.is_word(i, "async") && !lx.is_op(i + 1, "=>") {
            i += 1;
        }
        if lx.is(i, b'<') {
            i = skip_angles(lx, i, hi);
        }
        if lx.is_ident(i) {
            return lx.is_op(i + 1, "=>");
        }
        if !lx.is(i, b'(') {
            return false;
        }
        let mut j = lx.skip_group(i);
        if lx.is(j, b':') {
            j = self.skip_type(j + 1, hi, false);
        }
        lx.is_op(j, "=>")
    }

    /// Statements of the form `a.b = function…`, `X.prototype.m = function…`,
    /// `X.prototype = {…}`, `this.m = function…`, `a.b = {methods}` starting at `i`.
    fn assignment(&mut self, i: usize, hi: usize, ctx: Ctx, parent: Id, depth: usize) {
        let lx = self.lx;
        let mut j = i;
        let this = lx.is_word(i, "this");
        if !lx.is_ident(j) {
            return;
        }
        let mut segs = vec![j];
        while lx.is(j + 1, b'.') && lx.is_ident(j + 2) {
            j += 2;
            segs.push(j);
        }
        if !lx.is(j + 1, b'=') || lx.is(j + 2, b'=') || lx.is_op(j + 1, "=>") {
            return;
        }
        let v = j + 2;
        let f = if lx.is_word(v, "async") && lx.is_word(v + 1, "function") {
            v + 1
        } else {
            v
        };
        let last = lx.name(j);
        let proto = segs.len() >= 2 && lx.is_word(segs[segs.len() - 2], "prototype");
        let proto_obj = lx.is_word(j, "prototype");
        if lx.is_word(f, "function") {
            let (kind, owner) = if proto {
                (
                    Kind::Method,
                    self.proto_class(segs[segs.len().saturating_sub(3)], parent),
                )
            } else if this && ctx == Ctx::Func {
                (Kind::Method, parent)
            } else {
                (Kind::Function, parent)
            };
            // A method of a class declared in this file names it as its parent.
            let class = (proto && owner.is_none() && segs.len() >= 3)
                .then(|| lx.name(segs[segs.len() - 3]));
            if lx.is_ident(f + 1) {
                // `a.b = function b() {…}`: the function's own name is the one tagged.
                let (_, id) = self.function(f, hi, Some(kind), owner, depth);
                if let Some(c) = class {
                    self.b.set_parent_name(id, c);
                }
                return;
            }
            let id = self.b.add(last, kind, lx.line(j), owner);
            if let Some(c) = class {
                self.b.set_parent_name(id, c);
            }
            let (after, _) = self.function(f, hi, None, id, depth);
            self.b.end(id, lx.line(after.saturating_sub(1)));
        } else if lx.is(v, b'{') && self.keyed_object(v) && !this {
            let owner = if proto_obj && segs.len() >= 2 {
                self.proto_class(segs[segs.len() - 2], parent)
            } else {
                self.b.add(last, Kind::Object, lx.line(j), parent)
            };
            self.object_members(v, hi, owner, depth);
        }
    }

    /// The class `X` of `X.prototype…`: recorded on first sight unless `X` is declared
    /// in this file (then its declaration stands for it).
    fn proto_class(&mut self, at: usize, parent: Id) -> Id {
        let name = self.lx.name(at);
        if self.declared.contains(&name) || !self.protos.insert(name.clone()) {
            return None;
        }
        self.b.add(name, Kind::Class, self.lx.line(at), parent)
    }
}
