//! `Catalog::wait`: block until one of some executions changes after a catalog position,
//! woken by the recorder's commits (`Notify`), never by polling on a timer.
//!
//! Outcomes are distinct: `Changed` (with what changed), `Timeout` (nothing matching
//! changed; says nothing about completion) and `Resync` (the position is ahead of this
//! catalog: it was recreated).

use super::catalog::{Catalog, CatalogError, Record};
use crate::deadline::Deadline;
use crate::store::history::{self as table, ProcessStatus};
use crate::store::history_scope::{self, Stamps};

/// What a wait can wait for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The process status or exit code changed.
    State,
    Output,
    Exited,
    AwaitingInput,
    AwaitingApproval,
    Busy,
    /// The runtime lost the command's outcome (`ProcessStatus::Unknown`).
    Unknown,
}

impl Event {
    pub const ALL: [Event; 7] = [
        Event::State,
        Event::Output,
        Event::Exited,
        Event::AwaitingInput,
        Event::AwaitingApproval,
        Event::Busy,
        Event::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Event::State => "state",
            Event::Output => "output",
            Event::Exited => "exited",
            Event::AwaitingInput => "awaiting_input",
            Event::AwaitingApproval => "awaiting_approval",
            Event::Busy => "busy",
            Event::Unknown => "unknown",
        }
    }

    /// The event named `s`.
    pub fn parse(s: &str) -> Option<Event> {
        Event::ALL.into_iter().find(|e| e.as_str() == s)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Changed,
    Timeout,
    Resync,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Changed => "changed",
            Outcome::Timeout => "timeout",
            Outcome::Resync => "resync",
        }
    }
}

/// A wait's question.
pub struct WaitFor<'a> {
    /// 1..=32 distinct ids of the scope.
    pub ids: &'a [String],
    /// A catalog cursor; `None`: the catalog as the wait first reads it.
    pub after: Option<&'a str>,
    pub events: &'a [Event],
    /// One catalog pass, no waiting.
    pub poll_once: bool,
}

/// A wait's answer.
pub struct Waited {
    pub outcome: Outcome,
    /// Each id asked, with its record (`None`: not in the scope).
    pub records: Vec<(String, Option<Record>)>,
    /// The records whose watched events happened, with those events.
    pub changed: Vec<(String, Vec<Event>)>,
    /// Where the next wait starts: after a timeout still the baseline (nothing matching
    /// was consumed), else the catalog as last read.
    pub catalog_cursor: String,
}

/// Which of `events` happened to `r` (stamped `at` in its scope's own order) after the
/// scope's catalog position `after`.
fn happened(r: &Record, at: Stamps, after: i64, events: &[Event]) -> Vec<Event> {
    let state = at.state > after;
    let turn = at.turn > after;
    let turn_is = |e: Event| turn && r.turn_state.as_deref() == Some(e.as_str());
    Event::ALL
        .into_iter()
        .filter(|e| events.contains(e))
        .filter(|e| match *e {
            Event::State => state,
            Event::Output => at.output > after,
            Event::Exited => state && r.process_status == ProcessStatus::Exited,
            Event::Unknown => state && r.process_status == ProcessStatus::Unknown,
            other => turn_is(other),
        })
        .collect()
}

impl Catalog {
    /// Wait within `deadline` until one of `w.ids` has one of `w.events` after `w.after`.
    /// A cursor that is not a catalog cursor of this scope is `Cursor`; ids none of which
    /// is in the scope are `NotFound` (the first of them).
    pub fn wait(&self, w: &WaitFor, deadline: &Deadline) -> Result<Waited, CatalogError> {
        self.sync(deadline)?;
        // Without `after`, the baseline is the catalog as this call first reads it.
        let baseline = match w.after {
            None => self.open.read(|c| self.position(c))?,
            Some(c) => self.catalog_position(c).ok_or_else(|| {
                CatalogError::Cursor(
                    "after must be a catalog_cursor from list, observe or wait in this session"
                        .into(),
                )
            })?,
        };
        let mut watched = false;
        loop {
            let seen = self.open.notify.count();
            // One snapshot: a record read before a recorder commit and its stamps after it
            // would answer `changed: [state]` with a cursor already past the exit.
            let (records, stamps, seq) = self.open.read_snapshot(|c| {
                let mut found = Vec::with_capacity(w.ids.len());
                let mut stamps = Vec::with_capacity(w.ids.len());
                for id in w.ids {
                    found.push((id.clone(), table::get(c, &self.scope, id)?));
                    stamps.push(history_scope::stamps(c, &self.scope, id)?);
                }
                Ok((found, stamps, self.position(c)?))
            })?;
            if records.iter().all(|(_, r)| r.is_none()) {
                let first = w.ids.first().cloned().unwrap_or_default();
                return Err(CatalogError::NotFound(first));
            }
            if !watched {
                // Records another adapter admitted: watch their guardians from here too.
                for r in records.iter().filter_map(|(_, r)| r.as_ref()) {
                    if r.is_open() {
                        self.open.watch(&r.guardian, &r.socket);
                    }
                }
                watched = true;
            }
            let changed: Vec<(String, Vec<Event>)> = records
                .iter()
                .zip(&stamps)
                .filter_map(|((_, r), at)| Some((r.as_ref()?, *at)))
                .map(|(r, at)| (r.execution_id.clone(), happened(r, at, baseline, w.events)))
                .filter(|(_, ev)| !ev.is_empty())
                .collect();
            let outcome = if baseline > seq {
                // A cursor ahead of this catalog: it was recreated; start from its state.
                Some(Outcome::Resync)
            } else if !changed.is_empty() {
                Some(Outcome::Changed)
            } else if w.poll_once || deadline.expired() {
                Some(Outcome::Timeout)
            } else {
                None
            };
            if let Some(outcome) = outcome {
                let next = match outcome {
                    Outcome::Timeout => baseline.max(0),
                    _ => seq,
                };
                return Ok(Waited {
                    outcome,
                    records,
                    changed,
                    catalog_cursor: self.catalog_cursor(next),
                });
            }
            self.open.notify.wait_past(seen, deadline);
        }
    }
}
