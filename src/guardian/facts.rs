//! The history recorder's view of a guardian (`Request::Watch`): the facts of its running
//! and recently ended executions and the foreground screen (see `activity` for the
//! counter and the ended ones).

use super::activity::fact;
use super::session::Session;
use crate::wire::guardian::{ExecFact, Facts, SecretValues, execution_number};

impl Session {
    /// Facts for a caller that knows executions numbered up to `known` (their admissions
    /// are left out).
    pub fn facts(&self, with_screen: bool, known: u64) -> Facts {
        let mut executions: Vec<ExecFact> = self.activity.recent().cloned().collect();
        executions.extend(self.fg.iter().map(|e| fact(e, None)));
        executions.extend(self.bg.iter().map(|(id, b)| fact(&b.exec, Some(id))));
        for e in &mut executions {
            if execution_number(&e.execution_id).is_none_or(|n| n <= known) {
                e.admission = None;
            }
        }
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
