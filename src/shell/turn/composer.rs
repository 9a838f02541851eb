//! Does a program's input box (its composer) already hold text? A prompt written into a
//! composer that holds a draft is merged with it and submitted as one message, so a
//! native prompt is refused unless the composer is empty (issue 35).
//!
//! What the recorded screens show (`tests/fixtures/turn/*.ansi`): Codex 0.169 and Claude
//! Code 2.1.328 draw the composer as a row that starts with a glyph (`›` and `❯`, older
//! releases `▌`, `>` or a boxed `│ >`) and leave the terminal cursor in it, right after
//! the text typed so far; an empty composer may show a placeholder, drawn faint. So the
//! composer is the nearest glyph row at or above the cursor, down to the cursor's row,
//! and it holds text when anything but blanks and faint cells is in it.
//!
//! Invariant: a pure function of the screen model (cells, attributes, cursor); nothing
//! here reads a clock or a descriptor.

/// What the composer check found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Composer {
    /// The composer holds no text (a faint placeholder does not count).
    Empty,
    /// Text is typed (or pasted) into the composer.
    HoldsText,
    /// No composer row at or above the cursor.
    NotFound,
}

impl Composer {
    pub fn as_str(self) -> &'static str {
        match self {
            Composer::Empty => "composer_empty",
            Composer::HoldsText => "composer_holds_text",
            Composer::NotFound => "composer_not_found",
        }
    }
}

/// Rows above the cursor searched for an agent's composer glyph: the tallest composer
/// the recorded programs draw for a prompt of 16 KiB at 200 columns is a few rows (a long
/// paste is shown collapsed), so a dozen is ample and still stops short of older output.
pub const AGENT_DEPTH: usize = 12;

/// The glyphs a composer row starts with (after an optional `│ ` box edge).
const GLYPHS: [char; 4] = ['›', '❯', '▌', '>'];

/// How far above the cursor a composer is looked for: a built-in agent recognizer knows
/// its program draws one; any other program only counts a glyph on the cursor's own row
/// (a `> ` line printed earlier is output, not an input box).
pub fn depth(recognizer: &str) -> usize {
    if super::builtin::find(recognizer).is_some() {
        AGENT_DEPTH
    } else {
        0
    }
}

/// The screen's rows as the check reads them: each cell's text, a faint (dim) cell as a
/// blank, a wide character's second cell skipped; trailing blanks trimmed.
pub fn typed_rows(screen: &vt100::Screen) -> Vec<String> {
    let (rows, cols) = screen.size();
    let (rows, cols) = (u16::from(rows), u16::from(cols));
    (0..rows)
        .map(|r| {
            let mut line = String::with_capacity(usize::from(cols));
            for c in 0..cols {
                match screen.cell(r, c) {
                    Some(cell) if cell.is_wide_continuation() => {}
                    Some(cell) if cell.has_contents() && !cell.dim() => {
                        line.push_str(cell.contents())
                    }
                    _ => line.push(' '),
                }
            }
            line.trim_end().to_string()
        })
        .collect()
}

/// The text after a composer glyph, if `row` starts with one.
fn after_glyph(row: &str) -> Option<&str> {
    let row = row.strip_prefix("│ ").unwrap_or(row);
    let mut chars = row.chars();
    let first = chars.next()?;
    let rest = chars.as_str();
    let spaced = rest.is_empty() || rest.starts_with(char::is_whitespace);
    (GLYPHS.contains(&first) && spaced).then_some(rest)
}

/// Whether text (not blanks, not a box's right edge) is in `s`.
fn has_text(s: &str) -> bool {
    s.chars().any(|c| !c.is_whitespace() && c != '│')
}

/// The composer at or up to `depth` rows above `cursor_row`, and whether it holds text.
pub fn check(rows: &[String], cursor_row: usize, depth: usize) -> Composer {
    let Some(last) = rows.len().checked_sub(1) else {
        return Composer::NotFound;
    };
    let bottom = cursor_row.min(last);
    for top in (bottom.saturating_sub(depth)..=bottom).rev() {
        if let Some(rest) = after_glyph(&rows[top]) {
            let below = &rows[top + 1..=bottom];
            return if has_text(rest) || below.iter().any(|r| has_text(r)) {
                Composer::HoldsText
            } else {
                Composer::Empty
            };
        }
    }
    Composer::NotFound
}

/// The check on a screen model, for `recognizer`'s program.
pub fn on_screen(screen: &vt100::Screen, recognizer: &str) -> Composer {
    let (row, _) = screen.cursor_position();
    check(&typed_rows(screen), usize::from(row), depth(recognizer))
}
