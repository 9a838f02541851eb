//! `report`: offline aggregation of the usage log (JSON, or one HTML page).
//!
//! It opens the active file and its rotated siblings read-only, once each (so a rotation
//! racing the report renames a file it already holds), and reads them oldest first. With
//! `--last N`, a first pass counts the lines the filters select and the second aggregates
//! the last N of them; auxiliary lines (`tool_started`, `tool_phase`) never count towards
//! N (seed 000), but those of a call whose `tool_call` is in the window belong to it even
//! when they precede the window's first line (they share its `usage_call_id`; the
//! counting pass keeps, for each of the last N selected lines only, where its call's
//! first auxiliary line is and a hash of its id).
//! Malformed and oversized lines are counted and skipped.
//!
//! Every file is opened with `O_NONBLOCK | O_NOFOLLOW` and judged through its descriptor:
//! a FIFO, device, directory or symbolic link named like a log is listed as unreadable,
//! never waited on or followed.
//!
//! Invariant: the report never opens the usage writer and never creates, appends to,
//! renames or prunes a file.

mod aggregate;
mod audit;
mod html;
mod line;
mod sections;
mod stats;
mod svg;

use crate::config::opcli::ReportArgs;
use line::Kind;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::hash::{BuildHasher, RandomState};
use std::io::{BufRead, BufReader, Seek};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A line longer than this is not one the writer produced (its lines are a few hundred
/// bytes): counted as malformed and skipped without being held in memory.
const MAX_LINE_BYTES: usize = 1 << 20;
const READ_BUFFER: usize = 256 * 1024;

/// What selects lines.
pub struct Filters {
    pub last: Option<u64>,
    /// Only lines stamped at or after this time (Unix ms).
    pub since_ms: Option<i64>,
    pub build: Option<String>,
}

impl Filters {
    /// Whether a line of kind `k` stamped `ts` of build `build` passes the time and build
    /// filters. Auxiliary lines carry no build and pass that filter.
    fn keep(&self, k: Kind, ts: Option<i64>, build: Option<&str>) -> bool {
        if let Some(since) = self.since_ms
            && ts.is_none_or(|t| t < since)
        {
            return false;
        }
        match &self.build {
            Some(b) if !k.auxiliary() => build == Some(b.as_str()),
            _ => true,
        }
    }
}

/// Per-file and overall line counts.
#[derive(Default)]
struct Tally {
    lines: u64,
    malformed: u64,
    oversized: u64,
    filtered: u64,
}

/// Call `f` with every line of `file` (without its newline); lines longer than
/// `MAX_LINE_BYTES` are skipped and counted in `oversized`.
fn each_line(file: &File, oversized: &mut u64, mut f: impl FnMut(&[u8])) -> std::io::Result<()> {
    let mut r = BufReader::with_capacity(READ_BUFFER, file);
    let mut line = Vec::new();
    let mut skipping = false;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            if !line.is_empty() && !skipping {
                f(&line);
            }
            return Ok(());
        }
        let (chunk, end) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if !skipping {
            if line.len() + chunk.len() > MAX_LINE_BYTES {
                skipping = true;
                *oversized += 1;
                line.clear();
            } else if end.is_some() && line.is_empty() {
                // The whole line is in the buffer: no copy.
                f(chunk);
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = end.unwrap_or(buf.len());
        if end.is_some() {
            if !skipping && !line.is_empty() {
                f(&line);
            }
            line.clear();
            skipping = false;
        }
        r.consume(used);
    }
}

/// What the counting pass learned of a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Malformed,
    /// Filtered out.
    Other,
    /// An auxiliary line (`tool_started`, `tool_phase`) with a call id.
    Aux,
    /// A terminal line the filters keep: it counts towards `--last`.
    Selected,
    /// Not there during the counting pass.
    Unseen,
}

/// (file, line) in the files read oldest first.
type Pos = (usize, usize);

/// One of the last N selected lines: where it is, where the first auxiliary line of its
/// call is (itself when none), and its call id's hash.
struct Entry {
    pos: Pos,
    first_aux: Pos,
    id: u64,
}

