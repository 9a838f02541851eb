//! SEARCH/REPLACE blocks: parsing the agent's edit text and applying it to one file's content.
//!
//! Role: the pure core of the `search_replace` edit mode, no I/O. [`parse_blocks`] turns the
//! agent's text into [`Block`]s or names the malformation ([`FormatError`]); [`apply_blocks`]
//! applies them in order to a string, trying the [`Tolerance`] levels strictest first, and
//! reports where and how leniently each matched. The edit engine plans with it and commits.
//!
//! Invariant: a block that matches zero or several places is never applied, and when any block
//! fails no content is returned at all. Bytes outside the matched lines are never changed: the
//! file's line endings, final newline and typographic characters elsewhere stay as they were.

use std::fmt;

/// Markers are runs of at least this many `<`, `=` or `>`. Agents miscount the canonical
/// seven, while shorter runs (`===` in Markdown, `<<` in C++) are ordinary content.
const MIN_MARKER_RUN: usize = 5;

/// Longest digit run read as a leaked line number; ReadFiles never numbers past this, and a
/// longer run is data (a timestamp, an id), not a line number.
const MAX_LINE_NUMBER_DIGITS: usize = 9;

/// Line comparisons spent on the closest region after a miss (a few milliseconds); past it
/// the scan strides and refines around the best window, so huge files cost no more.
const CLOSEST_PAIR_BUDGET: usize = 1_000_000;

/// Below this similarity the "closest" region is noise that would mislead more than help.
const MIN_CLOSEST_SIMILARITY: f32 = 0.4;

/// Diff lines in a miss report: a typical block's divergence in a small tool result.
const MAX_DIFF_LINES: usize = 60;

/// Start lines listed in an ambiguity message; more add no information for the agent.
const MAX_LISTED_LOCATIONS: usize = 10;

/// The separator [`line_number`] reports for a number alone on its line.
const BARE: char = '\0';

/// The canonical format, [`FormatError::help`].
const HELP: &str = "<<<<<<< SEARCH
exact lines copied from the file
=======
the lines that replace them
>>>>>>> REPLACE
Repeat the block for each change; each SEARCH section must match exactly one place.";

// Message parts too long to sit inside a `write!`.
const NOT_FOUND: &str = "matches nothing in the file, even ignoring trailing whitespace, \
    indentation, leaked line numbers and typographic quotes; no block was applied.";
const NO_CLOSEST: &str = "\nNo similar region exists; read the file again.";
const DIFF_LEGEND: &str = "; `-` lines are your SEARCH, `+` lines what the file has:\n";
const COPY_HINT: &str = "Copy the file's lines exactly into SEARCH.";
const AMBIGUOUS: &str = "no block was applied. Add neighbouring lines to SEARCH until it \
    matches exactly one place.";
const CLOSE_FIRST: &str = "; close each block with `=======` and `>>>>>>> REPLACE` first";
const EMPTY_SEARCH: &str = "the SEARCH section is empty; quote at least one existing line \
    (the `replace` mode writes a whole file)";

/// One parsed block (lines without terminators), for [`apply_blocks`]. Only [`parse_blocks`]
/// builds it, so SEARCH always has a non-blank line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    search: Vec<String>,
    replace: Vec<String>,
}

/// A malformed block. Every `opened` is the 1-based line of that block's SEARCH marker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormatError {
    /// The text has no `<<<<<<< SEARCH` line at all.
    NoBlock,
    /// A `>>>>>>> REPLACE` marker at `line` with no block open.
    ReplaceWithoutSearch { line: usize },
    /// A second SEARCH marker at `line` inside the SEARCH section opened at `opened`.
    NestedSearch { opened: usize, line: usize },
    /// The SEARCH section has no non-blank line.
    EmptySearch { opened: usize },
    /// No `=======` before the REPLACE marker at `found` (`None`: the end of the text).
    MissingDivider { opened: usize, found: Option<usize> },
    /// No `>>>>>>> REPLACE` before the next SEARCH marker at `found` (`None`: the end).
    MissingReplace { opened: usize, found: Option<usize> },
}

