//! Deadlines as values. The only place that reads the monotonic clock for timeouts.
//!
//! Invariant: code elsewhere never does `Instant` arithmetic for a timeout; it builds a
//! `Deadline` and hands `Deadline::receiver()` to `crossbeam_channel::select!`.

use crossbeam_channel::{Receiver, after, never};
use std::time::{Duration, Instant};

/// A named point in monotonic time, or never.
#[derive(Clone, Copy, Debug)]
pub struct Deadline {
    name: &'static str,
    at: Option<Instant>,
}

impl Deadline {
    /// A deadline `d` from now.
    pub fn after(name: &'static str, d: Duration) -> Deadline {
        Deadline {
            name,
            at: Instant::now().checked_add(d),
        }
    }

    /// A deadline that never fires.
    pub fn never(name: &'static str) -> Deadline {
        Deadline { name, at: None }
    }

    /// Which deadline this is, for error messages ("shutdown grace", "request timeout").
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Time left, `None` for a deadline that never fires.
    pub fn remaining(&self) -> Option<Duration> {
        self.at
            .map(|at| at.saturating_duration_since(Instant::now()))
    }

    pub fn expired(&self) -> bool {
        self.remaining() == Some(Duration::ZERO)
    }

    /// A channel that yields once when the deadline passes (never, for `never`).
    pub fn receiver(&self) -> Receiver<Instant> {
        match self.remaining() {
            Some(left) => after(left),
            None => never(),
        }
    }
}

/// A monotonic stopwatch for measuring elapsed time (latency figures, usage durations).
#[derive(Clone, Copy, Debug)]
pub struct Stopwatch(Instant);

impl Stopwatch {
    pub fn start() -> Stopwatch {
        Stopwatch(Instant::now())
    }
    pub fn elapsed(&self) -> Duration {
        self.0.elapsed()
    }
}

/// Wall-clock milliseconds since the Unix epoch, for persisted timestamps.
pub fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::select;

    #[test]
    fn never_has_no_remaining_time() {
        let d = Deadline::never("test");
        assert_eq!(d.remaining(), None);
        assert!(!d.expired());
    }

    #[test]
    fn zero_deadline_fires_in_select() {
        let d = Deadline::after("zero", Duration::ZERO);
        let (_tx, rx) = crossbeam_channel::unbounded::<()>();
        let fired = select! {
            recv(rx) -> _ => false,
            recv(d.receiver()) -> _ => true,
        };
        assert!(fired);
        assert!(d.expired());
        assert_eq!(d.name(), "zero");
    }
}
