//! The operator's Herdr configuration (`WINX_HERDR_CONFIG`), read and validated on each
//! Herdr call — never at startup or by `Initialize` — so a fixed file takes effect without
//! a restart and a broken one fails only the Herdr calls.
//!
//! Invariant: the file is opened with `O_NONBLOCK | O_NOFOLLOW` and judged through its
//! descriptor, so a FIFO (or a device) at the path never blocks the worker (and its HTTP
//! slot) that reads it, and a symbolic link is refused. A `Config` exists only for a
//! private (no group/other permission), regular file of at most `MAX_FILE_BYTES` with no unknown fields, whose executable is an
//! existing executable regular file, whose socket path is absolute, whose deadline is in
//! `1..=30000` ms, and whose bindings name canonical workspaces and safe target ids.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub const MAX_FILE_BYTES: u64 = 256 * 1024;
pub const DEFAULT_DEADLINE_MS: u64 = 5000;
pub const MAX_DEADLINE_MS: u64 = 30_000;
/// Targets one principal and workspace may have (the `list` cap).
pub const MAX_TARGETS: usize = 32;
const MAX_NAME: usize = 128;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    executable: PathBuf,
    socket_path: PathBuf,
    deadline_ms: Option<u64>,
    bindings: Vec<RawBinding>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBinding {
    principal_key: String,
    workspace_root: PathBuf,
    targets: BTreeMap<String, String>,
}

/// A validated configuration.
#[derive(Debug)]
pub struct Config {
    pub executable: PathBuf,
    pub socket_path: PathBuf,
    pub deadline_ms: u64,
    /// (principal key, canonical workspace) → alias → Herdr target id.
    pub bindings: BTreeMap<(String, PathBuf), BTreeMap<String, String>>,
}

impl Config {
    /// The targets bound to `principal_key` in `workspace`, if any.
    pub fn targets(
        &self,
        principal_key: &str,
        workspace: &Path,
    ) -> Option<&BTreeMap<String, String>> {
        self.bindings
            .get(&(principal_key.to_string(), workspace.to_path_buf()))
    }
}

/// An alias or target id: printable ASCII of `[A-Za-z0-9._:@/-]`, not starting with `-`
/// (it is passed as one argument and must never read as an option).
fn safe_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME
        && !s.starts_with('-')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:@/-".contains(&b))
}

/// Read and validate the file at `path`.
pub fn load(path: &Path) -> Result<Config, String> {
    // Non-blocking: opening a FIFO for reading would otherwise wait for a writer.
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(path);
    let mut f = match opened {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err("it is a symbolic link; name the file itself".into());
        }
        Err(e) => return Err(format!("cannot open the file: {e}")),
    };
    let meta = f
        .metadata()
        .map_err(|e| format!("cannot stat the file: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "it is {}, not a regular file",
            kind(&meta.file_type())
        ));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "its mode is {mode:04o}; it must be private to its owner (chmod 600)"
        ));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "it is {} bytes; the limit is {MAX_FILE_BYTES}",
            meta.len()
        ));
    }
    let mut text = String::new();
    (&mut f)
        .take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read the file as UTF-8: {e}"))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("it is larger than {MAX_FILE_BYTES} bytes"));
    }
    let raw: Raw = serde_json::from_str(&text).map_err(|e| format!("invalid JSON: {e}"))?;
    validate(raw)
}

/// What a non-regular file is, for the refusal.
fn kind(t: &std::fs::FileType) -> &'static str {
    match () {
        _ if t.is_dir() => "a directory",
        _ if t.is_fifo() => "a FIFO",
        _ if t.is_socket() => "a socket",
        _ if t.is_char_device() || t.is_block_device() => "a device",
        _ => "a special file",
    }
}

fn validate(raw: Raw) -> Result<Config, String> {
    let exe = std::fs::canonicalize(&raw.executable)
        .map_err(|e| format!("executable does not resolve to a file: {e}"))?;
    let meta = std::fs::metadata(&exe).map_err(|e| format!("executable: {e}"))?;
    if !raw.executable.is_absolute() || !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err("executable must be an absolute path to an executable regular file".into());
    }
    if !raw.socket_path.is_absolute() {
        return Err("socket_path must be an absolute path".into());
    }
    let deadline_ms = raw.deadline_ms.unwrap_or(DEFAULT_DEADLINE_MS);
    if !(1..=MAX_DEADLINE_MS).contains(&deadline_ms) {
        return Err(format!("deadline_ms must be 1..={MAX_DEADLINE_MS}"));
    }
    let mut bindings = BTreeMap::new();
    for (i, b) in raw.bindings.into_iter().enumerate() {
        let key_ok = b.principal_key == "local"
            || b.principal_key
                .strip_prefix("http:")
                .is_some_and(|id| !id.is_empty() && id.len() <= MAX_NAME);
        if !key_ok {
            return Err(format!(
                "bindings[{i}].principal_key must be \"local\" or \"http:<principal id>\""
            ));
        }
        let canonical = std::fs::canonicalize(&b.workspace_root).ok();
        if !b.workspace_root.is_absolute() || canonical.as_deref() != Some(&b.workspace_root) {
            return Err(format!(
                "bindings[{i}].workspace_root must be an existing canonical absolute path"
            ));
        }
        if b.targets.is_empty() || b.targets.len() > MAX_TARGETS {
            return Err(format!(
                "bindings[{i}].targets must hold 1..={MAX_TARGETS} targets"
            ));
        }
        if let Some((alias, id)) = b
            .targets
            .iter()
            .find(|(a, t)| !safe_name(a) || !safe_name(t))
        {
            let _ = id;
            return Err(format!(
                "bindings[{i}].targets[{alias:?}]: aliases and ids are 1..={MAX_NAME} of \
                 A-Z a-z 0-9 . _ : @ / - and do not start with -"
            ));
        }
        if bindings
            .insert((b.principal_key, b.workspace_root), b.targets)
            .is_some()
        {
            return Err(format!(
                "bindings[{i}] repeats a principal_key and workspace_root"
            ));
        }
    }
    Ok(Config {
        executable: exe,
        socket_path: raw.socket_path,
        deadline_ms,
        bindings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// `load` on another thread, with a bound: a blocking open fails the test, not hangs it.
    fn load_within(path: &Path) -> Result<Config, String> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let path = path.to_path_buf();
        std::thread::spawn(move || {
            let _ = tx.send(load(&path));
        });
        rx.recv_timeout(Duration::from_secs(10))
            .expect("load blocked on the path")
    }

    #[test]
    fn a_fifo_a_directory_or_a_symlink_is_refused_without_blocking() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("herdr.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = load_within(&fifo).unwrap_err();
        assert!(e.contains("a FIFO, not a regular file"), "{e}");
        let e = load_within(tmp.path()).unwrap_err();
        assert!(e.contains("a directory"), "{e}");
        let real = tmp.path().join("real.json");
        std::fs::write(&real, "{}").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = tmp.path().join("link.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let e = load_within(&link).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        // The regular file itself is read (and judged on its contents).
        let e = load_within(&real).unwrap_err();
        assert!(e.contains("invalid JSON"), "{e}");
    }
}
