//! C and C++ definitions: `#define` macros, function definitions (a method inside a class
//! body or when qualified, `A::f`), `struct`/`union`/`enum`/`class` with a body,
//! `typedef` and `using X =` aliases, namespaces. Function bodies are opaque (their locals
//! are not definitions); prototypes are not definitions either. Structure is read from the
//! file with its preprocessor lines and set-aside `#else` branches removed.

use super::{Builder, Id, MAX_DEPTH, skip_angles, to_body, to_semicolon};
use crate::codemap::lex::{ASIDE, LINE_START, Lexed, PREPROC, Tk};
use crate::codemap::{Kind, Language};

pub fn outline(full: &Lexed, b: &mut Builder, lang: Language) {
    macros(full, b);
    let lx = full.without_preproc();
    let mut r = Reader {
        lx: &lx,
        b,
        cpp: lang == Language::Cpp,
    };
    r.block(0, lx.len(), false, None, 0);
}

/// `#define NAME` on any directive line.
fn macros(lx: &Lexed, b: &mut Builder) {
    for i in 0..lx.len() {
        let directive =
            lx.is(i, b'#') && lx.flags(i) & (PREPROC | LINE_START | ASIDE) == PREPROC | LINE_START;
        if directive
            && lx.is_word(i + 1, "define")
            && lx.is_ident(i + 2)
            && lx.line(i + 2) == lx.line(i)
        {
            let id = b.add(lx.name(i + 2), Kind::Macro, lx.line(i + 2), None);
            // To the end of the directive (continuation lines included).
            let mut k = i + 3;
            while k < lx.len() && lx.flags(k) & PREPROC != 0 && lx.flags(k) & LINE_START == 0 {
                k += 1;
            }
            b.end(id, lx.end_line(k - 1));
        }
    }
}

pub(super) struct Reader<'a, 'l> {
    pub lx: &'a Lexed<'l>,
    pub b: &'a mut Builder,
    pub cpp: bool,
}

impl Reader<'_, '_> {
    /// Declarations in `lo..hi`: a file, a namespace, an `extern "C"` block, or (`class`
    /// true) a class body.
    fn block(&mut self, lo: usize, hi: usize, class: bool, parent: Id, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        let mut i = lo;
        while i < hi {
            i = self.declaration(i, hi, class, parent, depth).max(i + 1);
        }
    }

    /// The group opened at `open` read as declarations; returns the index after it.
    fn nested(&mut self, open: usize, hi: usize, class: bool, id: Id, depth: usize) -> usize {
        let close = self.lx.partner(open).filter(|&c| c > open).unwrap_or(hi);
        self.block(open + 1, close.min(hi), class, id, depth + 1);
        self.b.end(id, self.lx.line(close));
        close + 1
    }

    fn declaration(
        &mut self,
        mut i: usize,
        hi: usize,
        class: bool,
        parent: Id,
        depth: usize,
    ) -> usize {
        let lx = self.lx;
        let start = i;
        if lx.is(i, b';') {
            return i + 1;
        }
        // `[[attributes]]`, `__extension__`, and a macro alone on its line
        // (`__BEGIN_DECLS`, `_GLIBCXX_BEGIN_NAMESPACE_VERSION`).
        loop {
            if lx.is(i, b'[') && lx.is(i + 1, b'[') {
                i = lx.skip_group(i);
            } else if lx.is_word(i, "__extension__")
                || (lx.is_ident(i)
                    && lx.flags(i + 1) & LINE_START != 0
                    && i + 1 < hi
                    && !is_type_word(lx, i))
            {
                i += 1;
            } else {
                break;
            }
        }
        if class
            && ["public", "private", "protected"]
                .iter()
                .any(|w| lx.is_word(i, w))
            && lx.is(i + 1, b':')
        {
            return i + 2;
        }
        if lx.is_word(i, "template") && lx.is(i + 1, b'<') {
            i = skip_angles(lx, i + 1, hi);
        }
        if lx.is_word(i, "extern") && lx.kind(i + 1) == Some(Tk::Str) {
            if lx.is(i + 2, b'{') {
                let close = lx.partner(i + 2).filter(|&c| c > i + 2).unwrap_or(hi);
                self.block(i + 3, close.min(hi), false, parent, depth + 1);
                return close + 1;
            }
            i += 2;
        }
        match lx.text(i) {
            b"namespace" if lx.is_ident(i) => return self.namespace(i, hi, parent, depth),
            b"typedef" if lx.is_ident(i) => return self.typedef(i, hi, parent, depth),
            b"using" if lx.is_ident(i + 1) && lx.is(i + 2, b'=') => {
                let id = self
                    .b
                    .add(lx.name(i + 1), Kind::Type, lx.line(i + 1), parent);
                let after = to_semicolon(lx, i + 2, hi);
                self.b.end(id, lx.line(after.saturating_sub(1)));
                return after;
            }
            b"friend" if lx.is_word(i + 1, "class") || lx.is_word(i + 1, "struct") => {
                return to_semicolon(lx, i, hi);
            }
            b"using" | b"static_assert" | b"_Static_assert" if lx.is_ident(i) => {
                return to_semicolon(lx, i, hi);
            }
            b"struct" | b"union" | b"enum" | b"class" if lx.is_ident(i) => {
                if let Some(after) = self.tagged(i, hi, parent, depth) {
                    return after;
                }
            }
            _ => {}
        }
        self.function_or_other(i, hi, class, parent).max(start + 1)
    }

