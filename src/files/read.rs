//! Reading files for `ReadFiles`: one file into line-numbered text with a revision, or a
//! batch of files in a bounded thread pool.
//!
//! Role: the filesystem half of `ReadFiles`. `read_one` canonicalizes a path, refuses what
//! is not a readable UTF-8 regular file with a typed [`ReadError`], hashes the exact bytes
//! into a `sha256:` revision and renders the requested lines within a byte budget.
//! `read_batch` runs `read_one` over many specs with budgets fixed before any thread starts.
//!
//! Invariant: output never depends on thread timing (results come back in request order and
//! each file's budget is computed up front), binary or non-UTF-8 bytes are never printed
//! (not even lossily), and a file larger than [`MAX_FILE_BYTES`] is refused before its
//! contents are read.

use super::beneath::{self, BeneathError, FileKind, Roots};
use super::policy::{self, AllowPaths};
use super::ranges::{LineRange, PathSpec, count_lines, render};
use sha2::{Digest, Sha256};
use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Largest file `read_one` will load. Source files above this are almost always generated
/// or data; refusing keeps one call from pinning tens of MiB per pool thread.
pub const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// Numbered text shown for one file when the call has room: about 1,500 lines of typical
/// code, enough to read a module without flooding the agent's context window.
pub const DEFAULT_FILE_BUDGET_BYTES: usize = 64 * 1024;

/// Numbered text shown across a whole call (four full files): a batch read stays a few
/// tens of thousands of tokens, whatever the number of paths.
pub const DEFAULT_CALL_BUDGET_BYTES: usize = 256 * 1024;

/// Floor of a file's share in a very large batch, so each file still shows a few lines
/// (the call may then exceed its budget by at most this much per file).
pub const MIN_FILE_BUDGET_BYTES: usize = 512;

/// Pool size when `WINX_READ_PARALLELISM` is unset: reads are mostly page-cache copies and
/// hashing, which stop scaling after a few cores.
pub const DEFAULT_READ_PARALLELISM: usize = 4;

/// Most pool threads a batch may use, whatever the configuration says.
pub const MAX_READ_PARALLELISM: usize = 32;

/// Prefix of every revision; the 64 lowercase hex digits of the SHA-256 follow.
pub const REVISION_PREFIX: &str = "sha256:";

/// A successful read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRead {
    /// The path with symlinks and `..` resolved.
    pub canonical: PathBuf,
    /// `sha256:` and 64 lowercase hex digits of the exact file bytes.
    pub revision: String,
    /// Lines in the file; a final newline does not start another line.
    pub total_lines: usize,
    /// Line-numbered text of `visible`, one `\n`-terminated line each; a `\r` before the
    /// newline of a CRLF file is not shown.
    pub text: String,
    /// First and last line shown, inclusive; `(0, 0)` when nothing is (an empty file).
    pub visible: (usize, usize),
    /// Where to continue when the budget stopped the read before the requested end.
    pub next_start_line: Option<usize>,
    /// The one line shown only in part, when a single line exceeded the budget.
    pub cut_line: Option<usize>,
    /// Size of the file in bytes.
    pub bytes: u64,
}

/// Why a file could not be read. Each variant maps to a stable `code()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// Nothing exists at the path (or a symlink points nowhere).
    NotFound { path: PathBuf },
    /// The path is a directory.
    IsDirectory { path: PathBuf },
    /// The path is a FIFO, socket or device, which could block or never end.
    NotRegularFile { path: PathBuf, kind: FileKind },
    /// The operating system refused access.
    PermissionDenied { path: PathBuf },
    /// The bytes are not UTF-8 text; `offset` is the first invalid or NUL byte.
    NotUtf8 { offset: u64, nul_byte: bool },
    /// The file is larger than the limit and was not read.
    TooLarge { bytes: u64, limit: u64 },
    /// The first requested line lies past the end of the file.
    RangeOutOfBounds { start: usize, total_lines: usize },
    /// Any other I/O failure, with the operation and path in the message.
    Io(String),
}

