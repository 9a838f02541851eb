//! One execution's output: a journal file on disk with every byte, an in-memory window of
//! the newest bytes, and the agent's delivery cursor; and a background command's terminal
//! model (`BgScreen`), which a native prompt to it checks readiness on (issue 37 item 3).
//!
//! Invariant: offsets only grow; bytes that left the window are still in the journal, and
//! an answer that skips them says how many it skipped (never a silent gap).

use super::journals::{Made, Masker};
use crate::deadline::{Stopwatch, unix_ms};
use crate::shell::pty;
use crate::wire::guardian::{ActionResult, Admission, CommandState, ProcessStatus};
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

/// Newest raw bytes kept in memory per execution. An agent never needs more than the tail
/// of a huge output inline; the journal keeps the rest.
pub const WINDOW_BYTES: usize = 512 * 1024;

pub struct OutputLog {
    window: Vec<u8>,
    total: u64,
    delivered: u64,
    journal: Option<Arc<File>>,
    journal_path: Option<PathBuf>,
    /// Where this execution's bytes start in `journal_path` (a shared segment).
    journal_offset: u64,
    journal_error: Option<String>,
    /// Masks secrets on their way into the journal (decision 041).
    masker: Masker,
}

impl OutputLog {
    /// A log writing to `journal` (made by `journals`); `None` keeps memory only.
    pub fn new(journal: Option<Made>) -> OutputLog {
        let mut log = OutputLog {
            window: Vec::new(),
            total: 0,
            delivered: 0,
            journal: None,
            journal_path: None,
            journal_offset: 0,
            journal_error: None,
            masker: Masker::default(),
        };
        match journal {
            Some(Ok(j)) => {
                log.journal = Some(j.file);
                log.journal_path = Some(j.path);
                log.journal_offset = j.offset;
            }
            Some(Err(e)) => log.journal_error = Some(e),
            None => {}
        }
        log
    }

    /// `append_masking` with no known secret values: for a log without a journal (the
    /// session's transcript), where nothing is masked.
    pub fn append(&mut self, bytes: &[u8]) {
        self.append_masking(bytes, &[]);
    }

    /// `bytes` arrived: into the window and, masked (the built-in rules and the session's
    /// `known` secret values), into the journal.
    pub fn append_masking(&mut self, bytes: &[u8], known: &[String]) {
        // `&File` writes: the segment's descriptor is shared, not owned (`journals`).
        if let Some(file) = self.journal.as_deref() {
            let written = self.masker.write(file, bytes, known);
            self.check(written);
        }
        self.total += bytes.len() as u64;
        self.window.extend_from_slice(bytes);
        if self.window.len() > 2 * WINDOW_BYTES {
            let cut = self.window.len() - WINDOW_BYTES;
            self.window.drain(..cut);
        }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// What the masker holds back goes into the journal, masked with the session's
    /// `known` secret values too (an unfinished last line such as `printf %s "$TOKEN"`):
    /// before a range is handed out, and at the end (the next execution appends to the
    /// segment after it).
    pub fn flush_journal(&mut self, known: &[String]) {
        if let Some(file) = self.journal.as_deref() {
            let written = self.masker.flush(file, known);
            self.check(written);
        }
    }

    fn check(&mut self, written: std::io::Result<()>) {
        if let Err(e) = written {
            // A full disk must not lose the answer: keep the window, report the journal.
            self.journal_error = Some(format!("journal write failed: {e}"));
            self.journal = None;
        }
    }

    fn window_start(&self) -> u64 {
        self.total - self.window.len() as u64
    }

    /// Bytes after the delivery cursor (bounded by the window); advances the cursor. The
    /// journal holds them all first (`flush_journal` with the session's `known` values).
    pub fn take_undelivered(&mut self, known: &[String]) -> (String, u64, u64, u64) {
        self.flush_journal(known);
        let start = self.delivered.max(self.window_start());
        let omitted = start - self.delivered;
        let from = (start - self.window_start()) as usize;
        let text = String::from_utf8_lossy(&self.window[from..]).into_owned();
        let end = self.total;
        self.delivered = end;
        (text, start, end, omitted)
    }

    /// At most `max` bytes from `offset` (for independent readers such as `attach`),
    /// without touching the delivery cursor: (text, next offset, bytes skipped because they
    /// left the window). A multi-byte character is never split unless it alone exceeds
    /// `max`; an empty text means the reader has caught up.
    pub fn read_from(&self, offset: u64, max: usize) -> (String, u64, u64) {
        let start = offset.max(self.window_start()).min(self.total);
        let from = (start - self.window_start()) as usize;
        let skipped = start.saturating_sub(offset);
        let avail = &self.window[from..];
        let mut len = avail.len().min(max);
        if len < avail.len() {
            // Back off to the start of a character (continuation bytes are 0b10xxxxxx).
            let mut cut = len;
            while cut > 0 && avail[cut] & 0xC0 == 0x80 {
                cut -= 1;
            }
            if cut > 0 {
                len = cut;
            }
        }
        let text = String::from_utf8_lossy(&avail[..len]).into_owned();
        (text, start + len as u64, skipped)
    }

    pub fn journal_error(&self) -> Option<String> {
        self.journal_error.clone()
    }

    pub fn journal_failed(&self) -> bool {
        self.journal_error.is_some()
    }

    pub fn journal_offset(&self) -> u64 {
        self.journal_offset
    }

    pub fn journal_path(&self) -> Option<String> {
        self.journal_path
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned())
    }
}

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