/// At most this many calls are followed between their first auxiliary line and their
/// `tool_call`: in-flight calls are bounded by the server's workers, so more open ids
/// mean `tool_call` lines that never came (a crash, a cut or crafted log).
const MAX_OPEN_CALLS: usize = 1 << 16;

/// The first auxiliary position of each call whose `tool_call` is not read yet, by hashed
/// id, holding at most `MAX_OPEN_CALLS` ids: past that the oldest opened is forgotten (its
/// `tool_call`, if it comes, then owns no earlier auxiliary line).
#[derive(Default)]
struct OpenCalls {
    first: HashMap<u64, Pos>,
    /// Ids in the order they opened, with that position; an entry whose id has since
    /// closed (or reopened elsewhere) is stale and skipped.
    order: VecDeque<(u64, Pos)>,
}

impl OpenCalls {
    fn open(&mut self, id: u64, pos: Pos) {
        if self.first.contains_key(&id) {
            return;
        }
        // Stale entries go before the queue would grow past twice the cap (amortised: a
        // sweep leaves at most `MAX_OPEN_CALLS`).
        if self.order.len() >= 2 * MAX_OPEN_CALLS {
            let first = &self.first;
            self.order.retain(|(id, at)| first.get(id) == Some(at));
        }
        while self.first.len() >= MAX_OPEN_CALLS {
            let Some((old, at)) = self.order.pop_front() else {
                break;
            };
            if self.first.get(&old) == Some(&at) {
                self.first.remove(&old);
            }
        }
        self.first.insert(id, pos);
        self.order.push_back((id, pos));
    }

    fn close(&mut self, id: u64) -> Option<Pos> {
        self.first.remove(&id)
    }
}

/// Where the last N selected lines start, from the counting pass, and which auxiliary
/// lines before that start belong to calls ending in the window.
struct Window {
    classes: Vec<Vec<Class>>,
    /// (file, line) of the first terminal line of the window.
    start: Pos,
    /// The first auxiliary line of a call that ends in the window (`start` when none).
    from: Pos,
    /// The hashed ids of the calls that end in the window but began before `start`.
    pulled: HashSet<u64>,
    ids: RandomState,
}

impl Window {
    fn plan(files: &[(PathBuf, File)], filters: &Filters, n: u64) -> Window {
        let mut classes = Vec::with_capacity(files.len());
        // The last N selected lines (N bounds the memory), and the first auxiliary line of
        // each call whose terminal line is not read yet (at most `MAX_OPEN_CALLS`).
        let mut selected: VecDeque<Entry> = VecDeque::new();
        let mut open = OpenCalls::default();
        let ids = RandomState::new();
        for (fi, (_, f)) in files.iter().enumerate() {
            let mut c = Vec::new();
            let mut ignored = 0;
            let _ = each_line(f, &mut ignored, |b| {
                let pos = (fi, c.len());
                let class = match line::parse_head(b) {
                    None => Class::Malformed,
                    Some(h) => {
                        let k = h.kind();
                        let id = h.usage_call_id.str().map(|id| ids.hash_one(id));
                        let mut first_aux = pos;
                        match (k, id) {
                            (_, Some(id)) if k.auxiliary() => {
                                open.open(id, pos);
                            }
                            (Kind::ToolCall, Some(id)) => {
                                first_aux = open.close(id).unwrap_or(pos);
                            }
                            _ => {}
                        }
                        if k.auxiliary() {
                            if id.is_some() {
                                Class::Aux
                            } else {
                                Class::Other
                            }
                        } else if filters.keep(k, h.ts_ms.i64(), h.build.str()) {
                            selected.push_back(Entry {
                                pos,
                                first_aux,
                                id: id.unwrap_or_default(),
                            });
                            if selected.len() as u64 > n {
                                selected.pop_front();
                            }
                            Class::Selected
                        } else {
                            Class::Other
                        }
                    }
                };
                c.push(class);
            });
            classes.push(c);
        }
        let start = match selected.front() {
            Some(e) if n > 0 => e.pos,
            _ => (files.len(), 0),
        };
        let mut from = start;
        let mut pulled = HashSet::new();
        for e in selected.iter().filter(|e| e.first_aux < start) {
            from = from.min(e.first_aux);
            pulled.insert(e.id);
        }
        Window {
            classes,
            start,
            from,
            pulled,
            ids,
        }
    }

