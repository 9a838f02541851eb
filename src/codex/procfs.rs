//! Which rollout file a process actually holds open (`/proc/<pid>/fd`), with the
//! process's start time and working directory — the observer's evidence that a rollout
//! belongs to the process a request targets, never "the newest file in the directory".

use std::path::PathBuf;

/// A process holding a rollout file open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    /// Clock ticks since boot (`/proc/<pid>/stat` field 22): with `pid`, an identity that
    /// survives pid reuse.
    pub start_time: u64,
    pub rollout: PathBuf,
    /// The process's working directory, when readable.
    pub cwd: Option<PathBuf>,
}

/// Most descriptors looked at per process (a process with more is not an agent TUI).
const MAX_FDS: usize = 4096;

/// Whether `path` names a Codex rollout file (`rollout-<timestamp>-<uuid>.jsonl`).
pub fn is_rollout(path: &std::path::Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("rollout-") && n.ends_with(".jsonl"))
}

/// The rollout files `pid` holds open, newest descriptor last.
pub fn rollouts_of(pid: u32) -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    let mut fds: Vec<(u32, PathBuf)> = dir
        .take(MAX_FDS)
        .filter_map(Result::ok)
        .filter_map(|e| {
            let n: u32 = e.file_name().to_str()?.parse().ok()?;
            let target = std::fs::read_link(e.path()).ok()?;
            is_rollout(&target).then_some((n, target))
        })
        .collect();
    fds.sort();
    let mut out: Vec<PathBuf> = Vec::new();
    for (_, p) in fds {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// The first of `pids` (in order) that holds a rollout open, with its identity. A
/// process that holds several is ambiguous and skipped.
pub fn holder_among(pids: &[u32]) -> Option<Holder> {
    pids.iter().find_map(|&pid| {
        let mut files = rollouts_of(pid);
        if files.len() != 1 {
            return None;
        }
        let start_time = crate::process::start_time(pid)?;
        Some(Holder {
            pid,
            start_time,
            rollout: files.pop()?,
            cwd: std::fs::read_link(format!("/proc/{pid}/cwd")).ok(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_rollout_is_found_with_this_process_identity() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("rollout-2026-12-01T10-00-00-0000.jsonl");
        let _f = std::fs::File::create(&path).unwrap();
        let me = std::process::id();
        let h = holder_among(&[me]).expect("this test holds a rollout open");
        assert_eq!(h.pid, me);
        assert_eq!(h.rollout.file_name(), path.file_name());
        assert_eq!(Some(h.start_time), crate::process::start_time(me));
        assert!(!is_rollout(std::path::Path::new("/x/rollout-1.json")));
        assert!(holder_among(&[u32::MAX]).is_none());
    }
}