impl FormatError {
    /// Stable identifier for `errorCode` fields.
    pub fn code(&self) -> &'static str {
        "search_block_malformed"
    }

    /// The correct format as a short example, to show after the message (which names only
    /// the problem).
    pub fn help() -> &'static str {
        HELP
    }
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let reached = |found: Option<usize>, marker: &str| match found {
            Some(line) => format!("the {marker} marker at line {line}"),
            None => "the end of the text".to_string(),
        };
        f.write_str("malformed SEARCH/REPLACE text: ")?;
        match *self {
            Self::NoBlock => f.write_str("no `<<<<<<< SEARCH` line found"),
            Self::ReplaceWithoutSearch { line } => {
                write!(f, "line {line}: `>>>>>>> REPLACE` without an open SEARCH")
            }
            Self::NestedSearch { opened, line } => {
                write!(f, "line {line}: SEARCH inside the block from line {opened}")?;
                f.write_str(CLOSE_FIRST)
            }
            Self::EmptySearch { opened } => write!(f, "line {opened}: {EMPTY_SEARCH}"),
            Self::MissingDivider { opened, found } => {
                let reached = reached(found, "REPLACE");
                write!(f, "line {opened}: no `=======` before {reached}")
            }
            Self::MissingReplace { opened, found } => {
                let reached = reached(found, "next SEARCH");
                write!(f, "line {opened}: no `>>>>>>> REPLACE` before {reached}")
            }
        }
    }
}

impl std::error::Error for FormatError {}

/// A marker line, as its run character: a run of `<`, `=` or `>` starting the line, then its
/// keyword (any case, spaces allowed before it), then nothing but trailing whitespace.
fn marker(line: &str) -> Option<char> {
    let line = line.trim_end();
    let run_char = line.chars().next()?;
    let keyword = match run_char {
        '<' => "SEARCH",
        '=' => "",
        '>' => "REPLACE",
        _ => return None,
    };
    let rest = line.trim_start_matches(run_char);
    let run = line.len() - rest.len();
    let is_marker = run >= MIN_MARKER_RUN && rest.trim_start().eq_ignore_ascii_case(keyword);
    is_marker.then_some(run_char)
}

/// Parse one or more blocks. Text outside blocks (prose, code fences, blank lines) is ignored;
/// inside REPLACE a divider line is content, so REPLACE may contain `=======`.
pub fn parse_blocks(text: &str) -> Result<Vec<Block>, FormatError> {
    use FormatError as E;
    let mut blocks = Vec::new();
    // The open block: the line of its SEARCH marker, and whether its divider was seen.
    let mut open: Option<(usize, bool)> = None;
    let (mut search, mut replace) = (Vec::new(), Vec::new());
    for (line, content) in (1..).zip(text.lines()) {
        let found = Some(line);
        match (open, marker(content)) {
            (None, Some('<')) => open = Some((line, false)),
            (None, Some('>')) => return Err(E::ReplaceWithoutSearch { line }),
            (None, _) => {}
            (Some((opened, false)), Some('<')) => return Err(E::NestedSearch { opened, line }),
            (Some((opened, false)), Some('>')) => return Err(E::MissingDivider { opened, found }),
            (Some((opened, false)), Some('=')) => {
                if search.iter().all(|l: &String| l.trim().is_empty()) {
                    return Err(E::EmptySearch { opened });
                }
                open = Some((opened, true));
            }
            (Some((_, false)), _) => search.push(content.to_string()),
            (Some((opened, true)), Some('<')) => return Err(E::MissingReplace { opened, found }),
            (Some((_, true)), Some('>')) => {
                let (search, replace) = (std::mem::take(&mut search), std::mem::take(&mut replace));
                blocks.push(Block { search, replace });
                open = None;
            }
            (Some((_, true)), _) => replace.push(content.to_string()),
        }
    }
    let found = None;
    match open {
        None if blocks.is_empty() => Err(E::NoBlock),
        None => Ok(blocks),
        Some((opened, false)) => Err(E::MissingDivider { opened, found }),
        Some((opened, true)) => Err(E::MissingReplace { opened, found }),
    }
}

