//! The `ttl-sweeper` thread: applies the idle TTL tiers when the main thread's sweep tick
//! asks. Sweeps can take seconds (each guardian gets a probe and a shutdown wait), so they
//! run here, not on the main thread, and a tick that finds a sweep running is skipped.

use super::event::Event;
use super::lifecycle;
use super::state::State;
use crossbeam_channel::{Receiver, Sender};
use std::sync::Arc;

/// One sweep per message on `ticks`; returns when the main thread closes it.
pub fn run(state: Arc<State>, ticks: Receiver<()>, events: Sender<Event>) {
    for () in ticks {
        let l = state.lifecycle;
        let removed = lifecycle::remove_where(&state.runtime_dir, l.now_ms(), |s, now| {
            lifecycle::expired_by_tier(s, &l, now)
        });
        if !removed.is_empty() {
            log::info!("ttl sweep removed {removed:?}");
        }
    }
    let _ = events.send(Event::Stopped("sweeper"));
}