    /// `namespace [a::b] [macro(…)] { … }` or an alias `namespace x = y;`.
    fn namespace(&mut self, kw: usize, hi: usize, parent: Id, depth: usize) -> usize {
        let lx = self.lx;
        let mut names = Vec::new();
        let mut i = kw + 1;
        if lx.is_word(i, "inline") {
            i += 1;
        }
        // `a::b::c`, then whatever precedes the brace (`_GLIBCXX_VISIBILITY(default)`).
        while lx.is_ident(i) {
            names.push(i);
            i += 1;
            if !lx.is_op(i, "::") {
                break;
            }
            i += 2;
            if lx.is_word(i, "inline") {
                i += 1;
            }
        }
        while i < hi && !lx.is(i, b'{') && !lx.is(i, b';') && !lx.is(i, b'=') {
            i = lx.skip_group(i).max(i + 1);
        }
        if !lx.is(i, b'{') {
            return to_semicolon(lx, i, hi);
        }
        let mut owner = parent;
        let mut opened = Vec::new();
        for n in names {
            owner = self.b.add(lx.name(n), Kind::Namespace, lx.line(n), owner);
            opened.push(owner);
        }
        let after = self.nested(i, hi, false, owner, depth);
        for id in opened {
            self.b.end(id, lx.line(after.saturating_sub(1)));
        }
        after
    }

    /// `struct|union|enum|class [attrs] Name [final] [: bases] { … } [declarators];` —
    /// `None` when the tag is only used (`struct foo *f(void)`, `struct foo x;`).
    fn tagged(&mut self, kw: usize, hi: usize, parent: Id, depth: usize) -> Option<usize> {
        let lx = self.lx;
        let mut i = kw + 1;
        if lx.is_word(kw, "enum") && (lx.is_word(i, "class") || lx.is_word(i, "struct")) {
            i += 1;
        }
        // Attributes and export macros before the name (`struct __attribute__((x)) s`).
        while lx.is(i, b'[') && lx.is(i + 1, b'[') {
            i = lx.skip_group(i);
        }
        while (lx.is_word(i, "__attribute__")
            || lx.is_word(i, "alignas")
            || lx.is_word(i, "__declspec"))
            && lx.is(i + 1, b'(')
        {
            i = lx.skip_group(i + 1);
        }
        let mut name_at = None;
        while lx.is_ident(i) || lx.is_op(i, "::") {
            if lx.is_ident(i) && !lx.is_word(i, "final") {
                name_at = Some(i);
            }
            i += if lx.is_op(i, "::") { 2 } else { 1 };
        }
        if lx.is(i, b'<') && name_at.is_some() {
            // A specialisation: `struct hash<int> { … }`.
            i = skip_angles(lx, i, hi);
        }
        if lx.is_word(i, "final") {
            i += 1;
        }
        let head = lx.is(i, b'{') || (lx.is(i, b':') && !lx.is_op(i, "::"));
        if !head {
            return None;
        }
        i = to_body(lx, i, hi);
        if !lx.is(i, b'{') {
            return None;
        }
        let kind = match lx.text(kw) {
            b"struct" => Kind::Struct,
            b"union" => Kind::Union,
            b"enum" => Kind::Enum,
            _ => Kind::Class,
        };
        let id = name_at.and_then(|n| self.b.add(lx.name(n), kind, lx.line(n), parent));
        let after = if kind == Kind::Enum || (id.is_none() && !self.cpp) {
            let after = lx.skip_group(i).min(hi);
            self.b.end(id, lx.line(after.saturating_sub(1)));
            after
        } else {
            let owner = if id.is_some() { id } else { parent };
            let close = lx.partner(i).filter(|&c| c > i).unwrap_or(hi);
            self.block(i + 1, close.min(hi), true, owner, depth + 1);
            self.b.end(id, lx.line(close));
            close + 1
        };
        // Declarators after the body (`} x, *y;`), or the end of a class member.
        Some(to_semicolon(lx, after, hi))
    }

