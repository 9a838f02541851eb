//! Filesystem helpers every layer may use (the lowest layer with `deadline`): private
//! directories, a directory's names read with `getdents64`, and linkless opens (`openat2`).
//!
//! Invariant: nothing here knows about sessions, tools or SQLite.

mod dir_names;
mod no_links;
mod private_dir;

pub use dir_names::dir_names;
pub use no_links::{is_canonical_dir, open_dir_without_links};

pub use private_dir::ensure_private_dir;
