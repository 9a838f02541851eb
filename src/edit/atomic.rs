//! Committing planned file contents atomically: a temp file in the same directory, fsync,
//! permissions copied, rename over the target, directory fsync. A crash leaves the old or
//! the new file, never a half-written one.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode of files the edit engine creates.
pub const NEW_FILE_MODE: u32 = 0o644;

/// This process as temp file names record it (pid, start time); `None` without `/proc`.
fn writer() -> Option<(u32, u64)> {
    static WRITER: std::sync::OnceLock<Option<(u32, u64)>> = std::sync::OnceLock::new();
    *WRITER.get_or_init(|| Some(crate::process::this_process()).filter(|(_, t)| *t > 0))
}

/// `.<name>.winx-<pid>-<start time>-<16 hex>.tmp`: the writer's identity lets the next
/// commit in the directory remove the file as soon as that writer is dead.
fn temp_path(target: &Path) -> PathBuf {
    let mut rnd = [0u8; 8];
    let _ = getrandom::fill(&mut rnd);
    let mut tag = crate::hex::lower(&rnd);
    if let Some((pid, started)) = writer() {
        tag = format!("{pid}-{started}-{tag}");
    }
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    target.with_file_name(format!(".{name}.winx-{tag}.tmp"))
}

/// A temp file holding new content, synced to disk, not yet renamed over its target.
pub struct Staged {
    tmp: PathBuf,
    pub target: PathBuf,
    /// Staged through a directory fd (`stage_at`): renamed and removed within it.
    at: Option<At>,
}

impl Staged {
    /// The synced temp file holding the new content.
    pub fn tmp(&self) -> &Path {
        &self.tmp
    }

    /// Rename over the target (atomic on one file system).
    pub fn publish(self) -> std::io::Result<()> {
        if let Some(at) = &self.at {
            return at.publish();
        }
        let r = fs::rename(&self.tmp, &self.target);
        if r.is_err() {
            let _ = fs::remove_file(&self.tmp);
        }
        r
    }

    /// Abandon the staged content.
    pub fn discard(self) {
        if let Some(at) = &self.at {
            return at.discard();
        }
        let _ = fs::remove_file(&self.tmp);
    }
}

/// Write `bytes` to a synced temp file beside `target`, with the target's permissions
/// (or `NEW_FILE_MODE`).
pub fn stage(target: &Path, bytes: &[u8]) -> std::io::Result<Staged> {
    let mode = fs::metadata(target)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(NEW_FILE_MODE);
    if let Some(dir) = target.parent() {
        fs::create_dir_all(dir)?;
    }
    let tmp = temp_path(target);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        f.sync_all()
    })();
    match result {
        Ok(()) => Ok(Staged {
            tmp,
            target: target.to_path_buf(),
            at: None,
        }),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

#[path = "atomic_at.rs"]
mod at;
pub use at::{At, remove_at, stage_at, sync_dir_at, write_at};

/// Make renames in `dir` durable.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A temp file older than this was left by a commit that died (one takes milliseconds).
/// Applies to temp files whose writer is alive or unknown (names without a writer).
pub const STALE_TEMP_AGE: std::time::Duration = std::time::Duration::from_secs(3600);
/// Most directory entries looked at by one sweep (huge directories stay cheap to edit in).
const SWEEP_SCAN_LIMIT: usize = 10_000;

/// One of our temp files, by its name.
#[derive(Debug, PartialEq, Eq)]
enum TempName {
    /// `.<target>.winx-<16 hex>.tmp` (written before names recorded their writer).
    Anonymous,
    /// `.<target>.winx-<pid>-<start time>-<16 hex>.tmp`.
    Writer { pid: u32, started: u64 },
}

fn parse_temp_name(name: &str) -> Option<TempName> {
    let rest = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let (target, tag) = rest.rsplit_once(".winx-")?;
    let hex16 = |t: &str| t.len() == 16 && t.bytes().all(|b| b.is_ascii_hexdigit());
    if target.is_empty() {
        return None;
    }
    if hex16(tag) {
        return Some(TempName::Anonymous);
    }
    let mut parts = tag.splitn(3, '-');
    let number = |p: Option<&str>| {
        p.filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|d| d.parse::<u64>().ok())
    };
    let pid = u32::try_from(number(parts.next())?).ok()?;
    let started = number(parts.next())?;
    hex16(parts.next()?).then_some(TempName::Writer { pid, started })
}

