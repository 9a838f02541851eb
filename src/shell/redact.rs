//! Secret redaction for command output, on by default.
//!
//! A `Redactor` is a fixed, ordered list of rules (a regex plus a rewrite), compiled once
//! (`Redactor::global`). PEM private-key blocks go first (the one rule that spans lines),
//! then, line by line, vendor token shapes, then context rules (`Authorization:` headers,
//! `Bearer`, URL passwords, `KEY=value`).
//!
//! Invariant: a replacement keeps the context around a secret (the word `Bearer`, the key,
//! the URL user and host) and is never matched by a later rule, so redacting twice finds
//! nothing new. Patterns use no look-around and regex-lite matches in linear time.

use super::needles::Needles;
use regex_lite::{Captures, Regex};
use std::borrow::Cow;
use std::ops::Range;
use std::sync::OnceLock;

/// Minimum body after `sk-` (OpenAI and look-alikes). Real keys are 48+ random chars; 20
/// still catches project keys while rejecting words like `sk-learn`.
const MIN_SK_KEY_BODY: usize = 20;

/// A bare `Bearer x` (outside an `Authorization:` header) may be prose ("the Bearer
/// token"), so its value must look random: at least this long and holding a digit ...
const MIN_BEARER_VALUE: usize = 8;
/// ... or at least this long, which ordinary words are not.
const MIN_BEARER_VALUE_WITHOUT_DIGIT: usize = 20;

/// Fragments that make an assignment key secret, matched on the key upper-cased with `_`,
/// `-` and `.` dropped. `TOKEN` counts only at the end (`GITHUB_TOKEN`, `token2`), so
/// `max_tokens`, `tokenizer` and `token_count` pass.
const SECRET_KEY_WORDS: [&str; 5] = ["SECRET", "PASSW", "PASSPHRASE", "APIKEY", "PRIVATEKEY"];

const REDACTED: &str = "[REDACTED]";

/// The BEGIN and END lines of a PEM private key (RSA, EC, OPENSSH, ENCRYPTED, PGP … BLOCK).
const PEM_BEGIN: &str = r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----";
const PEM_END: &str = r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----";
/// After `PEM_BEGIN`: the rest of the block through `PEM_END` or, when the END line is
/// missing, the base64/header lines after the BEGIN line.
const PEM_BODY: &str = r"(?:(?s:.*?)END_LINE|(?:\n[A-Za-z0-9+/=]+(?m:$)|\n[A-Za-z-]+: [^\n]*)*)";

/// Vendor token shapes, one named group each; `TOKEN_LABELS` maps the group to its label.
/// Alternation is leftmost-first, so `sk-ant-` wins over the generic `sk-`.
const TOKENS: &str = concat!(
    r"\b(?:(?P<github>gh[pousr]_[A-Za-z0-9]{36,}|github_pat_\w{22,})",
    r"|(?P<anthropic>sk-ant-[\w\-]{20,})",
    r"|(?P<sk>sk-[\w\-]+)",
    r"|(?P<aws>(?:AKIA|ASIA)[0-9A-Z]{16}\b)",
    r"|(?P<slack>xox[abposr]-[A-Za-z0-9\-]{10,})",
    r"|(?P<google>AIza[\w\-]{35,})",
    r"|(?P<stripe>[rs]k_(?:live|test)_[0-9A-Za-z]{16,})",
    r"|(?P<jwt>eyJ[\w\-]{4,}\.eyJ[\w\-]{4,}\.[\w\-]*))"
);
const TOKEN_LABELS: [(&str, &str); 8] = [
    ("github", "[REDACTED GITHUB TOKEN]"),
    ("anthropic", "[REDACTED ANTHROPIC KEY]"),
    ("sk", "[REDACTED API KEY]"),
    ("aws", "[REDACTED AWS KEY ID]"),
    ("slack", "[REDACTED SLACK TOKEN]"),
    ("google", "[REDACTED GOOGLE API KEY]"),
    ("stripe", "[REDACTED STRIPE KEY]"),
    ("jwt", "[REDACTED JWT]"),
];

