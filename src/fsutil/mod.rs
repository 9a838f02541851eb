//! Filesystem helpers every layer may use (the lowest layer with `deadline`): private
//! directories today.
//!
//! Invariant: nothing here knows about sessions, tools or SQLite.

mod private_dir;

pub use private_dir::ensure_private_dir;
