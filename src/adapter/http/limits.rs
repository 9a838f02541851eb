//! Request cost limits (seed 003, "Resource limits and responses"): the per-source-IP
//! rate window, the dispatch slots and the request-body memory, each with every
//! principal's share, and the count of requests being answered (what a drain waits for).
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
    /// Slots (or body bytes) held per principal. Only authenticated principals (a fixed
    /// set, from the configuration) are keys, so entries are kept at zero: taking a slot
    /// allocates nothing after a principal's first.
    by_principal: HashMap<Arc<str>, usize>,
}

/// One running handler's slot; released on drop.
pub struct Slot {
    slots: Arc<Slots>,
    principal: Arc<str>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.state.lock().give_back(&self.principal, 1);
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
    pub fn try_acquire(self: &Arc<Self>, principal: &str) -> Result<Slot, Refusal> {
        let mut st = self.state.lock();
        st.take(principal, 1, self.max, self.share)?;
        let principal = st.key(principal);
        Ok(Slot {
            slots: self.clone(),
            principal,
        })
    }
}

impl SlotState {
    /// Count `n` more for `principal` if neither `max` in all nor `share` for it is passed.
    fn take(&mut self, principal: &str, n: usize, max: usize, share: usize) -> Result<(), Refusal> {
        if self.total.saturating_add(n) > max {
            return Err(Refusal::Full);
        }
        let mine = self.by_principal.get(principal).copied().unwrap_or(0);
        if mine.saturating_add(n) > share {
            return Err(Refusal::ShareUsed);
        }
        self.total += n;
        *self.entry(principal) += n;
        Ok(())
    }

    fn entry(&mut self, principal: &str) -> &mut usize {
        if !self.by_principal.contains_key(principal) {
            self.by_principal.insert(Arc::from(principal), 0);
        }
        self.by_principal
            .get_mut(principal)
            .expect("inserted above")
    }

    /// The map's own key for `principal` (inserted at zero when new).
    fn key(&mut self, principal: &str) -> Arc<str> {
        self.entry(principal);
        let (k, _) = self
            .by_principal
            .get_key_value(principal)
            .expect("entry above");
        k.clone()
    }

    fn give_back(&mut self, principal: &str, n: usize) {
        self.total -= n;
        if let Some(mine) = self.by_principal.get_mut(principal) {
            *mine -= n;
        }
    }
}

/// Why a slot or body memory was refused (answer 503 `Retry-After`).
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Every slot (every byte of the budget) is in use.
    Full,
    /// This principal holds its whole share.
    ShareUsed,
}

/// How many largest bodies (the body cap) the body budget holds at once: two, so one
/// client's largest request never waits for another's, while 1,024 connections that each
/// declare 64 MiB and stall hold 128 MiB between them, not 64 GiB.
pub const BODY_BUDGET_BODIES: usize = 2;

/// Memory for request bodies, across every connection: a body's bytes are granted
/// before they are read — a declared length at once, a chunked body chunk by chunk, as
/// the capacity of the buffer it grows into — and held until its request is answered and
/// its handler has returned. Each principal may hold `max / principals` of it, never less
/// than one largest body, so a principal (a read-only one included) that stalls many
/// large bodies leaves the others theirs.
pub struct BodyBudget {
    max: usize,
    share: usize,
    state: Mutex<SlotState>,
}

/// Body bytes held for one request; given back on drop.
pub struct BodyGrant {
    budget: Arc<BodyBudget>,
    principal: Arc<str>,
    bytes: usize,
}

impl BodyBudget {
    /// `max` bytes shared by `principals`, each allowed at least `largest` (one body at
    /// the cap) and at most `max`.
    pub fn new(max: usize, largest: usize, principals: usize) -> Arc<BodyBudget> {
        Arc::new(BodyBudget {
            max,
            share: (max / principals.max(1)).max(largest).min(max),
            state: Mutex::new(SlotState::default()),
        })
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// Bytes granted now, across every principal.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.state.lock().total
    }

    /// A grant of no bytes yet for `principal`'s next body.
    pub fn grant(self: &Arc<Self>, principal: &str) -> BodyGrant {
        let principal = self.state.lock().key(principal);
        BodyGrant {
            budget: self.clone(),
            principal,
            bytes: 0,
        }
    }
}

impl BodyGrant {
    /// Hold `bytes` in all for this body (never fewer than now), or say why not; a refusal
    /// changes nothing.
    pub fn grow_to(&mut self, bytes: usize) -> Result<(), Refusal> {
        let Some(more) = bytes.checked_sub(self.bytes).filter(|m| *m > 0) else {
            return Ok(());
        };
        let b = &self.budget;
        b.state.lock().take(&self.principal, more, b.max, b.share)?;
        self.bytes = bytes;
        Ok(())
    }
}

impl Drop for BodyGrant {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.budget
                .state
                .lock()
                .give_back(&self.principal, self.bytes);
        }
    }
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
        assert_eq!(s.try_acquire("a").err(), Some(Refusal::ShareUsed));
        let _b1 = s.try_acquire("b").unwrap();
        let _b2 = s.try_acquire("b").unwrap();
        assert_eq!(s.try_acquire("c").err(), Some(Refusal::Full));
        drop(a1);
        assert!(s.try_acquire("a").is_ok());
        let lone = Slots::new(3, 1);
        let held: Vec<_> = (0..3).map(|_| lone.try_acquire("x").unwrap()).collect();
        assert_eq!(lone.try_acquire("x").err(), Some(Refusal::Full));
        drop(held);
        assert_eq!(Slots::new(2, 5).share(), 1);
    }

    #[test]
    fn body_bytes_are_capped_in_all_and_per_principal() {
        // 100 bytes for two principals: 50 each, never less than one 40-byte body.
        let b = BodyBudget::new(100, 40, 2);
        let mut a1 = b.grant("a");
        a1.grow_to(30).unwrap();
        a1.grow_to(10).unwrap();
        let mut a2 = b.grant("a");
        assert_eq!(a2.grow_to(21), Err(Refusal::ShareUsed));
        a2.grow_to(20).unwrap();
        let mut b1 = b.grant("b");
        b1.grow_to(50).unwrap();
        assert_eq!(b.held(), 100);
        assert_eq!(b.grant("c").grow_to(1), Err(Refusal::Full));
        drop(a1);
        assert_eq!(b.held(), 70);
        let mut a3 = b.grant("a");
        a3.grow_to(30).unwrap();
        drop((a2, a3, b1));
        assert_eq!(b.held(), 0);
        // A lone principal holds it all; many still get one largest body each.
        assert!(b.grant("x").grow_to(50).is_ok());
        let lone = BodyBudget::new(100, 40, 1);
        assert!(lone.grant("x").grow_to(100).is_ok());
        let many = BodyBudget::new(100, 40, 10);
        assert!(many.grant("x").grow_to(40).is_ok());
        assert_eq!(many.grant("x").grow_to(41), Err(Refusal::ShareUsed));
    }
}