/// How leniently a block matched, strictest first; each level keeps the earlier leniencies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tolerance {
    /// Byte-identical lines.
    Exact,
    /// Equal once trailing whitespace is ignored.
    TrailingWhitespace,
    /// Equal up to one uniform indentation offset; REPLACE is re-indented by that offset.
    Indentation,
    /// Equal once consecutive leaked line numbers (`12 `, `  12 | `, `12\t`, `12: `) are
    /// stripped from SEARCH; REPLACE lines with the same prefix style are stripped too.
    LineNumbers,
    /// Equal once typographic quotes and dashes are compared as ASCII.
    Typography,
}

const LEVELS: [Tolerance; 5] = [
    Tolerance::Exact,
    Tolerance::TrailingWhitespace,
    Tolerance::Indentation,
    Tolerance::LineNumbers,
    Tolerance::Typography,
];

/// The result of applying every block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    pub content: String,
    /// One entry per block, in block order.
    pub matched: Vec<MatchInfo>,
}

/// Where one block matched: 1-based inclusive lines of the content it was applied to (the
/// file as changed by the blocks before it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatchInfo {
    pub block_index: usize,
    pub start_line: usize,
    pub end_line: usize,
    pub tolerance: Tolerance,
}

/// The region most like a SEARCH section that matched nowhere.
#[derive(Clone, Debug, PartialEq)]
pub struct Closest {
    /// 1-based inclusive lines; the region has as many lines as SEARCH.
    pub start_line: usize,
    pub end_line: usize,
    /// Mean line similarity, 0.0 to 1.0.
    pub similarity: f32,
    /// `  ` equal lines, `- ` expected (SEARCH) and `+ ` found (file) for diverging lines.
    pub diff: String,
}

/// Why the blocks were not applied. `block_index` is 0-based; messages count from 1.
#[derive(Clone, Debug, PartialEq)]
pub enum MatchError {
    /// The block matches nowhere, at any tolerance.
    NotFound {
        block_index: usize,
        closest: Option<Closest>,
    },
    /// The block matches several places at the strictest level that matches at all;
    /// `lines` are the 1-based start lines.
    Ambiguous {
        block_index: usize,
        lines: Vec<usize>,
    },
}

impl MatchError {
    /// Stable identifier for `errorCode` fields.
    pub fn code(&self) -> &'static str {
        match self {
            MatchError::NotFound { .. } => "search_block_not_found",
            MatchError::Ambiguous { .. } => "search_block_ambiguous",
        }
    }

    /// 0-based index of the block that failed.
    pub fn block_index(&self) -> usize {
        match *self {
            Self::NotFound { block_index, .. } | Self::Ambiguous { block_index, .. } => block_index,
        }
    }
}

impl fmt::Display for MatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SEARCH block {} ", self.block_index() + 1)?;
        let closest = match self {
            Self::NotFound { closest, .. } => closest,
            Self::Ambiguous { lines, .. } => {
                let shown = lines.iter().take(MAX_LISTED_LOCATIONS);
                let mut shown: Vec<String> = shown.map(usize::to_string).collect();
                shown.extend((lines.len() > shown.len()).then(|| "…".to_string()));
                let (count, shown) = (lines.len(), shown.join(", "));
                return write!(f, "matches {count} places (lines {shown}); {AMBIGUOUS}");
            }
        };
        let Some(c) = closest else {
            return write!(f, "{NOT_FOUND}{NO_CLOSEST}");
        };
        let (start, end, diff) = (c.start_line, c.end_line, &c.diff);
        let percent = c.similarity * 100.0;
        write!(f, "{NOT_FOUND}\nClosest region: lines {start}-{end} ")?;
        write!(f, "({percent:.0}% similar){DIFF_LEGEND}{diff}{COPY_HINT}")
    }
}

impl std::error::Error for MatchError {}

/// Apply `blocks` in order, each to the content left by the ones before it. All or nothing:
/// any miss or ambiguity returns the error and no content.
pub fn apply_blocks(content: &str, blocks: &[Block]) -> Result<Applied, MatchError> {
    // Lines a replacement adds end like the file's (the rest keep their own endings).
    let crlf = content.contains("\r\n");
    let eol = if crlf { "\r\n" } else { "\n" };
    let mut content = content.to_string();
    let mut matched = Vec::with_capacity(blocks.len());
    for (block_index, block) in blocks.iter().enumerate() {
        let pieces: Vec<&str> = content.split_inclusive('\n').collect();
        let lines: Vec<&str> = pieces.iter().map(|p| without_eol(p)).collect();
        let (info, replacement) = locate(&lines, block, block_index)?;
        let range = info.start_line - 1..info.end_line;
        let next = splice(&pieces, range, &replacement, eol);
        matched.push(info);
        content = next;
    }
    Ok(Applied { content, matched })
}

