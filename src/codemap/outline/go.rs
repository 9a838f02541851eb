//! Go definitions: `func` (a method when it has a receiver, parented to the receiver's
//! type), `type` (struct, interface with its method specs, or any other type, grouped or
//! not) and `const` (grouped or not). Declarations start lines at the top level, so the
//! reader looks only at line-initial keywords there and steps over every bracket group.

use super::{Builder, Id, skip_angles};
use crate::codemap::Kind;
use crate::codemap::lex::{LINE_START, Lexed};

pub fn outline(lx: &Lexed, b: &mut Builder) {
    let mut i = 0;
    while i < lx.len() {
        let at_start = lx.flags(i) & LINE_START != 0;
        i = match lx.text(i) {
            b"func" if at_start && lx.is_ident(i) => func(lx, b, i),
            b"type" if at_start && lx.is_ident(i) => specs(lx, b, i, Spec::Type),
            b"const" if at_start && lx.is_ident(i) => specs(lx, b, i, Spec::Const),
            _ => lx.skip_group(i).max(i + 1),
        };
    }
}

/// `func [(recv T)] Name[T any](params) results {body}`.
fn func(lx: &Lexed, b: &mut Builder, kw: usize) -> usize {
    let mut i = kw + 1;
    let mut receiver = None;
    if lx.is(i, b'(') {
        // The receiver's type: its last identifier outside brackets (`*Server[T]` → Server).
        let close = lx.partner(i).unwrap_or(i);
        let recv = (i + 1..close)
            .filter(|&k| lx.is_ident(k) && !lx.is(k.wrapping_sub(1), b'['))
            .nth(1)
            .or_else(|| (i + 1..close).find(|&k| lx.is_ident(k)));
        receiver = Some(recv.map(|r| lx.name(r)).unwrap_or_default());
        i = lx.skip_group(i);
    }
    if !lx.is_ident(i) {
        return i.max(kw + 1);
    }
    let id = match receiver {
        Some(r) => b.add_in(lx.name(i), Kind::Method, lx.line(i), r),
        None => b.add(lx.name(i), Kind::Function, lx.line(i), None),
    };
    let mut j = i + 1;
    // Parameters, results, type parameters: groups up to the body or the end of line.
    while j < lx.len() && !lx.is(j, b'{') && lx.flags(j) & LINE_START == 0 {
        j = lx.skip_group(j).max(j + 1);
    }
    if lx.is(j, b'{') {
        let after = lx.skip_group(j);
        b.end(id, lx.line(after.saturating_sub(1)));
        return after;
    }
    b.end(id, lx.line(j.saturating_sub(1)));
    j
}

#[derive(Clone, Copy, PartialEq)]
enum Spec {
    Type,
    Const,
}

/// `type X …` / `const X = …`, or a parenthesised group of them (one per line).
fn specs(lx: &Lexed, b: &mut Builder, kw: usize, spec: Spec) -> usize {
    if !lx.is(kw + 1, b'(') {
        return one_spec(lx, b, kw + 1, spec, lx.len());
    }
    let close = lx.partner(kw + 1).unwrap_or(lx.len());
    let mut i = kw + 2;
    while i < close {
        if lx.is_ident(i)
            && (lx.flags(i) & LINE_START != 0 || lx.is(i - 1, b'(') || lx.is(i - 1, b';'))
        {
            i = one_spec(lx, b, i, spec, close);
        } else {
            i = lx.skip_group(i).max(i + 1);
        }
    }
    close + 1
}

/// One spec from its first name; returns the index of the next line's first token.
fn one_spec(lx: &Lexed, b: &mut Builder, at: usize, spec: Spec, hi: usize) -> usize {
    if !lx.is_ident(at) {
        return at + 1;
    }
    let mut names = vec![at];
    let mut i = at + 1;
    // `const a, b = 1, 2`
    while spec == Spec::Const && lx.is(i, b',') && lx.is_ident(i + 1) {
        names.push(i + 1);
        i += 2;
    }
    let kind = match spec {
        Spec::Const => Kind::Constant,
        Spec::Type => {
            let mut t = i;
            if lx.is(t, b'[') {
                t = lx.skip_group(t);
            }
            if lx.is(t, b'=') {
                t += 1;
            }
            match lx.text(t) {
                b"struct" => Kind::Struct,
                b"interface" => Kind::Interface,
                _ => Kind::Type,
            }
        }
    };
    let ids: Vec<Id> = names
        .iter()
        .map(|&n| b.add(lx.name(n), kind, lx.line(n), None))
        .collect();
    // To the end of the spec: the next line start at this level.
    while i < hi && lx.flags(i) & LINE_START == 0 && !lx.is(i, b';') {
        if lx.is(i, b'{') && kind == Kind::Interface {
            method_specs(lx, b, i, ids[0]);
        }
        if lx.is(i, b'<') {
            i = skip_angles(lx, i, hi);
            continue;
        }
        i = lx.skip_group(i).max(i + 1);
    }
    for id in ids {
        b.end(id, lx.line(i.saturating_sub(1)));
    }
    if lx.is(i, b';') { i + 1 } else { i }
}

/// The method specs of an interface body: `Name(params) results` lines.
fn method_specs(lx: &Lexed, b: &mut Builder, open: usize, owner: Id) {
    let close = lx.partner(open).unwrap_or(open);
    let mut i = open + 1;
    while i < close {
        if lx.is_ident(i) && lx.is(i + 1, b'(') && lx.flags(i) & LINE_START != 0 {
            let id = b.add(lx.name(i), Kind::Method, lx.line(i), owner);
            b.end(id, lx.line(i));
        }
        i = lx.skip_group(i).max(i + 1);
    }
}
