//! Output cleanup: turns the raw PTY bytes of one command into the text shown to an agent.
//!
//! Pure functions over bytes and strings, no I/O. The pipeline is `clean` → redact →
//! `collapse_repeats` → `truncate_head`, bundled as `render`.
//!
//! Invariant: the text handed back never holds a terminal escape sequence or a C0 control
//! other than `\n` and `\t`, never splits a UTF-8 character, and never exceeds the caller's
//! budget plus one truncation marker line (`TRUNCATION_MARKER_MAX_BYTES`). Redaction runs on
//! the whole cleaned text before anything is dropped, so truncation cannot cut a secret in
//! half and leave a recognisable piece of it behind.

use super::secrets::{KnownSecrets, redact_all};
use std::fmt::Write as _;

/// Default budget for one command's output. Enough for the tail of a build log (where the
/// errors are), small enough to leave most of the model's context for its own work.
pub const DEFAULT_OUTPUT_BUDGET_BYTES: usize = 32 * 1024;

/// Upper bound on the marker line `truncate_head` prefixes, which callers add to their
/// budget. Two 20-digit numbers (`usize::MAX`) plus the fixed words fit in 92 bytes.
pub const TRUNCATION_MARKER_MAX_BYTES: usize = 96;

/// Runs of at least this many identical lines collapse: a pair is shorter than the marker.
const MIN_REPEAT_RUN: usize = 3;

/// Longest OSC/DCS/APC/PM/SOS string we swallow while looking for its terminator. Window
/// titles and hyperlinks are far shorter; beyond this we assume a stray introducer (say from
/// `cat` on a binary) and show the text instead of silently hiding the rest of the output.
const MAX_STRING_SEQUENCE_BYTES: usize = 64 * 1024;

/// Cursor-movement parameters are clamped here: wider than any real terminal, and it bounds
/// the padding a hostile `ESC [ 999999999 C` could make us allocate.
const MAX_CURSOR_COLUMN: usize = 4096;

const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;
const BACKSPACE: u8 = 0x08;
const CAN: u8 = 0x18;
const SUB: u8 = 0x1a;

/// Output after head truncation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Truncated {
    pub text: String,
    /// Bytes dropped from the head (0 when the text fit).
    pub omitted_bytes: usize,
    /// Complete lines dropped from the head; a partly kept last line is not counted.
    pub omitted_lines: usize,
}

/// What an agent sees of one command's output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    pub text: String,
    pub omitted_bytes: usize,
    pub omitted_lines: usize,
    /// How many secrets were replaced by `[REDACTED…]` labels.
    pub redactions: usize,
}

/// Cleans, redacts (with the session's known secrets; `None` turns redaction off),
/// collapses repeats and keeps the last `budget` bytes.
pub fn render(raw: &[u8], budget: usize, redact: Option<&KnownSecrets>) -> Rendered {
    let cleaned = clean(raw);
    let (redacted, redactions) = match redact {
        Some(known) => {
            let (text, count) = redact_all(&cleaned, known);
            (text.into_owned(), count)
        }
        None => (cleaned, 0),
    };
    let truncated = truncate_head(&collapse_repeats(&redacted), budget);
    Rendered {
        text: truncated.text,
        omitted_bytes: truncated.omitted_bytes,
        omitted_lines: truncated.omitted_lines,
        redactions,
    }
}

/// Where to cut a stream of raw output that is cleaned piece by piece (spill files, the
/// history recorder): after the last newline of `pending` or, once one line has outgrown
/// `max_line`, before its last (possibly incomplete) UTF-8 character. `None` waits for
/// more bytes.
pub fn segment_end(pending: &[u8], max_line: usize) -> Option<usize> {
    if let Some(nl) = pending.iter().rposition(|&b| b == b'\n') {
        return Some(nl + 1);
    }
    if pending.len() < max_line {
        return None;
    }
    // The last char may be incomplete: cut before it when it is multi-byte (its lead byte
    // is at most three continuation bytes back); an ASCII or stray byte ends a char.
    let is_continuation = |b: u8| b & 0xc0 == 0x80;
    let back = (pending.iter().rev().take(3)).take_while(|&&b| is_continuation(b));
    let lead = pending.len() - back.count() - 1;
    Some(if pending[lead] >= 0xc0 {
        lead
    } else {
        pending.len()
    })
}