/// Temp files in `dir` that no commit in progress will publish: those whose recorded
/// writer is provably dead (`process::is_gone`), at once, and any other older than
/// `STALE_TEMP_AGE`. A multi-file commit's pending intent may still name one of them
/// (`edit::journal` keeps those for its recovery).
pub fn abandoned_temps(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let now = std::time::SystemTime::now();
    let mut found = Vec::new();
    for e in entries.flatten().take(SWEEP_SCAN_LIMIT) {
        let Some(kind) = parse_temp_name(&e.file_name().to_string_lossy()) else {
            continue;
        };
        let Some(meta) = e.metadata().ok().filter(|m| m.is_file()) else {
            continue;
        };
        let dead = match kind {
            TempName::Writer { pid, started } => crate::process::is_gone(pid, started),
            TempName::Anonymous => false,
        };
        let old = || {
            meta.modified()
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age > STALE_TEMP_AGE)
        };
        if dead || old() {
            found.push(e.path());
        }
    }
    found
}

/// Remove `abandoned` temp files (see `abandoned_temps`); returns how many went.
pub fn remove_temps(abandoned: &[PathBuf]) -> usize {
    let mut removed = 0;
    for path in abandoned {
        if fs::remove_file(path).is_ok() {
            log::info!(
                "removed a temp file left by an interrupted commit: {}",
                path.display()
            );
            removed += 1;
        }
    }
    removed
}

/// Remove temp files in `dir` that crashed commits left behind (`abandoned_temps`);
/// fresh ones of live writers may belong to a commit in progress and stay. Returns how
/// many were removed.
pub fn sweep_stale(dir: &Path) -> usize {
    remove_temps(&abandoned_temps(dir))
}

/// Replace `target` with `bytes` atomically, keeping its permissions.
pub fn write(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    stage(target, bytes)?.publish()?;
    match target.parent() {
        Some(dir) => sync_dir(dir),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crash can only land before a rename (the target is still old, a temp file may be
    /// left beside it) or after it (the target is new): never a half-written target.
    #[test]
    fn every_moment_of_a_commit_leaves_old_or_new() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("f.txt");
        let old = "o".repeat(1 << 20);
        let new = "n".repeat(1 << 20);
        fs::write(&p, &old).unwrap();
        let staged = stage(&p, new.as_bytes()).unwrap();
        // "Crash" here: the target is untouched.
        assert_eq!(fs::read_to_string(&p).unwrap(), old);
        staged.publish().unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), new);
        // An abandoned stage (the crash case) never touches the target.
        let abandoned = stage(&p, b"partial").unwrap();
        abandoned.discard();
        assert_eq!(fs::read_to_string(&p).unwrap(), new);
        assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 1);
    }

    #[test]
    fn stale_temps_of_crashed_commits_are_swept_and_fresh_ones_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let old = std::time::SystemTime::now() - STALE_TEMP_AGE * 2;
        let make = |name: &str, aged: bool| {
            let f = File::create(d.join(name)).unwrap();
            if aged {
                f.set_modified(old).unwrap();
            }
        };
        make(".f.txt.winx-0123456789abcdef.tmp", true); // a crashed commit's: removed
        make(".g.txt.winx-fedcba9876543210.tmp", false); // in progress: kept
        let (pid, started) = crate::process::this_process();
        let live = format!(".l.txt.winx-{pid}-{started}-0123456789abcdef.tmp");
        make(&live, false); // a live writer's, fresh: kept
        make(".d.txt.winx-2147483647-1-0123456789abcdef.tmp", false); // a dead writer's: removed
        make(".e.txt.winx-2147483647--0123456789abcdef.tmp", false); // malformed: kept
        make(".h.winx-0123.tmp", true); // not our name shape: kept
        make("notes.winx-0123456789abcdef.tmp", true); // not hidden: kept
        make("f.txt", true);
        assert_eq!(sweep_stale(d), 2);
        let mut left: Vec<String> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                ".e.txt.winx-2147483647--0123456789abcdef.tmp",
                ".g.txt.winx-fedcba9876543210.tmp",
                ".h.winx-0123.tmp",
                live.as_str(),
                "f.txt",
                "notes.winx-0123456789abcdef.tmp"
            ]
        );
        // Our own temp names are recognised, with this process as their writer.
        let t = temp_path(&d.join("x.rs"));
        assert_eq!(
            parse_temp_name(&t.file_name().unwrap().to_string_lossy()),
            Some(TempName::Writer { pid, started })
        );
        assert_eq!(
            parse_temp_name(".a.winx-0123456789abcdef.tmp"),
            Some(TempName::Anonymous)
        );
    }

    #[test]
    fn replaces_and_keeps_permissions() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("script.sh");
        fs::write(&p, "old").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        write(&p, b"new").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o755
        );
        let n = tmp.path().join("sub/new.txt");
        write(&n, b"x").unwrap();
        assert_eq!(
            fs::metadata(&n).unwrap().permissions().mode() & 0o777,
            NEW_FILE_MODE
        );
        // No temp files are left behind.
        assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 2);
    }
}
