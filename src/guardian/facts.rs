//! The history recorder's view of a guardian (`Request::Watch`): the facts of its running
//! and recently ended executions and the foreground screen (see `activity` for the
//! counter and the ended ones).

use super::activity::fact;
use super::session::Session;
use crate::deadline::unix_ms;
use crate::wire::guardian::{ExecFact, Facts, ScreenFact, SecretValues};

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
        let mut executions: Vec<ExecFact> = self.activity.recent().cloned().collect();
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
