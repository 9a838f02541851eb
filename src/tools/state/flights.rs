//! One session's mutation-receipt keys in flight: identical calls (same key) wait for the
//! one running, so a retry sent while the first is still working is single-flight.

use parking_lot::{Condvar, Mutex};
use std::collections::HashSet;
use std::time::Duration;

/// Longest an identical call waits for the one in flight (an edit plus its check).
const FLIGHT_WAIT: Duration = Duration::from_secs(90);

#[derive(Default)]
pub struct Flights {
    keys: Mutex<HashSet<String>>,
    landed: Condvar,
}

/// Holds a call's key in flight; identical calls wait for it to drop.
pub struct Flight<'a> {
    flights: &'a Flights,
    key: String,
}

impl Flights {
    /// Wait until no identical call is in flight (at most `FLIGHT_WAIT`), then take off.
    pub fn enter(&self, key: &str) -> Flight<'_> {
        let mut guard = self.keys.lock();
        while guard.contains(key) {
            if self.landed.wait_for(&mut guard, FLIGHT_WAIT).timed_out() {
                break;
            }
        }
        guard.insert(key.to_string());
        Flight {
            flights: self,
            key: key.to_string(),
        }
    }
}

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        self.flights.keys.lock().remove(&self.key);
        self.flights.landed.notify_all();
    }
}
