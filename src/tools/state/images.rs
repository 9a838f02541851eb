//! One session's fingerprints of delivered images (sha256 → summary), so an unchanged
//! repeat is answered with a compact reference instead of the bytes again.

use serde_json::Value;
use std::collections::VecDeque;

/// Fingerprints remembered per session.
pub const CACHE_PER_SESSION: usize = 64;

/// Least recently used first.
#[derive(Default)]
pub struct ImageCache {
    entries: VecDeque<(String, Value)>,
}

impl ImageCache {
    /// The summary of a delivered source, refreshed as most recently used.
    pub fn lookup(&mut self, sha: &str) -> Option<Value> {
        let at = self.entries.iter().position(|(s, _)| s == sha)?;
        let entry = self.entries.remove(at)?;
        let summary = entry.1.clone();
        self.entries.push_back(entry);
        Some(summary)
    }

    pub fn record(&mut self, sha: String, summary: Value) {
        self.entries.retain(|(s, _)| *s != sha);
        self.entries.push_back((sha, summary));
        while self.entries.len() > CACHE_PER_SESSION {
            self.entries.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cache_is_bounded_per_session_and_refreshes_on_hit() {
        let mut c = ImageCache::default();
        for i in 0..CACHE_PER_SESSION + 1 {
            c.record(format!("h{i}"), json!({}));
        }
        assert!(c.lookup("h0").is_none());
        assert!(c.lookup("h1").is_some());
        // h1 was refreshed, so the next insertion evicts h2 instead.
        c.record("new".into(), json!({}));
        assert!(c.lookup("h1").is_some());
        assert!(c.lookup("h2").is_none());
    }
}
