//! The session's output journals on disk.
//!
//! Foreground executions run one at a time, so they share **segment** files: each
//! appends to the current segment from the offset the file had when it started
//! (`Journal::offset`), and a segment holds up to `SEGMENT_EXECUTIONS` of them. A
//! background execution runs beside others and gets a file of its own. A command
//! therefore creates no file: creating and unlinking one per command was 40–90 µs of
//! ext4 work each, and on a file system without a journal the inode allocator skips every
//! inode deleted in the last minute, so a fast command loop made each create slower
//! (issue 18: the guardian's CPU per `echo` fell by about a third without them).
//!
//! Invariants: an execution's bytes are `offset..offset + total` of its journal, and no
//! other execution writes there (the next foreground execution starts at the file's end
//! once this one finished; after a failed write the segment is left, so a short write
//! can never be followed by another command's bytes); a journal exists before its path is
//! handed to anyone, and holds every byte read so far whenever an answer hands its range
//! out or its execution ended (until then the masker may hold an unfinished line back); the newest `RETAINED_JOURNALS`
//! finished executions of each kind stay on disk (late deletion only keeps more for a
//! while); the spare segment made ahead and never used is deleted at shutdown.
//!
//! Secrets never reach a journal (issue 36 item 3, decision 041): every byte goes through
//! a `Masker`, which masks what the redaction rules find with `*` of the same length, so
//! the journal is as long as the output and every offset stays true; what it holds back
//! (an unfinished line) is written before the range is handed to a reader.

use crate::shell::redact::Redactor;
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Finished executions of each kind (foreground, background) whose bytes stay on disk
/// per session; older journals are deleted so a long session's directory stays bounded.
pub const RETAINED_JOURNALS: usize = 16;
/// Foreground executions per segment.
pub const SEGMENT_EXECUTIONS: u64 = 64;
/// A segment this large takes no further execution (a flood's segment is not kept alive
/// by the small commands after it).
const SEGMENT_BYTES: u64 = 8 * 1024 * 1024;
/// Journals waiting for an idle moment to be deleted, at most: a loop that is never idle
/// (a flood) deletes the oldest at once beyond this.
const MAX_DOOMED: usize = 16;

/// An unfinished line is held back from the journal up to this long (a secret that
/// straddles two reads is masked whole); a longer one is written as it stands.
const MAX_CARRY_BYTES: usize = 16 * 1024;
/// A private key's block whose END line has not come yet is held back up to this long.
const MAX_KEY_HOLD_BYTES: usize = 64 * 1024;

/// Masks secrets on their way into a journal (decision 041): complete lines are masked
/// (`Redactor::mask`: same length, so every offset readers use still holds) and written;
/// the unfinished last line, and a private key's block until its END line, wait in a
/// carry for the next read. `flush` writes the carry as it is: before an answer hands
/// the journal's range out, and when the execution ends.
#[derive(Default)]
pub struct Masker {
    carry: Vec<u8>,
    /// A private key's block was written before its END line came (a flush, or a block
    /// past `MAX_KEY_HOLD_BYTES`): every line up to the END line is masked whole.
    in_key: bool,
}

impl Masker {
    /// `bytes` into `file`, masked, but for what waits for the rest of its line.
    pub fn write(&mut self, file: &File, bytes: &[u8], known: &[String]) -> io::Result<()> {
        self.carry.extend_from_slice(bytes);
        match self.ready() {
            0 => Ok(()),
            n => self.emit(file, n, known),
        }
    }

    /// Everything held, masked as it stands, into `file`.
    pub fn flush(&mut self, file: &File, known: &[String]) -> io::Result<()> {
        match self.carry.len() {
            0 => Ok(()),
            n => self.emit(file, n, known),
        }
    }