/// Rewrites one match; `None` keeps the match as it was (a false positive).
type Rewrite = fn(&Captures<'_>) -> Option<String>;

/// One line rule. Every match holds one of `needles` (lower-case, space-separated) and its
/// line passes `line_check` (given the lower-cased line). regex-lite has no literal
/// prefilter and scans at 10-40 MB/s, so these cheap tests decide whether a line needs the
/// regex at all; `Needles` finds every rule's needles in one pass.
struct Spec {
    pattern: &'static str,
    needles: &'static str,
    line_check: fn(&str) -> bool,
    rewrite: Rewrite,
    /// The rule matches `key = value` assignments (their values are harvested).
    assigns: bool,
}

/// A superset of the assignment key words, as needles; `key_is_secret` decides.
const KEY_NEEDLES: &str = "token secret pass api private";

/// Rules whose matches never cross a newline, run line by line in this order.
const LINE_RULES: [Spec; 6] = [
    Spec {
        pattern: TOKENS,
        needles: "ghp_ gho_ ghu_ ghs_ ghr_ github_pat_ sk- akia asia xox aiza k_live_ k_test_ eyj",
        line_check: any_line,
        rewrite: vendor_token,
        assigns: false,
    },
    // Credential headers: any value counts, the header name says it is a secret. A scheme
    // written twice (`Bearer Bearer <token>`, a common slip) is prefix, not the value.
    Spec {
        pattern: concat!(
            r"(?i)(?P<pre>\b(?:proxy-)?authorization[ \t]*:[ \t]*(?:(?:bearer|basic|token)[ \t]+)+",
            r"|\b(?:x-api-key|x-auth-token|private-token)[ \t]*:[ \t]*)(?P<val>[^\s,;]+)"
        ),
        needles: "authorization -api-key -token",
        line_check: any_line,
        rewrite: keep_prefix,
        assigns: false,
    },
    Spec {
        pattern: r"(?P<pre>\b(?:Bearer|bearer|BEARER)[ \t]+)(?P<val>[\w\-.~+/]+=*)",
        needles: "bearer",
        line_check: any_line,
        rewrite: bearer,
        assigns: false,
    },
    // `scheme://user:password@host`: only the password goes.
    Spec {
        pattern: r"(?P<pre>\b[A-Za-z][\w+.\-]*://[^\s:/@]+:)(?P<val>[^\s/@]+)(?P<post>@)",
        needles: "://",
        line_check: has_url_password,
        rewrite: keep_prefix,
        assigns: false,
    },
    Spec {
        pattern: concat!(
            r"(?P<pre>\b(?P<key>[A-Za-z_][\w.\-]*)[ \t]*=[ \t]*)",
            r#"(?:"(?P<dq>[^"\n]*)"|'(?P<sq>[^'\n]*)'|(?P<bare>[^\s"'&=][^\s"'&]*))"#
        ),
        needles: KEY_NEEDLES,
        line_check: has_secret_assignment,
        rewrite: assignment,
        assigns: true,
    },
    // JSON / YAML-flow `"password": "value"`.
    Spec {
        pattern: r#"(?P<pre>"(?P<key>[\w.\-]+)"[ \t]*:[ \t]*)"(?P<dq>[^"\n]*)""#,
        needles: KEY_NEEDLES,
        line_check: has_json_pair,
        rewrite: assignment,
        assigns: true,
    },
];

/// Compiled redaction rules. Build once; `redact` takes `&self` and is thread-safe.
pub struct Redactor {
    pem: Regex,
    pem_begin: Regex,
    pem_end: Regex,
    line_rules: Vec<(Regex, &'static Spec)>,
    /// The line rules' needles: bit `i` of `rules_in` is `line_rules[i]`.
    needles: Needles,
}

/// The bits of the rules that harvest assignments (`Spec::assigns`).
fn assigning_rules() -> u8 {
    (LINE_RULES.iter().enumerate())
        .filter(|(_, spec)| spec.assigns)
        .fold(0, |mask, (i, _)| mask | 1 << i)
}

/// Each line rule's needles, in order (for `needles`' tests).
#[cfg(test)]
pub(super) fn line_rule_needles() -> Vec<&'static str> {
    LINE_RULES.iter().map(|spec| spec.needles).collect()
}

impl Redactor {
    /// Compiles the built-in rules. Prefer `global()`, which does this once per process.
    pub fn new() -> Redactor {
        // The patterns are constants covered by the tests, not user input.
        let compile = |p: &str| Regex::new(p).expect("built-in redaction pattern compiles");
        let line_rules = LINE_RULES.iter().map(|spec| (compile(spec.pattern), spec));
        let pem = format!("{PEM_BEGIN}{}", PEM_BODY.replace("END_LINE", PEM_END));
        Redactor {
            pem: compile(&pem),
            pem_begin: compile(PEM_BEGIN),
            pem_end: compile(PEM_END),
            line_rules: line_rules.collect(),
            needles: Needles::new(&LINE_RULES.map(|spec| spec.needles)),
        }
    }

    /// The rules of `among` one of whose needles the lower-cased line `lower` holds.
    fn active(&self, lower: &str, among: u8) -> impl Iterator<Item = &(Regex, &'static Spec)> {
        let mask = self.needles.rules_among(lower.as_bytes(), among);
        (self.line_rules.iter().enumerate())
            .filter(move |(i, _)| mask & 1 << i != 0)
            .map(|(_, rule)| rule)
    }

    /// The process-wide redactor, compiled on first use.
    pub fn global() -> &'static Redactor {
        static GLOBAL: OnceLock<Redactor> = OnceLock::new();
        GLOBAL.get_or_init(Redactor::new)
    }

    /// Replaces every secret in `text` and returns the result with the number replaced.
    /// Borrows `text` back unchanged when nothing matched.
    pub fn redact<'a>(&self, text: &'a str) -> (Cow<'a, str>, usize) {
        let mut count = 0;
        let mut current = Cow::Borrowed(text);
        if text.contains("PRIVATE KEY") {
            current = apply(&self.pem, private_key, current, &mut count);
        }
        // Lower-casing ASCII keeps byte offsets, so line ranges of `current` index `lower`.
        let lower = current.to_ascii_lowercase();
        let active = self.needles.rules_in(lower.as_bytes());
        if active == 0 {
            return (current, count);
        }
        let mut out = String::with_capacity(current.len());
        let mut at = 0;
        for line in current.split_inclusive('\n') {
            // A label never forms a key, header or URL for a later rule, so the needles of
            // the line as it came in are enough.
            let lower_line = &lower[at..at + line.len()];
            at += line.len();
            let mut line = Cow::Borrowed(line);
            for (regex, spec) in self.active(lower_line, active) {
                if (spec.line_check)(lower_line) {
                    line = apply(regex, spec.rewrite, line, &mut count);
                }
            }
            out.push_str(&line);
        }
        if out == *current {
            (current, count)
        } else {
            (Cow::Owned(out), count)
        }
    }
}

