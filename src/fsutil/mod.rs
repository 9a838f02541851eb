//! Filesystem helpers every layer may use (the lowest layer with `deadline`): private
//! directories, and a directory's names read with `getdents64`.
//!
//! Invariant: nothing here knows about sessions, tools or SQLite.

mod dir_names;
mod private_dir;

pub use dir_names::dir_names;

pub use private_dir::ensure_private_dir;
