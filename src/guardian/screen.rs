//! The terminals' screens: the shell terminal's `screen` action view (rows, or the rows
//! changed since the last call), the whole screen for the history recorder's turn
//! recognition (a background command's own screen is `exec::BgScreen`).

use super::session::Session;
use crate::deadline::unix_ms;
use crate::wire::guardian::{Response, ScreenFact, SecretValues};

impl Session {
    /// The rendered terminal: the last `lines` non-empty rows, or only rows changed since
    /// the previous `screen` call when `diff` is set.
    pub fn screen(&mut self, lines: Option<usize>, diff: bool) -> Response {
        let screen = self.vt.screen();
        let (rows, cols) = screen.size();
        let (rows, cols) = (u16::from(rows), u16::from(cols));
        let current: Vec<String> = screen.rows(0, cols).collect();
        let text = if diff {
            let changed: Vec<String> = current
                .iter()
                .enumerate()
                .filter(|(i, r)| self.last_screen.get(*i) != Some(*r))
                .map(|(i, r)| format!("{:>3}| {}", i + 1, r.trim_end()))
                .collect();
            changed.join("\n")
        } else {
            let mut v: Vec<&str> = current.iter().map(|r| r.trim_end()).collect();
            while v.last().is_some_and(|l| l.is_empty()) {
                v.pop();
            }
            let skip = lines.map_or(0, |n| v.len().saturating_sub(n));
            v[skip..].join("\n")
        };
        self.last_screen = current;
        let secrets = SecretValues(self.secrets.values().to_vec());
        Response::Screen {
            text,
            rows,
            cols,
            secrets,
        }
    }

    /// The whole visible screen (not the `screen` action's view: no cursor is moved).
    pub fn screen_fact(&self) -> Option<ScreenFact> {
        let exec = self.fg.as_ref().filter(|e| !e.finished())?;
        Some(ScreenFact {
            execution_id: exec.id.clone(),
            text: super::exec::screen_text(self.vt.screen()),
            quiet_ms: (unix_ms() - self.clocks.last_activity_ms).max(0) as u64,
        })
    }
}