impl Redactor {
    /// The values of secret-named keys assigned in `text` (`KEY=value`, `KEY="v"`,
    /// `"key": "v"`), in order of appearance: what `redact` would replace in an
    /// assignment, so a session can also recognise the value where it later stands alone.
    pub fn assigned_secrets(&self, text: &str) -> Vec<String> {
        let mut found = Vec::new();
        let assigning = assigning_rules();
        for line in text.lines().filter(|l| l.contains(['=', ':'])) {
            let lower = line.to_ascii_lowercase();
            for (regex, spec) in self.active(&lower, assigning) {
                if !(spec.line_check)(&lower) {
                    continue;
                }
                for caps in regex.captures_iter(line) {
                    if let Some((value, _, _)) = assigned_secret(&caps) {
                        found.push(value.to_owned());
                    }
                }
            }
        }
        found
    }

    /// The start of the line opening a private-key block that `text` does not close, if
    /// any. The key rule is the one that spans lines: text redacted in pieces holds back
    /// from here until the END line has arrived, so the block is replaced whole. A BEGIN
    /// before the last END is closed by it (the rule matches up to the first END).
    pub fn open_private_key(&self, text: &str) -> Option<usize> {
        if !text.contains("PRIVATE KEY") {
            return None;
        }
        let closed = self.pem_end.find_iter(text).last().map_or(0, |m| m.end());
        let begin = self.pem_begin.find_at(text, closed)?.start();
        Some(text[..begin].rfind('\n').map_or(0, |nl| nl + 1))
    }
}

