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

use regex_lite::{Captures, Regex};
use std::borrow::Cow;
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
/// regex at all.
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
        needles: "gh github_pat_ sk- akia asia xox aiza k_live_ k_test_ eyj",
        line_check: any_line,
        rewrite: vendor_token,
        assigns: false,
    },
    // Credential headers: any value counts, the header name says it is a secret.
    Spec {
        pattern: concat!(
            r"(?i)(?P<pre>\b(?:proxy-)?authorization[ \t]*:[ \t]*(?:bearer|basic|token)[ \t]+",
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
        }
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
        let may_match =
            |spec: &Spec, lower: &str| spec.needles.split(' ').any(|n| lower.contains(n));
        let active: Vec<_> = (self.line_rules.iter())
            .filter(|(_, spec)| may_match(spec, &lower))
            .collect();
        if active.is_empty() {
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
            for (regex, spec) in &active {
                if may_match(spec, lower_line) && (spec.line_check)(lower_line) {
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
        for line in text.lines().filter(|l| l.contains(['=', ':'])) {
            let lower = line.to_ascii_lowercase();
            if !KEY_NEEDLES.split(' ').any(|n| lower.contains(n)) {
                continue;
            }
            for (regex, spec) in &self.line_rules {
                if !spec.assigns || !(spec.line_check)(&lower) {
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

impl Default for Redactor {
    fn default() -> Redactor {
        Redactor::new()
    }
}

/// Runs `regex` over `text`, replacing what `rewrite` rewrites and counting replacements.
fn apply<'a>(regex: &Regex, rewrite: Rewrite, text: Cow<'a, str>, n: &mut usize) -> Cow<'a, str> {
    let replaced = regex.replace_all(&text, |caps: &Captures<'_>| match rewrite(caps) {
        Some(new) => {
            *n += 1;
            new
        }
        None => caps.get(0).map_or("", |m| m.as_str()).to_owned(),
    });
    match replaced {
        Cow::Owned(changed) => Cow::Owned(changed),
        Cow::Borrowed(_) => text,
    }
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
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One case a line: `input => expected`, or `input => =` when nothing may change.
    const CASES: &str = r#"
> Authorization: Bearer abc123DEF456ghi789.x-y => > Authorization: Bearer [REDACTED]
authorization: basic dXNlcjpwYXNz => authorization: basic [REDACTED]
Authorization: token 0123abcd => Authorization: token [REDACTED]
-H 'Bearer abc123DEF456ghi789' => -H 'Bearer [REDACTED]'
x-api-key: k3y-value => x-api-key: [REDACTED]
curl -H "Authorization: Bearer $TOKEN" https://api.example.com => =
Send the Bearer token in the header; Bearer authentication is required. => =
https://alice:s3cr3t-pw@github.com/o/r.git => https://alice:[REDACTED]@github.com/o/r.git
postgres://app:p%40ss:w0rd@db:5432/x => postgres://app:[REDACTED]@db:5432/x
ssh://git@github.com:22/org/repo.git and http://localhost:8080/a@b => =
https://user:${DB_PASS}@host/ and git@github.com:org/repo.git => =
GITHUB_TOKEN=abc123 => GITHUB_TOKEN=[REDACTED]
export DEPLOY_TOKEN=abc123; make => export DEPLOY_TOKEN=[REDACTED]; make
export DB_PASSWORD='hunter 2' => export DB_PASSWORD='[REDACTED]'
aws_secret_access_key = "wJalrXUt" => aws_secret_access_key = "[REDACTED]"
mysql --passwd=hunter2 -u root => mysql --passwd=[REDACTED] -u root
OPENAI_API_KEY=abc => OPENAI_API_KEY=[REDACTED]
GET /cb?client_secret=xyz&state=1 => GET /cb?client_secret=[REDACTED]&state=1
{"password": "hunter2", "user": "a"} => {"password": "[REDACTED]", "user": "a"}
PASSWORD= => =
TOKEN=$GITHUB_TOKEN => =
API_KEY="" password=***** => =
max_tokens=4096 tokenizer=bpe {"token_count": "5"} => =
PATH=/usr/bin HOME=/home/u => =
let token = parse(input)?; if password == expected { => =
call(password=password, token=tok(x)) => =
   Compiling winx v0.1.0 (/work/main)    Finished `dev` profile in 3.21s => =
commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39 Author: A <a@example.com> => =
id=550e8400-e29b-41d4-a716-446655440000 => =
data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk => =
Password: => =
[sudo] password for alice: => =
Enter passphrase for key '/home/alice/.ssh/id_ed25519': => =
token: expected identifier, found `}` => =
sk-learn-compatibility-wrapper and task-runner-for-everything => =
error[E0425]: cannot find value `secret` in this scope => =
eyJ is how base64 of '{"' starts => =
-----BEGIN CERTIFICATE----- MIIB -----END CERTIFICATE----- => =
"#;

    /// Fake secrets are assembled at run time so no token-shaped literal sits in the source.
    fn fake(prefix: &str, unit: &str, n: usize) -> String {
        format!("{prefix}{}", unit.repeat(n))
    }

    fn r(text: &str) -> (String, usize) {
        let (out, n) = Redactor::global().redact(text);
        (out.into_owned(), n)
    }

    #[test]
    fn context_rules_and_ordinary_text() {
        for case in CASES.lines().filter(|l| !l.is_empty()) {
            let (input, expected) = case.split_once(" => ").expect("case has ` => `");
            let want = if expected == "=" {
                (input.to_owned(), 0)
            } else {
                (expected.to_owned(), 1)
            };
            assert_eq!(r(input), want, "case: {case}");
        }
    }

    #[test]
    fn vendor_token_shapes() {
        let cases = [
            (fake("ghp_", "a1B2", 9), "GITHUB TOKEN"),
            (fake("gho_", "Zz09", 9), "GITHUB TOKEN"),
            (fake("ghs_", "Zz09", 9), "GITHUB TOKEN"),
            (fake("ghu_", "Zz09", 9), "GITHUB TOKEN"),
            (fake("github_pat_", "11AB_cd9", 10), "GITHUB TOKEN"),
            (fake("sk-ant-api03-", "xY3_-", 12), "ANTHROPIC KEY"),
            (fake("sk-", "T3BlbkFJ", 6), "API KEY"),
            (fake("sk-proj-", "aB3-x_", 8), "API KEY"),
            (fake("AKIA", "Q7Z", 5) + "X", "AWS KEY ID"),
            (fake("xoxb-", "1234-aBc", 4), "SLACK TOKEN"),
            (fake("xoxp-", "99-zzz", 4), "SLACK TOKEN"),
            (fake("AIza", "Sy_9-k", 6), "GOOGLE API KEY"),
            (fake("sk_live_", "51Hx", 6), "STRIPE KEY"),
            (fake("rk_live_", "51Hx", 6), "STRIPE KEY"),
            (
                fake("eyJ", "hbGc", 3) + "." + &fake("eyJ", "zdWI", 3) + ".Sf_x-9",
                "JWT",
            ),
        ];
        for (token, kind) in &cases {
            let want = |ctx: &str| (ctx.replace('T', &format!("[REDACTED {kind}]")), 1);
            assert_eq!(
                r(&format!("value: {token} end")),
                want("value: T end"),
                "{token}"
            );
            assert_eq!(r(&format!("K=\"{token}\"")), want("K=\"T\""), "{token}");
        }
    }

    #[test]
    fn pem_private_key_blocks() {
        let body = fake("", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n", 3);
        for kind in ["", "RSA ", "EC ", "OPENSSH ", "ENCRYPTED ", "PGP "] {
            let block = if kind == "PGP " { " BLOCK" } else { "" };
            let armour = |edge: &str| format!("-----{edge} {kind}PRIVATE KEY{block}-----");
            let pem = format!("{}\n{body}{}", armour("BEGIN"), armour("END"));
            let want = ("key:\n[REDACTED PRIVATE KEY]\ndone".to_owned(), 1);
            assert_eq!(r(&format!("key:\n{pem}\ndone")), want, "{kind}");
        }
        let cut = format!("-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n{body}$ next");
        assert_eq!(r(&cut), ("[REDACTED PRIVATE KEY]\n$ next".to_owned(), 1));
    }

    #[test]
    fn an_unclosed_private_key_is_found_from_its_line() {
        let open = |t: &str| Redactor::global().open_private_key(t);
        let (begin, end) = (
            "-----BEGIN RSA PRIVATE KEY-----",
            "-----END RSA PRIVATE KEY-----",
        );
        assert_eq!(open("plain\ntext\n"), None);
        assert_eq!(open(&format!("a\nkey: {begin}\nMIIE\n")), Some(2));
        assert_eq!(open(&format!("{begin}\nMIIE\n{end}\n")), None);
        // A block closed, then another opened: only the second is open.
        let two = format!("{begin}\nA\n{end}\nx\n{begin}\nB\n");
        assert_eq!(open(&two), Some(two.rfind(begin).unwrap()));
        assert_eq!(open(&format!("{end}\n")), None);
    }

    #[test]
    fn counts_every_secret_and_is_idempotent() {
        let (ghp, akia) = (fake("ghp_", "a1B2", 9), fake("AKIA", "Q7Z", 5) + "X");
        let (once, n) = r(&format!("a={ghp}\nb {akia}\nPASSWORD=x\n"));
        assert_eq!(n, 3);
        assert_eq!(r(&once), (once.clone(), 0));
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in "(?s).{0,400}") {
            let (out, n) = Redactor::global().redact(&text);
            prop_assert!(n > 0 || out == text);
        }

        #[test]
        fn redaction_is_idempotent(parts in proptest::collection::vec(prop::sample::select(vec![
            "token", "PASSWORD", "api-key", "=", " = ", ":", "://", "@", "/", "\"", "'", " ", "\n",
            "Bearer ", "Authorization: ", "basic ", "x", "abc123def456", "$V", "[REDACTED]",
            "ghp_", "a1B2a1B2a1B2a1B2a1B2a1B2a1B2a1B2a1B2", "sk-", "AKIA", "eyJ", ".",
            "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----",
        ]), 0..40)) {
            let (once, _) = r(&parts.concat());
            prop_assert_eq!(r(&once), (once.clone(), 0));
        }

        #[test]
        fn embedded_github_tokens_never_survive(
            pre in "[ -~\n]{0,40}",
            body in "[A-Za-z0-9]{36,60}",
            post in "[ \n.,;][ -~\n]{0,40}",
        ) {
            let (out, n) = r(&format!("{pre} ghp_{body}{post}"));
            prop_assert!(n >= 1 && !out.contains(&body));
        }
    }
}
