//! The log file's lifecycle: open private (`O_NOFOLLOW`, 0600, a broader mode reduced;
//! missing directories created 0700), rotate when an event falls in a new period (the
//! active file is renamed `<name>.<label>`), prune rotated files past the retention, and
//! find the active file's rotated siblings (for `report`).
//!
//! Invariant: a symlink, a directory or any other non-regular file at the log path is
//! never written through; the writer reports it once and keeps serving without a log.

use super::period::{self, Rotation};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Buffer between the writer and the file: a burst of events costs one `write(2)`.
const WRITE_BUFFER: usize = 64 * 1024;
/// How much of an existing active file is read to learn the period of its first event.
const FIRST_LINE_MAX: usize = 64 * 1024;

/// Open `path` for appending, privately: refuses symlinks (`O_NOFOLLOW`) and anything but
/// a regular file (a FIFO is not waited on), creates it 0600, reduces a broader mode, and
/// creates missing parent directories 0700.
pub fn open_private(path: &Path) -> io::Result<File> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
        && !parent.exists()
    {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
    }
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ELOOP) => io::Error::new(
                io::ErrorKind::InvalidInput,
                "the path is a symlink; refusing to follow it",
            ),
            _ => e,
        })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        file.set_permissions(fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

/// Whether the writer could use `path`, judged without creating or changing anything
/// (`doctor`): `Ok` with what the writer will do, `Err` with why it cannot write there.
pub fn probe(path: &Path) -> Result<&'static str, String> {
    use nix::unistd::{AccessFlags, access};
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            Err("the path is a symlink; the writer refuses to follow it".into())
        }
        Ok(m) if !m.is_file() => Err("the path is not a regular file".into()),
        Ok(_) if access(path, AccessFlags::W_OK).is_err() => {
            Err("the file is not writable by this user".into())
        }
        Ok(m) if m.permissions().mode() & 0o077 != 0 => {
            Ok("writable; its mode will be reduced to 0600")
        }
        Ok(_) => Ok("writable"),
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e.to_string()),
        Err(_) => {
            let mut dir = path.parent();
            while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty()) {
                if d.exists() {
                    return match d.is_dir() && access(d, AccessFlags::W_OK).is_ok() {
                        true => Ok("will be created"),
                        false => Err(format!("{} is not a writable directory", d.display())),
                    };
                }
                dir = d.parent();
            }
            Ok("will be created")
        }
    }
}

/// The active file and the period it holds.
pub struct LogFile {
    path: PathBuf,
    rotation: Rotation,
    keep_days: u32,
    out: Option<BufWriter<File>>,
    /// The period of the events in the open file.
    label: Option<String>,
    /// Why the file cannot be written, once said; cleared by a successful reopen.
    failed: Option<String>,
}