    /// The class of line `i` of file `f` (its bytes `b`) when it lies outside the window
    /// (before it, or not there when counted); `None` inside the window: from its first
    /// terminal line on, and the auxiliary lines before it of the calls ending in it.
    fn excludes(&self, f: usize, i: usize, b: &[u8]) -> Option<Class> {
        let Some(&class) = self.classes.get(f).and_then(|c| c.get(i)) else {
            return Some(Class::Unseen);
        };
        let pos = (f, i);
        if pos >= self.start {
            return None;
        }
        if class == Class::Aux
            && pos >= self.from
            && let Some(h) = line::parse_head(b)
            && let Some(id) = h.usage_call_id.str()
            && self.pulled.contains(&self.ids.hash_one(id))
        {
            return None;
        }
        Some(class)
    }
}

/// The report over the log at `path` (active file and rotated siblings).
pub fn build(path: &Path, filters: &Filters) -> Result<Value, String> {
    let paths = crate::usage::file::log_files(path);
    if paths.is_empty() {
        return Err(format!(
            "no usage log at {} (nor rotated files beside it)",
            path.display()
        ));
    }
    let mut files: Vec<(PathBuf, File)> = Vec::new();
    let mut unreadable = Vec::new();
    for p in paths {
        match open_regular(&p) {
            Ok(f) => files.push((p, f)),
            Err(e) => unreadable.push(json!({"file": name(&p), "error": e.to_string()})),
        }
    }
    // Pass 1 (only with --last): classify every line and find where the window of the
    // last N selected lines starts; pass 2 then parses nothing before it.
    let window = filters.last.map(|n| Window::plan(&files, filters, n));
    let mut agg = aggregate::Agg::default();
    let mut total = Tally::default();
    let mut per_file = Vec::new();
    for (fi, (p, f)) in files.iter_mut().enumerate() {
        let mut t = Tally::default();
        let mut index = 0usize;
        let rewound = f.rewind();
        let read = rewound.and_then(|()| {
            each_line(f, &mut t.oversized, |b| {
                let i = index;
                index += 1;
                if let Some(w) = &window {
                    match w.excludes(fi, i, b) {
                        // Appended after the counting pass: outside this report.
                        Some(Class::Unseen) => return,
                        Some(c) => {
                            t.lines += 1;
                            match c {
                                Class::Malformed => t.malformed += 1,
                                _ => t.filtered += 1,
                            }
                            return;
                        }
                        None => {}
                    }
                }
                t.lines += 1;
                let Some(l) = line::parse(b) else {
                    t.malformed += 1;
                    return;
                };
                let k = l.kind();
                if !filters.keep(k, l.ts_ms.i64(), l.build.str()) {
                    t.filtered += 1;
                    return;
                }
                agg.add(k, &l);
            })
        });
        if let Err(e) = read {
            unreadable.push(json!({"file": name(p), "error": e.to_string()}));
        }
        t.lines += t.oversized;
        per_file.push(
            json!({"file": name(p), "lines": t.lines, "malformed": t.malformed + t.oversized}),
        );
        total.lines += t.lines;
        total.malformed += t.malformed + t.oversized;
        total.oversized += t.oversized;
        total.filtered += t.filtered;
    }
    let mut report = agg.to_json();
    report["source"] = json!({
        "files": per_file,
        "unreadableFiles": unreadable,
        "linesSeen": total.lines,
        "malformedLines": total.malformed,
        "oversizedLines": total.oversized,
        "filteredOut": total.filtered,
        "filters": {
            "last": filters.last,
            "sinceMs": filters.since_ms,
            "build": filters.build,
        },
    });
    report["reportSchema"] = json!(1);
    report["usageSchema"] = json!(crate::usage::event::USAGE_SCHEMA);
    Ok(report)
}