impl ReadError {
    /// Stable snake_case identifier for `errorCode` fields.
    pub fn code(&self) -> &'static str {
        match self {
            ReadError::NotFound { .. } => "file_not_found",
            ReadError::IsDirectory { .. } => "is_directory",
            ReadError::NotRegularFile { .. } => "not_regular_file",
            ReadError::PermissionDenied { .. } => "permission_denied",
            ReadError::NotUtf8 { .. } => "not_utf8",
            ReadError::TooLarge { .. } => "file_too_large",
            ReadError::RangeOutOfBounds { .. } => "range_out_of_bounds",
            ReadError::Io(_) => "io_error",
        }
    }

    fn from_io(op: &str, path: &Path, e: io::Error) -> ReadError {
        let path = path.to_path_buf();
        match e.kind() {
            io::ErrorKind::NotFound => ReadError::NotFound { path },
            io::ErrorKind::PermissionDenied => ReadError::PermissionDenied { path },
            io::ErrorKind::IsADirectory => ReadError::IsDirectory { path },
            _ => ReadError::Io(format!("{op} {}: {e}", path.display())),
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::NotFound { path } => write!(f, "{}: no such file", path.display()),
            ReadError::IsDirectory { path } => {
                let p = path.display();
                write!(
                    f,
                    "{p}: is a directory; list it (`ls -la {p}` or CodeMap) and read files inside"
                )
            }
            ReadError::NotRegularFile { path, kind } => {
                let (p, k) = (path.display(), kind.describe());
                write!(
                    f,
                    "{p} is {k}, not a regular file; it was not opened (reading could block)"
                )
            }
            ReadError::PermissionDenied { path } => {
                write!(f, "{}: permission denied", path.display())
            }
            ReadError::NotUtf8 { offset, nul_byte } => {
                let (kind, byte) = match nul_byte {
                    true => ("binary file", "NUL"),
                    false => ("not UTF-8 text", "invalid UTF-8"),
                };
                write!(f, "{kind} ({byte} byte at offset {offset}); not shown")
            }
            ReadError::TooLarge { bytes, limit } => write!(
                f,
                "file is {bytes} bytes, over the {limit}-byte limit; use `head`, `sed -n` or `grep`"
            ),
            ReadError::RangeOutOfBounds { start, total_lines } => write!(
                f,
                "range starts at line {start} but the file has {total_lines} lines"
            ),
            ReadError::Io(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ReadError {}

/// Reads `range` of the file at `path` as line-numbered text of at most `budget` bytes.
///
/// The text ends at a whole line; `next_start_line` then says where to continue. At least
/// one line is always shown: a line that alone exceeds the budget is cut at a character
/// boundary and ends with [`super::ranges::LINE_CUT_MARKER`]. A range ending past the file
/// is clamped; one starting past it is `RangeOutOfBounds`, except line 1 of an empty file.
pub fn read_one(path: &Path, range: &LineRange, budget: usize) -> Result<FileRead, ReadError> {
    let unconfined = AllowPaths::unconfined();
    let roots = Roots {
        workspace: Path::new("/"),
        allow: &unconfined,
    };
    read_one_beneath(&roots, path, range, budget)
}

/// `read_one` confined to `roots`: the path is canonicalised, authorised and opened beneath
/// its root without following symlinks (`files::beneath`), and a FIFO, socket or device is
/// refused without being opened for I/O.
pub fn read_one_beneath(
    roots: &Roots,
    path: &Path,
    range: &LineRange,
    budget: usize,
) -> Result<FileRead, ReadError> {
    let (canonical, file) = open_regular(roots, path)?;
    let meta = file
        .metadata()
        .map_err(|e| ReadError::from_io("stat", &canonical, e))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_large(meta.len()));
    }
    let bytes = load(file, &canonical, meta.len())?;
    let revision = revision_of(&bytes);
    let text = utf8_text(&bytes)?;
    let total_lines = count_lines(&bytes);
    let start = range.start();
    if start > total_lines.max(1) {
        return Err(ReadError::RangeOutOfBounds { start, total_lines });
    }
    let end = range.end_within(total_lines);
    let rendered = render(text, start, end, budget);
    Ok(FileRead {
        canonical,
        revision,
        total_lines,
        text: rendered.text,
        visible: rendered.visible,
        next_start_line: rendered.next_start_line,
        cut_line: rendered.cut_line,
        bytes: bytes.len() as u64,
    })
}

/// Open `path` beneath its root as a regular file, or the typed reason why not.
fn open_regular(roots: &Roots, path: &Path) -> Result<(PathBuf, fs::File), ReadError> {
    let to_path = || path.to_path_buf();
    beneath::open_read(roots, path).map_err(|e| match e {
        BeneathError::NotFound => ReadError::NotFound { path: to_path() },
        BeneathError::NotRegular(FileKind::Directory) => ReadError::IsDirectory {
            path: policy::canonical(path).unwrap_or_else(|_| to_path()),
        },
        BeneathError::NotRegular(kind) => ReadError::NotRegularFile {
            path: policy::canonical(path).unwrap_or_else(|_| to_path()),
            kind,
        },
        BeneathError::Io(e) => ReadError::from_io("open", path, e),
        other => ReadError::Io(format!("{}: {other}", path.display())),
    })
}

/// Reads at most `MAX_FILE_BYTES + 1` bytes, so a file that grew after `stat` is still
/// refused rather than loaded whole.
fn load(file: fs::File, path: &Path, expected: u64) -> Result<Vec<u8>, ReadError> {
    let mut bytes = Vec::with_capacity(expected as usize);
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ReadError::from_io("read", path, e))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

fn too_large(bytes: u64) -> ReadError {
    let limit = MAX_FILE_BYTES;
    ReadError::TooLarge { bytes, limit }
}

/// `sha256:` and the lowercase hex digest of `bytes`.
pub fn revision_of(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(REVISION_PREFIX.len() + 2 * digest.len());
    out.push_str(REVISION_PREFIX);
    for b in digest.iter() {
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 0xf)] as char);
    }
    out
}

