//! The scanner's working types, shared by the word scanner (`lex`, which builds on the
//! grammar's tokens) and the grammar (`parse`, which scans here-document bodies), so the
//! grammar never imports the scanner.

/// A word under construction.
#[derive(Default)]
pub(super) struct Wb {
    pub(super) text: Vec<u8>,
    pub(super) dynamic: bool,
    pub(super) quoted: bool,
    pub(super) literal: Option<usize>,
    pub(super) brace: bool,
    pub(super) bracket: bool,
}

impl Wb {
    /// Ends the literal prefix: at a quote (`quoted`) or an expansion (the word becomes dynamic).
    pub(super) fn mark(&mut self, quoted: bool) {
        self.literal.get_or_insert(self.text.len());
        (self.quoted, self.dynamic) = (self.quoted || quoted, self.dynamic || !quoted);
    }
}

/// What `Parser::scan` reads: an unquoted word (ended by a metacharacter, not consumed), the
/// inside of `"…"`, an unquoted here-document body, or `${…}`/`$((…))` up to the closing byte.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Ctx {
    Bare,
    Dq,
    Doc,
    Nest(u8, u8),
}
