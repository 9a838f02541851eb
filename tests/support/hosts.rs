//! What the real-host tests share: where `make hosts` installed a host's binary, and the
//! README snippets they run (a host's section, its fenced blocks), so the README's set-up
//! is the one tested.

use super::manifest_dir;
use serde_json::Value;
use std::path::PathBuf;

/// `node_modules/.bin/<name>` under `WINX_TEST_HOSTS` (set by `make test`) or
/// `target/hosts`; panics saying how to install it.
pub fn host_bin(name: &str, what: &str) -> PathBuf {
    let root = std::env::var_os("WINX_TEST_HOSTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest_dir().join("target/hosts"));
    let bin = root.join("node_modules/.bin").join(name);
    assert!(
        bin.exists(),
        "{what} is not installed at {}: run `make hosts` (or `make test`, which runs it and \
         sets WINX_TEST_HOSTS)",
        bin.display()
    );
    bin
}

/// The README section that starts at the comment `<!-- hosts:<host>` and ends at the next
/// `### ` heading.
pub fn readme_section(host: &str) -> String {
    let readme = std::fs::read_to_string(manifest_dir().join("README.md")).unwrap();
    let marker = format!("<!-- hosts:{host}");
    let start = readme
        .find(&marker)
        .unwrap_or_else(|| panic!("README.md has no `{marker}` marker"));
    let section = &readme[start..];
    section[..section.find("\n### ").unwrap_or(section.len())].to_string()
}

/// The README part that starts at the comment `<!-- <marker>` and ends at the next `## `
/// heading outside a fenced block (for a part with no `### ` headings of its own, such as
/// "Tools by example").
pub fn readme_part(marker: &str) -> String {
    let readme = std::fs::read_to_string(manifest_dir().join("README.md")).unwrap();
    let marker = format!("<!-- {marker}");
    let start = readme
        .find(&marker)
        .unwrap_or_else(|| panic!("README.md has no `{marker}` marker"));
    let (mut part, mut fenced) = (String::new(), false);
    for line in readme[start..].lines() {
        fenced ^= line.starts_with("```");
        if !fenced && line.starts_with("## ") {
            break;
        }
        part.push_str(line);
        part.push('\n');
    }
    part
}

/// The bodies of the fenced blocks of language `lang` in `text`.
pub fn fenced(text: &str, lang: &str) -> Vec<String> {
    let open = format!("```{lang}\n");
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(&open) {
        let body = &rest[i + open.len()..];
        let end = body.find("```").expect("an unclosed fenced block");
        out.push(body[..end].to_string());
        rest = &body[end + 3..];
    }
    out
}

/// A command line split into words as a shell would, for the simple lines the README
/// shows: whitespace separates, double quotes group (and are removed), nothing expands.
pub fn shell_words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quoted) = (Vec::new(), String::new(), false);
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// Strings longer than this are cut in a recorded trace: a host's system prompt parts are
/// (several KiB each), the tool results of the first calls are not.
const TRACE_STRING_BYTES: usize = 2000;

/// Cut long strings and replace temp paths in a trace recorded as a golden file.
pub fn cut_strings(v: &mut Value) {
    match v {
        Value::String(s) => {
            let tmp = regex_lite::Regex::new(r"/tmp/\.tmp[A-Za-z0-9]+").unwrap();
            *s = tmp.replace_all(s, "<TMP>").into_owned();
            if s.len() > TRACE_STRING_BYTES {
                let mut end = TRACE_STRING_BYTES;
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                *s = format!("{}… [cut]", &s[..end]);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(cut_strings),
        Value::Object(o) => o.values_mut().for_each(cut_strings),
        _ => {}
    }
}
