//! Request cost limits (seed 003, "Resource limits and responses"): the per-source-IP
//! rate window, the global concurrency cap and the capped, deadline-bounded body reader.
//!
//! Invariant: every limit here is checked before `mcp::Server::handle` runs; none of them
//! reads the clock except through `Stopwatch` / `Deadline`.

use crate::deadline::{Deadline, Stopwatch};
use crossbeam_channel::{Receiver, Sender, bounded};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io::{ErrorKind, Read};
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
/// Bytes read from the socket per call while collecting a body.
const READ_CHUNK: usize = 64 * 1024;

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

/// The global cap on requests being served (from admission until both the answer is
/// written and the handler has returned).
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

/// Why a body could not be collected.
#[derive(Debug)]
pub enum BodyError {
    /// More than the cap arrived (counted as it streams, chunked bodies included): 413.
    TooLarge,
    /// The request deadline passed while the body was still arriving: 408.
    Timeout(&'static str),
    /// The client sent something unreadable (bad chunk framing) or hung up: 400.
    Io(std::io::Error),
}

/// Read a whole body, refusing more than `cap` bytes. Each socket read is bounded by the
/// connection's I/O timeout, so a stalled client returns control here and the request
/// deadline is checked between reads.
pub fn read_body(r: &mut dyn Read, cap: usize, deadline: Deadline) -> Result<Vec<u8>, BodyError> {
    let mut body = Vec::new();
    let mut chunk = vec![0u8; READ_CHUNK];
    loop {
        if deadline.expired() {
            return Err(BodyError::Timeout(deadline.name()));
        }
        match r.read(&mut chunk) {
            Ok(0) => return Ok(body),
            Ok(n) => {
                if body.len() + n > cap {
                    return Err(BodyError::TooLarge);
                }
                body.extend_from_slice(&chunk[..n]);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(BodyError::Io(e)),
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
    fn body_cap_counts_streamed_bytes() {
        let data = [b'x'; 100];
        let never = Deadline::never("test");
        assert_eq!(read_body(&mut &data[..], 100, never).unwrap().len(), 100);
        assert!(matches!(
            read_body(&mut &data[..], 99, never),
            Err(BodyError::TooLarge)
        ));
        let expired = Deadline::after("request timeout", Duration::ZERO);
        assert!(matches!(
            read_body(&mut &data[..], 100, expired),
            Err(BodyError::Timeout("request timeout"))
        ));
    }
}