/// Open `path` for reading if it is a regular file, without blocking (a FIFO would wait
/// for a writer in `open`) and without following a symbolic link.
fn open_regular(path: &Path) -> std::io::Result<File> {
    use std::io::{Error, ErrorKind};
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(path);
    let f = match opened {
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            let why = "a symbolic link; pass the file it points to";
            return Err(Error::new(ErrorKind::InvalidInput, why));
        }
        other => other?,
    };
    let t = f.metadata()?.file_type();
    if t.is_file() {
        return Ok(f);
    }
    let kind = match () {
        _ if t.is_dir() => "a directory",
        _ if t.is_fifo() => "a FIFO",
        _ if t.is_socket() => "a socket",
        _ if t.is_char_device() || t.is_block_device() => "a device",
        _ => "a special file",
    };
    let why = format!("{kind}, not a regular file; the report reads only regular files");
    Err(Error::new(ErrorKind::InvalidInput, why))
}

/// A file's name, without its directory (the report names files, not paths).
fn name(p: &Path) -> String {
    p.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// The `report` verb: the log of `--log`, else of `WINX_USAGE_LOG`; `now_ms` on the
/// log's clock (for `--since-minutes`).
pub fn run(args: &ReportArgs, configured: Option<&Path>, now_ms: i64) -> Result<String, String> {
    let path = args
        .log
        .as_deref()
        .or(configured)
        .ok_or("no usage log to read: pass --log PATH or set WINX_USAGE_LOG")?;
    let filters = Filters {
        last: args.last,
        since_ms: args.since_minutes.filter(|m| *m > 0).map(|m| {
            let m = i64::try_from(m).unwrap_or(i64::MAX);
            now_ms.saturating_sub(m.saturating_mul(60_000))
        }),
        build: args.build.clone(),
    };
    let report = build(path, &filters)?;
    Ok(match args.html {
        true => html::render(&report),
        false => serde_json::to_string_pretty(&report).unwrap_or_default() + "\n",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Orphan auxiliary lines (no `tool_call` ever) keep at most `MAX_OPEN_CALLS` ids, the
    /// oldest opened forgotten first; ids closed meanwhile neither count nor evict.
    #[test]
    fn open_calls_are_capped_oldest_first() {
        let mut o = OpenCalls::default();
        o.open(0, (0, 0));
        for i in 1..MAX_OPEN_CALLS as u64 * 3 {
            o.open(i, (0, i as usize));
            if i % 2 == 0 {
                o.close(i);
            }
        }
        assert_eq!(o.first.len(), MAX_OPEN_CALLS);
        assert!(o.order.len() <= 2 * MAX_OPEN_CALLS);
        assert_eq!(o.close(0), None, "the oldest is forgotten");
        let last = MAX_OPEN_CALLS as u64 * 3 - 1;
        assert_eq!(o.close(last), Some((0, last as usize)));
        let mut few = OpenCalls::default();
        for i in 0..MAX_OPEN_CALLS as u64 * 3 {
            few.open(i, (0, i as usize));
            few.close(i);
        }
        few.open(u64::MAX, (1, 0));
        assert_eq!(
            few.close(u64::MAX),
            Some((1, 0)),
            "closed ids evict nothing"
        );
    }

    #[test]
    fn lines_are_split_bounded_and_the_last_one_needs_no_newline() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("f");
        let mut f = File::create(&p).unwrap();
        f.write_all(b"a\n\nbb\n").unwrap();
        f.write_all(&vec![b'x'; MAX_LINE_BYTES + 10]).unwrap();
        f.write_all(b"\nccc").unwrap();
        let mut lines = Vec::new();
        let mut over = 0;
        each_line(&File::open(&p).unwrap(), &mut over, |l| {
            lines.push(l.to_vec())
        })
        .unwrap();
        assert_eq!(
            lines,
            [b"a".to_vec(), b"".to_vec(), b"bb".to_vec(), b"ccc".to_vec()]
        );
        assert_eq!(over, 1);
    }
}
