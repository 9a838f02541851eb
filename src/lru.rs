//! `Lru`: a map bounded by least-recent use, for state kept per session (the tools'
//! session-state registry, the live session bindings). Lookups and inserts are
//! O(log n); eviction walks from the oldest entry and may skip entries the caller says
//! are in use.
//!
//! Invariant: the map and its use order always hold the same keys.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

pub struct Lru<K, V> {
    tick: u64,
    /// Key → (value, its last use).
    map: HashMap<K, (V, u64)>,
    /// Last use → key, oldest first.
    order: BTreeMap<u64, K>,
}

impl<K: Hash + Eq + Clone, V> Default for Lru<K, V> {
    fn default() -> Self {
        Lru {
            tick: 0,
            map: HashMap::new(),
            order: BTreeMap::new(),
        }
    }
}

impl<K: Hash + Eq + Clone, V> Lru<K, V> {
    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// The value of `key`, marked most recently used.
    pub fn get(&mut self, key: &K) -> Option<&V> {
        let tick = self.next_tick();
        let (value, used) = self.map.get_mut(key)?;
        self.order.remove(used);
        *used = tick;
        self.order.insert(tick, key.clone());
        Some(value)
    }

    /// Insert or replace `key`'s value, marked most recently used.
    pub fn insert(&mut self, key: K, value: V) {
        let tick = self.next_tick();
        if let Some((_, used)) = self.map.insert(key.clone(), (value, tick)) {
            self.order.remove(&used);
        }
        self.order.insert(tick, key);
    }

    pub fn remove(&mut self, key: &K) -> Option<V> {
        let (value, used) = self.map.remove(key)?;
        self.order.remove(&used);
        Some(value)
    }

    /// Without marking it used.
    pub fn contains_key(&self, key: &K) -> bool {
        self.map.contains_key(key)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Drop the least recently used entries for which `idle` holds until at most `limit`
    /// remain (fewer are dropped when too few are idle). Returns how many are still over.
    pub fn evict(&mut self, limit: usize, idle: impl Fn(&V) -> bool) -> usize {
        let excess = self.map.len().saturating_sub(limit);
        if excess == 0 {
            return 0;
        }
        let victims: Vec<(u64, K)> = self
            .order
            .iter()
            .filter(|(_, k)| self.map.get(*k).is_some_and(|(v, _)| idle(v)))
            .take(excess)
            .map(|(t, k)| (*t, k.clone()))
            .collect();
        let dropped = victims.len();
        for (tick, key) in victims {
            self.order.remove(&tick);
            self.map.remove(&key);
        }
        excess - dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_used_idle_entries() {
        let mut l: Lru<u32, bool> = Lru::default();
        for k in 0..6 {
            l.insert(k, k != 1);
        }
        l.get(&0);
        // 1 is busy (false): 2 and 3 go, 0 was used again.
        assert_eq!(l.evict(4, |idle| *idle), 0);
        assert_eq!(l.len(), 4);
        for (k, kept) in [
            (0, true),
            (1, true),
            (2, false),
            (3, false),
            (4, true),
            (5, true),
        ] {
            assert_eq!(l.contains_key(&k), kept, "{k}");
        }
        assert_eq!(l.evict(0, |idle| *idle), 1, "the busy one stays");
        assert_eq!(l.remove(&1), Some(false));
        assert!(l.is_empty() && l.order.is_empty());
        l.insert(7, true);
        l.insert(7, true);
        assert_eq!((l.len(), l.order.len()), (1, 1));
    }
}
