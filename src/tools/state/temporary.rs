//! The managed temporary directory's memory per session: the verdict of the last audit
//! (so a command is checked against the budget before it runs only when that is needed)
//! and the helper-map budget of `CodeMap` (seed 003).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Unique files one session may map as helpers (seed 003).
pub const HELPER_MAP_FILES: usize = 24;
/// Helper-map calls per session (seed 003).
pub const HELPER_MAP_CALLS: u32 = 64;

/// What the last audit of this session's directory found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Verdict {
    /// No audit in this process yet (a new or restarted adapter): audit before a command.
    #[default]
    Unknown,
    Under,
    /// Over budget or unmeasurable: audit again before a command, refuse ordinary ones.
    Over,
}

#[derive(Debug, Default)]
pub struct Temporary {
    pub verdict: Verdict,
    /// The last audit, while nothing it measured changed (`temporary::watch`).
    pub watch: Option<crate::temporary::watch::Watched>,
    helper_files: HashSet<PathBuf>,
    helper_calls: u32,
}

/// The helper-map budget as used (after a charge, or when refused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HelperUse {
    pub files: usize,
    pub calls: u32,
}

impl Temporary {
    /// Charge one helper map of `path`: `Err` (nothing charged) when a call beyond 64, or
    /// a 25th distinct file, would be needed.
    pub fn charge_helper_map(&mut self, path: &Path) -> Result<HelperUse, HelperUse> {
        let new_file = !self.helper_files.contains(path);
        let used = HelperUse {
            files: self.helper_files.len(),
            calls: self.helper_calls,
        };
        if used.calls >= HELPER_MAP_CALLS || (new_file && used.files >= HELPER_MAP_FILES) {
            return Err(used);
        }
        if new_file {
            self.helper_files.insert(path.to_path_buf());
        }
        self.helper_calls += 1;
        Ok(HelperUse {
            files: self.helper_files.len(),
            calls: self.helper_calls,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_maps_are_budgeted_by_files_and_calls() {
        let mut t = Temporary::default();
        for i in 0..HELPER_MAP_FILES {
            t.charge_helper_map(Path::new(&format!("/h/{i}"))).unwrap();
        }
        assert!(t.charge_helper_map(Path::new("/h/new")).is_err());
        let used = t.charge_helper_map(Path::new("/h/0")).unwrap();
        assert_eq!(used.files, HELPER_MAP_FILES);
        while t.charge_helper_map(Path::new("/h/1")).is_ok() {}
        assert_eq!(t.helper_calls, HELPER_MAP_CALLS);
    }
}