    /// `typedef <type> A, *B, (*C)(int);` — each declarator a type alias; a tagged type
    /// with a body (`typedef struct tag { … } t;`) also defines `tag`.
    fn typedef(&mut self, kw: usize, hi: usize, parent: Id, depth: usize) -> usize {
        let lx = self.lx;
        let mut i = kw + 1;
        if ["struct", "union", "enum", "class"]
            .iter()
            .any(|w| lx.is_word(i, w))
        {
            let mut k = i + 1;
            while lx.is_ident(k) || lx.is_op(k, "::") {
                k += 1;
            }
            if (lx.is(k, b'{') || lx.is(k, b':'))
                && let Some(after) = self.tagged(i, hi, parent, depth)
            {
                // `tagged` went to the `;`; the declarators sit before it.
                let close = (i..after).rev().find(|&c| lx.is(c, b'}')).unwrap_or(i);
                self.declarators(close + 1, after.saturating_sub(1), parent);
                return after;
            }
        }
        let end = to_semicolon(lx, i, hi);
        i = i.max(kw + 1);
        self.declarators(i, end.saturating_sub(1), parent);
        end
    }

    /// The names declared in `lo..hi`, split at top-level commas: a name in a `(*name)`
    /// group (function pointers), else the last identifier outside brackets.
    pub(super) fn declarators(&mut self, lo: usize, hi: usize, parent: Id) {
        let lx = self.lx;
        let mut i = lo;
        while i < hi {
            let mut name = None;
            let mut k = i;
            while k < hi && !lx.is(k, b',') {
                if lx.is(k, b'(')
                    && (lx.is(k + 1, b'*') || lx.is(k + 1, b'^') || lx.is(k + 1, b'&'))
                {
                    let close = lx.partner(k).unwrap_or(k);
                    if let Some(n) = (k + 1..close).find(|&n| lx.is_ident(n) && !is_cv(lx, n)) {
                        name = Some(n);
                    }
                } else if lx.is_ident(k) && !lx.is(k + 1, b'(') && !is_cv(lx, k) {
                    name = Some(k);
                }
                k = if lx.is(k, b'<') && k > lo && lx.is_ident(k - 1) {
                    skip_angles(lx, k, hi)
                } else {
                    lx.skip_group(k).max(k + 1)
                };
            }
            if let Some(n) = name {
                let id = self.b.add(lx.name(n), Kind::Type, lx.line(n), parent);
                self.b.end(id, lx.line(n));
            }
            i = k + 1;
        }
    }

    /// A function definition (`… name(params) [qualifiers] [: inits] { body }`), or any
    /// other declaration (stepped over to its `;`).
    fn function_or_other(&mut self, i: usize, hi: usize, class: bool, parent: Id) -> usize {
        let lx = self.lx;
        let mut k = i;
        while k < hi {
            if lx.is(k, b';') {
                return k + 1;
            }
            let operator = (k.saturating_sub(2)..k).any(|o| lx.is_word(o, "operator"));
            if lx.is(k, b'=') && !lx.is_op(k, "==") && !operator {
                return to_semicolon(lx, k, hi);
            }
            if lx.is(k, b'{') || lx.is(k, b'}') {
                // A block that is no function's body (a macro's, an initializer's).
                return to_semicolon(lx, k, hi).min(lx.skip_group(k).max(k + 1));
            }
            if lx.is(k, b'<')
                && k > i
                && lx.is_ident(k - 1)
                && !lx.is_word(k - 1, "operator")
                && self.cpp
            {
                k = skip_angles(lx, k, hi);
                continue;
            }
            if lx.is(k, b'(') {
                if let Some(name_at) = self.function_name(k, i)
                    && let Some(after) = self.definition(name_at, k, hi, class, parent)
                {
                    return after;
                }
                k = lx.skip_group(k);
                continue;
            }
            k = lx.skip_group(k).max(k + 1);
        }
        hi
    }
}

/// Words that begin a declaration even when alone on a line (`struct\nfoo {`).
fn is_type_word(lx: &Lexed, i: usize) -> bool {
    [
        "struct",
        "union",
        "enum",
        "class",
        "typedef",
        "namespace",
        "template",
        "extern",
        "static",
        "inline",
        "const",
        "unsigned",
        "signed",
        "void",
        "int",
        "char",
        "long",
        "short",
    ]
    .iter()
    .any(|w| lx.is_word(i, w))
}

/// `const`/`volatile`/`restrict`: qualifiers, never a declarator's name.
pub(super) fn is_cv(lx: &Lexed, i: usize) -> bool {
    [
        "const",
        "volatile",
        "restrict",
        "__restrict",
        "__restrict__",
    ]
    .iter()
    .any(|w| lx.is_word(i, w))
}