/// Decodes lossily and keeps what a terminal would show: escape sequences and controls
/// removed, `\r` and backspace applied per line, trailing whitespace trimmed per line.
pub fn clean(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let s: &str = &text;
    let bytes = s.as_bytes();
    let mut screen = Screen::default();
    let mut i = 0;
    while i < bytes.len() {
        i = match bytes[i] {
            ESC => skip_escape(bytes, i + 1, &mut screen),
            control @ (0x00..=0x1f | 0x7f) => {
                screen.control(control);
                i + 1
            }
            0xc2 if matches!(bytes.get(i + 1), Some(0x80..=0x9f)) => match bytes[i + 1] {
                // 8-bit CSI and string introducers, as UTF-8 encoded C1 controls.
                0x9b => skip_csi(bytes, i + 2, &mut screen),
                0x90 | 0x98 | 0x9d | 0x9e | 0x9f => skip_string(bytes, i + 2),
                _ => i + 2,
            },
            _ => {
                // Every skip stops on an ASCII byte, so `i` is a char boundary.
                let ch = s.get(i..).and_then(|rest| rest.chars().next());
                let ch = ch.unwrap_or(char::REPLACEMENT_CHARACTER);
                screen.put(ch);
                i + ch.len_utf8()
            }
        };
    }
    screen.finish()
}

/// Where the text resumes after an `ESC` at `at - 1`.
fn skip_escape(bytes: &[u8], at: usize, screen: &mut Screen) -> usize {
    match bytes.get(at) {
        None => at,
        Some(b'[') => skip_csi(bytes, at + 1, screen),
        Some(b']' | b'P' | b'X' | b'^' | b'_') => skip_string(bytes, at + 1),
        Some(0x20..=0x2f) => {
            let j = skip_range(bytes, at, 0x20..=0x2f);
            match bytes.get(j) {
                Some(0x30..=0x7e) => j + 1,
                _ => j, // malformed: drop what we saw, reprocess the rest as text
            }
        }
        Some(0x30..=0x7e) => at + 1,
        Some(_) => at, // a lone ESC: drop it only
    }
}

/// Skips a CSI body starting at `at`, applying the few cursor/erase commands that decide
/// what a line shows (`K`, `G`, `C`, `D`). Everything else is dropped.
fn skip_csi(bytes: &[u8], at: usize, screen: &mut Screen) -> usize {
    let params_end = skip_range(bytes, at, 0x30..=0x3f);
    let j = skip_range(bytes, params_end, 0x20..=0x2f);
    match bytes.get(j) {
        Some(&fin @ 0x40..=0x7e) => {
            screen.apply_csi(&bytes[at..params_end], fin);
            j + 1
        }
        _ => j, // malformed: resume at the offending byte
    }
}

/// The first index from `at` whose byte is not in `range`.
fn skip_range(bytes: &[u8], at: usize, range: std::ops::RangeInclusive<u8>) -> usize {
    let run = bytes
        .get(at..)
        .unwrap_or_default()
        .iter()
        .take_while(|&&b| range.contains(&b));
    at + run.count()
}

/// Skips an OSC/DCS/APC/PM/SOS string whose body starts at `body`. It ends at BEL, ST
/// (`ESC \` or U+009C), CAN/SUB, or any other ESC (which starts a new sequence). Unterminated
/// at end of input it is swallowed, as a terminal would; unterminated within
/// `MAX_STRING_SEQUENCE_BYTES` only the introducer is dropped and the body shows as text.
fn skip_string(bytes: &[u8], body: usize) -> usize {
    let limit = body
        .saturating_add(MAX_STRING_SEQUENCE_BYTES)
        .min(bytes.len());
    let mut j = body;
    while j < limit {
        match bytes[j] {
            BEL | CAN | SUB => return j + 1,
            ESC if bytes.get(j + 1) == Some(&b'\\') => return j + 2,
            ESC => return j,
            0xc2 if bytes.get(j + 1) == Some(&0x9c) => return j + 2,
            _ => j += 1,
        }
    }
    if limit == bytes.len() { limit } else { body }
}

/// A cell nothing was written to (skipped by a cursor move, or erased): shown as a space
/// inside a line and dropped at its end, so a line keeps exactly the blanks the program
/// wrote (`\0` never reaches a line: `control` drops it).
const BLANK: char = '\0';

