//! The scanner of the brace languages: Rust, C, C++, Java, Go, JavaScript and TypeScript.
//! One loop; the dialect decides what a quote, a backquote, a `#` or a `/` starts.

use super::{PREPROC, Scan, Tk, ident_start};
use crate::codemap::lang::Language;

/// JavaScript keywords after which a `/` starts a regular expression, not a division.
const JS_REGEX_AFTER: &[&[u8]] = &[
    b"return",
    b"typeof",
    b"instanceof",
    b"in",
    b"of",
    b"new",
    b"delete",
    b"void",
    b"throw",
    b"case",
    b"do",
    b"else",
    b"yield",
    b"await",
];

pub fn lex(lang: Language, src: &[u8]) -> Vec<super::Token> {
    let mut s = Scan::new(src);
    let js = lang.is_js();
    let dollar = js || lang == Language::Java;
    // Brace depth at each open `${` of a template literal (JavaScript).
    let mut holes: Vec<u32> = Vec::new();
    let mut depth: u32 = 0;
    // Inside a C preprocessor directive, until an unescaped newline.
    let mut pp = false;
    while !s.done() {
        let b = s.at(0);
        let (start, line, line_pos) = (s.i, s.line, s.line_pos);
        let fresh = s.fresh_line;
        let flags = |fresh: bool, pp: bool| {
            (u8::from(fresh) * super::LINE_START) | if pp { PREPROC } else { 0 }
        };
        match b {
            b'\n' => {
                s.bump();
                pp = false;
            }
            b' ' | b'\t' | b'\r' | 0x0b | 0x0c => s.i += 1,
            // A line splice (C) or a stray backslash: whitespace to a reader.
            b'\\' if s.at(1) == b'\n' || (s.at(1) == b'\r' && s.at(2) == b'\n') => {
                s.i += 1;
                if s.at(0) == b'\r' {
                    s.i += 1;
                }
                s.bump();
                s.fresh_line = fresh;
            }
            b'/' if s.at(1) == b'/' => s.skip_to_line_end(),
            b'/' if s.at(1) == b'*' => block_comment(&mut s, lang == Language::Rust),
            b'#' if lang.is_c() && fresh => {
                pp = true;
                s.i += 1;
                s.push_at(Tk::Punct, start, line, line_pos, flags(fresh, true));
            }
            b'"' => {
                s.i += 1;
                if lang == Language::Java && s.at(0) == b'"' && s.at(1) == b'"' {
                    s.i += 2;
                    text_block(&mut s);
                } else {
                    // Rust strings span lines; the others end at the line (a stray quote
                    // in JSX text or a `#error` line must not swallow the file).
                    s.quoted(b'"', lang != Language::Rust);
                }
                s.push_at(Tk::Str, start, line, line_pos, flags(fresh, pp));
            }
            b'\'' => {
                let kind = if lang == Language::Rust {
                    rust_quote(&mut s)
                } else {
                    s.i += 1;
                    s.quoted(b'\'', true);
                    Tk::Str
                };
                s.push_at(kind, start, line, line_pos, flags(fresh, pp));
            }
            b'`' if lang == Language::Go => {
                s.i += 1;
                while !s.done() && s.at(0) != b'`' {
                    s.bump();
                }
                s.i = (s.i + 1).min(src.len());
                s.push_at(Tk::Str, start, line, line_pos, flags(fresh, pp));
            }
            b'`' if js => {
                s.i += 1;
                if template(&mut s) {
                    holes.push(depth);
                }
                s.push_at(Tk::Str, start, line, line_pos, flags(fresh, pp));
            }
            b'}' if holes.last() == Some(&depth) => {
                // The end of a `${…}` hole: the template literal goes on.
                holes.pop();
                s.i += 1;
                if template(&mut s) {
                    holes.push(depth);
                }
                s.push_at(Tk::Str, start, line, line_pos, flags(fresh, pp));
            }
            b'/' if js && regex_allowed(&s) => {
                if !regex(&mut s) {
                    s.i = start + 1;
                    s.push_at(Tk::Punct, start, line, line_pos, flags(fresh, pp));
                } else {
                    s.push_at(Tk::Str, start, line, line_pos, flags(fresh, pp));
                }
            }
            b'0'..=b'9' => {
                s.number();
                s.push_at(Tk::Num, start, line, line_pos, flags(fresh, pp));
            }
            b'.' if s.at(1).is_ascii_digit() => {
                s.i += 1;
                s.number();
                s.push_at(Tk::Num, start, line, line_pos, flags(fresh, pp));
            }
            b if ident_start(b) || (dollar && b == b'$') => {
                s.ident(dollar);
                let kind = prefixed_literal(&mut s, lang, start);
                let start = if kind == Tk::Ident && raw_ident(&s, lang, start) {
                    // `r#match`: the identifier is what follows `r#`.
                    s.i += 1;
                    let at = s.ident(false);
                    if at == s.i { start } else { at }
                } else {
                    start
                };
                s.push_at(kind, start, line, line_pos, flags(fresh, pp));
            }
            _ => {
                s.i += 1;
                if !pp {
                    match b {
                        b'{' => depth += 1,
                        b'}' => depth = depth.saturating_sub(1),
                        _ => {}
                    }
                }
                s.push_at(Tk::Punct, start, line, line_pos, flags(fresh, pp));
            }
        }
    }
    s.toks
}