fn without_eol(piece: &str) -> &str {
    piece
        .strip_suffix('\n')
        .map_or(piece, |l| l.strip_suffix('\r').unwrap_or(l))
}

/// Replace the lines `range` (0-based). Added lines end with `eol`; the last keeps the
/// terminator of the last replaced line, so the final newline (or its absence) survives.
fn splice(pieces: &[&str], range: std::ops::Range<usize>, lines: &[String], eol: &str) -> String {
    let last = pieces[range.end - 1];
    let last_eol = &last[without_eol(last).len()..];
    let mut out: String = pieces[..range.start].concat();
    out.push_str(&lines.join(eol));
    if !lines.is_empty() {
        out.push_str(last_eol);
    } else if last_eol.is_empty() {
        // The deleted lines ended the file without a newline; so must the line before them.
        out.truncate(without_eol(&out).len());
    }
    out + &pieces[range.end..].concat()
}

type Located = (MatchInfo, Vec<String>);

/// The unique match of `block` at the strictest level with any match, and its REPLACE lines
/// as they go into the file.
fn locate(file: &[&str], block: &Block, block_index: usize) -> Result<Located, MatchError> {
    let search = views(&block.search);
    let numbered = strip_line_numbers(&block.search);
    let loose = numbered.as_ref().map_or(&search, |(lines, _)| lines);
    for tolerance in LEVELS {
        let mut hits = match tolerance {
            Tolerance::LineNumbers if numbered.is_none() => continue,
            Tolerance::LineNumbers => find(file, loose, tolerance),
            Tolerance::Typography => {
                let (file, search) = (plain(file), plain(loose));
                find(&views(&file), &views(&search), tolerance)
            }
            _ => find(file, &search, tolerance),
        };
        if hits.len() > 1 {
            let lines = hits.iter().map(|(start, _)| start + 1).collect();
            return Err(MatchError::Ambiguous { block_index, lines });
        }
        let Some((start, shift)) = hits.pop() else {
            continue;
        };
        let (start_line, end_line) = (start + 1, start + search.len());
        let numbers = numbered.filter(|_| tolerance >= Tolerance::LineNumbers);
        let replacement = replacement(&block.replace, numbers.map(|(_, style)| style), &shift);
        let info = MatchInfo {
            block_index,
            start_line,
            end_line,
            tolerance,
        };
        return Ok((info, replacement));
    }
    let closest = closest(file, loose);
    Err(MatchError::NotFound {
        block_index,
        closest,
    })
}

/// How the file's indentation differs from SEARCH's on every non-blank line.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Shift {
    Same,
    /// The file has this much more leading whitespace.
    Add(String),
    /// The file has this much less leading whitespace.
    Remove(String),
}

/// Every window of `file` that matches `search` at `tolerance`, with its indentation shift.
/// The looser levels compare like Indentation; their callers prepare the lines.
fn find(file: &[&str], search: &[&str], tolerance: Tolerance) -> Vec<(usize, Shift)> {
    let pairs = |i: usize| file[i..].iter().zip(search).map(|(f, s)| (*f, *s));
    let trimmed_equal = |(f, s): (&str, &str)| f.trim_end() == s.trim_end();
    let matches = |i: usize| match tolerance {
        Tolerance::Exact => pairs(i).all(|(f, s)| f == s).then_some(Shift::Same),
        Tolerance::TrailingWhitespace => pairs(i).all(trimmed_equal).then_some(Shift::Same),
        _ => indent_shift(pairs(i)),
    };
    // SEARCH is never empty (parse_blocks refuses that), so no window is trivially equal.
    let windows = (file.len() + 1).saturating_sub(search.len());
    let hit = |i: usize| Some((i, matches(i)?));
    (0..windows).filter_map(hit).collect()
}

fn leading_ws(line: &str) -> &str {
    &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
}