/// The current line as a terminal would hold it, plus the finished text.
#[derive(Default)]
struct Screen {
    out: String,
    line: Vec<char>,
    cursor: usize,
}

impl Screen {
    /// Applies a C0 control; all but these four are dropped.
    fn control(&mut self, byte: u8) {
        match byte {
            b'\n' => {
                self.flush_line();
                self.out.push('\n');
            }
            b'\r' => self.cursor = 0,
            b'\t' => self.put('\t'),
            BACKSPACE => self.backspace(),
            _ => {}
        }
    }

    fn put(&mut self, ch: char) {
        if self.cursor < self.line.len() {
            self.line[self.cursor] = ch;
        } else {
            self.line.resize(self.cursor, BLANK);
            self.line.push(ch);
        }
        self.cursor += 1;
    }

    /// Deletes the previous char at the end of a line; mid-line (after `\r`) it only moves
    /// left, so the next char overwrites, as on a terminal.
    fn backspace(&mut self) {
        if self.cursor == 0 {
            return;
        }
        if self.cursor >= self.line.len() {
            self.line.truncate(self.cursor - 1);
        }
        self.cursor -= 1;
    }

    fn apply_csi(&mut self, params: &[u8], fin: u8) {
        if params.first().is_some_and(|b| matches!(b, b'<'..=b'?')) {
            return; // private-mode sequences never change what a line shows
        }
        let first = first_param(params);
        match fin {
            b'K' => match first.unwrap_or(0) {
                0 => self.line.truncate(self.cursor),
                1 => {
                    let end = (self.cursor + 1).min(self.line.len());
                    self.line[..end].fill(BLANK);
                }
                _ => self.line.iter_mut().for_each(|c| *c = BLANK),
            },
            b'G' => self.cursor = first.unwrap_or(1).saturating_sub(1).min(MAX_CURSOR_COLUMN),
            b'C' => {
                let n = first.unwrap_or(1).max(1);
                self.cursor = self.cursor.saturating_add(n).min(MAX_CURSOR_COLUMN);
            }
            b'D' => self.cursor = self.cursor.saturating_sub(first.unwrap_or(1).max(1)),
            _ => {}
        }
    }

    /// The line as shown: blank cells at its end dropped, inside it spaces; every character
    /// the program wrote kept, trailing spaces and tabs included.
    fn flush_line(&mut self) {
        let end = self.line.iter().rposition(|c| *c != BLANK);
        let shown = self.line[..end.map_or(0, |e| e + 1)].iter();
        self.out
            .extend(shown.map(|&c| if c == BLANK { ' ' } else { c }));
        self.line.clear();
        self.cursor = 0;
    }

    fn finish(mut self) -> String {
        self.flush_line();
        self.out
    }
}

/// The first numeric CSI parameter, saturating; `None` when absent or empty.
fn first_param(params: &[u8]) -> Option<usize> {
    let digits = params.split(|&b| b == b';').next()?;
    if digits.is_empty() {
        return None;
    }
    let digit = |n: usize, b: &u8| n.saturating_mul(10).saturating_add(usize::from(b - b'0'));
    Some(digits.iter().filter(|b| b.is_ascii_digit()).fold(0, digit))
}

/// Replaces each run of `MIN_REPEAT_RUN` or more identical lines by the line once and a
/// `[previous line repeated N more times]` marker. A final newline is kept.
pub fn collapse_repeats(text: &str) -> String {
    let body = text.strip_suffix('\n');
    let mut out = String::with_capacity(text.len());
    let mut lines = body.unwrap_or(text).split('\n').peekable();
    while let Some(line) = lines.next() {
        let mut run = 1;
        while lines.next_if(|next| *next == line).is_some() {
            run += 1;
        }
        let repeats = if run >= MIN_REPEAT_RUN { 1 } else { run };
        for _ in 0..repeats {
            out.push_str(line);
            out.push('\n');
        }
        if run >= MIN_REPEAT_RUN {
            let _ = writeln!(out, "[previous line repeated {} more times]", run - 1);
        }
    }
    if body.is_none() {
        out.pop(); // the newline pushed after the last line, which had none
    }
    out
}

