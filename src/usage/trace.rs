//! One call's phases: `CallTrace::phase` times a stretch of work; each finished phase of at
//! least `PHASE_EVENT_MIN` is one `tool_phase` event (its start offset and duration), up to
//! `MAX_PHASE_EVENTS` per call, then one truncation marker. Every phase, short, suppressed
//! or not, counts in the totals the terminal `tool_call` carries.
//!
//! Invariant: with the log off a trace records nothing and costs one branch per phase.

use super::Sink;
use super::event::{Event, PhaseTotal, ToolPhase};
use crate::deadline::Stopwatch;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::time::Duration;

/// Phase events written per call; more would let one busy call flood the log.
pub const MAX_PHASE_EVENTS: u32 = 16;
/// Shorter phases are only counted in the terminal totals: a line per sub-millisecond
/// phase would triple the events of a cheap call (measured: +10 % on a 0.2 ms
/// `Initialize status`) and says nothing a slow call's diagnosis needs.
pub const PHASE_EVENT_MIN: Duration = Duration::from_millis(1);

/// The stretches of a call worth timing (seed 000, "Workflow telemetry").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    WorkspaceValidation,
    SessionAdmission,
    Catalog,
    RuntimeInspection,
    PromptRpc,
    Herdr,
    Wait,
    TemporaryAudit,
    Finalisation,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::WorkspaceValidation => "workspace_validation",
            Phase::SessionAdmission => "session_admission",
            Phase::Catalog => "catalog",
            Phase::RuntimeInspection => "runtime_inspection",
            Phase::PromptRpc => "prompt_rpc",
            Phase::Herdr => "herdr",
            Phase::Wait => "wait",
            Phase::TemporaryAudit => "temporary_audit",
            Phase::Finalisation => "finalisation",
        }
    }
}

#[derive(Default)]
struct Totals {
    events: u32,
    suppressed: u32,
    by_phase: BTreeMap<&'static str, PhaseTotal>,
}

/// The phases of one call. `off()` when the log is off.
pub struct CallTrace {
    on: Option<On>,
}

struct On {
    sink: Sink,
    call_id: String,
    clock: Stopwatch,
    min: Duration,
    totals: Mutex<Totals>,
}

/// Ends its phase when dropped.
pub struct PhaseGuard<'a> {
    trace: &'a CallTrace,
    phase: Phase,
    start: Duration,
}

impl Drop for PhaseGuard<'_> {
    fn drop(&mut self) {
        self.trace.finish(self.phase, self.start);
    }
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// The trace of calls the log does not follow (task runners, tests).
static OFF: CallTrace = CallTrace { on: None };

impl CallTrace {
    pub fn off() -> CallTrace {
        CallTrace { on: None }
    }

    /// A shared trace that records nothing.
    pub fn none() -> &'static CallTrace {
        &OFF
    }

    /// A trace for the call `call_id`, timed from now.
    pub fn new(sink: &Sink, call_id: String) -> CallTrace {
        CallTrace::with_min(sink, call_id, PHASE_EVENT_MIN)
    }

    /// As `new`, writing an event for every phase of at least `min`.
    pub fn with_min(sink: &Sink, call_id: String, min: Duration) -> CallTrace {
        CallTrace {
            on: sink.is_on().then(|| On {
                sink: sink.clone(),
                call_id,
                clock: Stopwatch::start(),
                min,
                totals: Mutex::new(Totals::default()),
            }),
        }
    }

    /// Time `phase` until the guard drops.
    pub fn phase(&self, phase: Phase) -> PhaseGuard<'_> {
        let start = match &self.on {
            Some(on) => on.clock.elapsed(),
            None => Duration::ZERO,
        };
        PhaseGuard {
            trace: self,
            phase,
            start,
        }
    }

    fn finish(&self, phase: Phase, start: Duration) {
        let Some(on) = &self.on else { return };
        let took = on.clock.elapsed().saturating_sub(start);
        let mut t = on.totals.lock();
        let total = t.by_phase.entry(phase.as_str()).or_default();
        total.count += 1;
        total.total_ms = ((total.total_ms + ms(took)) * 1e3).round() / 1e3;
        if took < on.min {
            return;
        }
        let (name, start_ms, duration_ms) = if t.events < MAX_PHASE_EVENTS {
            t.events += 1;
            (phase.as_str(), ms(start), ms(took))
        } else {
            t.suppressed += 1;
            if t.suppressed > 1 {
                return;
            }
            // The one marker: phases after it still count in the totals.
            ("truncated", ms(start), 0.0)
        };
        drop(t);
        on.sink.emit(Event::ToolPhase(ToolPhase {
            usage_call_id: on.call_id.clone(),
            phase: name,
            start_ms,
            duration_ms,
        }));
    }

    /// The per-phase totals and the number of phases not written as events.
    pub fn totals(&self) -> (BTreeMap<&'static str, PhaseTotal>, Option<u32>) {
        match &self.on {
            None => (BTreeMap::new(), None),
            Some(on) => {
                let t = on.totals.lock();
                (
                    t.by_phase.clone(),
                    (t.suppressed > 0).then_some(t.suppressed),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_past_the_cap_count_but_write_one_marker() {
        let (sink, rx) = Sink::capture(64);
        let trace = CallTrace::with_min(&sink, "c".into(), Duration::ZERO);
        for _ in 0..20 {
            let _g = trace.phase(Phase::Wait);
        }
        let phases: Vec<&'static str> = rx
            .try_iter()
            .map(|s| match s.1 {
                Event::ToolPhase(p) => p.phase,
                _ => "other",
            })
            .collect();
        assert_eq!(phases.len(), 17);
        assert_eq!(phases[16], "truncated");
        let (totals, suppressed) = trace.totals();
        assert_eq!(totals["wait"].count, 20);
        assert_eq!(suppressed, Some(4));
    }

    #[test]
    fn short_phases_count_in_the_totals_only() {
        let (sink, rx) = Sink::capture(64);
        let trace = CallTrace::new(&sink, "c".into());
        drop(trace.phase(Phase::Catalog));
        assert_eq!(rx.try_iter().count(), 0);
        assert_eq!(trace.totals().0["catalog"].count, 1);
    }

    #[test]
    fn an_off_trace_records_nothing() {
        let trace = CallTrace::off();
        drop(trace.phase(Phase::Catalog));
        assert!(trace.totals().0.is_empty());
    }
}
