//! Request cost limits (seed 003, "Resource limits and responses"): the per-source-IP
//! rate window, the dispatch slots with each principal's share, and the count of
//! requests being answered (what a drain waits for).
//!
//! Invariant: every limit here is checked before `mcp::Server::handle` runs; none of them
//! reads the clock except through `Stopwatch` / `Deadline`.

use crate::deadline::Stopwatch;
use crossbeam_channel::{Receiver, Sender, bounded};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// `Retry-After` on 429 and 503: both conditions clear within about a second.
pub const RETRY_AFTER_SECS: &str = "1";
/// Source addresses remembered by the rate limiter; beyond this, full (idle) buckets are
/// forgotten first, and a flood of fresh addresses is refused rather than remembered.
const MAX_TRACKED_IPS: usize = 65_536;
/// The window the per-minute rate is spread over.
const WINDOW: Duration = Duration::from_secs(60);

/// Per-source-IP token bucket: `per_minute` requests of burst, refilled evenly over a
/// minute. Forwarded-IP headers are never consulted: the key is the TCP peer.
pub struct RateLimiter {
    per_minute: u32,
    clock: Stopwatch,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Duration,
}

impl RateLimiter {
    pub fn new(per_minute: u32) -> RateLimiter {
        RateLimiter {
            per_minute,
            clock: Stopwatch::start(),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Take one request from `ip`'s window; false means answer 429.
    pub fn allow(&self, ip: IpAddr) -> bool {
        self.allow_at(ip, self.clock.elapsed())
    }

    /// `allow` at an explicit point on the limiter's clock (tests inject time here).
    pub fn allow_at(&self, ip: IpAddr, now: Duration) -> bool {
        let cap = f64::from(self.per_minute);
        let refill = |b: Bucket| -> f64 {
            let per_sec = cap / WINDOW.as_secs_f64();
            (b.tokens + now.saturating_sub(b.at).as_secs_f64() * per_sec).min(cap)
        };
        let mut map = self.buckets.lock();
        if !map.contains_key(&ip) && map.len() >= MAX_TRACKED_IPS {
            map.retain(|_, b| refill(*b) < cap);
            if map.len() >= MAX_TRACKED_IPS {
                return false;
            }
        }
        let b = map.entry(ip).or_insert(Bucket {
            tokens: cap,
            at: now,
        });
        b.tokens = refill(*b);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// A counted set of permits with an idle signal: the requests being answered (from
/// admission until the answer is written), which a drain waits for.
pub struct Concurrency {
    max: usize,
    active: AtomicUsize,
    idle_tx: Sender<()>,
    idle_rx: Receiver<()>,
}

/// One admitted request; releases its slot on drop.
pub struct Permit(Arc<Concurrency>);

impl Drop for Permit {
    fn drop(&mut self) {
        if self.0.active.fetch_sub(1, Ordering::SeqCst) == 1 {
            // Wakes a drain waiting for idleness; a full channel already says so.
            let _ = self.0.idle_tx.try_send(());
        }
    }
}

impl Concurrency {
    pub fn new(max: usize) -> Arc<Concurrency> {
        let (idle_tx, idle_rx) = bounded(1);
        Arc::new(Concurrency {
            max,
            active: AtomicUsize::new(0),
            idle_tx,
            idle_rx,
        })
    }

    /// A slot, or `None` when `max` requests are already being served (answer 503).
    pub fn try_acquire(self: &Arc<Self>) -> Option<Permit> {
        self.active
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.max).then_some(n + 1)
            })
            .ok()
            .map(|_| Permit(self.clone()))
    }

    pub fn active(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }

    /// Fires whenever the last permit is released (may hold one stale wake-up).
    pub fn idle_receiver(&self) -> &Receiver<()> {
        &self.idle_rx
    }
}

/// Dispatch slots: the global cap (`--max-concurrency`) on requests whose handler is
/// running, and each principal's share of it, so one principal's load (long tool calls,
/// a burst) cannot take every slot from the others. A slot is taken only once the body
/// is in memory: a slow client holds its connection, never a slot.
pub struct Slots {
    max: usize,
    share: usize,
    state: Mutex<SlotState>,
}

#[derive(Default)]
struct SlotState {
    total: usize,
    /// Slots held per principal. Only authenticated principals (a fixed set, from the
    /// configuration) are keys, so entries are kept at zero: taking a slot allocates
    /// nothing after a principal's first.
    by_principal: HashMap<Arc<str>, usize>,
}

/// One running handler's slot; released on drop.
pub struct Slot {
    slots: Arc<Slots>,
    principal: Arc<str>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut st = self.slots.state.lock();
        st.total -= 1;
        if let Some(n) = st.by_principal.get_mut(&*self.principal) {
            *n -= 1;
        }
    }
}

