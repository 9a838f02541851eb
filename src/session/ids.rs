//! Workspace canonicalisation and stable external session IDs.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Longest accepted path argument; longer input is refused rather than truncated.
pub const MAX_PATH_ARG_BYTES: usize = 4096;
/// Longest label kept from the workspace's directory name in an external ID.
const MAX_LABEL_CHARS: usize = 24;

/// Resolve a workspace argument to a canonical directory. A file resolves to its parent.
pub fn canonical_workspace(arg: &str) -> Result<PathBuf, String> {
    if arg.len() > MAX_PATH_ARG_BYTES {
        return Err(format!("path is longer than {MAX_PATH_ARG_BYTES} bytes"));
    }
    if arg.contains('\0') {
        return Err("path contains a NUL byte".into());
    }
    let p = Path::new(arg);
    if !p.is_absolute() {
        return Err("workspace_root must be an absolute path".into());
    }
    // Agents repeat the canonical path they were given: two system calls say it is one.
    if crate::fsutil::is_canonical_dir(arg) {
        return Ok(p.to_path_buf());
    }
    let canon = p.canonicalize().map_err(|e| e.to_string())?;
    if canon.is_dir() {
        Ok(canon)
    } else {
        canon
            .parent()
            .map(Path::to_path_buf)
            .ok_or_else(|| "not a directory".into())
    }
}

/// The stable external ID of the workspace-affinity session of `principal` in `workspace`:
/// `ws_<label>_<hash>`, where the hash covers both, so principals never collide.
pub fn workspace_thread_id(principal: &str, workspace: &Path) -> String {
    let mut h = Sha256::new();
    h.update(principal.as_bytes());
    h.update([0u8]);
    h.update(workspace.as_os_str().as_encoded_bytes());
    let digest = h.finalize();
    let hex = crate::hex::lower(&digest[..6]);
    format!("ws_{}_{hex}", label(workspace))
}

/// The external ID of a conversation-affinity session: `cv_<label>_<hash>` over
/// (principal, conversation identity, workspace). The identity itself never appears.
pub fn conversation_thread_id(principal: &str, identity: &str, workspace: &Path) -> String {
    let mut h = Sha256::new();
    for part in [
        principal.as_bytes(),
        identity.as_bytes(),
        workspace.as_os_str().as_encoded_bytes(),
    ] {
        h.update(part);
        h.update([0u8]);
    }
    let digest = h.finalize();
    let hex = crate::hex::lower(&digest[..6]);
    format!("cv_{}_{hex}", label(workspace))
}

/// A caller-owned thread ID, normalised: trimmed, only `[A-Za-z0-9_.-]` kept, at most 128
/// characters. `None` when nothing usable remains.
pub fn normalize_thread_id(raw: &str) -> Option<String> {
    let out: String = raw
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "_.-".contains(*c))
        .take(128)
        .collect();
    (!out.is_empty()).then_some(out)
}

fn label(workspace: &Path) -> String {
    let name = workspace
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let mut out = String::new();
    for c in name.chars() {
        if out.chars().count() >= MAX_LABEL_CHARS {
            break;
        }
        let keep = if c.is_ascii_alphanumeric() { c } else { '-' };
        if !(keep == '-' && out.ends_with('-')) {
            out.push(keep);
        }
    }
    let out = out.trim_matches('-').to_string();
    if out.is_empty() { "root".into() } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_scoped_by_principal() {
        let a = workspace_thread_id("local", Path::new("/home/u/My Project"));
        assert_eq!(
            a,
            workspace_thread_id("local", Path::new("/home/u/My Project"))
        );
        assert!(a.starts_with("ws_my-project_"), "{a}");
        assert_eq!(a.len(), "ws_my-project_".len() + 12);
        assert_ne!(
            a,
            workspace_thread_id("other", Path::new("/home/u/My Project"))
        );
        assert!(workspace_thread_id("p", Path::new("/")).starts_with("ws_root_"));
    }

    #[test]
    fn canonicalisation() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().canonicalize().unwrap();
        let file = real.join("f.txt");
        std::fs::write(&file, "x").unwrap();
        assert_eq!(canonical_workspace(real.to_str().unwrap()).unwrap(), real);
        assert_eq!(canonical_workspace(file.to_str().unwrap()).unwrap(), real);
        let dotted = format!("{}/./", real.display());
        assert_eq!(canonical_workspace(&dotted).unwrap(), real);
        assert!(canonical_workspace("relative/path").is_err());
        assert!(canonical_workspace("/definitely/not/here/winx").is_err());
        assert!(canonical_workspace("/tmp/\0x").is_err());
    }
}
