//! The lexical layer of CodeMap: source bytes into tokens, with comments, whitespace and
//! the insides of strings gone, and every bracket paired with its partner.
//!
//! Role: one hand-written scanner per language family (`c_like` for the brace languages,
//! `python` for Python). They know exactly what hides code from a reader — comments
//! (nested in Rust), strings with escapes, raw strings (Rust `r#"…"#`, C++ `R"d(…)d"`, Go
//! backquotes), Java text blocks, JavaScript template literals (whose `${…}` holes are
//! code again) and regular expression literals, C preprocessor lines — and nothing about
//! grammar. The outlines (`codemap::outline`) and `references` read the tokens.
//!
//! Invariant: any byte sequence lexes without a panic, in time linear in its length; an
//! unterminated string or comment runs to the end of the file (a quote in a one-line
//! string form stops at the end of its line), never further than the input.
//! Invariant: bytes that are not UTF-8 are identifier bytes (≥ 0x80) or punctuation; they
//! never stop the scan.

mod c_like;
mod preproc;
mod python;

use super::lang::Language;

/// What a token is. Strings, characters and regular expressions are all `Str`: what
/// matters to a reader is that their insides are not code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tk {
    Ident,
    /// One byte of punctuation; multi-byte operators are consecutive glued tokens.
    Punct,
    Str,
    Num,
    /// A Rust lifetime or loop label (`'a`).
    Lifetime,
}

/// The first token on its physical line.
pub const LINE_START: u8 = 1;
/// Part of a C preprocessor directive (or of a branch the preprocessor scan sets aside):
/// not paired, not part of the outline's structure.
pub const PREPROC: u8 = 2;
/// Python: the first token of a logical line (outside brackets, not continued).
pub const LOGICAL_START: u8 = 4;
/// No whitespace or comment between this token and the previous one (`::`, `->`, `=>`).
pub const GLUED: u8 = 8;
/// In a C preprocessor branch set aside (directives there included): not read at all.
pub const ASIDE: u8 = 16;

/// One token: a byte span of the source, its kind and where it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    pub kind: Tk,
    pub flags: u8,
    pub start: u32,
    pub end: u32,
    /// 1-based line of the first byte.
    pub line: u32,
    /// 1-based line of the last byte (differs for strings and comments spanning lines).
    pub end_line: u32,
    /// Display column of the first byte (tabs to multiples of 8), for Python's indentation.
    pub col: u32,
}

/// No partner: a stray closing bracket, or an opening one never closed.
pub const UNPAIRED: u32 = u32::MAX;

/// A lexed file: its tokens and, for each bracket token, the index of its partner.
pub struct Lexed<'s> {
    pub src: &'s [u8],
    pub toks: Vec<Token>,
    pub pair: Vec<u32>,
    /// Lines in the file (a final newline does not start another).
    pub lines: u32,
}

/// Lex `src` as `lang`.
pub fn lex(lang: Language, src: &[u8]) -> Lexed<'_> {
    let mut toks = match lang {
        Language::Python => python::lex(src),
        _ => c_like::lex(lang, src),
    };
    if lang.is_c() {
        preproc::set_aside_branches(src, &mut toks);
    }
    let pair = pairs(src, &toks);
    let newlines = src.iter().filter(|&&b| b == b'\n').count() as u32;
    let lines = newlines + u32::from(!src.is_empty() && src.last() != Some(&b'\n'));
    Lexed {
        src,
        toks,
        pair,
        lines,
    }
}

fn closer(open: u8) -> u8 {
    match open {
        b'(' => b')',
        b'[' => b']',
        _ => b'}',
    }
}

/// Pair brackets with a stack. A closer that matches an opener deeper in the stack closes
/// the ones above it too (they stay unpaired); a closer matching nothing is left alone.
fn pairs(src: &[u8], toks: &[Token]) -> Vec<u32> {
    let mut pair = vec![UNPAIRED; toks.len()];
    let mut stack: Vec<(u8, u32)> = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if t.kind != Tk::Punct || t.flags & PREPROC != 0 {
            continue;
        }
        match src[t.start as usize] {
            b @ (b'(' | b'[' | b'{') => stack.push((closer(b), i as u32)),
            b @ (b')' | b']' | b'}') => {
                if let Some(k) = stack.iter().rposition(|&(c, _)| c == b) {
                    let (_, open) = stack[k];
                    stack.truncate(k);
                    pair[open as usize] = i as u32;
                    pair[i] = open;
                }
            }
            _ => {}
        }
    }
    pair
}

