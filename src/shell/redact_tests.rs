//! Tests of `shell::redact` (a file of their own: the rules file stays under the size cap).

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

/// Found by `redaction_is_idempotent`: the first `Bearer` took the second as its value,
/// declined it (no token), and the search went on after it, so the token that followed
/// survived the first pass (and only a second pass redacted it).
#[test]
fn a_declined_match_does_not_hide_a_secret_inside_it() {
    let token = "a1B2a1B2a1B2a1B2a1B2a1B2a1B2a1B2a1B2";
    for (text, want, count) in [
        (
            format!("Bearer Bearer {token}"),
            "Bearer Bearer [REDACTED]",
            1,
        ),
        (
            format!("token=Bearer Bearer {token}"),
            "token=[REDACTED] Bearer [REDACTED]",
            2,
        ),
        (
            format!("Authorization: Bearer Bearer {token}"),
            "Authorization: Bearer Bearer [REDACTED]",
            1,
        ),
    ] {
        let (once, n) = r(&text);
        assert_eq!((once.as_str(), n), (want, count), "{text}");
        assert_eq!(r(&once), (once.clone(), 0), "{text}");
    }
}

/// A declined assignment is not searched again from inside its value: that value runs to
/// the end of the line and may hold `=`, so a line of `a=a=a=…` next to a secret key would
/// be searched once per `=` from there (quadratic: over a minute for this line, debug build).
#[test]
fn a_long_line_of_declined_assignments_is_searched_once() {
    let line = format!("TOKEN=abc123 {}\n", "a=".repeat(100_000));
    let (out, n) = r(&line);
    assert_eq!(n, 1);
    assert!(out.starts_with("TOKEN=[REDACTED] a=a="));
}

#[test]
fn counts_every_secret_and_is_idempotent() {
    let (ghp, akia) = (fake("ghp_", "a1B2", 9), fake("AKIA", "Q7Z", 5) + "X");
    let (once, n) = r(&format!("a={ghp}\nb {akia}\nPASSWORD=x\n"));
    assert_eq!(n, 3);
    assert_eq!(r(&once), (once.clone(), 0));
}

fn masked(text: &[u8], known: &[String]) -> Vec<u8> {
    let mut bytes = text.to_vec();
    Redactor::global().mask(&mut bytes, known);
    assert_eq!(bytes.len(), text.len(), "masking keeps the length");
    bytes
}

/// Journals are masked in place (decision 041): same length, the context kept, and
/// nothing left that redaction would still replace.
#[test]
fn masking_keeps_the_length_and_leaves_nothing_to_redact() {
    for case in CASES.lines().filter(|l| !l.is_empty()) {
        let (input, want) = case.split_once(" => ").unwrap();
        let out = String::from_utf8(masked(input.as_bytes(), &[])).unwrap();
        if want == "=" {
            assert_eq!(out, input);
        } else {
            assert_ne!(out, input, "{case}");
            assert_eq!(r(&out), (out.clone(), 0), "{case}");
        }
    }
    let key = "-----BEGIN RSA PRIVATE KEY-----\r\nMIIEpAIBAAKCAQEA\r\nqwerty==\r\n-----END RSA PRIVATE KEY-----\r\n";
    let text = format!(
        "db password=hunter2-x\r\n?{}\nkey: AKIAQ7ZWX3KL9MN2PB4T\n{key}after plain-value-99\n",
        fake("ghp_", "a1B2", 9)
    );
    let mut raw = text.into_bytes();
    raw[23] = 0xff; // not UTF-8: one byte, one character
    let out = masked(&raw, &["plain-value-99".to_string()]);
    let out = String::from_utf8_lossy(&out);
    for gone in [
        "hunter2",
        "a1B2",
        "AKIAQ7",
        "MIIEp",
        "qwerty",
        "plain-value",
    ] {
        assert!(!out.contains(gone), "{gone}: {out}");
    }
    assert!(out.contains("db password=*******"), "{out}");
    assert_eq!(
        out.matches('\n').count(),
        8,
        "lines keep their count: {out}"
    );
    assert_eq!(
        Redactor::global().open_private_key_bytes(b"x\n-----BEGIN EC PRIVATE KEY-----\n\xffAB\n"),
        Some(2)
    );
}

proptest! {
    #[test]
    fn masking_leaves_nothing_to_redact(parts in proptest::collection::vec(prop::sample::select(vec![
        "token", "PASSWORD", "api-key", "=", " = ", ":", "://", "@", "/", "\"", "'", " ", "\n",
        "Bearer ", "Authorization: ", "basic ", "x", "abc123def456", "$V", "[REDACTED]", "\u{e9}",
        "ghp_", "a1B2a1B2a1B2a1B2a1B2a1B2a1B2a1B2a1B2", "sk-", "AKIA", "eyJ", ".", "*",
        "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----",
    ]), 0..40)) {
        let text = parts.concat();
        let out = String::from_utf8(masked(text.as_bytes(), &[])).unwrap();
        prop_assert_eq!(r(&out).1, 0, "{:?} masked to {:?}", text, out);
    }

    #[test]
    fn arbitrary_bytes_mask_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        masked(&bytes, &["ab".to_string()]);
    }

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