/// The one indentation offset, read from the first pair of non-blank lines, that turns every
/// non-blank SEARCH line into its file line (trailing whitespace ignored). Blank faces blank.
fn indent_shift<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)> + Clone) -> Option<Shift> {
    let mut pairs = pairs.map(|(f, s)| (f.trim_end(), s.trim_end()));
    let both_text = |(f, s): &(&str, &str)| !f.is_empty() && !s.is_empty();
    let (f, s) = pairs.clone().find(both_text)?;
    let (fi, si) = (leading_ws(f), leading_ws(s));
    let (file_has_more, extra) = match (fi.strip_suffix(si), si.strip_suffix(fi)) {
        (Some(extra), _) => (true, extra),
        (None, Some(extra)) => (false, extra),
        (None, None) => return None,
    };
    let fits = |(f, s): (&str, &str)| match (f.is_empty() || s.is_empty(), file_has_more) {
        (true, _) => f.is_empty() == s.is_empty(),
        (false, true) => f.strip_prefix(extra) == Some(s),
        (false, false) => s.strip_prefix(extra) == Some(f),
    };
    pairs.all(fits).then(|| match (extra, file_has_more) {
        ("", _) => Shift::Same,
        (_, true) => Shift::Add(extra.to_string()),
        (_, false) => Shift::Remove(extra.to_string()),
    })
}

/// Split a leading line number off `line`: `(number, separator, rest)`. Separators: `|` for
/// `12 | x` (gutters), `:` for `12: x` (grep -n), tab for `12\tx` and `12→x` (cat -n style),
/// space for `12 x` (winx ReadFiles), and `\0` for a lone `12` (a numbered blank line whose
/// trailing space was trimmed).
fn line_number(line: &str) -> Option<(u64, char, &str)> {
    let trimmed = line.trim_start_matches(' ');
    let rest = trimmed.trim_start_matches(|c: char| c.is_ascii_digit());
    let digits = &trimmed[..trimmed.len() - rest.len()];
    if digits.is_empty() || digits.len() > MAX_LINE_NUMBER_DIGITS {
        return None;
    }
    let number = digits.parse().ok()?;
    let (sep, rest) = if let Some(r) = rest.trim_start_matches(' ').strip_prefix('|') {
        ('|', r.strip_prefix(' ').unwrap_or(r))
    } else if let Some(r) = rest.strip_prefix(':') {
        (':', r.strip_prefix(' ').unwrap_or(r))
    } else if let Some(r) = rest.strip_prefix('\t').or_else(|| rest.strip_prefix('→')) {
        ('\t', r)
    } else if let Some(r) = rest.strip_prefix(' ') {
        (' ', r)
    } else if rest.trim_end().is_empty() {
        (BARE, "")
    } else {
        return None;
    };
    Some((number, sep, rest))
}

/// SEARCH without leaked line numbers, when every non-blank line carries one, the numbers
/// count up one per line (a SEARCH section is contiguous, so real leaks always do) and one
/// separator style is used throughout.
fn strip_line_numbers(search: &[String]) -> Option<(Vec<&str>, char)> {
    let (mut first, mut style) = (None, None);
    let mut out = Vec::with_capacity(search.len());
    for (k, line) in (0u64..).zip(search) {
        if line.trim().is_empty() {
            out.push(line.as_str());
            continue;
        }
        let (number, sep, rest) = line_number(line)?;
        let first = *first.get_or_insert(number.checked_sub(k)?);
        let same_style = sep == BARE || *style.get_or_insert(sep) == sep;
        if number != first + k || !same_style {
            return None;
        }
        out.push(rest);
    }
    let has_text = out.iter().any(|l| !l.trim().is_empty());
    Some((out, style?)).filter(|_| has_text)
}

/// The REPLACE lines as written into the file: leaked numbers of the SEARCH style stripped
/// (a bare number stays, since it may be data), then re-indented by the match's shift.
fn replacement(replace: &[String], numbers: Option<char>, shift: &Shift) -> Vec<String> {
    let adjust = |line: &String| {
        let line = match (numbers, line_number(line)) {
            (Some(style), Some((_, sep, rest))) if sep == style => rest,
            _ => line,
        };
        match shift {
            _ if line.trim().is_empty() => line.to_string(),
            Shift::Same => line.to_string(),
            Shift::Add(extra) => format!("{extra}{line}"),
            Shift::Remove(extra) => match line.strip_prefix(extra.as_str()) {
                Some(rest) => rest.to_string(),
                None => line.trim_start_matches([' ', '\t']).to_string(),
            },
        }
    };
    replace.iter().map(adjust).collect()
}

