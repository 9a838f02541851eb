//! Java definitions: classes, interfaces, enums, records and annotation types (nested
//! ones too), and methods and constructors in their bodies. Method bodies are opaque.

use super::{Builder, Id, MAX_DEPTH, skip_angles, to_body, to_semicolon};
use crate::codemap::Kind;
use crate::codemap::lex::Lexed;

const MODIFIERS: &[&str] = &[
    "public",
    "private",
    "protected",
    "static",
    "final",
    "abstract",
    "sealed",
    "non",
    "strictfp",
    "synchronized",
    "native",
    "transient",
    "volatile",
    "default",
];

pub fn outline(lx: &Lexed, b: &mut Builder) {
    block(lx, b, 0, lx.len(), None, 0);
}

fn block(lx: &Lexed, b: &mut Builder, lo: usize, hi: usize, owner: Id, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    let mut i = lo;
    while i < hi {
        i = member(lx, b, i, hi, owner, depth).max(i + 1);
    }
}

/// One declaration from `i`: a type, a method, a field, an initializer block.
fn member(lx: &Lexed, b: &mut Builder, mut i: usize, hi: usize, owner: Id, depth: usize) -> usize {
    if lx.is(i, b';') {
        return i + 1;
    }
    loop {
        if lx.is(i, b'@') && lx.is_ident(i + 1) && !lx.is_word(i + 1, "interface") {
            i += 2;
            while lx.is(i, b'.') && lx.is_ident(i + 1) {
                i += 2;
            }
            if lx.is(i, b'(') {
                i = lx.skip_group(i);
            }
        } else if MODIFIERS.iter().any(|w| lx.is_word(i, w)) {
            // `non-sealed` is three tokens.
            i += if lx.is_word(i, "non") && lx.is(i + 1, b'-') {
                3
            } else {
                1
            };
        } else {
            break;
        }
    }
    let kind = match lx.text(i) {
        b"class" | b"record" if lx.is_ident(i + 1) => Some(Kind::Class),
        b"interface" if lx.is_ident(i + 1) => Some(Kind::Interface),
        b"enum" if lx.is_ident(i + 1) => Some(Kind::Enum),
        b"@" if lx.is_word(i + 1, "interface") => {
            i += 1;
            Some(Kind::Interface)
        }
        _ => None,
    };
    if let Some(kind) = kind {
        return type_decl(lx, b, i, hi, kind, owner, depth);
    }
    if lx.is_word(i, "package") || lx.is_word(i, "import") {
        return to_semicolon(lx, i, hi);
    }
    if lx.is(i, b'{') {
        return lx.skip_group(i);
    }
    // A method or constructor (`<T> Type name(…) [throws …] {…}`) or a field.
    let mut k = i;
    while k < hi {
        if lx.is(k, b';') {
            return k + 1;
        }
        if lx.is(k, b'=') || lx.is(k, b'{') || lx.is(k, b'}') {
            return to_semicolon(lx, k, hi);
        }
        if lx.is(k, b'<') {
            k = skip_angles(lx, k, hi);
            continue;
        }
        if lx.is(k, b'(') && k > i && lx.is_ident(k - 1) && owner.is_some() {
            let id = b.add(lx.name(k - 1), Kind::Method, lx.line(k - 1), owner);
            let mut j = lx.skip_group(k);
            while j < hi && !lx.is(j, b'{') && !lx.is(j, b';') {
                j = lx.skip_group(j).max(j + 1);
            }
            let after = if lx.is(j, b'{') {
                lx.skip_group(j)
            } else {
                j + 1
            };
            b.end(id, lx.line(after.saturating_sub(1)));
            return after;
        }
        k = lx.skip_group(k).max(k + 1);
    }
    hi
}

/// `class|interface|enum|record|@interface Name … { body }`.
fn type_decl(
    lx: &Lexed,
    b: &mut Builder,
    kw: usize,
    hi: usize,
    kind: Kind,
    owner: Id,
    depth: usize,
) -> usize {
    let id = b.add(lx.name(kw + 1), kind, lx.line(kw + 1), owner);
    let mut i = kw + 2;
    i = to_body(lx, i, hi);
    if !lx.is(i, b'{') {
        return i + 1;
    }
    let close = lx.partner(i).filter(|&c| c > i).unwrap_or(hi).min(hi);
    let mut start = i + 1;
    if lx.is_word(kw, "enum") {
        // The constants come first, up to a `;` (bodies of constants are skipped).
        let mut k = start;
        while k < close && !lx.is(k, b';') {
            k = lx.skip_group(k).max(k + 1);
        }
        start = k;
    }
    block(lx, b, start, close, id, depth + 1);
    b.end(id, lx.line(close));
    close + 1
}
