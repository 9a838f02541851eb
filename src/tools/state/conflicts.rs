//! One session's SEARCH conflicts per target: after `CONFLICTS_BEFORE_EXHAUSTED` within
//! the window, the edit answers `recovery_exhausted` instead of inviting another retry.

use std::collections::HashMap;

/// SEARCH conflicts on one session and target before `recovery_exhausted`.
pub const CONFLICTS_BEFORE_EXHAUSTED: u32 = 3;
/// Window in which conflicts are counted (the mutation-receipt window of seed 003).
pub const CONFLICT_WINDOW_MS: i64 = 30 * 60 * 1000;
/// Targets counted per session: an agent retries a handful of files at a time; beyond
/// this the stalest count is forgotten (it only delays `recovery_exhausted`).
pub const MAX_CONFLICT_TARGETS: usize = 256;

/// Path → (conflicts, time of the last one).
#[derive(Default)]
pub struct Conflicts {
    counts: HashMap<String, (u32, i64)>,
}

impl Conflicts {
    /// Count a conflict on `path` at `now_ms`; the number within the window.
    pub fn count(&mut self, path: &str, now_ms: i64) -> u32 {
        if !self.counts.contains_key(path) && self.counts.len() >= MAX_CONFLICT_TARGETS {
            self.counts
                .retain(|_, (_, last)| now_ms - *last <= CONFLICT_WINDOW_MS);
            if self.counts.len() >= MAX_CONFLICT_TARGETS
                && let Some(stalest) = self
                    .counts
                    .iter()
                    .min_by_key(|(_, (_, last))| *last)
                    .map(|(p, _)| p.clone())
            {
                self.counts.remove(&stalest);
            }
        }
        let entry = self.counts.entry(path.to_string()).or_insert((0, now_ms));
        if now_ms - entry.1 > CONFLICT_WINDOW_MS {
            *entry = (0, now_ms);
        }
        entry.0 += 1;
        entry.1 = now_ms;
        entry.0
    }

    /// A committed edit of `path` ends its conflicts.
    pub fn clear(&mut self, path: &str) {
        self.counts.remove(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_within_the_window_and_stays_bounded() {
        let mut c = Conflicts::default();
        assert_eq!(c.count("/a", 0), 1);
        assert_eq!(c.count("/a", 1), 2);
        assert_eq!(c.count("/a", 2 + CONFLICT_WINDOW_MS), 1, "window restarts");
        c.clear("/a");
        assert_eq!(c.count("/a", 3), 1);
        for i in 0..MAX_CONFLICT_TARGETS as i64 * 2 {
            c.count(&format!("/f{i}"), 10 + i);
        }
        assert_eq!(c.counts.len(), MAX_CONFLICT_TARGETS);
    }
}
