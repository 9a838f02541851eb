//! File tools: `ReadFiles` and the edit tools over the one edit engine.

pub mod context;
pub mod edit_error;
pub mod edits;
pub mod image;
pub mod multi;
pub mod permits;
pub mod read_files;
pub mod receipts;
pub mod undo;
pub mod verify;
pub mod write;

use std::path::{Path, PathBuf};

/// An argument path: absolute as given, relative ones taken from the workspace.
pub fn absolute(workspace: &Path, p: &str) -> PathBuf {
    let path = Path::new(p);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        workspace.join(path)
    }
}

/// Where the per-target edit locks live (`edit::lock`), shared by every adapter on the
/// state directory.
pub fn lock_dir(ctx: &crate::tools::ToolContext) -> std::path::PathBuf {
    ctx.sessions.state_dir().join("locks")
}