/// Keeps the last `budget_bytes` of `text`, dropping whole lines from the head and
/// prefixing a marker line (not counted in the budget, at most
/// `TRUNCATION_MARKER_MAX_BYTES`). When the last line alone is over budget, its tail is
/// kept, cut on a char boundary.
pub fn truncate_head(text: &str, budget_bytes: usize) -> Truncated {
    if text.len() <= budget_bytes {
        return Truncated {
            text: text.to_owned(),
            omitted_bytes: 0,
            omitted_lines: 0,
        };
    }
    let bytes = text.as_bytes();
    // Non-zero because the text is over budget; keep `text[start..]` with `start >= min`.
    let min_start = text.len() - budget_bytes;
    let line_start = bytes[min_start - 1..]
        .iter()
        .position(|&b| b == b'\n')
        .map(|p| min_start + p)
        .filter(|&start| start < text.len());
    let start = line_start.unwrap_or_else(|| {
        let mut start = min_start;
        while !text.is_char_boundary(start) {
            start += 1;
        }
        start
    });
    let omitted_lines = bytes[..start].iter().filter(|&&b| b == b'\n').count();
    let mut out = marker(start, omitted_lines);
    out.push_str(&text[start..]);
    Truncated {
        text: out,
        omitted_bytes: start,
        omitted_lines,
    }
}

