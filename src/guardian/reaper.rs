//! Every process a session started, detached or not, and ending them with the session.
//!
//! Commands escape their process group with `disown`, `nohup`, `setsid` or `(cmd &)`. A
//! `winx-guardian` process is a child subreaper (`PR_SET_CHILD_SUBREAPER`): orphans of its
//! shells are re-parented to it instead of init, so "descends from the guardian" covers
//! them all, whatever group or session they moved to. An embedded guardian is a thread of
//! the adapter, which is not marked (its orphans would mix with the adapter's own
//! children); there the session's processes are those descending from its shells, or
//! still in the shells' terminal sessions, found when the session ends.
//!
//! Invariant: `reap_strays` reaps only zombies that are not the session's own shell or
//! background pids, whose exit codes the session reads itself.

use nix::libc;
use std::collections::HashMap;

/// Mark this process a child subreaper; `false` if the kernel refused (then orphans go to
/// init, and only what is still in the shells' sessions is found).
pub fn become_subreaper() -> bool {
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Proc {
    ppid: i32,
    sid: i32,
    zombie: bool,
}

/// Parse `/proc/<pid>/stat`: the fields after the command name (which may hold spaces
/// and parentheses, so the last `)` ends it).
fn parse_stat(stat: &str) -> Option<Proc> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().take(5).collect();
    // state ppid pgrp session tty_nr
    Some(Proc {
        zombie: *f.first()? == "Z",
        ppid: f.get(1)?.parse().ok()?,
        sid: f.get(3)?.parse().ok()?,
    })
}

fn scan() -> HashMap<i32, Proc> {
    let mut out = HashMap::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Some(p) = std::fs::read_to_string(e.path().join("stat"))
            .ok()
            .as_deref()
            .and_then(parse_stat)
        {
            out.insert(pid, p);
        }
    }
    out
}

/// Live (non-zombie) processes that descend from one of `roots` or belong to one of the
/// terminal `sessions`; never this process or init.
pub fn session_processes(roots: &[i32], sessions: &[i32]) -> Vec<i32> {
    select(&scan(), roots, sessions, std::process::id() as i32)
}

fn select(procs: &HashMap<i32, Proc>, roots: &[i32], sessions: &[i32], me: i32) -> Vec<i32> {
    let descends = |mut pid: i32| {
        // Bounded walk: a pid cycle (reuse mid-scan) cannot loop forever.
        for _ in 0..procs.len().min(4096) {
            match procs.get(&pid) {
                Some(p) if roots.contains(&p.ppid) => return true,
                Some(p) if p.ppid > 1 => pid = p.ppid,
                _ => return false,
            }
        }
        false
    };
    let mut v: Vec<i32> = procs
        .iter()
        .filter(|(pid, p)| **pid != me && **pid > 1 && !p.zombie)
        .filter(|(pid, p)| roots.contains(pid) || sessions.contains(&p.sid) || descends(**pid))
        .map(|(pid, _)| *pid)
        .collect();
    v.sort_unstable();
    v
}

/// `pid` exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .as_deref()
        .and_then(parse_stat)
        .is_some_and(|p| !p.zombie)
}

pub fn signal_all(pids: &[i32], sig: i32) {
    for &pid in pids {
        // SAFETY: kill(2) on a pid found above; a pid that exited meanwhile gives ESRCH.
        unsafe { libc::kill(pid, sig) };
    }
}

/// Reap zombie children of this process that are not in `own` (re-parented orphans that
/// exited), so a subreaper never accumulates zombies.
pub fn reap_strays(own: &[i32]) {
    let me = std::process::id() as i32;
    for (pid, p) in scan() {
        if p.ppid == me && p.zombie && !own.contains(&pid) {
            // SAFETY: waitpid on one specific child of ours that has exited.
            unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(ppid: i32, sid: i32) -> Proc {
        Proc {
            ppid,
            sid,
            zombie: false,
        }
    }

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        let s = "42 (a) b) (c) S 7 42 9 34816 42 4194560 0";
        assert_eq!(parse_stat(s), Some(p(7, 9)));
        assert!(parse_stat("42 (x) Z 1 1 1 0").unwrap().zombie);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn descendants_and_session_members_are_selected() {
        // 100 guardian; 200 shell (sid 200); 300 its child; 400 a setsid grandchild;
        // 500 an orphan still in the shell's session; 600 unrelated; 700 a zombie child.
        let mut procs = HashMap::new();
        procs.insert(100, p(1, 1));
        procs.insert(200, p(100, 200));
        procs.insert(300, p(200, 200));
        procs.insert(400, p(300, 400));
        procs.insert(500, p(1, 200));
        procs.insert(600, p(1, 600));
        let mut z = p(200, 200);
        z.zombie = true;
        procs.insert(700, z);
        assert_eq!(select(&procs, &[100], &[], 100), vec![200, 300, 400]);
        assert_eq!(
            select(&procs, &[200], &[200], 100),
            vec![200, 300, 400, 500]
        );
    }
}
