//! The last audit of a session's directory, kept while inotify reports no change to what
//! it measured: a `BashCommand` or a status call whose command touched nothing there
//! costs one `read` of the inotify descriptor instead of the walk (about ten system calls,
//! 20–30 µs on the test VM).
//!
//! Watched: every directory the audit read (`.winx/tmp`, this session's directory and
//! those of the others, and their subdirectories: any change there), plus the workspace
//! and `.winx` for the one entry each that leads on (`.winx`, `tmp`: made, removed or
//! renamed) and their own move or removal. A watch is added just before its directory is
//! read, so a change the reading missed still leaves an event.
//!
//! At most `MAX_WATCHED` sessions of a process hold an inotify instance at once.
//!
//! Invariants: a cached audit is only ever a clean one (no problem, nothing made again,
//! nothing unavailable, nothing cut short); it is used for at most `LEASE_FRESH_MS`, so
//! the directory's lease is renewed as before; an overflowing queue, an unknown watch or
//! any failure to watch means a full audit. Not seen by inotify, and so not by the
//! cache until the next event or minute: writes through a hard link made outside the
//! directory, and modification times changed by writes through `mmap` (sizes cannot
//! change that way). `release_temporary` always audits afresh.

use super::audit::{Audit, audit_visiting};
use nix::sys::inotify::{AddWatchFlags as F, InitFlags, Inotify, WatchDescriptor};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Sessions of this process with a watched audit at once. inotify instances are counted
/// per user (`max_user_instances`, 128 by default) across every program the user runs,
/// editors' file watchers included: a server with many sessions must not take them all.
/// Beyond this, sessions audit by walking, as without the cache.
pub const MAX_WATCHED: usize = 4;
static WATCHED: AtomicUsize = AtomicUsize::new(0);

/// Longest use of one audit: the lease (the directory's mtime) is renewed by a full audit
/// when older than a minute, so it stays as fresh as without the cache.
const LEASE_FRESH_MS: i64 = 60_000;

/// Entries made, removed or renamed in a directory, and the directory's own move or
/// removal.
const ENTRIES: F = F::IN_CREATE
    .union(F::IN_DELETE)
    .union(F::IN_MOVED_FROM)
    .union(F::IN_MOVED_TO)
    .union(F::IN_DELETE_SELF)
    .union(F::IN_MOVE_SELF)
    .union(F::IN_ONLYDIR);
/// What changes a measured directory: its entries, and any write or attribute change.
const TREE: F = ENTRIES.union(F::IN_MODIFY).union(F::IN_ATTRIB);
/// What changes the way to `.winx/tmp` (one named entry, or the directory itself).
const WAY: F = ENTRIES.union(F::IN_DONT_FOLLOW);

/// One session's watched audit.
#[derive(Debug)]
pub struct Watched {
    _seat: Seat,
    inotify: Inotify,
    workspace: PathBuf,
    key: String,
    /// Each watch, with the one entry name that matters for the workspace's and
    /// `.winx`'s (`None`: anything in it matters).
    watches: HashMap<WatchDescriptor, Option<&'static str>>,
    last: Audit,
    audited_ms: i64,
    /// Full audits made, for tests.
    full: u64,
}

/// The audit of `key` in `workspace` at `now_ms`: the one in `slot` while nothing it
/// measured changed, else a full one (kept in `slot` when it is clean and watchable).
pub fn audit(slot: &mut Option<Watched>, workspace: &Path, key: &str, now_ms: i64) -> Audit {
    if let Some(w) = slot.as_mut()
        && w.still(workspace, key, now_ms)
    {
        return w.last.clone();
    }
    let full = slot.as_ref().map_or(0, |w| w.full) + 1;
    // A fresh instance each time: no event or watch of the last audit can leak into this
    // one, and directories no longer in the tree are forgotten.
    *slot = None;
    let Some(seat) = Seat::take() else {
        return super::audit::audit(workspace, key, now_ms);
    };
    let Ok(inotify) = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC) else {
        return super::audit::audit(workspace, key, now_ms);
    };
    let mut watches = HashMap::new();
    let mut ok = true;
    for (dir, leads_on) in [
        (workspace.to_path_buf(), ".winx"),
        (workspace.join(".winx"), "tmp"),
    ] {
        match inotify.add_watch(dir.as_path(), WAY) {
            Ok(wd) => {
                watches.insert(wd, Some(leads_on));
            }
            Err(_) => ok = false,
        }
    }
    let mut visit = |fd: BorrowedFd<'_>| {
        let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
        match inotify.add_watch(path.as_str(), TREE) {
            Ok(wd) => {
                watches.insert(wd, None);
            }
            Err(_) => ok = false,
        }
    };
    let a = audit_visiting(workspace, key, now_ms, &mut visit);
    let clean =
        a.problem.is_none() && !a.recreated && a.unavailable.is_none() && !a.session.truncated;
    if ok && clean {
        *slot = Some(Watched {
            _seat: seat,
            inotify,
            workspace: workspace.to_path_buf(),
            key: key.to_string(),
            watches,
            last: a.clone(),
            audited_ms: now_ms,
            full,
        });
    }
    a
}

impl Watched {
    /// Whether the last audit still holds: same directory, young enough, and no event
    /// since on what it measured.
    fn still(&mut self, workspace: &Path, key: &str, now_ms: i64) -> bool {
        if self.workspace != workspace || self.key != key {
            return false;
        }
        if !(0..LEASE_FRESH_MS).contains(&(now_ms - self.audited_ms)) {
            return false;
        }
        // A stale audit is replaced with a new instance: its other events need no reading.
        loop {
            let events = match self.inotify.read_events() {
                Ok(events) => events,
                Err(nix::errno::Errno::EAGAIN) => return true,
                Err(_) => return false,
            };
            for e in events {
                let ignorable = match self.watches.get(&e.wd) {
                    Some(Some(name)) => !matters(&e.mask, e.name.as_deref(), name),
                    _ => false,
                };
                if e.mask.contains(F::IN_Q_OVERFLOW) || !ignorable {
                    return false;
                }
            }
        }
    }

    /// Full audits made so far (the cache's own count, for tests).
    pub fn full_audits(&self) -> u64 {
        self.full
    }
}

/// One of the `MAX_WATCHED` places, given back when dropped.
#[derive(Debug)]
struct Seat;

impl Seat {
    fn take() -> Option<Seat> {
        let taken = WATCHED.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n < MAX_WATCHED).then_some(n + 1)
        });
        taken.ok().map(|_| Seat)
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        WATCHED.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An event on the workspace or `.winx` matters when it is about that directory itself
/// or about the entry that leads on.
fn matters(mask: &F, name: Option<&OsStr>, leads_on: &str) -> bool {
    let own = F::IN_DELETE_SELF | F::IN_MOVE_SELF | F::IN_IGNORED | F::IN_UNMOUNT;
    mask.intersects(own) || name.is_none_or(|n| n == OsStr::new(leads_on))
}