    /// Bytes waiting in the carry.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.carry.len()
    }

    /// How much of the carry can be written now.
    fn ready(&self) -> usize {
        let end = self
            .carry
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |nl| nl + 1);
        if self.carry.len() - end > MAX_CARRY_BYTES {
            return self.carry.len();
        }
        let open = Redactor::global().open_private_key_bytes(&self.carry[..end]);
        match open {
            Some(at) if self.carry.len() - at <= MAX_KEY_HOLD_BYTES => at,
            _ => end,
        }
    }

    fn emit(&mut self, mut file: &File, n: usize, known: &[String]) -> io::Result<()> {
        let redactor = Redactor::global();
        let region = &mut self.carry[..n];
        if self.in_key {
            let end = region.windows(9).position(|w| w == b"-----END ");
            let line_end = end.map(|at| {
                let nl = region[at..].iter().position(|&b| b == b'\n');
                nl.map_or(region.len(), |nl| at + nl + 1)
            });
            let (upto, done) = line_end.map_or((region.len(), false), |e| (e, true));
            star(&mut region[..upto]);
            self.in_key = !done;
        }
        let open = redactor.open_private_key_bytes(region);
        redactor.mask(region, known);
        if let Some(at) = open {
            // A block whose END line has not come: everything from its BEGIN line on is
            // key (the PEM rule's no-END branch wants `\n` lines, and a PTY ends lines
            // with `\r\n`), masked whole as the `in_key` branch masks the lines after it.
            star(&mut region[at..]);
            self.in_key = true;
        }
        let written = file.write_all(&self.carry[..n]);
        self.carry.drain(..n);
        written
    }
}

/// Every byte of `bytes` but line ends becomes `*` (a key's lines keep their count).
fn star(bytes: &mut [u8]) {
    for b in bytes {
        if !matches!(*b, b'\n' | b'\r') {
            *b = b'*';
        }
    }
}

/// Where one execution writes: `file` (appending) at `path`, its bytes from `offset`. The
/// file is shared with the segment, not duplicated: a `dup` and a `close` per command were
/// two system calls on the answer's path for nothing (appends go to the end either way).
pub struct Journal {
    pub path: PathBuf,
    pub file: Arc<File>,
    pub offset: u64,
}

/// An execution's journal, or why it could not be made.
pub type Made = Result<Journal, String>;

/// Create the file `path` (0600, appending, not through a link).
fn create(path: &Path) -> Result<File, String> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))
}

/// A journal that is a file of its own, created at `path`.
pub fn own_file(path: PathBuf) -> Made {
    let file = Arc::new(create(&path)?);
    Ok(Journal {
        path,
        file,
        offset: 0,
    })
}

/// The segment foreground executions append to.
struct Segment {
    path: PathBuf,
    file: Arc<File>,
    executions: u64,
    /// Ordinal of its newest foreground execution.
    last: u64,
}

pub struct Journals {
    dir: PathBuf,
    tag: String,
    /// Foreground executions started so far.
    fg_started: u64,
    /// Segments named so far (for the next name).
    segments_named: u64,
    current: Option<Segment>,
    /// A segment made ahead in an idle moment, for the next rotation.
    spare: Option<(PathBuf, File)>,
    /// Making the spare failed: not tried again in idle moments until a rotation made a
    /// segment (an idle loop must not retry a failing create at every look).
    spare_refused: bool,
    /// Segments no longer written, oldest first, with the ordinal of their newest
    /// execution; doomed once more than `RETAINED_JOURNALS` newer foreground executions
    /// started (the newest `RETAINED_JOURNALS` finished ones stay while the next runs).
    sealed: VecDeque<(PathBuf, u64)>,
    /// Finished background journals, oldest first; those beyond `RETAINED_JOURNALS` are
    /// doomed.
    finished_bg: VecDeque<String>,
}

impl Journals {
    pub fn new(dir: PathBuf, tag: String) -> Journals {
        Journals {
            dir,
            tag,
            fg_started: 0,
            segments_named: 0,
            current: None,
            spare: None,
            spare_refused: false,
            sealed: VecDeque::new(),
            finished_bg: VecDeque::new(),
        }
    }

    /// `<dir>/<prefix>-<tag>-<n>.log`, built in buffers sized up front: a `String` or
    /// `PathBuf` that grows is a `realloc`, which takes the malloc arena's lock (see
    /// `poll_set`).
    fn path(&self, prefix: &str, n: u64) -> PathBuf {
        use std::fmt::Write;
        let mut name = String::with_capacity(prefix.len() + self.tag.len() + 30);
        let _ = write!(name, "{prefix}-{}-{n}.log", self.tag);
        let mut path = PathBuf::with_capacity(self.dir.as_os_str().len() + 1 + name.len());
        path.push(&self.dir);
        path.push(name);
        path
    }

