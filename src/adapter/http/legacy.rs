//! Legacy (handshake-era) HTTP sessions: the `Mcp-Session-Id` issued at `initialize`,
//! owned by one principal, ended by `DELETE` or evicted when idle.
//!
//! Invariant: a session is visible only to the principal that created it; to anyone else
//! it is indistinguishable from an unknown session (404).

use crate::deadline::Stopwatch;
use crate::mcp::origin::Client;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::Duration;

/// Sessions kept at once. A client that initializes in a loop evicts its own oldest
/// sessions instead of growing memory without bound.
pub const MAX_SESSIONS: usize = 4096;
/// A session unused this long is forgotten (the shells behind it are not affected).
pub const IDLE_TTL: Duration = Duration::from_secs(24 * 3600);
/// 256 bits from the OS generator, hex-encoded: visible ASCII, unguessable.
const ID_BYTES: usize = 32;

struct Entry {
    principal: String,
    last_used: Duration,
    /// The client its `initialize` described (for the usage log).
    client: Option<Client>,
}

pub struct Sessions {
    clock: Stopwatch,
    max: usize,
    map: Mutex<HashMap<String, Entry>>,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions::with_capacity(MAX_SESSIONS)
    }
}

impl Sessions {
    pub fn with_capacity(max: usize) -> Sessions {
        Sessions {
            clock: Stopwatch::start(),
            max,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// Issue a new session for `principal`. Fails only if the OS has no randomness.
    pub fn create(&self, principal: &str) -> Result<String, getrandom::Error> {
        let mut raw = [0u8; ID_BYTES];
        getrandom::fill(&mut raw)?;
        let id = crate::hex::lower(&raw);
        let now = self.clock.elapsed();
        let mut map = self.map.lock();
        map.retain(|_, e| now.saturating_sub(e.last_used) < IDLE_TTL);
        while map.len() >= self.max {
            let Some(oldest) = map
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            map.remove(&oldest);
        }
        map.insert(
            id.clone(),
            Entry {
                principal: principal.to_string(),
                last_used: now,
                client: None,
            },
        );
        Ok(id)
    }

    /// Whether `id` is a live session of `principal` (and mark it used).
    pub fn touch(&self, id: &str, principal: &str) -> bool {
        let now = self.clock.elapsed();
        let mut map = self.map.lock();
        match map.get_mut(id) {
            Some(e) if e.principal == principal && now.saturating_sub(e.last_used) < IDLE_TTL => {
                e.last_used = now;
                true
            }
            _ => false,
        }
    }

    /// Remember the client that opened session `id`.
    pub fn remember(&self, id: &str, client: Client) {
        if let Some(e) = self.map.lock().get_mut(id) {
            e.client = Some(client);
        }
    }

    /// The client that opened `principal`'s session `id`, if known.
    pub fn client(&self, id: &str, principal: &str) -> Option<Client> {
        let map = self.map.lock();
        map.get(id)
            .filter(|e| e.principal == principal)
            .and_then(|e| e.client.clone())
    }

    /// End `principal`'s session `id`; false when there was no such session.
    pub fn end(&self, id: &str, principal: &str) -> bool {
        let mut map = self.map.lock();
        match map.get(id) {
            Some(e) if e.principal == principal => {
                map.remove(id);
                true
            }
            _ => false,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_belong_to_their_principal() {
        let s = Sessions::default();
        let id = s.create("a").unwrap();
        assert_eq!(id.len(), 2 * ID_BYTES);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(s.touch(&id, "a"));
        assert!(!s.touch(&id, "b"));
        assert!(!s.end(&id, "b"));
        assert!(s.end(&id, "a"));
        assert!(!s.touch(&id, "a"));
        assert_ne!(s.create("a").unwrap(), s.create("a").unwrap());
        let id = s.create("a").unwrap();
        let c = Client {
            name: Some("x".into()),
            ..Default::default()
        };
        s.remember(&id, c.clone());
        assert_eq!(s.client(&id, "a"), Some(c));
        assert_eq!(s.client(&id, "b"), None);
    }

    #[test]
    fn capacity_evicts_the_least_recently_used() {
        let s = Sessions::with_capacity(2);
        let a = s.create("p").unwrap();
        let b = s.create("p").unwrap();
        assert!(s.touch(&a, "p"));
        let c = s.create("p").unwrap();
        assert_eq!(s.len(), 2);
        assert!(s.touch(&a, "p") && s.touch(&c, "p"));
        assert!(!s.touch(&b, "p"));
    }
}