/// `/* … */`, nested in Rust.
fn block_comment(s: &mut Scan, nested: bool) {
    s.i += 2;
    let mut level = 1u32;
    while !s.done() {
        if s.at(0) == b'*' && s.at(1) == b'/' {
            s.i += 2;
            level -= 1;
            if level == 0 {
                return;
            }
        } else if nested && s.at(0) == b'/' && s.at(1) == b'*' {
            s.i += 2;
            level += 1;
        } else {
            s.bump();
        }
    }
}

/// Java text block: after `"""`, up to the closing `"""`.
fn text_block(s: &mut Scan) {
    while !s.done() {
        if s.at(0) == b'\\' {
            s.bump();
            if !s.done() {
                s.bump();
            }
        } else if s.at(0) == b'"' && s.at(1) == b'"' && s.at(2) == b'"' {
            s.i += 3;
            return;
        } else {
            s.bump();
        }
    }
}

/// Rust `'`: a lifetime or label (`'a`), or a character literal (`'a'`, `'\n'`, `'é'`).
fn rust_quote(s: &mut Scan) -> Tk {
    s.i += 1;
    if ident_start(s.at(0)) {
        let mut k = 0;
        while super::ident_byte(s.at(k)) {
            k += 1;
        }
        if s.at(k) != b'\'' {
            s.i += k;
            return Tk::Lifetime;
        }
        s.i += k + 1;
        return Tk::Str;
    }
    if s.at(0) == b'\\' {
        s.i += 2;
    } else if !s.done() && s.at(0) != b'\n' {
        s.i += 1;
    }
    // The rest of an escape (`\u{1F600}`, `\x7f`) up to the closing quote, on this line.
    let mut k = 0;
    while k < 12 && !matches!(s.at(k), b'\'' | b'\n' | 0) {
        k += 1;
    }
    if s.at(k) == b'\'' {
        s.i += k + 1;
    }
    Tk::Str
}

/// After an identifier: is it the prefix of a literal (`r#"…"#`, `b'x'`, `u8"…"`,
/// `R"d(…)d"`)? Consumes the literal and returns `Str` if so.
fn prefixed_literal(s: &mut Scan, lang: Language, start: usize) -> Tk {
    let word = &s.src[start..s.i];
    match lang {
        Language::Rust => {
            let raw = matches!(word, b"r" | b"br" | b"cr");
            if raw && (s.at(0) == b'"' || (s.at(0) == b'#' && hashes_then_quote(s))) {
                rust_raw(s);
                return Tk::Str;
            }
            if matches!(word, b"b" | b"c") && s.at(0) == b'"' {
                s.i += 1;
                s.quoted(b'"', false);
                return Tk::Str;
            }
            if word == b"b" && s.at(0) == b'\'' {
                rust_quote(s);
                return Tk::Str;
            }
        }
        Language::C | Language::Cpp => {
            if matches!(word, b"R" | b"LR" | b"uR" | b"UR" | b"u8R") && s.at(0) == b'"' {
                cpp_raw(s);
                return Tk::Str;
            }
            if matches!(word, b"L" | b"u" | b"U" | b"u8") && matches!(s.at(0), b'"' | b'\'') {
                let q = s.at(0);
                s.i += 1;
                s.quoted(q, true);
                return Tk::Str;
            }
        }
        _ => {}
    }
    Tk::Ident
}

