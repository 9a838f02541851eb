//! Session state: everything the tools keep in memory for one session — read permits,
//! undo checkpoints, mutation receipts in flight, SEARCH conflict counts, fingerprints of
//! delivered images — in one registry keyed by session (principal + thread ID), bounded
//! in the number of sessions. The MCP layer creates the registry and hands it to every
//! call through `ToolContext`.
//!
//! Invariant: no tool keeps per-session state in a process-global `static`; it lives in a
//! `SessionState` of this registry, and each part has its own lock.
//! Invariant: the registry's own lock is held only to find, insert or evict an entry
//! (never across I/O or another lock), so two different sessions never wait on each
//! other's work.
//! Invariant: a session in use (its `Arc` held by a running call) is never evicted, so a
//! call and an identical one in flight always share one state (single-flight holds).

pub mod conflicts;
pub mod flights;
pub mod images;
pub mod temporary;
pub mod undo;

use crate::files::coverage::Coverage;
use crate::lru::Lru;
use parking_lot::Mutex;
use std::sync::Arc;

/// Sessions whose state is kept per process (`WINX_SESSION_STATES`). 32 times winxd's
/// default guardian quota (32 live shells), so every session with a live shell keeps its
/// state while a long-lived HTTP server with many principals and thread IDs holds at most
/// this many: an idle session costs a few KiB, a busy one its per-part bounds (undo's
/// 64 MiB is the largest). Beyond it the least recently used idle session is forgotten.
pub const DEFAULT_MAX_SESSIONS: usize = 1_024;
/// Largest accepted `WINX_SESSION_STATES`.
pub const MAX_SESSIONS_LIMIT: usize = 1_000_000;

/// The registry key of a session: principal-scoped thread ID.
pub fn session_key(principal: &str, thread_id: &str) -> String {
    format!("{principal}\u{0}{thread_id}")
}

/// One session's in-memory state; each part behind its own lock.
#[derive(Default)]
pub struct SessionState {
    /// Read permits (`files::coverage`): on eviction, reads come back from the state store
    /// (`store::permits`); permits an edit granted are re-requested with `needs_read`.
    pub coverage: Coverage,
    /// Pre-edit bytes of the last edits (best effort: lost on eviction).
    pub undo: Mutex<undo::Checkpoints>,
    /// Mutation-receipt keys of this session's calls in flight (receipts themselves are in
    /// SQLite).
    pub flights: flights::Flights,
    /// SEARCH conflicts per target within the window.
    pub conflicts: Mutex<conflicts::Conflicts>,
    /// Fingerprints of images delivered (best effort: lost on eviction).
    pub images: Mutex<images::ImageCache>,
    /// The managed temporary directory: last audit verdict, helper-map budget (lost on
    /// eviction: the next command is audited first; the helper budget starts again).
    pub temporary: Mutex<temporary::Temporary>,
}

/// The registry: at most `limit` sessions, least recently used evicted first.
pub struct SessionStates {
    limit: usize,
    lru: Mutex<Lru<String, Arc<SessionState>>>,
    /// CodeMap's outlines of scanned files, shared by every session of this server: an
    /// entry is derived from a file alone and validated against its stat on each use
    /// (`codemap::cache`).
    pub codemap: crate::codemap::cache::SymbolCache,
}

impl SessionStates {
    /// A registry keeping at most `limit` (≥ 1) sessions that are not in use.
    pub fn new(limit: usize) -> SessionStates {
        SessionStates {
            limit: limit.max(1),
            lru: Mutex::new(Lru::default()),
            codemap: crate::codemap::cache::SymbolCache::default(),
        }
    }

    /// The state of `key` (see `session_key`), created when absent; marks it most
    /// recently used and evicts beyond the limit.
    pub fn get(&self, key: &str) -> Arc<SessionState> {
        let key = key.to_string();
        let mut lru = self.lru.lock();
        if let Some(state) = lru.get(&key) {
            return state.clone();
        }
        let state = Arc::new(SessionState::default());
        lru.insert(key, state.clone());
        // Sessions in use (a running call holds their `Arc`) stay, so the registry may
        // briefly hold more: at most one more per call running at that moment. Counted
        // under the registry lock: only this lock hands out new `Arc`s, so a count of 1
        // (the map's own) cannot grow while we look.
        let over = lru.evict(self.limit, |s| Arc::strong_count(s) == 1);
        if over > 0 {
            log::debug!("session states: {over} over the limit while in use");
        }
        state
    }