    /// The journal of the next foreground execution: the current segment from its end,
    /// or a new segment (the spare, else made now) when the current one is full, or when
    /// the previous execution's journal write failed (`healthy` false).
    pub fn take_foreground(&mut self, healthy: bool) -> Made {
        self.fg_started += 1;
        let ordinal = self.fg_started;
        if !healthy {
            self.seal();
        }
        if let Some(s) = self.current.as_mut()
            && s.executions < SEGMENT_EXECUTIONS
            && let Ok(m) = s.file.metadata()
            && m.len() < SEGMENT_BYTES
        {
            s.executions += 1;
            s.last = ordinal;
            let (path, file) = (s.path.clone(), Arc::clone(&s.file));
            return Ok(Journal {
                path,
                file,
                offset: m.len(),
            });
        }
        self.seal();
        let (path, file) = match self.spare.take() {
            Some(spare) => spare,
            None => self.make_segment()?,
        };
        self.spare_refused = false;
        let file = Arc::new(file);
        self.current = Some(Segment {
            path: path.clone(),
            file: Arc::clone(&file),
            executions: 1,
            last: ordinal,
        });
        Ok(Journal {
            path,
            file,
            offset: 0,
        })
    }

    fn make_segment(&mut self) -> Result<(PathBuf, File), String> {
        self.segments_named += 1;
        let path = self.path("seg", self.segments_named);
        create(&path).map(|f| (path, f))
    }

    /// The current segment takes no more executions.
    fn seal(&mut self) {
        if let Some(s) = self.current.take() {
            self.sealed.push_back((s.path, s.last));
        }
        // Never idle: beyond the bound the oldest doomed segment goes at once.
        while self.doomed_segments() > MAX_DOOMED {
            self.delete_doomed_segment();
        }
    }

    /// The journal of background execution `n`: a file of its own.
    pub fn take_background(&mut self, n: u64) -> Made {
        own_file(self.path("exec", n))
    }

    /// A finished background execution's journal: kept among the newest, the oldest
    /// doomed.
    pub fn retire_background(&mut self, path: Option<String>) {
        self.finished_bg.extend(path);
        while self.finished_bg.len() > RETAINED_JOURNALS + MAX_DOOMED {
            if let Some(old) = self.finished_bg.pop_front() {
                let _ = std::fs::remove_file(old);
            }
        }
    }

    fn doomed_segments(&self) -> usize {
        let newest_kept = self.fg_started.saturating_sub(RETAINED_JOURNALS as u64);
        self.sealed
            .iter()
            .take_while(|(_, last)| *last < newest_kept)
            .count()
    }

    fn delete_doomed_segment(&mut self) {
        if let Some((path, _)) = self.sealed.pop_front() {
            let _ = std::fs::remove_file(path);
        }
    }

    fn wants_spare(&self) -> bool {
        self.current.is_some() && self.spare.is_none() && !self.spare_refused
    }

    /// Work left for an idle moment.
    pub fn has_chores(&self) -> bool {
        self.wants_spare()
            || self.doomed_segments() > 0
            || self.finished_bg.len() > RETAINED_JOURNALS
    }

    /// One piece of that work: make the spare segment first (a rotation needs it), then
    /// delete one doomed journal.
    pub fn chore(&mut self) {
        if self.wants_spare() {
            // On failure the next rotation makes one (and reports the error then).
            match self.make_segment() {
                Ok(spare) => self.spare = Some(spare),
                Err(_) => self.spare_refused = true,
            }
            return;
        }
        if self.doomed_segments() > 0 {
            self.delete_doomed_segment();
        } else if self.finished_bg.len() > RETAINED_JOURNALS
            && let Some(old) = self.finished_bg.pop_front()
        {
            let _ = std::fs::remove_file(old);
        }
    }

    /// The spare segment made ahead and never used goes; written ones stay for readers.
    pub fn discard_ready(&mut self) {
        if let Some((path, _)) = self.spare.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
#[path = "journals_tests.rs"]
mod tests;
