//! Python definitions: `class`, `def` (a method directly inside a class) and `async def`,
//! at any depth, `name = lambda …`, and module-level constants (`NAME = …` in capitals). A definition spans its logical lines up to the next logical line
//! indented no deeper than its own `def`/`class` line.

use super::{Builder, Id};
use crate::codemap::Kind;
use crate::codemap::lex::{LOGICAL_START, Lexed};

pub fn outline(lx: &Lexed, b: &mut Builder) {
    // Open definitions: (indentation of their line, handle).
    let mut open: Vec<(u32, Id)> = Vec::new();
    let mut last_end = 1u32;
    for (i, t) in lx.toks.iter().enumerate() {
        if t.flags & LOGICAL_START != 0 {
            while let Some(&(indent, id)) = open.last() {
                if indent < t.col {
                    break;
                }
                b.end(id, last_end);
                open.pop();
            }
            let k = if lx.is_word(i, "async") { i + 1 } else { i };
            let class = lx.is_word(k, "class");
            if (class || lx.is_word(k, "def")) && lx.is_ident(k + 1) {
                let parent = open.last().and_then(|&(_, id)| id);
                let kind = match (class, b.kind(parent)) {
                    (true, _) => Kind::Class,
                    (false, Some(Kind::Class)) => Kind::Method,
                    _ => Kind::Function,
                };
                let id = b.add(lx.name(k + 1), kind, lx.line(k + 1), parent);
                open.push((t.col, id));
            } else if open.is_empty() && t.col == 0 && constant_name(lx.text(i)) && assigns(lx, i) {
                // A module-level `NAME = …` (or `NAME: T = …`) in capitals: a constant.
                let id = b.add(lx.name(i), Kind::Constant, t.line, None);
                b.end(id, t.line);
            } else if lx.is_ident(i) && lx.is(i + 1, b'=') && lx.is_word(i + 2, "lambda") {
                // `name = lambda …`: a function by another spelling (ctags agrees).
                let parent = open.last().and_then(|&(_, id)| id);
                let id = b.add(lx.name(i), Kind::Function, t.line, parent);
                b.end(id, t.line);
            }
        }
        last_end = last_end.max(t.end_line);
    }
    for (_, id) in open {
        b.end(id, last_end);
    }
}

/// `MAX_ITEMS`, `V2`: upper-case letters, digits and underscores, starting with a letter.
fn constant_name(word: &[u8]) -> bool {
    word.len() >= 2
        && word[0].is_ascii_uppercase()
        && word
            .iter()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b'_')
}

/// Is token `i` assigned to (`i =`, not `i ==`; or annotated, `i: T = …`)?
fn assigns(lx: &Lexed, i: usize) -> bool {
    let eq = |k: usize| lx.is(k, b'=') && !lx.is(k + 1, b'=');
    eq(i + 1) || (lx.is(i + 1, b':') && (i + 2..i + 12).any(|k| eq(k) && lx.line(k) == lx.line(i)))
}
