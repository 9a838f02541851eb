//! The Python scanner: `#` comments, the string forms (prefixes, triple quotes), and
//! logical lines — a line continued by a backslash or inside brackets is not a new one, so
//! the first token of each logical line carries `LOGICAL_START` and its indentation.

use super::{LINE_START, LOGICAL_START, Scan, Tk, ident_start};

/// String prefixes, compared case-insensitively (`rb`, `Rb`, `f`, `t` …).
fn string_prefix(word: &[u8]) -> bool {
    word.len() <= 2
        && word
            .iter()
            .all(|b| matches!(b.to_ascii_lowercase(), b'r' | b'b' | b'u' | b'f' | b't'))
}

pub fn lex(src: &[u8]) -> Vec<super::Token> {
    let mut s = Scan::new(src);
    let mut depth = 0u32;
    let mut continued = false;
    let mut logical = true;
    while !s.done() {
        let b = s.at(0);
        let (start, line, line_pos) = (s.i, s.line, s.line_pos);
        let mut flags = u8::from(s.fresh_line) * LINE_START;
        if logical {
            flags |= LOGICAL_START;
        }
        let kind = match b {
            b'\n' => {
                s.bump();
                if depth == 0 && !continued {
                    logical = true;
                }
                continued = false;
                continue;
            }
            b'\\' if s.at(1) == b'\n' || (s.at(1) == b'\r' && s.at(2) == b'\n') => {
                continued = true;
                s.i += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' | 0x0b | 0x0c => {
                s.i += 1;
                continue;
            }
            b'#' => {
                s.skip_to_line_end();
                continue;
            }
            b'\'' | b'"' => {
                string(&mut s);
                Tk::Str
            }
            b'0'..=b'9' => {
                s.number();
                Tk::Num
            }
            b'.' if s.at(1).is_ascii_digit() => {
                s.i += 1;
                s.number();
                Tk::Num
            }
            b if ident_start(b) => {
                s.ident(false);
                if matches!(s.at(0), b'\'' | b'"') && string_prefix(&src[start..s.i]) {
                    string(&mut s);
                    Tk::Str
                } else {
                    Tk::Ident
                }
            }
            _ => {
                s.i += 1;
                match b {
                    b'(' | b'[' | b'{' => depth += 1,
                    b')' | b']' | b'}' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                Tk::Punct
            }
        };
        logical = false;
        s.push_at(kind, start, line, line_pos, flags);
    }
    s.toks
}

/// A string from its opening quote: triple-quoted ones span lines, single-quoted ones end
/// at an unescaped newline.
fn string(s: &mut Scan) {
    let q = s.at(0);
    if s.at(1) == q && s.at(2) == q {
        s.i += 3;
        while !s.done() {
            if s.at(0) == b'\\' {
                s.bump();
                if !s.done() {
                    s.bump();
                }
            } else if s.at(0) == q && s.at(1) == q && s.at(2) == q {
                s.i += 3;
                return;
            } else {
                s.bump();
            }
        }
        return;
    }
    s.i += 1;
    s.quoted(q, true);
}
