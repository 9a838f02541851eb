//! The word scanner: tokens, quoting, expansions, substitutions and here-document bodies.

use super::parse::{PResult, ParseErrorKind, Parser, Token, Word};
use super::word::{Ctx, Wb};

/// Operators, longest first so that `&>>` wins over `&>` and `&`; those with `<`/`>` redirect.
#[rustfmt::skip]
const OPS: &[&str] = &["&>>", "<<<", "<<-", ";;&", "&&", "||", "|&", ";;", ";&", "((", "&>", "<<",
    "<>", "<&", ">>", ">|", ">&", "&", "|", ";", "(", ")", "<", ">"];

impl Parser<'_> {
    pub(super) fn lex(&mut self) -> PResult<Token> {
        loop {
            match (self.at(0), self.at(1)) {
                (Some(b' ' | b'\t'), _) => self.pos += 1,
                (Some(b'\\'), Some(b'\n')) => self.pos += 2,
                (Some(b'#'), _) => {
                    self.pos += self.src[self.pos..]
                        .split(|&c| c == b'\n')
                        .next()
                        .map_or(0, <[u8]>::len)
                }
                _ => break,
            }
        }
        let (start, rest) = (self.pos, &self.src[self.pos..]);
        let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
        let fd: Option<u32> = std::str::from_utf8(&rest[..digits])
            .ok()
            .and_then(|d| d.parse().ok());
        let after = &rest[digits..];
        let tok = match (
            rest.first(),
            OPS.iter()
                .copied()
                .find(|op| after.starts_with(op.as_bytes())),
        ) {
            (None, _) if self.heredocs.is_empty() => Token::Eof,
            (None, _) => return self.fail(ParseErrorKind::Missing("here-document delimiter")),
            (Some(b'\n'), _) => {
                self.pos += 1;
                self.read_heredocs()?;
                Token::Newline
            }
            _ if matches!(after, [b'<' | b'>', b'(', ..]) => self.word()?, // process substitution
            (_, Some(_)) if digits > 0 && fd.is_none() => {
                return self.fail(ParseErrorKind::Unsupported("file descriptor number"));
            }
            (_, Some(op)) if op.contains(['<', '>']) => {
                self.pos += digits + op.len();
                Token::Redir(fd, op)
            }
            (_, Some(op)) if digits == 0 => {
                self.pos += op.len();
                Token::Op(op)
            }
            _ => self.word()?,
        };
        self.tok_start = start; // after any nested lexing inside the token
        Ok(tok)
    }

    fn word(&mut self) -> PResult<Token> {
        let (start, mut w) = (self.pos, Wb::default());
        self.scan(&mut w, Ctx::Bare)?;
        if self.pos == start {
            return self.fail(ParseErrorKind::Unexpected(
                char::from(self.src[start]).into(),
            ));
        }
        let text = String::from_utf8_lossy(&w.text).into_owned();
        let literal_prefix = w.literal.unwrap_or(text.len());
        Ok(Token::Word(Word {
            text,
            dynamic: w.dynamic,
            quoted: w.quoted,
            literal_prefix,
        }))
    }

    /// Scans text in `ctx` up to its end into `w`, parsing every substitution on the way.
    pub(super) fn scan(&mut self, w: &mut Wb, ctx: Ctx) -> PResult<()> {
        let (start, mut depth, quotes) = (self.pos, 0usize, !matches!(ctx, Ctx::Dq | Ctx::Doc));
        while let Some(c) = self.at(0) {
            let (sub, next) = (self.pos, self.at(1));
            if self.expansion(c, next, ctx)? {
                w.mark(false);
                w.text.extend_from_slice(&self.src[sub..self.pos]);
                continue;
            }
            let end = match ctx {
                Ctx::Nest(_, close) => c == close && depth == 0,
                _ => ctx == Ctx::Dq && c == b'"',
            };
            match c {
                _ if end => {
                    self.pos += 1;
                    return Ok(());
                }
                b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'(' | b')' | b'<' | b'>'
                    if ctx == Ctx::Bare =>
                {
                    return Ok(());
                }
                b'"' if quotes => {
                    w.mark(true);
                    self.nested(1, |p| p.scan(w, Ctx::Dq))?;
                }
                b'\'' if quotes => self.single(w, 1)?,
                b'$' if quotes && next == Some(b'\'') => self.single(w, 2)?,
                b'\\' if ctx == Ctx::Bare && next.is_none() => {
                    return self.fail(ParseErrorKind::Missing("\\ escape"));
                }
                b'\\' if next == Some(b'\n') => self.pos += 2,
                b'\\' if next.is_some_and(|e| quotes || b"$`\"\\".contains(&e)) => {
                    w.mark(true);
                    w.text.extend(next);
                    self.pos += 2;
                }
                _ => {
                    if let Ctx::Nest(open, close) = ctx {
                        depth = depth + usize::from(c == open) - usize::from(c == close);
                    } else if ctx == Ctx::Bare {
                        let brace = w.brace && (c == b',' || (c == b'.' && next == Some(b'.')));
                        let glob = matches!(c, b'*' | b'?') || (c == b']' && w.bracket);
                        if glob || brace || (c == b'~' && sub == start) {
                            w.mark(false);
                        }
                        (w.bracket, w.brace) = (w.bracket || c == b'[', w.brace || c == b'{');
                    }
                    w.text.push(c);
                    self.pos += 1;
                }
            }
        }
        match ctx {
            Ctx::Bare | Ctx::Doc => Ok(()),
            Ctx::Dq => self.fail(ParseErrorKind::Missing("\"")),
            Ctx::Nest(_, b'}') => self.fail(ParseErrorKind::Missing("}")),
            Ctx::Nest(..) => self.fail(ParseErrorKind::Missing("))")),
        }
    }

    /// After skipping `'` (1) or `$'` (2): single-quoted text. ANSI-C escapes in `$'…'` are not
    /// decoded, so such a word with a backslash is dynamic.
    fn single(&mut self, w: &mut Wb, skip: usize) -> PResult<()> {
        let (body, ansi) = (&self.src[self.pos + skip..], skip == 2);
        let mut i = 0;
        while body.get(i).is_some_and(|&c| c != b'\'') {
            i += 1 + usize::from(ansi && body[i] == b'\\');
        }
        if i >= body.len() {
            return self.fail(ParseErrorKind::Missing("'"));
        }
        w.mark(!(ansi && body[..i].contains(&b'\\')));
        w.quoted = true;
        w.text.extend_from_slice(&body[..i]);
        self.pos += skip + i + 1;
        Ok(())
    }

    /// Parses the expansion at the cursor (`$…`, a backtick, `<(…)`), if one starts here.
    fn expansion(&mut self, c: u8, next: Option<u8>, ctx: Ctx) -> PResult<bool> {
        let name = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_';
        match (c, next.unwrap_or(0)) {
            (b'`', _) => self.backtick(ctx == Ctx::Dq)?,
            (b'<' | b'>', b'(') if ctx == Ctx::Bare => self.nested(2, |p| p.list(true))?,
            (b'$', b'(') if self.at(2) == Some(b'(') => self.nested(3, Self::arith)?,
            (b'$', b'(') => self.nested(2, |p| p.list(true))?,
            (b'$', b'{') => {
                self.nested(2, |p| p.scan(&mut Wb::default(), Ctx::Nest(b'{', b'}')))?
            }
            (b'$', b'[') => return self.fail(ParseErrorKind::Unsupported("`$[…]` arithmetic")),
            (b'$', n) if name(&n) => {
                self.pos += 1 + self.src[self.pos + 1..]
                    .iter()
                    .take_while(|c| name(c))
                    .count()
            }
            (b'$', n) if b"@*#?$!-".contains(&n) => self.pos += 2,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// After `((` or `$((`: the arithmetic up to `))`; only its substitutions matter.
    pub(super) fn arith(&mut self) -> PResult<()> {
        self.scan(&mut Wb::default(), Ctx::Nest(b'(', b')'))?;
        match self.at(0) {
            Some(b')') => {
                self.pos += 1;
                Ok(())
            }
            _ => self.fail(ParseErrorKind::Unsupported("`((` that is not arithmetic")),
        }
    }

    /// At a backtick: the old-style command substitution, unescaped and parsed on its own.
    fn backtick(&mut self, in_dq: bool) -> PResult<()> {
        let (start, mut body) = (self.pos, Vec::new());
        loop {
            self.pos += 1;
            match (self.at(0), self.at(1)) {
                (None, _) => return self.fail(ParseErrorKind::Missing("`")),
                (Some(b'`'), _) => break,
                (Some(b'\\'), Some(e)) if b"`$\\".contains(&e) || (in_dq && e == b'"') => {
                    body.push(e);
                    self.pos += 1;
                }
                (Some(c), _) => body.push(c),
            }
        }
        self.pos += 1;
        self.sub(&body, self.base + start + 1, false)
    }

    /// Right after a newline: the pending here-document bodies. They are data, but with an
    /// unquoted delimiter `$(…)` and backticks in them run, so those are parsed.
    fn read_heredocs(&mut self) -> PResult<()> {
        let src = self.src;
        for (delim, strip_tabs, expand) in std::mem::take(&mut self.heredocs) {
            let body = self.pos;
            let end = loop {
                let Some(line) = src[self.pos..]
                    .split(|&c| c == b'\n')
                    .next()
                    .filter(|_| self.pos < src.len())
                else {
                    return self.fail(ParseErrorKind::Missing("here-document delimiter"));
                };
                let start = self.pos;
                self.pos = (start + line.len() + 1).min(src.len());
                if line[line
                    .iter()
                    .take_while(|&&c| strip_tabs && c == b'\t')
                    .count()..]
                    == delim[..]
                {
                    break start;
                }
            };
            if expand {
                self.sub(&src[body..end], self.base + body, true)?;
            }
        }
        Ok(())
    }
}