impl LogFile {
    /// Ready the log at `now_ms`: a leftover active file of an earlier period is rotated
    /// first and old rotated files pruned; then the active file is opened. A failure is
    /// reported (once) and leaves the writer without a file until the next period.
    pub fn start(path: PathBuf, rotation: Rotation, keep_days: u32, now_ms: i64) -> LogFile {
        let mut log = LogFile {
            path,
            rotation,
            keep_days,
            out: None,
            label: rotation.label(now_ms),
            failed: None,
        };
        if let Some(old) = log.leftover_label()
            && Some(&old) != log.label.as_ref()
            && let Err(e) = log.rename_active(&old)
        {
            log.fail(format!("cannot rotate the previous file: {e}"));
        }
        log.prune(now_ms);
        log.open();
        log
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file is open for writing.
    pub fn is_open(&self) -> bool {
        self.out.is_some()
    }

    /// Append one line stamped `ts_ms` (rotating first when it opens a new period).
    /// `false` when the line was lost (the file cannot be written).
    pub fn write_line(&mut self, ts_ms: i64, line: &[u8]) -> bool {
        let label = self.rotation.label(ts_ms);
        if label != self.label {
            self.rotate(label, ts_ms);
        }
        let Some(out) = self.out.as_mut() else {
            return false;
        };
        match out.write_all(line) {
            Ok(()) => true,
            Err(e) => {
                self.out = None;
                self.fail(format!("write failed: {e}"));
                false
            }
        }
    }

    pub fn flush(&mut self) {
        if let Some(out) = self.out.as_mut()
            && let Err(e) = out.flush()
        {
            self.out = None;
            self.fail(format!("write failed: {e}"));
        }
    }

    /// Close the current period's file under its label, prune, open the next one.
    fn rotate(&mut self, label: Option<String>, now_ms: i64) {
        self.flush();
        self.out = None;
        if let Some(old) = self.label.take()
            && fs::symlink_metadata(&self.path).is_ok()
            && let Err(e) = self.rename_active(&old)
        {
            self.fail(format!("cannot rotate: {e}"));
        }
        self.label = label;
        self.prune(now_ms);
        self.open();
    }

    fn open(&mut self) {
        match open_private(&self.path) {
            Ok(f) => {
                if self.failed.take().is_some() {
                    log::warn!("usage log {}: writable again", self.path.display());
                }
                self.out = Some(BufWriter::with_capacity(WRITE_BUFFER, f));
            }
            Err(e) => self.fail(format!("cannot open: {e}")),
        }
    }

    /// Say why the log cannot be written, once per failure (not once per event).
    fn fail(&mut self, why: String) {
        if self.failed.is_none() {
            log::warn!(
                "usage log {}: {why}; the server keeps serving and usage events are dropped \
                 until the next rotation period",
                self.path.display()
            );
        }
        self.failed = Some(why);
    }

    /// The period of the first event in a leftover active file (its modification time
    /// when no first event can be read); `None` without a file or when files never rotate.
    fn leftover_label(&self) -> Option<String> {
        if self.rotation == Rotation::Never {
            return None;
        }
        let meta = fs::symlink_metadata(&self.path).ok()?;
        if !meta.is_file() || meta.len() == 0 {
            return None;
        }
        let ts = first_ts_ms(&self.path).or_else(|| {
            let m = meta.modified().ok()?;
            let d = m.duration_since(std::time::UNIX_EPOCH).ok()?;
            i64::try_from(d.as_millis()).ok()
        })?;
        self.rotation.label(ts)
    }

    /// Rename the active file to `<name>.<label>` (`.<label>.N` if that exists).
    fn rename_active(&self, label: &str) -> io::Result<()> {
        let mut n = 0;
        loop {
            let suffix = match n {
                0 => label.to_string(),
                n => format!("{label}.{n}"),
            };
            let target = sibling(&self.path, &suffix);
            if fs::symlink_metadata(&target).is_err() {
                return fs::rename(&self.path, &target);
            }
            n += 1;
        }
    }

    /// Remove rotated siblings whose period ended more than `keep_days` days ago.
    fn prune(&self, now_ms: i64) {
        if self.keep_days == 0 {
            return;
        }
        for (label, p) in rotated_siblings(&self.path) {
            if period::expired(&label, self.keep_days, now_ms)
                && let Err(e) = fs::remove_file(&p)
            {
                log::warn!("usage log: cannot prune {}: {e}", p.display());
            }
        }
    }
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".");
    name.push(suffix);
    path.with_file_name(name)
}

/// `ts_ms` of the first line of `path`, if it is a usage event.
fn first_ts_ms(path: &Path) -> Option<i64> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let mut buf = Vec::new();
    f.take(FIRST_LINE_MAX as u64).read_to_end(&mut buf).ok()?;
    let line = buf.split(|b| *b == b'\n').next()?;
    let v: serde_json::Value = serde_json::from_slice(line).ok()?;
    v.get("ts_ms")?.as_i64()
}

/// Rotated siblings of `path` (`<name>.<label>[.N]`) with their labels, oldest first.
/// Names whose suffix is not a period label are not ours and are left out.
pub fn rotated_siblings(path: &Path) -> Vec<(String, PathBuf)> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Vec::new();
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = format!("{}.", name.to_string_lossy());
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let label = n.strip_prefix(&prefix)?.to_string();
            period::label_start_ms(&label)?;
            Some((label, e.path()))
        })
        .collect();
    out.sort_by_key(|(label, _)| (period::label_start_ms(label), label.clone()));
    out
}