impl Slots {
    /// `max` slots shared by `principals`: each may hold `max / principals` (at least
    /// one), so a lone principal has them all.
    pub fn new(max: usize, principals: usize) -> Arc<Slots> {
        Arc::new(Slots {
            max,
            share: (max / principals.max(1)).max(1),
            state: Mutex::new(SlotState::default()),
        })
    }

    pub fn share(&self) -> usize {
        self.share
    }

    /// A slot for `principal`, or why not (answer 503).
    pub fn try_acquire(self: &Arc<Self>, principal: &str) -> Result<Slot, SlotRefusal> {
        let mut st = self.state.lock();
        if st.total >= self.max {
            return Err(SlotRefusal::Full);
        }
        let mine = st.by_principal.get(principal).copied().unwrap_or(0);
        if mine >= self.share {
            return Err(SlotRefusal::ShareUsed);
        }
        st.total += 1;
        let key = match st.by_principal.get_key_value(principal) {
            Some((k, _)) => k.clone(),
            None => Arc::from(principal),
        };
        *st.by_principal.entry(key.clone()).or_insert(0) += 1;
        Ok(Slot {
            slots: self.clone(),
            principal: key,
        })
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum SlotRefusal {
    /// Every slot is in use.
    Full,
    /// This principal holds its whole share.
    ShareUsed,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_refills_over_the_window() {
        let rl = RateLimiter::new(2);
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let other: IpAddr = "127.0.0.2".parse().unwrap();
        let t0 = Duration::from_secs(1);
        assert!(rl.allow_at(ip, t0));
        assert!(rl.allow_at(ip, t0));
        assert!(!rl.allow_at(ip, t0));
        // Another source has its own window.
        assert!(rl.allow_at(other, t0));
        // Two per minute: one token back after 30 s.
        assert!(!rl.allow_at(ip, t0 + Duration::from_secs(29)));
        assert!(rl.allow_at(ip, t0 + Duration::from_secs(60)));
    }

    #[test]
    fn concurrency_cap_and_idle_wait() {
        let c = Concurrency::new(2);
        let a = c.try_acquire().unwrap();
        let b = c.try_acquire().unwrap();
        assert!(c.try_acquire().is_none());
        drop(a);
        assert_eq!(c.active(), 1);
        assert!(c.idle_receiver().try_recv().is_err());
        drop(b);
        assert_eq!(c.active(), 0);
        assert!(c.idle_receiver().try_recv().is_ok());
    }

    #[test]
    fn each_principal_is_held_to_its_share() {
        let s = Slots::new(4, 2);
        let a1 = s.try_acquire("a").unwrap();
        let _a2 = s.try_acquire("a").unwrap();
        assert_eq!(s.try_acquire("a").err(), Some(SlotRefusal::ShareUsed));
        let _b1 = s.try_acquire("b").unwrap();
        let _b2 = s.try_acquire("b").unwrap();
        assert_eq!(s.try_acquire("c").err(), Some(SlotRefusal::Full));
        drop(a1);
        assert!(s.try_acquire("a").is_ok());
        let lone = Slots::new(3, 1);
        let held: Vec<_> = (0..3).map(|_| lone.try_acquire("x").unwrap()).collect();
        assert_eq!(lone.try_acquire("x").err(), Some(SlotRefusal::Full));
        drop(held);
        assert_eq!(Slots::new(2, 5).share(), 1);
    }
}
