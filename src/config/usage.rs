//! The command line's usage error, shared by the serve flags (`cli.rs`) and the operator
//! verbs (`opcli.rs`), which sit side by side and import neither each other.

use std::ffi::OsString;

/// A usage error: printed with a one-line hint, exit code 2.
#[derive(Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "error: {}\nhint: run 'winx-code-agent --help' for usage",
            self.0
        )
    }
}

pub fn usage(e: impl std::fmt::Display) -> UsageError {
    UsageError(e.to_string())
}

/// An argument as UTF-8, or a usage error naming it.
pub fn string(v: OsString) -> Result<String, UsageError> {
    v.into_string()
        .map_err(|v| usage(format!("argument is not valid UTF-8: {v:?}")))
}