/// Typographic quotes and dashes as their ASCII look-alikes.
fn ascii_look_alike(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' => '\'',
        '\u{201C}' | '\u{201D}' => '"',
        '\u{2013}' | '\u{2014}' => '-',
        c => c,
    }
}

/// Lines with typographic characters replaced, for comparison only.
fn plain(lines: &[&str]) -> Vec<String> {
    let plain_line = |l: &&str| l.chars().map(ascii_look_alike).collect();
    lines.iter().map(plain_line).collect()
}

fn views(lines: &[String]) -> Vec<&str> {
    lines.iter().map(String::as_str).collect()
}

/// Share of the longer line covered by the common prefix and suffix, ignoring surrounding
/// whitespace and typography: cheap, allocation-free, and high for a one-token edit.
fn line_similarity(a: &str, b: &str) -> f32 {
    let (a, b) = (a.trim(), b.trim());
    let (la, lb) = (a.chars().count(), b.chars().count());
    if la.max(lb) == 0 {
        return 1.0;
    }
    let same = |(x, y): &(char, char)| ascii_look_alike(*x) == ascii_look_alike(*y);
    let prefix = a.chars().zip(b.chars()).take_while(same).count();
    let (ra, rb) = (a.chars().rev(), b.chars().rev());
    let suffix = ra.zip(rb).take_while(same).count();
    (prefix + suffix).min(la.min(lb)) as f32 / la.max(lb) as f32
}

/// The window of `search.len()` lines most like `search`: a strided pass, then every window
/// near the best one, so at most about twice [`CLOSEST_PAIR_BUDGET`] line pairs are scored.
fn closest(file: &[&str], search: &[&str]) -> Option<Closest> {
    let n = search.len();
    let similarity = |(f, s): (&&str, &&str)| line_similarity(f, s);
    let score = |i: usize| (i, file[i..].iter().zip(search).map(similarity).sum::<f32>());
    let better = |a: (usize, f32), b: (usize, f32)| if b.1 > a.1 { b } else { a };
    let windows = file.len().checked_sub(n)? + 1;
    let per_pass = (CLOSEST_PAIR_BUDGET / n).max(1);
    let step = windows.div_ceil(per_pass);
    let (coarse, _) = (0..windows).step_by(step).map(score).reduce(better)?;
    let reach = (step - 1).min(per_pass / 2);
    let around = coarse.saturating_sub(reach)..(coarse + reach + 1).min(windows);
    let (start, total) = around.map(score).reduce(better)?;
    let similarity = total / n as f32;
    if similarity < MIN_CLOSEST_SIMILARITY {
        return None;
    }
    let diff = diff(&file[start..start + n], search);
    let (start_line, end_line) = (start + 1, start + n);
    Some(Closest {
        start_line,
        end_line,
        similarity,
        diff,
    })
}

/// Expected (`- `) and found (`+ `) lines where they diverge, equal lines as context. Lines
/// diverge when their text differs; only when none do are indentation differences marked.
fn diff(found: &[&str], expected: &[&str]) -> String {
    let text = |l: &str| l.trim().chars().map(ascii_look_alike).collect::<String>();
    let text_differs = found.iter().zip(expected).any(|(f, e)| text(f) != text(e));
    let (mut out, mut shown) = (String::new(), 0);
    for (f, e) in found.iter().zip(expected) {
        if shown >= MAX_DIFF_LINES {
            out.push_str("  … (diff cut short)\n");
            break;
        }
        let diverges = match text_differs {
            true => text(f) != text(e),
            false => f.trim_end() != e.trim_end(),
        };
        shown += 1 + usize::from(diverges);
        out += &match diverges {
            true => format!("- {e}\n+ {f}\n"),
            false => format!("  {f}\n"),
        };
    }
    out
}

#[cfg(test)]
#[path = "search_replace_tests.rs"]
mod tests;