/// The id of the session's execution `n` ("<tag>-<n>"), built in a buffer sized up front:
/// a growing `String` is a `realloc`, which takes the malloc arena's lock (see `poll_set`).
pub fn execution_id(tag: &str, n: u64) -> String {
    use std::fmt::Write;
    let mut id = String::with_capacity(tag.len() + 21);
    let _ = write!(id, "{tag}-{n}");
    id
}

/// The answer about the foreground when no command ran yet.
pub fn idle_result(shell_alive: bool, cwd: &str) -> ActionResult {
    ActionResult {
        state: CommandState {
            process_status: if shell_alive {
                ProcessStatus::Idle
            } else {
                ProcessStatus::ShellExited
            },
            exit_code: None,
            cwd: cwd.to_string(),
            bg_command_id: None,
            elapsed_ms: 0,
            execution_id: None,
        },
        output: String::new(),
        offset_start: 0,
        offset_end: 0,
        omitted_bytes: 0,
        journal_path: None,
        journal_offset: 0,
        journal_error: None,
        secrets: Default::default(),
    }
}

/// A command's identity, clock, output and outcome.
pub struct Execution {
    pub id: String,
    pub command: String,
    pub started_ms: i64,
    clock: Stopwatch,
    pub log: OutputLog,
    pub exit_code: Option<i32>,
    finished_elapsed_ms: Option<u64>,
    /// The shell died before reporting this command's completion.
    pub shell_died: bool,
    /// Who admitted it, for the history (`Facts`).
    pub admission: Option<Admission>,
}

impl Execution {
    pub fn new(id: String, command: String, journal: Option<Made>) -> Execution {
        Execution {
            id,
            command,
            started_ms: unix_ms(),
            clock: Stopwatch::start(),
            log: OutputLog::new(journal),
            exit_code: None,
            finished_elapsed_ms: None,
            shell_died: false,
            admission: None,
        }
    }

    pub fn finished(&self) -> bool {
        self.finished_elapsed_ms.is_some()
    }

    /// The execution ended; what its journal held back is written, masked with the
    /// session's `known` secret values.
    pub fn finish(&mut self, exit_code: Option<i32>, known: &[String]) {
        if !self.finished() {
            self.exit_code = exit_code;
            self.finished_elapsed_ms = Some(self.clock.elapsed().as_millis() as u64);
            self.log.flush_journal(known);
        }
    }

    pub fn elapsed_ms(&self) -> u64 {
        self.finished_elapsed_ms
            .unwrap_or_else(|| self.clock.elapsed().as_millis() as u64)
    }

    pub fn state(&self, cwd: &str, bg_id: Option<&str>) -> CommandState {
        let process_status = if self.shell_died {
            ProcessStatus::ShellExited
        } else if self.finished() {
            ProcessStatus::Exited
        } else {
            ProcessStatus::Running
        };
        CommandState {
            process_status,
            exit_code: self.exit_code,
            cwd: cwd.to_string(),
            bg_command_id: bg_id.map(str::to_string),
            elapsed_ms: self.elapsed_ms(),
            execution_id: Some(self.id.clone()),
        }
    }