/// Bytes of a secret masked in place: `*`, never matched by a rule (`is_placeholder`).
const MASK: u8 = b'*';

impl Redactor {
    /// Masks every secret in `bytes` in place, keeping its length: each byte of a secret
    /// becomes `*` (the newlines of a private-key block stay, so lines keep their count),
    /// the context around it stays as `redact` keeps it (`password=`, `Bearer `). The same
    /// rules as `redact`, then every value in `known`. Bytes that are not UTF-8 count as
    /// one character each. Returns how many secrets were masked. For a journal, whose
    /// offsets readers rely on (`guardian::journals::Masker`).
    pub fn mask(&self, bytes: &mut [u8], known: &[String]) -> usize {
        let spans = {
            let text = same_length_text(bytes);
            let mut spans = self.spans(&text);
            for value in known.iter().filter(|v| !v.is_empty()) {
                spans.extend(
                    text.match_indices(value.as_str())
                        .map(|(i, v)| i..i + v.len()),
                );
            }
            spans
        };
        for span in &spans {
            for b in &mut bytes[span.clone()] {
                if !matches!(*b, b'\n' | b'\r') {
                    *b = MASK;
                }
            }
        }
        spans.len()
    }

    /// `open_private_key` of bytes that may not be UTF-8 (offsets are the bytes').
    pub fn open_private_key_bytes(&self, bytes: &[u8]) -> Option<usize> {
        let key = b"PRIVATE KEY";
        if !bytes.windows(key.len()).any(|w| w == key) {
            return None;
        }
        self.open_private_key(&same_length_text(bytes))
    }

    /// The byte ranges `redact` replaces, each narrowed to the secret itself.
    fn spans(&self, text: &str) -> Vec<Range<usize>> {
        let mut spans = Vec::new();
        let mut work = Cow::Borrowed(text);
        if text.contains("PRIVATE KEY") {
            spans.extend(self.pem.find_iter(text).map(|m| m.range()));
            work = Cow::Owned(masked(text, &spans));
        }
        let lower = work.to_ascii_lowercase();
        let active = self.needles.rules_in(lower.as_bytes());
        if active == 0 {
            return spans;
        }
        let mut at = 0;
        for line in work.split_inclusive('\n') {
            let lower_line = &lower[at..at + line.len()];
            let mut line = Cow::Borrowed(line);
            for (regex, spec) in self.active(lower_line, active) {
                if (spec.line_check)(lower_line) {
                    let found = rule_spans(regex, spec.rewrite, &line);
                    if !found.is_empty() {
                        line = Cow::Owned(masked(&line, &found));
                        spans.extend(found.into_iter().map(|r| r.start + at..r.end + at));
                    }
                }
            }
            at += line.len();
        }
        spans
    }
}

/// The matches of `regex` in `text` that `rewrite` accepts, searched as `apply` searches,
/// each narrowed to what the rewrite replaced (the match less the prefix and suffix the
/// rewrite kept).
fn rule_spans(regex: &Regex, rewrite: Rewrite, text: &str) -> Vec<Range<usize>> {
    let (mut out, mut at) = (Vec::new(), 0);
    while at <= text.len() {
        let Some(caps) = regex.captures_at(text, at) else {
            break;
        };
        let Some(whole) = caps.get(0) else { break };
        match rewrite(&caps) {
            Some(new) => {
                let old = whole.as_str();
                let pre = common_len(old.chars(), new.chars());
                let post = common_len(old[pre..].chars().rev(), new[pre..].chars().rev());
                let span = whole.start() + pre..whole.end() - post;
                out.push(if span.is_empty() { whole.range() } else { span });
                at = whole.end();
            }
            None => at = value_start(&caps).unwrap_or(whole.end()),
        }
        if whole.is_empty() {
            at = text[at..]
                .chars()
                .next()
                .map_or(text.len() + 1, |c| at + c.len_utf8());
        }
    }
    out
}

/// Bytes of the longest common run at the start of `a` and `b`.
fn common_len(a: impl Iterator<Item = char>, b: impl Iterator<Item = char>) -> usize {
    a.zip(b)
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x.len_utf8())
        .sum()
}