impl<'s> Lexed<'s> {
    /// The same file without its preprocessor lines and set-aside branches, brackets
    /// paired again: what a C reader walks for structure.
    pub fn without_preproc(&self) -> Lexed<'s> {
        let toks: Vec<Token> = self
            .toks
            .iter()
            .filter(|t| t.flags & PREPROC == 0)
            .copied()
            .collect();
        let pair = pairs(self.src, &toks);
        Lexed {
            src: self.src,
            toks,
            pair,
            lines: self.lines,
        }
    }

    pub fn len(&self) -> usize {
        self.toks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.toks.is_empty()
    }

    /// The bytes of token `i` (empty past the end).
    pub fn text(&self, i: usize) -> &'s [u8] {
        match self.toks.get(i) {
            Some(t) => &self.src[t.start as usize..t.end as usize],
            None => &[],
        }
    }

    /// The token's text as a string (lossy for bytes that are not UTF-8).
    pub fn name(&self, i: usize) -> String {
        String::from_utf8_lossy(self.text(i)).into_owned()
    }

    pub fn kind(&self, i: usize) -> Option<Tk> {
        self.toks.get(i).map(|t| t.kind)
    }

    /// Is token `i` the punctuation byte `b`?
    pub fn is(&self, i: usize, b: u8) -> bool {
        self.toks
            .get(i)
            .is_some_and(|t| t.kind == Tk::Punct && self.src[t.start as usize] == b)
    }

    /// Is token `i` the identifier (or keyword) `word`?
    pub fn is_word(&self, i: usize, word: &str) -> bool {
        self.kind(i) == Some(Tk::Ident) && self.text(i) == word.as_bytes()
    }

    pub fn is_ident(&self, i: usize) -> bool {
        self.kind(i) == Some(Tk::Ident)
    }

    /// Are tokens `i..` the glued punctuation `op` (`"::"`, `"->"`, `"=>"`)?
    pub fn is_op(&self, i: usize, op: &str) -> bool {
        op.bytes()
            .enumerate()
            .all(|(k, b)| self.is(i + k, b) && (k == 0 || self.toks[i + k].flags & GLUED != 0))
    }

    pub fn line(&self, i: usize) -> u32 {
        self.toks.get(i).map_or(self.lines.max(1), |t| t.line)
    }

    pub fn end_line(&self, i: usize) -> u32 {
        self.toks.get(i).map_or(self.lines.max(1), |t| t.end_line)
    }

    pub fn flags(&self, i: usize) -> u8 {
        self.toks.get(i).map_or(0, |t| t.flags)
    }

    /// The partner of bracket `i`, if it has one.
    pub fn partner(&self, i: usize) -> Option<usize> {
        match self.pair.get(i) {
            Some(&p) if p != UNPAIRED => Some(p as usize),
            _ => None,
        }
    }

    /// The index after the group opened at `i` (its closer + 1); the end of the file for
    /// an opener never closed; `i + 1` for anything else.
    pub fn skip_group(&self, i: usize) -> usize {
        match self.partner(i) {
            Some(p) if p > i => p + 1,
            _ if self.is(i, b'(') || self.is(i, b'[') || self.is(i, b'{') => self.len(),
            _ => i + 1,
        }
    }

    /// Is this token set aside (a preprocessor line or an unused branch)?
    pub fn preproc(&self, i: usize) -> bool {
        self.flags(i) & PREPROC != 0
    }
}

/// Identifier bytes: ASCII letters, digits, `_`, and every byte of a multi-byte (or
/// invalid) UTF-8 sequence.
pub fn ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

pub fn ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b >= 0x80
}

