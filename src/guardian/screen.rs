//! The terminals' screens: the shell terminal's `screen` action view (rows, or the rows
//! changed since the last call), the whole screen for the history recorder's turn
//! recognition, and each running background command's own screen (`BgScreen`), which is
//! what a native prompt to that command checks readiness on (issue 37 item 3).

use super::session::Session;
use crate::deadline::unix_ms;
use crate::shell::pty;
use crate::wire::guardian::{Response, ScreenFact, SecretValues};

/// A background command's terminal model (its PTY is as large as the shell's) and when it
/// last printed. Dropped when the command ends: a finished command takes no prompt.
pub struct BgScreen {
    pub vt: vt100::Parser,
    pub last_output_ms: i64,
}

impl BgScreen {
    pub fn new() -> BgScreen {
        let nz = |n: u16| std::num::NonZeroU16::new(n).unwrap_or(std::num::NonZeroU16::MIN);
        BgScreen {
            vt: vt100::Parser::new(nz(pty::DEFAULT_ROWS), nz(pty::DEFAULT_COLS), 0),
            last_output_ms: unix_ms(),
        }
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        self.vt.process(bytes);
        self.last_output_ms = unix_ms();
    }

    pub fn quiet_ms(&self) -> u64 {
        (unix_ms() - self.last_output_ms).max(0) as u64
    }
}

impl Default for BgScreen {
    fn default() -> Self {
        BgScreen::new()
    }
}

/// The whole visible screen as text: rows without trailing blanks, trailing empty rows
/// dropped (what the recognizers read).
pub fn screen_text(screen: &vt100::Screen) -> String {
    let (_, cols) = screen.size();
    let rows: Vec<String> = screen
        .rows(0, u16::from(cols))
        .map(|r| r.trim_end().to_string())
        .collect();
    let mut end = rows.len();
    while end > 0 && rows[end - 1].is_empty() {
        end -= 1;
    }
    rows[..end].join("\n")
}

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
            text: screen_text(self.vt.screen()),
            quiet_ms: (unix_ms() - self.clocks.last_activity_ms).max(0) as u64,
        })
    }
}
