//! Waiting in tests: a named [`Deadline`] and [`eventually`], which polls a condition until
//! it holds or the deadline passes.
//!
//! Invariant: this file is the only place under `tests/` that sleeps (`tests/it/tidy.rs`
//! checks it). A test synchronises on an event (a line, a socket, a FIFO gaining its
//! reader) where the binary offers one; where it offers none (a task's status in the
//! store, a thread count in `/proc`), it polls through `eventually`, never with a sleep of
//! its own.
#![allow(dead_code)]

use super::HARD_TIMEOUT;
use std::fmt::Debug;
use std::time::{Duration, Instant};

/// The first pause between two polls: short, because most conditions hold within a few
/// milliseconds of the event the test just caused.
const FIRST_PAUSE: Duration = Duration::from_millis(1);

/// The longest pause between two polls: the pause doubles up to this, so a condition that
/// takes a while costs few polls (each may be a request to the server under test), and one
/// that holds is still seen within 20 ms.
const MAX_PAUSE: Duration = Duration::from_millis(20);

/// A point in time a wait must not pass, named so a failure says which wait it was.
#[derive(Clone, Copy, Debug)]
pub struct Deadline {
    name: &'static str,
    limit: Duration,
    at: Instant,
}

impl Deadline {
    /// `limit` from now.
    pub fn after(name: &'static str, limit: Duration) -> Deadline {
        Deadline {
            name,
            limit,
            at: Instant::now() + limit,
        }
    }

    /// [`HARD_TIMEOUT`] from now: for waits that only a hang would exceed.
    pub fn hard(name: &'static str) -> Deadline {
        Deadline::after(name, HARD_TIMEOUT)
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    pub fn passed(&self) -> bool {
        Instant::now() >= self.at
    }
}

impl std::fmt::Display for Deadline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "deadline `{}` ({:?})", self.name, self.limit)
    }
}

/// Observe `probe` until `holds` accepts what it returned, and return that value; panics
/// once `deadline` has passed, naming the deadline, the condition (`what`) and the last
/// value observed. `probe` may itself assert on every value it sees.
pub fn eventually<T: Debug>(
    deadline: Deadline,
    what: &str,
    probe: impl FnMut() -> T,
    holds: impl FnMut(&T) -> bool,
) -> T {
    settle(deadline, probe, holds)
        .unwrap_or_else(|last| panic!("{deadline} passed before {what}; last observed: {last:?}"))
}

/// Like [`eventually`], for a wait whose caller judges the outcome itself: `Ok` with the
/// value `holds` accepted, or `Err` with the last value observed when `deadline` passed.
/// `probe` runs at least once, and once more after the last pause.
pub fn settle<T>(
    deadline: Deadline,
    mut probe: impl FnMut() -> T,
    mut holds: impl FnMut(&T) -> bool,
) -> Result<T, T> {
    let mut pause = FIRST_PAUSE;
    loop {
        let value = probe();
        if holds(&value) {
            return Ok(value);
        }
        let left = deadline.remaining();
        if left.is_zero() {
            return Err(value);
        }
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(MAX_PAUSE);
    }
}
