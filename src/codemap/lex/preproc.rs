//! C preprocessor conditionals, for structure only: a reader follows one branch of each
//! `#if` where two would not make sense together, or the braces of two alternative
//! function heads (`#ifdef X` `void f(int a) {` `#else` `void f(int a, int b) {`
//! `#endif`) would never balance.
//!
//! Rule (ctags' too, measured against it): every branch is read when the conditional
//! stands between two statements; a later branch (`#elif`, `#else`) is set aside (flagged
//! `PREPROC`, like the directives themselves) when the `#if` or that `#else` falls in the
//! middle of a statement — after anything but a `;` or a `}` (a class head's `{`, a
//! function head) — and so are the rest of that conditional's branches. `#if 0` sets its
//! own branch aside and reads the next one. Directive lines keep their tokens either way,
//! so a `#define` in any branch is seen.

use super::{ASIDE, LINE_START, PREPROC, Tk, Token};

struct Frame {
    /// Set aside by an enclosing conditional.
    outer: bool,
    /// `#if 0` whose alternative has not been reached yet.
    zero_pending: bool,
    /// The `#if` fell in the middle of a statement: one branch only.
    single: bool,
    /// A branch was read (or `single` applied): the remaining ones are set aside.
    rest_aside: bool,
}

fn word<'a>(src: &'a [u8], t: &Token) -> &'a [u8] {
    &src[t.start as usize..t.end as usize]
}

pub fn set_aside_branches(src: &[u8], toks: &mut [Token]) {
    let mut stack: Vec<Frame> = Vec::new();
    let mut skip = false;
    // Whether the last token read ends a statement (`;`, `}`) or nothing was read yet.
    let mut between = true;
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i];
        let directive = t.kind == Tk::Punct
            && t.flags & PREPROC != 0
            && t.flags & LINE_START != 0
            && word(src, &t) == b"#";
        if !directive {
            if skip {
                toks[i].flags |= PREPROC | ASIDE;
            } else if t.flags & PREPROC == 0 {
                between = t.kind == Tk::Punct && matches!(word(src, &t), b";" | b"}");
            }
            i += 1;
            continue;
        }
        let name = toks.get(i + 1).filter(|n| n.line == t.line);
        let name = name.map_or(&b""[..], |n| word(src, n));
        match name {
            b"if" | b"ifdef" | b"ifndef" => {
                let zero = name == b"if"
                    && toks.get(i + 2).is_some_and(|z| word(src, z) == b"0")
                    && toks
                        .get(i + 3)
                        .is_none_or(|n| n.flags & PREPROC == 0 || n.line != t.line);
                stack.push(Frame {
                    outer: skip,
                    zero_pending: zero,
                    single: !between,
                    rest_aside: false,
                });
                skip = skip || zero;
            }
            b"elif" | b"else" | b"elifdef" | b"elifndef" => {
                if let Some(f) = stack.last_mut() {
                    if f.zero_pending {
                        f.zero_pending = false;
                        skip = f.outer;
                    } else {
                        f.rest_aside |= f.single || !between;
                        skip = f.outer || f.rest_aside;
                    }
                }
            }
            b"endif" => {
                if let Some(f) = stack.pop() {
                    skip = f.outer;
                }
            }
            _ => {}
        }
        // Past the directive's own tokens; a directive in a set-aside branch is set aside
        // too (a `#define` there defines nothing).
        let conditional = matches!(
            name,
            b"if" | b"ifdef" | b"ifndef" | b"elif" | b"else" | b"elifdef" | b"elifndef" | b"endif"
        );
        let aside = skip && !conditional;
        let first = i;
        i += 1;
        while i < toks.len() && toks[i].flags & PREPROC != 0 && toks[i].flags & LINE_START == 0 {
            i += 1;
        }
        if aside {
            for t in &mut toks[first..i] {
                t.flags |= ASIDE;
            }
        }
    }
}
