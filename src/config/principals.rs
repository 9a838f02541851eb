//! The principal config (`--principal-config`, seed 003 "Multiple authenticated
//! principals"): a private TOML file naming each HTTP principal, its one token source and
//! its tool policy. Every problem is a startup error that names the file and never quotes
//! what may be a secret.
//!
//! Invariant: a loaded principal's name is valid, not reserved (`RESERVED_NAMES`) and
//! unique (case-insensitively); its key (`token::key`) is distinct from every other key.

use super::token::{Principal, check_token, key, read_token_file, token_digest};
use super::vars::ConfigError;
use crate::tools::policy::{PolicyError, ToolPolicy};
use serde::Deserialize;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

const MAX_NAME_CHARS: usize = 64;
/// A principal config larger than this is certainly a mistake.
const MAX_PRINCIPAL_CONFIG_BYTES: u64 = 1 << 20;

fn err(msg: impl Into<String>) -> ConfigError {
    ConfigError(msg.into())
}

/// Names no principal may take (compared case-insensitively): `local` is the stdio user
/// (and the operator's `agent` commands), `default` the principal of a single-token
/// server. A principal so named would share their sessions, history and requests in a
/// shared state directory; keys already differ (`http:` prefix), and refusing the names
/// keeps logs, `list` and Herdr bindings unambiguous too.
pub const RESERVED_NAMES: &[&str] = &[super::LOCAL_PRINCIPAL, super::token::SINGLE_PRINCIPAL];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PrincipalFile {
    principals: Vec<PrincipalEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PrincipalEntry {
    name: String,
    token_file: Option<PathBuf>,
    token_env: Option<String>,
    tool_profile: Option<String>,
    allowed_tools: Option<Vec<String>>,
    workspace_roots: Option<Vec<PathBuf>>,
}

/// Parse and validate the principal TOML (seed 003, "Multiple authenticated principals").
/// Keys a principal config may hold: the only file text a TOML error may repeat.
const PRINCIPAL_KEYS: [&str; 6] = [
    "principals",
    "name",
    "token_file",
    "token_env",
    "tool_profile",
    "allowed_tools",
];

/// A TOML error without the file's text: the position, and the parser's message with
/// every quoted fragment that is not a known key replaced by `…`. The file may be a token
/// file passed by mistake, and the default message quotes the offending line.
fn toml_error(e: &toml::de::Error, text: &str) -> String {
    let at = e.span().map_or(String::new(), |span| {
        let before = &text.as_bytes()[..span.start.min(text.len())];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let col = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
        format!(" at line {line}, column {col}")
    });
    format!("invalid TOML{at}: {}", redact_quoted(e.message().trim()))
}

/// `s` with the inside of every `` `…` `` or `"…"` replaced by `…`, unless it is a known
/// key or one punctuation character (`=`, `]`).
fn redact_quoted(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(open) = rest.find(['`', '"']) {
        let q = rest.as_bytes()[open] as char;
        out.push_str(&rest[..=open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find(q) else {
            out.push('…');
            return out;
        };
        let inner = &after[..close];
        let punct = inner.len() == 1 && inner.bytes().all(|b| b.is_ascii_punctuation());
        out.push_str(if PRINCIPAL_KEYS.contains(&inner) || punct {
            inner
        } else {
            "…"
        });
        out.push(q);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

pub fn load_principal_config(
    path: &Path,
    weak_ok: bool,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Principal>, ConfigError> {
    let shown = path.display();
    let meta = std::fs::metadata(path)
        .map_err(|e| err(format!("cannot read principal config {shown}: {e}")))?;
    if !meta.is_file() || meta.len() > MAX_PRINCIPAL_CONFIG_BYTES {
        return Err(err(format!(
            "principal config {shown} must be a regular file under 1 MiB"
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(err(format!(
            "principal config {shown} is writable by group or others; run chmod 600 {shown}"
        )));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| err(format!("cannot read principal config {shown}: {e}")))?;
    let file: PrincipalFile = toml::from_str(&text).map_err(|e| {
        err(format!(
            "principal config {shown}: {}",
            toml_error(&e, &text)
        ))
    })?;
    if file.principals.is_empty() {
        return Err(err(format!(
            "principal config {shown} defines no [[principals]]"
        )));
    }
    let base = path.parent().unwrap_or(Path::new("."));
    let mut out: Vec<Principal> = Vec::new();
    for entry in file.principals {
        let p = principal_entry(entry, base, weak_ok, env)
            .map_err(|e| err(format!("principal config {shown}: {e}")))?;
        if let Some(prev) = out.iter().find(|q| q.name.eq_ignore_ascii_case(&p.name)) {
            return Err(err(format!(
                "principal config {shown}: duplicate principal name {:?} (also {:?}; names are \
                 compared case-insensitively)",
                p.name, prev.name
            )));
        }
        if let Some(prev) = out.iter().find(|q| q.token_digest == p.token_digest) {
            return Err(err(format!(
                "principal config {shown}: principals {:?} and {:?} share a token; give each \
                 client its own",
                prev.name, p.name
            )));
        }
        out.push(p);
    }
    Ok(out)
}

/// `workspace_roots`: absolute existing directories, kept canonical.
fn workspace_roots(name: &str, roots: Vec<PathBuf>) -> Result<Vec<PathBuf>, String> {
    if roots.is_empty() {
        return Err(format!(
            "principal {name:?}: workspace_roots cannot be empty (omit it to allow any workspace)"
        ));
    }
    roots
        .into_iter()
        .map(|r| {
            if !r.is_absolute() {
                return Err(format!(
                    "principal {name:?}: workspace root {} must be an absolute path",
                    r.display()
                ));
            }
            r.canonicalize().ok().filter(|c| c.is_dir()).ok_or_else(|| {
                format!(
                    "principal {name:?}: workspace root {} is not an existing directory",
                    r.display()
                )
            })
        })
        .collect()
}

fn principal_entry(
    e: PrincipalEntry,
    base: &Path,
    weak_ok: bool,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Principal, String> {
    let name = e.name;
    if let Some(r) = RESERVED_NAMES.iter().find(|r| name.eq_ignore_ascii_case(r)) {
        return Err(format!(
            "principal name {name:?} is reserved ({r:?} names winx's own {}); choose another \
             name",
            if *r == "local" {
                "stdio user"
            } else {
                "single-token principal"
            }
        ));
    }
    if name.is_empty()
        || name.len() > MAX_NAME_CHARS
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(format!(
            "principal name {name:?} must be 1..={MAX_NAME_CHARS} ASCII letters, digits, '_' or '-'"
        ));
    }
    let mut token_file = None;
    let token_env = e.token_env.clone();
    let (raw, from) = match (e.token_file, e.token_env) {
        (Some(f), None) => {
            let f = if f.is_absolute() { f } else { base.join(f) };
            let t = read_token_file(&f).map_err(|e| e.0)?;
            let from = format!("token file {}", f.display());
            token_file = Some(f);
            (t, from)
        }
        (None, Some(var)) => {
            let t = env(&var).filter(|t| !t.is_empty()).ok_or_else(|| {
                format!("principal {name:?}: environment variable {var} is not set")
            })?;
            (t, format!("environment variable {var}"))
        }
        _ => {
            return Err(format!(
                "principal {name:?} must set exactly one of token_file or token_env"
            ));
        }
    };
    let token = check_token(&raw, &from, weak_ok).map_err(|e| e.0)?;
    let policy = match &e.allowed_tools {
        Some(list) if list.is_empty() => Err(PolicyError::EmptyAllowlist),
        Some(list) => ToolPolicy::build(e.tool_profile.as_deref(), list),
        None => ToolPolicy::build(e.tool_profile.as_deref(), &[]),
    }
    .map_err(|pe| format!("principal {name:?}: {pe}"))?;
    let mut policy = policy;
    policy.workspace_roots = e
        .workspace_roots
        .map(|roots| workspace_roots(&name, roots))
        .transpose()?;
    Ok(Principal {
        key: key(&name),
        name,
        token_digest: token_digest(token.as_bytes()),
        policy,
        token_file,
        token_env,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_fragments_are_redacted_but_keys() {
        assert_eq!(
            redact_quoted("unknown field `s3cret`, expected `name` or \"x\", not `=`"),
            "unknown field `…`, expected `name` or \"…\", not `=`"
        );
    }

    #[test]
    fn reserved_names_are_refused_whatever_their_case() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("t");
        std::fs::write(&token, "a".repeat(40)).unwrap();
        let private = std::os::unix::fs::PermissionsExt::from_mode(0o600);
        std::fs::set_permissions(&token, private).unwrap();
        let cfg = dir.path().join("p.toml");
        for name in ["local", "LOCAL", "Local", "default", "DEFAULT"] {
            let text = format!("[[principals]]\nname = {name:?}\ntoken_file = \"t\"\n");
            std::fs::write(&cfg, text).unwrap();
            let private = std::os::unix::fs::PermissionsExt::from_mode(0o600);
            std::fs::set_permissions(&cfg, private).unwrap();
            let e = load_principal_config(&cfg, false, &|_| None).unwrap_err();
            assert!(e.0.contains("is reserved"), "{name}: {e}");
        }
        let text = "[[principals]]\nname = \"locals\"\ntoken_file = \"t\"\n";
        std::fs::write(&cfg, text).unwrap();
        let p = load_principal_config(&cfg, false, &|_| None).unwrap();
        assert_eq!(p[0].key, "http:locals");
    }
}

#[cfg(test)]
#[path = "http_fuzz_tests.rs"]
mod fuzz;