/// `text` with the bytes of `spans` masked (newlines kept): as long, and still UTF-8.
fn masked(text: &str, spans: &[Range<usize>]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for span in spans {
        for b in &mut bytes[span.clone()] {
            if !matches!(*b, b'\n' | b'\r') {
                *b = MASK;
            }
        }
    }
    // Every span starts and ends on a character boundary and becomes ASCII.
    String::from_utf8(bytes).unwrap_or_default()
}

/// `bytes` as text of the same length: each byte that is not UTF-8 is one `?`.
fn same_length_text(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => {
            let mut text = String::with_capacity(bytes.len());
            for chunk in bytes.utf8_chunks() {
                text.push_str(chunk.valid());
                text.extend(chunk.invalid().iter().map(|_| '?'));
            }
            Cow::Owned(text)
        }
    }
}

impl Default for Redactor {
    fn default() -> Redactor {
        Redactor::new()
    }
}

/// Every match of `regex` in `text` that `rewrite` accepts, replaced and counted in `n`.
/// A match it declines may hide a secret inside it (`Bearer Bearer <token>`: the first
/// `Bearer` takes the second as its value, which is no token), so the search resumes
/// where the declined match's one-token value (`val`) begins, not after its end. An
/// assignment's value may hold `=` and run to the end of the line, so resuming inside it
/// would make a line of `a=a=a=…` quadratic: those rules resume after the match.
fn apply<'a>(regex: &Regex, rewrite: Rewrite, text: Cow<'a, str>, n: &mut usize) -> Cow<'a, str> {
    let mut out = String::new();
    // Bytes of `text` already copied into `out`, and where the next search starts.
    let (mut copied, mut at, mut replaced) = (0, 0, false);
    while at <= text.len() {
        let Some(caps) = regex.captures_at(&text, at) else {
            break;
        };
        let Some(whole) = caps.get(0) else { break };
        match rewrite(&caps) {
            Some(new) => {
                *n += 1;
                replaced = true;
                out.push_str(&text[copied..whole.start()]);
                out.push_str(&new);
                copied = whole.end();
                at = whole.end();
            }
            None => at = value_start(&caps).unwrap_or(whole.end()),
        }
        if whole.is_empty() {
            // No rule matches empty text; were one to, the search must still move on.
            at = text[at..]
                .chars()
                .next()
                .map_or(text.len() + 1, |c| at + c.len_utf8());
        }
    }
    if !replaced {
        return text;
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// Where a match's one-token value begins, when that is past the match's start (`val`
/// follows a non-empty prefix in every rule that has one, and holds no blank).
fn value_start(caps: &Captures<'_>) -> Option<usize> {
    let start = caps.get(0)?.start();
    caps.name("val").map(|m| m.start()).filter(|&v| v > start)
}

fn any_line(_: &str) -> bool {
    true
}

/// Some `scheme://` whose authority (up to whitespace, `/` or `@`) holds `:` and ends in `@`.
fn has_url_password(line: &str) -> bool {
    line.match_indices("://").any(|(at, _)| {
        let rest = &line[at + 3..];
        match rest.find(|c: char| c.is_whitespace() || c == '/' || c == '@') {
            Some(end) => rest[end..].starts_with('@') && rest[..end].contains(':'),
            None => false,
        }
    })
}

/// Some `=` whose key (the word before it, spaces skipped) names a secret.
fn has_secret_assignment(line: &str) -> bool {
    line.match_indices('=').any(|(at, _)| {
        let key = line[..at].trim_end_matches([' ', '\t']);
        let is_key_byte = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-');
        // A multi-byte char has no key bytes, so the byte after it is a char boundary.
        let start = key.bytes().rposition(|b| !is_key_byte(b));
        key_is_secret(&key[start.map_or(0, |i| i + 1)..])
    })
}

fn has_json_pair(line: &str) -> bool {
    line.contains('"') && line.contains(':')
}

fn group<'t>(caps: &Captures<'t>, name: &str) -> Option<&'t str> {
    caps.name(name).map(|m| m.as_str())
}

fn private_key(_: &Captures<'_>) -> Option<String> {
    Some("[REDACTED PRIVATE KEY]".to_owned())
}