/// Every file of the log, oldest first: the rotated siblings, then the active file.
pub fn log_files(path: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = rotated_siblings(path).into_iter().map(|(_, p)| p).collect();
    if fs::symlink_metadata(path).is_ok() {
        files.push(path.to_path_buf());
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    const DAY: i64 = 86_400_000;
    /// 2026-03-01T23:00:00Z.
    const T: i64 = 1_772_406_000_000;

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn opens_private_and_refuses_symlinks_and_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("new/dir/usage.jsonl");
        open_private(&p).unwrap();
        assert_eq!(mode(&p), 0o600);
        assert_eq!(mode(&tmp.path().join("new")), 0o700);
        assert_eq!(mode(&tmp.path().join("new/dir")), 0o700);
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        open_private(&p).unwrap();
        assert_eq!(mode(&p), 0o600, "a broader mode is reduced");
        let target = tmp.path().join("target");
        fs::write(&target, "").unwrap();
        let link = tmp.path().join("link.jsonl");
        symlink(&target, &link).unwrap();
        let e = open_private(&link).unwrap_err();
        assert!(e.to_string().contains("symlink"), "{e}");
        assert!(open_private(tmp.path()).is_err());
    }

    #[test]
    fn probe_judges_without_touching() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("a/b/usage.jsonl");
        assert_eq!(probe(&p), Ok("will be created"));
        assert!(!tmp.path().join("a").exists());
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, "").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(probe(&p), Ok("writable; its mode will be reduced to 0600"));
        let link = tmp.path().join("link");
        symlink(&p, &link).unwrap();
        assert!(probe(&link).unwrap_err().contains("symlink"));
        assert!(probe(tmp.path()).is_err());
    }

    #[test]
    fn rotates_on_a_new_period_and_on_start_with_a_leftover() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("usage.jsonl");
        let mut log = LogFile::start(p.clone(), Rotation::Hourly, 7, T);
        assert!(log.write_line(T, b"{\"ts_ms\":1772406000000}\n"));
        assert!(log.write_line(T + 3_600_000, b"{\"n\":2}\n"));
        log.flush();
        assert_eq!(
            fs::read_to_string(sibling(&p, "2026-03-01T23")).unwrap(),
            "{\"ts_ms\":1772406000000}\n"
        );
        assert_eq!(fs::read_to_string(&p).unwrap(), "{\"n\":2}\n");
        drop(log);
        // A restart the next day rotates the leftover under its first event's period.
        fs::write(&p, format!("{{\"ts_ms\":{}}}\n", T + 3_600_000)).unwrap();
        let log = LogFile::start(p.clone(), Rotation::Daily, 7, T + 2 * DAY);
        assert!(log.is_open());
        assert!(sibling(&p, "2026-03-02").exists());
        assert_eq!(fs::read_to_string(&p).unwrap(), "");
        let labels: Vec<String> = rotated_siblings(&p).into_iter().map(|(l, _)| l).collect();
        assert_eq!(labels, ["2026-03-01T23", "2026-03-02"]);
    }

    #[test]
    fn prunes_past_keep_days_only_our_files() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("usage.jsonl");
        for s in [
            "2026-02-01",
            "2026-02-26T23",
            "2026-02-27",
            "2026-02-28T05",
            "notes",
            "2026-01-01.gz",
        ] {
            fs::write(sibling(&p, s), "x\n").unwrap();
        }
        let _log = LogFile::start(p.clone(), Rotation::Daily, 2, T);
        assert!(!sibling(&p, "2026-02-01").exists());
        assert!(!sibling(&p, "2026-02-26T23").exists());
        // Two days before today (2026-03-01): 02-27 and 02-28 stay.
        assert!(sibling(&p, "2026-02-27").exists());
        assert!(sibling(&p, "2026-02-28T05").exists());
        assert!(sibling(&p, "notes").exists(), "not a label: not ours");
        assert!(
            sibling(&p, "2026-01-01.gz").exists(),
            "not a label: not ours"
        );
        let files = log_files(&p);
        assert_eq!(files.last().unwrap(), &p);
        assert_eq!(files.len(), 3);
        let _keep_all = LogFile::start(p.clone(), Rotation::Daily, 0, T + 100 * DAY);
        assert!(sibling(&p, "2026-02-28T05").exists());
    }

    #[test]
    fn a_symlink_at_the_path_leaves_the_writer_without_a_file() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("elsewhere");
        fs::write(&target, "").unwrap();
        let p = tmp.path().join("usage.jsonl");
        symlink(&target, &p).unwrap();
        let mut log = LogFile::start(p.clone(), Rotation::Never, 7, T);
        assert!(!log.is_open());
        assert!(!log.write_line(T, b"x\n"));
        assert_eq!(fs::read_to_string(&target).unwrap(), "");
    }
}