    /// Deliver what is new and the state, advancing the delivery cursor (`known`: the
    /// session's secret values, for the journal).
    pub fn deliver(&mut self, cwd: &str, bg_id: Option<&str>, known: &[String]) -> ActionResult {
        let (output, offset_start, offset_end, omitted_bytes) = self.log.take_undelivered(known);
        ActionResult {
            state: self.state(cwd, bg_id),
            output,
            offset_start,
            offset_end,
            omitted_bytes,
            journal_path: self.log.journal_path(),
            journal_offset: self.log.journal_offset,
            journal_error: self.log.journal_error.clone(),
            secrets: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_come_in_bounded_chunks_on_character_boundaries() {
        let mut log = OutputLog::new(None);
        log.append("ab€cd".as_bytes()); // '€' is 3 bytes: offsets 2..5
        // A cut inside '€' backs off to its start; the next read resumes there.
        assert_eq!(log.read_from(0, 3), ("ab".into(), 2, 0));
        assert_eq!(log.read_from(2, 3), ("€".into(), 5, 0));
        assert_eq!(log.read_from(5, 3), ("cd".into(), 7, 0));
        // Caught up: empty text, same offset.
        assert_eq!(log.read_from(7, 3), (String::new(), 7, 0));
        // A character longer than the whole budget is still returned (lossily) and the
        // reader moves on instead of looping.
        let (_, next, _) = log.read_from(2, 1);
        assert_eq!(next, 3);
    }

    #[test]
    fn delivery_is_incremental_and_gaps_are_counted() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("exec-1.log");
        let mut log = OutputLog::new(Some(crate::guardian::journals::own_file(path.clone())));
        log.append(b"hello ");
        assert_eq!(log.take_undelivered(&[]), ("hello ".into(), 0, 6, 0));
        log.append(b"world");
        assert_eq!(log.take_undelivered(&[]), ("world".into(), 6, 11, 0));
        assert_eq!(log.take_undelivered(&[]).0, "");
        let big = vec![b'x'; 3 * WINDOW_BYTES];
        log.append(&big);
        let (text, start, end, omitted) = log.take_undelivered(&[]);
        assert_eq!(end, 11 + big.len() as u64);
        assert_eq!(omitted, start - 11);
        assert!(text.len() <= 2 * WINDOW_BYTES);
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            end,
            "journal has every byte"
        );
        assert_eq!(log.read_from(0, usize::MAX).1, end);
        assert!(
            log.read_from(0, usize::MAX).2 > 0,
            "skipped bytes are counted"
        );
    }

    /// A known secret on an unfinished last line (`printf %s "$TOKEN"`) is held back by
    /// the masker, then written when an answer hands the range out and when the command
    /// ends: masked with the session's known values there too, not the built-in rules only.
    #[test]
    fn a_known_secret_on_an_unfinished_line_is_masked_when_flushed() {
        let tmp = tempfile::tempdir().unwrap();
        let value = format!("val-{}", "Qw7e".repeat(4));
        let known = [value.clone()];
        let path = tmp.path().join("exec-2.log");
        let mut log = OutputLog::new(Some(crate::guardian::journals::own_file(path.clone())));
        log.append_masking(format!("key {value}").as_bytes(), &known);
        let (text, _, end, _) = log.take_undelivered(&known);
        assert!(
            text.contains(&value),
            "the answer is redacted later, not here"
        );
        let journal = std::fs::read(&path).unwrap();
        assert_eq!(journal.len() as u64, end, "the journal holds every byte");
        assert_eq!(
            journal,
            format!("key {}", "*".repeat(value.len())).as_bytes()
        );

        let path = tmp.path().join("exec-3.log");
        let journal = Some(crate::guardian::journals::own_file(path.clone()));
        let mut e = Execution::new("e".into(), "printf".into(), journal);
        e.log.append_masking(value.as_bytes(), &known);
        e.finish(Some(0), &known);
        assert_eq!(std::fs::read(&path).unwrap(), vec![b'*'; value.len()]);
    }

    #[test]
    fn a_journal_that_cannot_be_created_is_reported() {
        let log = OutputLog::new(Some(crate::guardian::journals::own_file(
            "/no/such/dir/exec.log".into(),
        )));
        assert!(log.journal_error.is_some());
    }
}
