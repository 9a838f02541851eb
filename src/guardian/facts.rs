//! The history recorder's view of a guardian: an activity counter and the facts of its
//! running and recently ended executions (ids, byte totals, exits, journal paths).
//!
//! Invariant: `seq` never decreases and grows whenever any fact changes, so a watcher
//! that saw `seq` and is answered with a larger one has missed nothing it cannot re-read
//! (the bytes are in the journals; ended executions stay listed for `RECENT` more ends).

use super::exec::Execution;
use super::session::Session;
use crate::deadline::unix_ms;
use crate::wire::guardian::{ExecFact, Facts, ScreenFact, SecretValues};
use std::collections::VecDeque;

/// Ended executions still reported after they left the session's live set; matches the
/// journals kept on disk, so every listed journal can still be read.
const RECENT: usize = super::session::RETAINED_JOURNALS;

#[derive(Default)]
pub struct Activity {
    pub seq: u64,
    recent: VecDeque<ExecFact>,
}

impl Activity {
    pub fn bump(&mut self) {
        self.seq += 1;
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
        journal_error: exec.log.journal_error(),
    }
}

impl Session {
    /// The whole visible screen (not the `screen` action's view: no cursor is moved).
    pub fn screen_fact(&self) -> Option<ScreenFact> {
        let exec = self.fg.as_ref().filter(|e| !e.finished())?;
        let screen = self.vt.screen();
        let (_, cols) = screen.size();
        let rows: Vec<String> = screen
            .rows(0, u16::from(cols))
            .map(|r| r.trim_end().to_string())
            .collect();
        let mut end = rows.len();
        while end > 0 && rows[end - 1].is_empty() {
            end -= 1;
        }
        Some(ScreenFact {
            execution_id: exec.id.clone(),
            text: rows[..end].join("\n"),
            quiet_ms: (unix_ms() - self.clocks.last_activity_ms).max(0) as u64,
        })
    }

    pub fn facts(&self, with_screen: bool) -> Facts {
        let mut executions: Vec<ExecFact> = self.activity.recent.iter().cloned().collect();
        executions.extend(self.fg.iter().map(|e| fact(e, None)));
        executions.extend(self.bg.iter().map(|(id, b)| fact(&b.exec, Some(id))));
        Facts {
            seq: self.activity.seq,
            guardian_pid: std::process::id(),
            created_at_ms: self.clocks.created_ms,
            executions,
            screen: with_screen.then(|| self.screen_fact()).flatten(),
            secrets: SecretValues(self.secrets.values().to_vec()),
        }
    }
}