/// The bytes as text, or the offset of the first byte that makes them not text. A NUL is
/// valid UTF-8 but marks a binary file, so it is refused too.
fn utf8_text(bytes: &[u8]) -> Result<&str, ReadError> {
    let (text, invalid_at) = match std::str::from_utf8(bytes) {
        Ok(text) => (text, None),
        Err(e) => {
            let valid = std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default();
            (valid, Some(e.valid_up_to()))
        }
    };
    let (offset, nul_byte) = match (text.find('\0'), invalid_at) {
        (Some(nul), _) => (nul, true),
        (None, Some(invalid)) => (invalid, false),
        (None, None) => return Ok(text),
    };
    Err(ReadError::NotUtf8 {
        offset: offset as u64,
        nul_byte,
    })
}

/// Each file's share of `call_budget` when `files` are read together: an equal split, at
/// most [`DEFAULT_FILE_BUDGET_BYTES`] and at least [`MIN_FILE_BUDGET_BYTES`].
pub fn per_file_budget(files: usize, call_budget: usize) -> usize {
    (call_budget / files.max(1)).clamp(MIN_FILE_BUDGET_BYTES, DEFAULT_FILE_BUDGET_BYTES)
}

/// Reads every spec with up to `parallelism` threads (clamped to `1..=MAX_READ_PARALLELISM`),
/// returning results in request order. Failures carry the path as requested.
pub fn read_batch(
    roots: &Roots,
    specs: &[PathSpec],
    parallelism: usize,
    call_budget: usize,
) -> Vec<Result<FileRead, (String, ReadError)>> {
    let budget = per_file_budget(specs.len(), call_budget);
    let read = |spec: &PathSpec| {
        read_one_beneath(roots, Path::new(&spec.path), &spec.range, budget)
            .map_err(|e| (spec.path.clone(), e))
    };
    let threads = parallelism.clamp(1, MAX_READ_PARALLELISM).min(specs.len());
    if threads <= 1 {
        return specs.iter().map(read).collect();
    }
    let (work_tx, work_rx) = crossbeam_channel::unbounded::<(usize, &PathSpec)>();
    let (done_tx, done_rx) = crossbeam_channel::unbounded();
    // Queued before any worker starts; `work_rx` is alive, so a send cannot fail.
    specs.iter().enumerate().for_each(|job| {
        let _ = work_tx.send(job);
    });
    drop(work_tx);
    std::thread::scope(|scope| {
        for n in 0..threads {
            let (work_rx, done_tx) = (work_rx.clone(), done_tx.clone());
            let worker = move || {
                for (index, spec) in work_rx {
                    // `done_rx` outlives every worker, so a send cannot fail.
                    let _ = done_tx.send((index, read(spec)));
                }
            };
            let spawned = std::thread::Builder::new()
                .name(format!("winx-read-{n}"))
                .spawn_scoped(scope, worker);
            if spawned.is_err() {
                // Out of threads: those already running drain the queue, and any job none
                // took is read on this thread below, so the batch still completes.
                break;
            }
        }
    });
    drop(done_tx);
    let mut slots: Vec<Option<Result<FileRead, (String, ReadError)>>> =
        (0..specs.len()).map(|_| None).collect();
    for (index, result) in done_rx {
        slots[index] = Some(result);
    }
    slots
        .into_iter()
        .zip(specs)
        .map(|(slot, spec)| slot.unwrap_or_else(|| read(spec)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deadline::Stopwatch;
    use LineRange::{Between, From, Line, To, Whole};

    fn file(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
        let path = dir.path().join(name);
        fs::write(&path, bytes).unwrap();
        path
    }

    static UNCONFINED: AllowPaths = AllowPaths::unconfined();
    fn anywhere() -> Roots<'static> {
        Roots {
            workspace: Path::new("/"),
            allow: &UNCONFINED,
        }
    }

    fn read(path: &Path, range: LineRange) -> Result<FileRead, ReadError> {
        read_one(path, &range, DEFAULT_FILE_BUDGET_BYTES)
    }

    #[test]
    fn numbers_lines_and_reports_ranges() {
        let dir = tempfile::tempdir().unwrap();
        let body: String = (1..=12).map(|n| format!("line {n}\n")).collect();
        let path = file(&dir, "a.txt", body.as_bytes());
        let r = read(&path, Whole).unwrap();
        let got = (r.total_lines, r.visible, r.bytes, r.next_start_line);
        assert_eq!(got, (12, (1, 12), 87, None));
        assert!(r.text.starts_with(" 1 line 1\n 2 line 2\n"), "{}", r.text);
        assert_eq!(r.canonical, fs::canonicalize(&path).unwrap());
        let r = read(&path, Between(9, 99)).unwrap();
        let first = r.text.lines().next();
        assert_eq!((r.visible, first), ((9, 12), Some(" 9 line 9")));
        // Each numbered line is 10 or 11 bytes, so 35 bytes hold lines 4, 5 and 6.
        let r = read_one(&path, &From(4), 35).unwrap();
        assert_eq!((r.visible, r.next_start_line), ((4, 6), Some(7)));
        let err = read(&path, From(13)).unwrap_err();
        let want = "range starts at line 13 but the file has 12 lines";
        assert_eq!(err.to_string(), want);
        assert_eq!(err.code(), "range_out_of_bounds");
    }

    #[test]
    fn revision_is_sha256_of_the_exact_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let abc = read(&file(&dir, "abc", b"abc"), Whole).unwrap();
        let want = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(abc.revision, want);
        let r = read(&file(&dir, "crlf", b"one\r\ntwo\r\nthree"), Whole).unwrap();
        let want = (3, "1 one\n2 two\n3 three\n");
        assert_eq!((r.total_lines, r.text.as_str()), want);
        assert_eq!(r.revision, revision_of(b"one\r\ntwo\r\nthree"));
        assert_ne!(r.revision, revision_of(b"one\ntwo\nthree"));
    }

    #[test]
    fn empty_file_shows_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = file(&dir, "empty", b"");
        for range in [Whole, To(5), Line(1)] {
            let r = read(&path, range).unwrap();
            assert_eq!((r.total_lines, r.visible, r.text.as_str()), (0, (0, 0), ""));
        }
        assert_eq!(
            read(&path, Line(2)).unwrap_err().code(),
            "range_out_of_bounds"
        );
    }

    #[test]
    fn refuses_what_is_not_text_or_not_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let bin = read(&file(&dir, "bin", b"ok\n\x00\x01"), Whole).unwrap_err();
        assert_eq!(
            bin,
            ReadError::NotUtf8 {
                offset: 3,
                nul_byte: true
            }
        );
        let latin1 = read(&file(&dir, "latin1", b"caf\xe9\n"), Whole).unwrap_err();
        assert_eq!(
            latin1,
            ReadError::NotUtf8 {
                offset: 3,
                nul_byte: false
            }
        );
        assert!(latin1.to_string().contains("offset 3"), "{latin1}");
        let err = read(dir.path(), Whole).unwrap_err();
        assert_eq!(err.code(), "is_directory");
        assert!(err.to_string().contains("list it"), "{err}");
        let missing = dir.path().join("missing");
        let err = read(&missing, Whole).unwrap_err();
        assert_eq!(err, ReadError::NotFound { path: missing });
        let big = dir.path().join("big");
        fs::File::create(&big)
            .unwrap()
            .set_len(MAX_FILE_BYTES + 1)
            .unwrap();
        let (bytes, limit) = (MAX_FILE_BYTES + 1, MAX_FILE_BYTES);
        assert_eq!(read(&big, Whole), Err(ReadError::TooLarge { bytes, limit }));
        let dev = read(Path::new("/dev/null"), Whole).unwrap_err();
        assert_eq!(dev.code(), "not_regular_file");
    }

    #[test]
    fn permission_denied_unless_root() {
        use std::os::unix::fs::PermissionsExt;
        let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
        let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap_or("");
        if uid_line.split_whitespace().nth(2) == Some("0") {
            eprintln!("running as root: permission bits are not enforced; skipped");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = file(&dir, "secret", b"x\n");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o000)).unwrap();
        let err = read(&path, Whole).unwrap_err();
        assert_eq!(err.code(), "permission_denied", "{err}");
    }

    #[test]
    fn symlinks_resolve_to_the_canonical_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = file(&dir, "target.rs", b"fn main() {}\n");
        let link = dir.path().join("link.rs");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let canonical = read(&link, Whole).unwrap().canonical;
        assert_eq!(canonical, fs::canonicalize(&target).unwrap());
    }

    #[test]
    fn batch_keeps_request_order_and_splits_the_budget() {
        let dir = tempfile::tempdir().unwrap();
        let spec = |path: String| PathSpec { path, range: Whole };
        let mut specs: Vec<PathSpec> = (0..40)
            .map(|n| {
                file(
                    &dir,
                    &format!("f{n}"),
                    format!("{n}\n").repeat(n * 50 + 1).as_bytes(),
                )
            })
            .map(|path| spec(path.display().to_string()))
            .collect();
        specs.insert(7, spec("/nonexistent/x".into()));
        let serial = read_batch(&anywhere(), &specs, 1, 8192);
        for parallelism in [0, 3, 32, 1000] {
            assert_eq!(read_batch(&anywhere(), &specs, parallelism, 8192), serial);
        }
        let missing =
            matches!(&serial[7], Err((p, ReadError::NotFound { .. })) if p == "/nonexistent/x");
        assert!(missing, "{:?}", serial[7]);
        let share = per_file_budget(specs.len(), 8192);
        assert_eq!(share, MIN_FILE_BUDGET_BYTES);
        for (n, result) in serial.iter().enumerate().filter(|(n, _)| *n != 7) {
            let r = result.as_ref().unwrap();
            assert!(r.text.len() <= share, "file {n} exceeds its share");
            assert_eq!(r.next_start_line.is_some(), r.visible.1 < r.total_lines);
        }
        let one = per_file_budget(1, DEFAULT_CALL_BUDGET_BYTES);
        assert_eq!(one, DEFAULT_FILE_BUDGET_BYTES);
        assert_eq!(per_file_budget(0, 0), MIN_FILE_BUDGET_BYTES);
        assert!(read_batch(&anywhere(), &[], 4, 100).is_empty());
    }

    #[test]
    fn ten_thousand_line_file_timing() {
        let dir = tempfile::tempdir().unwrap();
        let body: String = (1..=10_000)
            .map(|n| format!("    let value_{n} = compute({n}); // some code\n"))
            .collect();
        let path = file(&dir, "big.rs", body.as_bytes());
        read_one(&path, &Whole, usize::MAX).unwrap();
        let clock = Stopwatch::start();
        let r = read_one(&path, &Whole, usize::MAX).unwrap();
        let full = clock.elapsed();
        let clock = Stopwatch::start();
        read(&path, Whole).unwrap();
        let (bytes, budgeted) = (r.bytes, clock.elapsed());
        eprintln!("10,000 lines ({bytes} bytes): unbudgeted {full:?}, default budget {budgeted:?}");
        assert_eq!(r.visible, (1, 10_000));
    }
}