    /// The state of the session of `thread_id` of `principal`.
    pub fn of(&self, principal: &str, thread_id: &str) -> Arc<SessionState> {
        self.get(&session_key(principal, thread_id))
    }

    /// Sessions held now.
    pub fn len(&self) -> usize {
        self.lru.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Is `key` held (without touching it)?
    pub fn contains(&self, key: &str) -> bool {
        self.lru.lock().contains_key(&key.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::bounded;
    use std::path::Path;

    #[test]
    fn the_registry_keeps_the_most_recently_used_sessions() {
        let states = SessionStates::new(8);
        for i in 0..8 {
            states
                .get(&format!("s{i}"))
                .coverage
                .grant(Path::new("/w/a"), "r", (1, 1));
        }
        // s0 is used again, so s1..s3 are the oldest when three more arrive.
        states.get("s0");
        for i in 8..11 {
            states.get(&format!("s{i}"));
        }
        assert_eq!(states.len(), 8);
        for gone in ["s1", "s2", "s3"] {
            assert!(!states.contains(gone), "{gone} should be evicted");
        }
        for kept in ["s0", "s4", "s7", "s10"] {
            assert!(states.contains(kept), "{kept} should be kept");
        }
        // s0 kept its permits; an evicted session starts over (reads are asked again).
        assert!(
            states
                .get("s0")
                .coverage
                .unread(Path::new("/w/a"), "r", (1, 1))
                .is_empty()
        );
        assert_eq!(
            states
                .get("s1")
                .coverage
                .unread(Path::new("/w/a"), "r", (1, 1)),
            vec![(1, 1)]
        );
        assert_eq!(states.len(), 8);
    }

    #[test]
    fn many_more_sessions_than_the_limit_stay_bounded() {
        let states = SessionStates::new(100);
        for i in 0..10_000 {
            states.get(&session_key("p", &format!("t{i}")));
        }
        assert_eq!(states.len(), 100);
        assert!(states.contains(&session_key("p", "t9999")));
        assert!(!states.contains(&session_key("p", "t9899")));
    }

    #[test]
    fn a_session_in_use_is_never_evicted() {
        let states = SessionStates::new(2);
        let held = states.get("busy");
        for i in 0..10 {
            states.get(&format!("s{i}"));
        }
        assert!(states.contains("busy"));
        assert!(Arc::ptr_eq(&held, &states.get("busy")));
        drop(held);
        states.get("x");
        states.get("y");
        assert!(!states.contains("busy"));
        assert_eq!(states.len(), 2);
    }

    #[test]
    fn principals_never_share_a_session() {
        let states = SessionStates::new(8);
        assert!(!Arc::ptr_eq(&states.of("a", "t"), &states.of("b", "t")));
        assert!(Arc::ptr_eq(&states.of("a", "t"), &states.of("a", "t")));
    }

    /// One session's part held locked (as a slow undo holds its checkpoints across file
    /// locks) never blocks another session: its calls complete while the first still holds.
    #[test]
    fn a_slow_session_never_blocks_another() {
        let states = Arc::new(SessionStates::new(4));
        let (held_tx, held_rx) = bounded::<()>(0);
        let (release_tx, release_rx) = bounded::<()>(0);
        let slow = {
            let states = states.clone();
            std::thread::spawn(move || {
                let state = states.of("p", "slow");
                let _undo = state.undo.lock();
                let _images = state.images.lock();
                let _conflicts = state.conflicts.lock();
                let _flight = state.flights.enter("k");
                held_tx.send(()).unwrap();
                release_rx.recv().unwrap();
            })
        };
        held_rx.recv().unwrap();
        // Every part of another session, and the registry itself, are free meanwhile.
        let (done_tx, done_rx) = bounded::<()>(1);
        let other = {
            let states = states.clone();
            std::thread::spawn(move || {
                let state = states.of("p", "fast");
                state.undo.lock().push(Vec::new());
                state
                    .images
                    .lock()
                    .record("sha".into(), serde_json::json!({}));
                state.conflicts.lock().count("/w/a", 0);
                drop(state.flights.enter("k"));
                state.coverage.grant(Path::new("/w/a"), "r", (1, 1));
                states.of("p", "third");
                done_tx.send(()).unwrap();
            })
        };
        // The slow session still holds everything: the other finished without it.
        done_rx.recv().unwrap();
        other.join().unwrap();
        let slow_state = states.of("p", "slow");
        assert!(slow_state.undo.try_lock().is_none(), "still held");
        release_tx.send(()).unwrap();
        slow.join().unwrap();
        assert!(slow_state.undo.try_lock().is_some());
    }
}