fn marker(omitted_bytes: usize, omitted_lines: usize) -> String {
    let unit = if omitted_lines == 1 { "line" } else { "lines" };
    format!("[… {omitted_bytes} bytes ({omitted_lines} {unit}) of earlier output omitted …]\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn c(raw: &str) -> String {
        clean(raw.as_bytes())
    }

    /// `(raw, what the agent sees)`.
    const CLEAN_CASES: &[(&str, &str)] = &[
        // Escape sequences: CSI, OSC (BEL and ST), two-byte, charset, DCS/APC/PM, 8-bit C1.
        ("\x1b[1;31merror\x1b[0m: bad", "error: bad"),
        ("\x1b]0;title\x07$ ls\n", "$ ls\n"),
        ("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"),
        ("\x1b(Ba\x1b=b\x1b7c\x1b8", "abc"),
        ("\x1bP1$r0m\x1b\\x\x1b_apc\x1b\\y\x1b^pm\x07z", "xyz"),
        ("\x1b[?2004hcmd\x1b[?2004l", "cmd"),
        ("a\u{9b}31mb\u{9d}0;t\u{9c}c", "abc"),
        ("lone esc\x1b", "lone esc"),
        ("esc\x1b\nnl \x1b[1\u{e9}", "esc\nnl \u{e9}"),
        // Other controls go; newline, tab and lossy UTF-8 stay; the blanks a program wrote
        // stay too, at a line's end included (issue 37 item 7); erased cells do not.
        ("a\x00b\x07c\x7fd\te\x0bf\x0c\n", "abcd\tef\n"),
        ("trailing \t \nnext  ", "trailing \t \nnext  "),
        (
            "L0000000 \u{e9}\u{20ac}\u{1f600} \n",
            "L0000000 \u{e9}\u{20ac}\u{1f600} \n",
        ),
        ("abc  \r\x1b[Kx", "x"),
        ("ab\x1b[5Gc", "ab  c"),
        // Carriage return and erase-in-line, as a terminal shows them.
        ("10%\r20%\r30%", "30%"),
        ("line one\r\nline two\r\n", "line one\nline two\n"),
        ("hello world\rhi", "hillo world"),
        ("done\r", "done"),
        (
            "Compiling a\r\x1b[KBuilding 3/4\r\x1b[K   Finished",
            "   Finished",
        ),
        ("abcdef\r\x1b[2Kxy", "xy"),
        ("abcdef\x1b[3G\x1b[1K!", "  !def"),
        ("ab\x1b[3Cc\x1b[2Dx", "ab  xc"),
        // Backspace deletes at the end of a line and moves left inside it.
        ("abc\x08\x08d", "ad"),
        ("\x08\x08x", "x"),
        ("abc\r\x08x\x08y", "ybc"),
    ];

    #[test]
    fn clean_keeps_what_a_terminal_shows() {
        for (raw, shown) in CLEAN_CASES {
            assert_eq!(c(raw), *shown, "raw: {raw:?}");
        }
        assert_eq!(clean(b"bad \xff\xfe utf8"), "bad \u{fffd}\u{fffd} utf8");
    }

    #[test]
    fn hostile_sequences_stay_bounded() {
        assert_eq!(
            c("\x1b[999999999999999999999999Cx"),
            format!("{}x", " ".repeat(4096))
        );
        let long = format!("\x1b]{}", "a".repeat(MAX_STRING_SEQUENCE_BYTES + 10));
        assert_eq!(c(&long).len(), MAX_STRING_SEQUENCE_BYTES + 10);
        assert_eq!(c("shown\x1b]0;never terminated"), "shown");
    }

    #[test]
    fn collapse_repeats_runs_of_three_or_more() {
        assert_eq!(collapse_repeats("a\na\nb"), "a\na\nb");
        assert_eq!(
            collapse_repeats("x\nwait\nwait\nwait\nwait\ny\n"),
            "x\nwait\n[previous line repeated 3 more times]\ny\n"
        );
        assert_eq!(
            collapse_repeats("z\nz\nz"),
            "z\n[previous line repeated 2 more times]"
        );
        assert_eq!(collapse_repeats(""), "");
        assert_eq!(collapse_repeats("\n"), "\n");
    }

    #[test]
    fn truncate_keeps_the_tail_in_whole_lines() {
        let t = truncate_head("one\ntwo\nthree\n", 8);
        assert_eq!(
            t.text,
            "[… 8 bytes (2 lines) of earlier output omitted …]\nthree\n"
        );
        assert_eq!((t.omitted_bytes, t.omitted_lines), (8, 2));
        let fits = truncate_head("one\ntwo\n", 8);
        assert_eq!((fits.text.as_str(), fits.omitted_bytes), ("one\ntwo\n", 0));
        let one = truncate_head("a\nbbbbbb", 7);
        assert_eq!(
            one.text,
            "[… 2 bytes (1 line) of earlier output omitted …]\nbbbbbb"
        );
    }

    #[test]
    fn truncate_cuts_an_oversized_last_line_on_a_char_boundary() {
        let t = truncate_head("head\nééééé\n", 4);
        assert_eq!(
            t.text,
            "[… 13 bytes (1 line) of earlier output omitted …]\né\n"
        );
        assert_eq!(t.omitted_lines, 1);
        assert!(truncate_head("abc", 0).text.ends_with("omitted …]\n"));
    }

    #[test]
    fn marker_fits_its_bound() {
        assert!(marker(usize::MAX, usize::MAX).len() <= TRUNCATION_MARKER_MAX_BYTES);
    }

    #[test]
    fn render_runs_the_whole_pipeline() {
        let mut raw = b"\x1b[32mok\x1b[0m\r\n".repeat(5);
        // Assembled at run time so no token-shaped literal sits in the source.
        raw.extend_from_slice(format!("GITHUB_TOKEN=ghp_{}\n", "a1B2".repeat(9)).as_bytes());
        let r = render(
            &raw,
            DEFAULT_OUTPUT_BUDGET_BYTES,
            Some(&KnownSecrets::new()),
        );
        assert_eq!(
            r.text,
            "ok\n[previous line repeated 4 more times]\nGITHUB_TOKEN=[REDACTED GITHUB TOKEN]\n"
        );
        assert_eq!((r.redactions, r.omitted_bytes), (1, 0));
        let plain = render(&raw, 20, None);
        assert!(plain.text.ends_with("a1B2\n") && plain.redactions == 0);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_and_fit_the_budget(
            raw in proptest::collection::vec(prop_oneof![any::<u8>(), prop::sample::select(
                b"\x1b\x1b[]\r\n\x08\x07\xc2\x9b\x9c\\K5;P_".to_vec())], 0..1024),
            budget in 0usize..512,
        ) {
            let r = render(&raw, budget, Some(&KnownSecrets::new()));
            prop_assert!(r.text.len() <= budget + TRUNCATION_MARKER_MAX_BYTES);
            prop_assert!(!r.text.contains(|c: char| c.is_control() && c != '\n' && c != '\t'));
        }

        #[test]
        fn truncation_keeps_a_suffix(text in "(?s).{0,300}", budget in 0usize..200) {
            let t = truncate_head(&text, budget);
            let kept = text.len() - t.omitted_bytes;
            prop_assert!(kept <= budget);
            prop_assert!(t.text.ends_with(&text[t.omitted_bytes..]));
        }
    }
}
