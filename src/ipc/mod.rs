//! Talking to session processes over their Unix sockets and readiness pipes: the client of
//! a guardian socket, where those sockets live, and the verdict a started process writes.
//! Both the adapter (`runtime`) and winxd (`daemon`) use it; it imports only `wire` and
//! `deadline`, so neither of them needs the other.

pub mod client;
pub mod ready;

pub use client::{ClientError, GuardianClient};

use std::path::{Path, PathBuf};

/// Where guardians of this runtime directory put their sockets.
pub fn guardian_socket(runtime_dir: &Path, key: &str) -> PathBuf {
    runtime_dir.join("g").join(format!("{key}.sock"))
}