/// Shared scanner state: position, line bookkeeping and the token list.
pub(crate) struct Scan<'s> {
    pub src: &'s [u8],
    pub i: usize,
    pub line: u32,
    /// Byte offset where the current line starts.
    pub line_pos: usize,
    /// No token yet on the current physical line.
    pub fresh_line: bool,
    pub toks: Vec<Token>,
}

impl<'s> Scan<'s> {
    pub fn new(src: &'s [u8]) -> Scan<'s> {
        Scan {
            src,
            i: 0,
            line: 1,
            line_pos: 0,
            fresh_line: true,
            // About one token per five bytes of typical code.
            toks: Vec::with_capacity(src.len() / 5),
        }
    }

    /// The byte at `i + k`, 0 past the end.
    pub fn at(&self, k: usize) -> u8 {
        self.src.get(self.i + k).copied().unwrap_or(0)
    }

    pub fn done(&self) -> bool {
        self.i >= self.src.len()
    }

    /// Step over one byte, counting lines.
    pub fn bump(&mut self) {
        if self.at(0) == b'\n' {
            self.line += 1;
            self.line_pos = self.i + 1;
            self.fresh_line = true;
        }
        self.i += 1;
    }

    /// Step to just before the next newline (or the end).
    pub fn skip_to_line_end(&mut self) {
        while !self.done() && self.at(0) != b'\n' {
            self.i += 1;
        }
    }

    /// Display column of a token at `start` on the line beginning at `line_pos`: tabs
    /// expand to multiples of 8 in the indentation (what Python compares); after the first
    /// non-blank byte, every byte counts one (so this costs no more than the indentation).
    fn col(&self, line_pos: usize, start: usize) -> u32 {
        let mut col = 0u32;
        let before = self.src.get(line_pos..start).unwrap_or(&[]);
        let indent = before
            .iter()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count();
        for &b in &before[..indent] {
            col = if b == b'\t' {
                (col / 8 + 1) * 8
            } else {
                col + 1
            };
        }
        col + (before.len() - indent) as u32
    }

    /// Record the token `start..self.i` that began on line `line` at `line_pos`.
    pub fn push_at(&mut self, kind: Tk, start: usize, line: u32, line_pos: usize, flags: u8) {
        self.i = self.i.min(self.src.len());
        self.fresh_line = false;
        let mut flags = flags;
        if self.toks.last().is_some_and(|t| t.end as usize == start) {
            flags |= GLUED;
        }
        let col = self.col(line_pos, start);
        self.toks.push(Token {
            kind,
            flags,
            start: start as u32,
            end: self.i as u32,
            line,
            end_line: self.line,
            col,
        });
    }

    /// Consume an identifier starting here; returns its start.
    pub fn ident(&mut self, dollar: bool) -> usize {
        let start = self.i;
        while !self.done() && (ident_byte(self.at(0)) || (dollar && self.at(0) == b'$')) {
            self.i += 1;
        }
        start
    }

    /// Consume a quoted string body after its opening quote `q` (already consumed), with
    /// backslash escapes; `one_line` strings stop before a newline.
    pub fn quoted(&mut self, q: u8, one_line: bool) {
        while !self.done() {
            match self.at(0) {
                b'\\' => {
                    self.bump();
                    if !self.done() {
                        self.bump();
                    }
                }
                b'\n' if one_line => return,
                b if b == q => {
                    self.i += 1;
                    return;
                }
                _ => self.bump(),
            }
        }
    }

    /// Consume a number: digits, letters (suffixes, hex), `_`, a `.` before a digit,
    /// exponent signs, and C++14 digit separators (`1'000`).
    pub fn number(&mut self) {
        let mut prev = 0u8;
        while !self.done() {
            let b = self.at(0);
            let ok = b.is_ascii_alphanumeric()
                || b == b'_'
                || (b == b'.' && self.at(1).is_ascii_digit())
                || ((b == b'+' || b == b'-') && matches!(prev, b'e' | b'E' | b'p' | b'P'))
                || (b == b'\''
                    && self.at(1).is_ascii_alphanumeric()
                    && prev.is_ascii_alphanumeric());
            if !ok {
                break;
            }
            prev = b;
            self.i += 1;
        }
    }
}

#[cfg(test)]
mod tests;