/// The label of whichever vendor group matched. `sk-…` also starts ordinary words and
/// package names, so it must look like random base62: digits and both letter cases.
fn vendor_token(caps: &Captures<'_>) -> Option<String> {
    if let Some(sk) = group(caps, "sk") {
        let body = sk.as_bytes().get(3..)?;
        let has = |f: fn(&u8) -> bool| body.iter().any(f);
        let mixed = [
            u8::is_ascii_digit,
            u8::is_ascii_uppercase,
            u8::is_ascii_lowercase,
        ];
        if body.len() < MIN_SK_KEY_BODY || !mixed.into_iter().all(has) {
            return None;
        }
    }
    let (_, label) = TOKEN_LABELS
        .iter()
        .find(|(name, _)| caps.name(name).is_some())?;
    Some((*label).to_owned())
}

/// Values that hold no secret: empty, a shell variable, already masked or redacted.
fn is_placeholder(value: &str) -> bool {
    value.is_empty()
        || value.starts_with('$')
        || value.starts_with("[REDACTED")
        || value.chars().all(|c| c == '*')
}

/// `pre` + `[REDACTED]` + `post`, unless the value is a placeholder.
fn keep_prefix(caps: &Captures<'_>) -> Option<String> {
    if is_placeholder(group(caps, "val")?) {
        return None;
    }
    let pre = group(caps, "pre").unwrap_or("");
    let post = group(caps, "post").unwrap_or("");
    Some(format!("{pre}{REDACTED}{post}"))
}

fn bearer(caps: &Captures<'_>) -> Option<String> {
    let value = group(caps, "val")?;
    let has_digit = value.bytes().any(|b| b.is_ascii_digit());
    let random = (value.len() >= MIN_BEARER_VALUE && has_digit)
        || value.len() >= MIN_BEARER_VALUE_WITHOUT_DIGIT;
    if random { keep_prefix(caps) } else { None }
}

/// Whether an assignment key names a secret (`GITHUB_TOKEN`, `db.password`, `x-api-key`).
fn key_is_secret(key: &str) -> bool {
    let key: String = (key.chars())
        .filter(|c| !matches!(c, '_' | '-' | '.'))
        .map(|c| c.to_ascii_uppercase())
        .collect();
    SECRET_KEY_WORDS.iter().any(|word| key.contains(word))
        || key
            .trim_end_matches(|c: char| c.is_ascii_digit())
            .ends_with("TOKEN")
}

/// The secret value of an assignment match, its quote and what follows it inside the match
/// (a shell's `;`), or `None` when the key is not secret, the value is a placeholder, or a
/// bare value after a spaced `=` is code (`let token = parse(x)`).
fn assigned_secret<'t>(caps: &Captures<'t>) -> Option<(&'t str, &'static str, &'t str)> {
    if !key_is_secret(group(caps, "key")?) {
        return None;
    }
    let pre = group(caps, "pre").unwrap_or("");
    let (value, quote) = match (group(caps, "dq"), group(caps, "sq"), group(caps, "bare")) {
        (Some(v), _, _) => (v, "\""),
        (_, Some(v), _) => (v, "'"),
        (_, _, Some(v)) => (v, ""),
        _ => return None,
    };
    // `export TOKEN=v; next` ends the value at the command separator.
    let (value, rest) = match value.strip_suffix(';') {
        Some(v) if quote.is_empty() => (v, ";"),
        _ => (value, ""),
    };
    let code_like = quote.is_empty()
        && (pre.contains([' ', '\t']) || value.contains(['(', ')', '{', '}', '[', ']', ',', ';']));
    (!is_placeholder(value) && !code_like).then_some((value, quote, rest))
}

/// `KEY=value`, `KEY="value"`, `"key": "value"`: redacts the value, keeps key and quotes.
fn assignment(caps: &Captures<'_>) -> Option<String> {
    let (_, quote, rest) = assigned_secret(caps)?;
    let pre = group(caps, "pre").unwrap_or("");
    Some(format!("{pre}{quote}{REDACTED}{quote}{rest}"))
}

/// Whether an environment variable's name marks its value as a secret (the rule the
/// `KEY=value` redaction applies to keys).
pub fn is_secret_name(name: &str) -> bool {
    key_is_secret(name)
}

#[cfg(test)]
#[path = "redact_tests.rs"]
mod tests;
