//! Per-session start turns: concurrent first calls of one session converge on one shell
//! (the second waits for the first's start, then attaches), while starts of different
//! sessions never wait on each other.
//!
//! Invariant: an entry exists only while someone holds or waits for its turn, so the map
//! is bounded by the starts in progress.

use parking_lot::{Mutex, MutexGuard};
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Default)]
pub struct StartLocks {
    turns: Mutex<HashMap<String, Arc<Mutex<()>>>>,
}

/// The start turn of one key; the next waiter's turn comes when it drops.
pub struct Turn<'a> {
    locks: &'a StartLocks,
    key: String,
    lock: Arc<Mutex<()>>,
}

impl StartLocks {
    /// Wait for `key`'s turn (only behind starts of the same key).
    pub fn turn(&self, key: &str) -> Turn<'_> {
        let lock = self
            .turns
            .lock()
            .entry(key.to_string())
            .or_default()
            .clone();
        Turn {
            locks: self,
            key: key.to_string(),
            lock,
        }
    }

    /// No start in progress or waiting.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.turns.lock().is_empty()
    }
}

impl Turn<'_> {
    /// Hold the turn while the returned guard lives.
    pub fn hold(&self) -> MutexGuard<'_, ()> {
        self.lock.lock()
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut turns = self.locks.turns.lock();
        // Clones are handed out only under this lock: 2 (the map's and ours) means nobody
        // else waits for this key.
        if Arc::strong_count(&self.lock) == 2 {
            turns.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::bounded;

    #[test]
    fn different_keys_never_wait_and_one_key_waits_its_turn() {
        let locks = Arc::new(StartLocks::default());
        let (held_tx, held_rx) = bounded::<()>(0);
        let (release_tx, release_rx) = bounded::<()>(0);
        let slow = {
            let locks = locks.clone();
            std::thread::spawn(move || {
                let turn = locks.turn("a");
                let _g = turn.hold();
                held_tx.send(()).unwrap();
                release_rx.recv().unwrap();
            })
        };
        held_rx.recv().unwrap();
        // Another key starts while "a" is starting.
        let (done_tx, done_rx) = bounded::<()>(1);
        let other = {
            let locks = locks.clone();
            std::thread::spawn(move || {
                let turn = locks.turn("b");
                let _g = turn.hold();
                done_tx.send(()).unwrap();
            })
        };
        done_rx.recv().unwrap();
        other.join().unwrap();
        // The same key is still taken.
        let again = locks.turn("a");
        assert!(again.lock.try_lock().is_none(), "a second start of a waits");
        release_tx.send(()).unwrap();
        slow.join().unwrap();
        assert!(again.lock.try_lock().is_some());
        drop(again);
        assert!(locks.is_empty(), "no entry outlives its starts");
    }
}
