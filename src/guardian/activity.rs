//! A guardian's activity counter and its recently ended executions, for the history
//! recorder (`facts`).
//!
//! Invariant: `seq` never decreases and grows whenever any fact changes, so a watcher
//! that saw `seq` and is answered with a larger one has missed nothing it cannot re-read
//! (the bytes are in the journals; ended executions stay listed for `RECENT` more ends).

use super::exec::Execution;
use crate::wire::guardian::ExecFact;
use std::collections::VecDeque;

/// Ended executions still reported after they left the session's live set; matches the
/// journals kept on disk, so every listed journal can still be read.
const RECENT: usize = super::journals::RETAINED_JOURNALS;

#[derive(Default)]
pub struct Activity {
    pub seq: u64,
    recent: VecDeque<ExecFact>,
}

impl Activity {
    pub fn bump(&mut self) {
        self.seq += 1;
    }

    /// Ended executions that left the live set, oldest first.
    pub fn recent(&self) -> impl Iterator<Item = &ExecFact> {
        self.recent.iter()
    }

    /// An execution left the live set (replaced or expired); keep reporting its end.
    pub fn retire(&mut self, exec: &Execution, bg: Option<&str>) {
        self.recent.push_back(fact(exec, bg));
        while self.recent.len() > RECENT {
            self.recent.pop_front();
        }
        self.bump();
    }
}

pub fn fact(exec: &Execution, bg: Option<&str>) -> ExecFact {
    ExecFact {
        execution_id: exec.id.clone(),
        bg_command_id: bg.map(str::to_string),
        total_bytes: exec.log.total(),
        finished: exec.finished(),
        exit_code: exec.exit_code,
        shell_died: exec.shell_died,
        journal_path: exec.log.journal_path(),
        journal_offset: exec.log.journal_offset(),
        journal_error: exec.log.journal_error(),
        admission: exec.admission.clone(),
    }
}