fn hashes_then_quote(s: &Scan) -> bool {
    let mut k = 0;
    while s.at(k) == b'#' {
        k += 1;
    }
    s.at(k) == b'"'
}

/// `r#match`: a raw identifier (Rust), `r` then `#` then an identifier start.
fn raw_ident(s: &Scan, lang: Language, start: usize) -> bool {
    lang == Language::Rust && &s.src[start..s.i] == b"r" && s.at(0) == b'#' && ident_start(s.at(1))
}

/// Rust raw string after its prefix: `#`* `"` … `"` `#`* (same count).
fn rust_raw(s: &mut Scan) {
    let mut hashes = 0;
    while s.at(0) == b'#' {
        hashes += 1;
        s.i += 1;
    }
    s.i += 1;
    while !s.done() {
        if s.at(0) == b'"' && (1..=hashes).all(|k| s.at(k) == b'#') {
            s.i += 1 + hashes;
            return;
        }
        s.bump();
    }
}

/// C++ raw string after its prefix: `"delim(` … `)delim"`.
fn cpp_raw(s: &mut Scan) {
    s.i += 1;
    let open = s.i;
    while !s.done() && !matches!(s.at(0), b'(' | b'"' | b'\n') && s.i - open < 16 {
        s.i += 1;
    }
    if s.at(0) != b'(' {
        // Not a raw string after all: an ordinary one.
        s.i = open;
        s.quoted(b'"', true);
        return;
    }
    let delim = s.src[open..s.i].to_vec();
    s.i += 1;
    while !s.done() {
        if s.at(0) == b')' && s.src[s.i + 1..].starts_with(&delim) && s.at(1 + delim.len()) == b'"'
        {
            s.i += 2 + delim.len();
            return;
        }
        s.bump();
    }
}

/// A template literal's text from here: returns true when it stops at a `${` hole
/// (consumed), false at the closing backquote (consumed) or the end of the file.
fn template(s: &mut Scan) -> bool {
    while !s.done() {
        match s.at(0) {
            b'\\' => {
                s.bump();
                if !s.done() {
                    s.bump();
                }
            }
            b'`' => {
                s.i += 1;
                return false;
            }
            b'$' if s.at(1) == b'{' => {
                s.i += 2;
                return true;
            }
            _ => s.bump(),
        }
    }
    false
}

/// Does a `/` here start a regular expression? Yes at the start, after an operator or
/// opening bracket, and after the keywords that precede an expression.
fn regex_allowed(s: &Scan) -> bool {
    let Some(prev) = s.toks.last() else {
        return true;
    };
    let text = &s.src[prev.start as usize..prev.end as usize];
    match prev.kind {
        Tk::Punct => !matches!(text, b")" | b"]"),
        Tk::Ident => JS_REGEX_AFTER.contains(&text),
        _ => false,
    }
}

/// A regular expression literal from its `/`: true when it closes on this line (then
/// consumed with its flags), false when it does not (nothing consumed).
fn regex(s: &mut Scan) -> bool {
    let start = s.i;
    s.i += 1;
    let mut class = false;
    while !s.done() {
        match s.at(0) {
            b'\n' => break,
            b'\\' => s.i += 2,
            b'[' => {
                class = true;
                s.i += 1;
            }
            b']' => {
                class = false;
                s.i += 1;
            }
            b'/' if !class => {
                s.i += 1;
                while s.at(0).is_ascii_alphabetic() {
                    s.i += 1;
                }
                return true;
            }
            _ => s.i += 1,
        }
    }
    s.i = start;
    false
}
