//! HTTP principals and their tokens: the `Principal` an authenticated request names, its
//! key, and reading and checking a token. Below `http` (the credential source) and
//! `principals` (the principal config), which both build principals.
//!
//! Invariant: a `Principal` carries the SHA-256 digest of its token, never the token.

use super::vars::ConfigError;
use crate::tools::policy::ToolPolicy;
use sha2::{Digest, Sha256};
use std::fmt;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// 256 bits of hex-encoded randomness is 64 bytes; 32 is the floor seed 003 sets.
pub const MIN_TOKEN_BYTES: usize = 32;
/// The principal name of a single-token server.
pub const SINGLE_PRINCIPAL: &str = "default";
/// A token file larger than this is certainly a mistake.
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// An authenticated identity: its name, the digest of its token and its tool policy.
#[derive(Clone)]
pub struct Principal {
    pub name: String,
    /// What sessions, history, tasks and requests are keyed by (`http:<name>`): never
    /// equal to the stdio user's `local`, whatever the name (`key`).
    pub key: String,
    pub token_digest: [u8; 32],
    pub policy: ToolPolicy,
    /// Where the token was read from, so file tools can refuse it.
    pub token_file: Option<PathBuf>,
    /// The variable the token was read from (`token_env`), so shells never get it.
    pub token_env: Option<String>,
}

/// The key of the HTTP principal `name` (seed 000's Herdr bindings use the same form):
/// the stdio user is `local`, and no HTTP key can be (names hold no `:`).
pub fn key(name: &str) -> String {
    format!("http:{name}")
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Principal")
            .field("name", &self.name)
            .field("policy", &self.policy.source)
            .finish_non_exhaustive()
    }
}

fn err(msg: impl Into<String>) -> ConfigError {
    ConfigError(msg.into())
}

/// SHA-256 of a token: what is kept and compared.
pub fn token_digest(token: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(&Sha256::digest(token));
    out
}

/// Trim surrounding whitespace (files usually end in a newline) and check the rest.
pub fn check_token(raw: &str, from: &str, weak_ok: bool) -> Result<String, ConfigError> {
    let token = raw.trim_matches(|c: char| c.is_ascii_whitespace());
    if token.is_empty() {
        return Err(err(format!("the token from {from} is empty")));
    }
    if !token.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(err(format!(
            "the token from {from} must be visible ASCII without spaces (it travels in an \
             Authorization header)"
        )));
    }
    if token.len() < MIN_TOKEN_BYTES && !weak_ok {
        return Err(err(format!(
            "the token from {from} has {} bytes; at least {MIN_TOKEN_BYTES} are required \
             (create one with `openssl rand -hex 32`; --allow-weak-token is for local tests only)",
            token.len()
        )));
    }
    Ok(token.to_string())
}

/// Read a token file that must be a regular, non-symlink file without group/other access.
/// Opened with `O_NOFOLLOW` and checked through the open descriptor (no check-then-open race).
pub fn read_token_file(path: &Path) -> Result<String, ConfigError> {
    let shown = path.display();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(nix::libc::ELOOP) {
                err(format!(
                    "token file {shown} is a symlink; point at the file itself"
                ))
            } else {
                err(format!("cannot open token file {shown}: {e}"))
            }
        })?;
    let meta = file
        .metadata()
        .map_err(|e| err(format!("cannot stat token file {shown}: {e}")))?;
    if !meta.is_file() {
        return Err(err(format!("token file {shown} is not a regular file")));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(err(format!(
            "token file {shown} is accessible by group or others (mode {:o}); run chmod 600 {shown}",
            meta.mode() & 0o777
        )));
    }
    if meta.len() > MAX_TOKEN_FILE_BYTES {
        return Err(err(format!(
            "token file {shown} is larger than {MAX_TOKEN_FILE_BYTES} bytes"
        )));
    }
    let mut s = String::new();
    file.take(MAX_TOKEN_FILE_BYTES)
        .read_to_string(&mut s)
        .map_err(|e| err(format!("cannot read token file {shown}: {e}")))?;
    Ok(s)
}
