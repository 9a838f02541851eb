//! C and C++ function definitions: the name before a parameter list, and what may stand
//! between the list and the body (qualifiers, a constructor's initialisers, a trailing
//! return type, K&R parameter declarations, attribute macros).

use super::c::Reader;
use super::{Id, skip_angles, to_semicolon};
use crate::codemap::Kind;
use crate::codemap::lex::GLUED;

/// Words followed by a parenthesised group that is not a parameter list.
const NOT_FUNCTIONS: &[&str] = &[
    "if",
    "while",
    "for",
    "switch",
    "return",
    "sizeof",
    "alignof",
    "alignas",
    "decltype",
    "typeof",
    "__typeof__",
    "__attribute__",
    "__declspec",
    "__asm__",
    "asm",
    "static_assert",
    "_Static_assert",
    "noexcept",
    "throw",
    "requires",
    "_Alignas",
    "__attribute",
];

/// Words allowed between a parameter list and a function body.
const QUALIFIERS: &[&str] = &[
    "const",
    "volatile",
    "noexcept",
    "throw",
    "override",
    "final",
    "__attribute__",
    "__attribute",
    "mutable",
    "requires",
    "try",
];

impl Reader<'_, '_> {
    /// The name before the parameter list at `open`, if it can name a function.
    pub(super) fn function_name(&self, open: usize, lo: usize) -> Option<usize> {
        let lx = self.lx;
        let n = open.checked_sub(1).filter(|&n| n >= lo)?;
        // `operator==(`, `operator()(`, `operator bool(`: back to the keyword.
        if let Some(op) = (n.saturating_sub(3)..=n).find(|&k| k >= lo && lx.is_word(k, "operator"))
        {
            return Some(op);
        }
        (lx.is_ident(n) && !NOT_FUNCTIONS.iter().any(|w| lx.is_word(n, w))).then_some(n)
    }

    /// After the parameter list at `open`: a body makes `name_at` a definition, recorded;
    /// returns the index after it. `None` for anything else (a prototype, a call).
    pub(super) fn definition(
        &mut self,
        name_at: usize,
        open: usize,
        hi: usize,
        class: bool,
        parent: Id,
    ) -> Option<usize> {
        let lx = self.lx;
        let mut k = lx.skip_group(open);
        if !self.cpp && self.knr_params(open) && lx.is_ident(k) {
            // K&R: `int f(a, b) int a; char *b; {` — the parameter declarations.
            while k < hi && !lx.is(k, b'{') {
                let ok = lx.is_ident(k)
                    || lx.is(k, b'*')
                    || lx.is(k, b',')
                    || lx.is(k, b';')
                    || lx.is(k, b'[');
                if !ok {
                    return None;
                }
                k = lx.skip_group(k).max(k + 1);
            }
        }
        loop {
            if k >= hi {
                return None;
            }
            if lx.is(k, b'{') {
                break;
            }
            if lx.is(k, b':') && !lx.is_op(k, "::") {
                // A constructor's initialisers: `: a(x), b{y}` up to the body.
                k += 1;
                loop {
                    while lx.is_ident(k) || lx.is_op(k, "::") || lx.is(k, b'.') {
                        k += if lx.is_op(k, "::") { 2 } else { 1 };
                    }
                    if lx.is(k, b'<') {
                        k = skip_angles(lx, k, hi);
                    }
                    if lx.is(k, b'(') || lx.is(k, b'{') {
                        k = lx.skip_group(k);
                    } else {
                        return None;
                    }
                    if lx.is(k, b',') {
                        k += 1;
                        continue;
                    }
                    break;
                }
                continue;
            }
            if lx.is_op(k, "->") {
                // A trailing return type, up to the body.
                k += 2;
                while k < hi && !lx.is(k, b'{') && !lx.is(k, b';') && !lx.is(k, b'=') {
                    k = if lx.is(k, b'<') {
                        skip_angles(lx, k, hi)
                    } else {
                        lx.skip_group(k).max(k + 1)
                    };
                }
                continue;
            }
            if lx.is_ident(k) && QUALIFIERS.iter().any(|w| lx.is_word(k, w)) {
                k += 1;
                if lx.is(k, b'(') {
                    k = lx.skip_group(k);
                }
                continue;
            }
            if lx.is(k, b'&') || lx.is(k, b'[') {
                k = lx.skip_group(k).max(k + 1);
                continue;
            }
            // An upper-case macro between the list and the body (`__THROW`,
            // `_GLIBCXX_NOEXCEPT_IF(…)`).
            if lx.is_ident(k) && lx.text(k).iter().all(|c| !c.is_ascii_lowercase()) {
                k += 1;
                if lx.is(k, b'(') {
                    k = lx.skip_group(k);
                }
                continue;
            }
            return None;
        }
        let name = self.name_text(name_at, open);
        let qualified = name_at >= 2 && lx.is_op(name_at - 2, "::");
        let kind = if class || qualified {
            Kind::Method
        } else {
            Kind::Function
        };
        // `A::f`: a member of `A`, named after the class whether or not it is here.
        let owner = (qualified && !class)
            .then(|| name_at.checked_sub(3))
            .flatten()
            .filter(|&o| lx.is_ident(o))
            .map(|o| lx.name(o));
        let id = match owner {
            Some(o) if parent.is_none() => self.b.add_in(name, kind, lx.line(name_at), o),
            _ => self.b.add(name, kind, lx.line(name_at), parent),
        };
        let after = lx.skip_group(k).min(hi);
        self.b.end(id, lx.line(after.saturating_sub(1)));
        self.local_typedefs(k + 1, after.saturating_sub(1), id);
        Some(after)
    }

    /// A body is opaque but for its `typedef`s, which ctags tags (they name types a
    /// reader of the body meets).
    fn local_typedefs(&mut self, lo: usize, hi: usize, owner: Id) {
        let lx = self.lx;
        let mut k = lo;
        while k < hi {
            if lx.is_word(k, "typedef") {
                let end = to_semicolon(lx, k, hi);
                self.declarators(k + 1, end.saturating_sub(1), owner);
                k = end;
            } else if lx.is_word(k, "using") && lx.is_ident(k + 1) && lx.is(k + 2, b'=') {
                let id = self
                    .b
                    .add(lx.name(k + 1), Kind::Type, lx.line(k + 1), owner);
                self.b.end(id, lx.line(k + 1));
                k = to_semicolon(lx, k, hi);
            } else {
                k += 1;
            }
        }
    }

    /// Is the group at `open` a K&R parameter list (identifiers and commas only)?
    fn knr_params(&self, open: usize) -> bool {
        let lx = self.lx;
        let close = lx.partner(open).unwrap_or(open);
        close > open + 1 && (open + 1..close).all(|k| lx.is_ident(k) || lx.is(k, b','))
    }

    /// A function's name: the identifier, `~Name` for a destructor, `operator ==` (as
    /// ctags spells it) for an operator.
    fn name_text(&self, at: usize, open: usize) -> String {
        let lx = self.lx;
        if lx.is_word(at, "operator") {
            let rest: Vec<u8> = (at + 1..open).flat_map(|k| lx.text(k).to_vec()).collect();
            return format!("operator {}", String::from_utf8_lossy(&rest));
        }
        if at >= 1 && lx.is(at - 1, b'~') && lx.flags(at) & GLUED != 0 {
            return format!("~{}", lx.name(at));
        }
        lx.name(at)
    }
}
