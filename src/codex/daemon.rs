//! A Codex TUI's thread when Codex's managed app-server daemon holds the rollouts (issue
//! 35 item 4). Since 0.169 the TUI starts or joins one detached `codex app-server
//! --managed-daemon` per `CODEX_HOME` (feature `daemon_auto_start`, on by default); that
//! daemon, not the TUI, holds every thread's rollout open, keeps those of TUIs that
//! closed, and outlives them. So "the one rollout the execution's process tree holds" finds
//! nothing, and the TUI's thread is found this way instead:
//!
//! 1. the TUI: the process in the execution's tree whose executable is named `codex`
//!    (the npm package's native binary; its `node` wrapper is its parent);
//! 2. its daemon: `$CODEX_HOME/app-server-daemon/daemon.pid` (JSON with `pid` and
//!    `processIdentity.startTicks`), checked against `/proc` (same start ticks, running);
//! 3. its thread, among the rollouts the daemon holds under `$CODEX_HOME/sessions`: the
//!    one named on the command line (`codex resume <uuid>`), or else the one thread created
//!    in the minute after the TUI started — thread ids are UUIDv7, whose first 48 bits are
//!    the creation time in unix ms, and a TUI creates its thread as it starts (recorded:
//!    2.6 s after the process on a loaded 2-core machine). A thread that another Codex TUI
//!    of the same `CODEX_HOME` could have created (one started between this TUI and the
//!    thread) is not taken, and neither is a second candidate: ambiguity finds nothing,
//!    never a guess.
//!
//! The holder reported is the TUI itself (its pid, start time and working directory), so
//! the incarnation and the stale-target rules stay those of the TUI: a TUI that exits
//! ends its requests even though the daemon keeps the file.
//!
//! Invariant: only reads `/proc` and `$CODEX_HOME`; a `codex resume` without an id (a
//! picker, `--last`) is not identified and stays out of the catalog.

use super::procfs::{self, Holder};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// How long after its TUI started a thread is taken as that TUI's: generous for a slow
/// start on a loaded machine, short enough that a later `/new` is not mistaken for it.
const CREATION_WINDOW_MS: u64 = 60_000;
/// Clock ticks are coarse (10 ms); a thread is never created before its process.
const TICK_SLACK_MS: u64 = 20;
/// Most processes looked at when counting other Codex TUIs.
const MAX_PROCS: usize = 16_384;
/// `daemon.pid` is a few hundred bytes.
const MAX_PID_FILE: u64 = 64 * 1024;

/// The Codex TUI among `pids` (lowest pid first), if any.
fn tui_among(pids: &[u32]) -> Option<u32> {
    pids.iter()
        .copied()
        .find(|&p| is_codex(p) && !is_app_server(p))
}

fn is_codex(pid: u32) -> bool {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .and_then(|e| e.file_name().map(|n| n == "codex"))
        .unwrap_or(false)
}

fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn is_app_server(pid: u32) -> bool {
    cmdline(pid).iter().any(|a| a == "app-server")
}

/// `CODEX_HOME` of `pid`: its environment's, else `$HOME/.codex`.
fn codex_home(pid: u32) -> Option<PathBuf> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let var = |name: &str| {
        env.split(|c| *c == 0).find_map(|kv| {
            let kv = std::str::from_utf8(kv).ok()?;
            kv.strip_prefix(name)?.strip_prefix('=').map(PathBuf::from)
        })
    };
    let home = var("CODEX_HOME").or_else(|| var("HOME").map(|h| h.join(".codex")))?;
    Some(home.canonicalize().unwrap_or(home))
}

/// The managed daemon of `home`, if it runs: its pid.
fn daemon_of(home: &Path) -> Option<u32> {
    let path = home.join("app-server-daemon/daemon.pid");
    // A FIFO there must not block the guardian's loop (issue 36 item 8).
    let f = super::rollout_file::open(&path).ok()?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(f, MAX_PID_FILE), &mut text).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    let pid = u32::try_from(v.get("pid")?.as_u64()?).ok()?;
    let ticks = v.pointer("/processIdentity/startTicks")?.as_u64()?;
    crate::process::is_running(pid, ticks).then_some(pid)
}

/// Unix milliseconds of a process start given in clock ticks since boot.
fn start_unix_ms(ticks: u64) -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let btime: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { nix::libc::sysconf(nix::libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|h| *h > 0)?;
    Some(btime * 1000 + ticks * 1000 / hz)
}

/// A UUID in its canonical textual form.
fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// The thread id a rollout file is named with (`rollout-<timestamp>-<uuid>.jsonl`).
fn thread_of(rollout: &Path) -> Option<&str> {
    let name = rollout.file_name()?.to_str()?.strip_suffix(".jsonl")?;
    let id = name.get(name.len().checked_sub(36)?..)?;
    is_uuid(id).then_some(id)
}

/// The creation time of a UUIDv7 thread id, in unix ms.
pub fn uuid_v7_ms(id: &str) -> Option<u64> {
    let hex: String = id.chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 || hex.as_bytes()[12] != b'7' {
        return None;
    }
    u64::from_str_radix(&hex[..12], 16).ok()
}

/// The thread id `codex resume <uuid>` names on a command line, if any.
fn resumed(args: &[String]) -> Option<&str> {
    let at = args.iter().position(|a| a == "resume")?;
    args[at + 1..]
        .iter()
        .map(String::as_str)
        .find(|a| is_uuid(a))
}

/// Which of `threads` (id, creation ms) the TUI started at `start_ms` created, given the
/// start times of the other Codex TUIs of its `CODEX_HOME`. See the module doc.
pub fn pick(start_ms: u64, threads: &[(String, u64)], others: &[u64]) -> Option<String> {
    let from = start_ms.saturating_sub(TICK_SLACK_MS);
    let mine: Vec<&String> = threads
        .iter()
        .filter(|(_, created)| (from..=start_ms + CREATION_WINDOW_MS).contains(created))
        .filter(|(_, created)| !others.iter().any(|o| (from..=*created).contains(o)))
        .map(|(id, _)| id)
        .collect();
    match mine.as_slice() {
        [one] => Some((*one).clone()),
        _ => None,
    }
}

/// Start times (unix ms) of the other Codex TUIs whose `CODEX_HOME` is `home`.
fn other_tuis(home: &Path, tui: u32) -> Vec<u64> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.take(MAX_PROCS)
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| p != tui && is_codex(p) && !is_app_server(p))
        .filter(|&p| codex_home(p).as_deref() == Some(home))
        .filter_map(|p| start_unix_ms(crate::process::start_time(p)?))
        .collect()
}

/// The rollout of the Codex agent among `pids`: the one rollout a process of the tree
/// holds (Codex without the daemon), or else the TUI's thread its managed daemon holds.
/// A daemon is never the holder, although the TUI that started it is its parent (so it is
/// in that TUI's tree until the TUI exits): it serves every TUI of its `CODEX_HOME` and
/// outlives them, so its pid would make a wrong incarnation.
pub fn holder(pids: &[u32]) -> Option<Holder> {
    let own: Vec<u32> = pids
        .iter()
        .copied()
        .filter(|&p| !is_app_server(p))
        .collect();
    procfs::holder_among(&own).or_else(|| holder_via_daemon(&own))
}

/// The rollout of the Codex TUI among `pids` when its managed daemon holds it.
pub fn holder_via_daemon(pids: &[u32]) -> Option<Holder> {
    let tui = tui_among(pids)?;
    let home = codex_home(tui)?;
    let daemon = daemon_of(&home)?;
    let sessions = home.join("sessions");
    let held: Vec<PathBuf> = procfs::rollouts_of(daemon)
        .into_iter()
        .filter(|p| p.starts_with(&sessions))
        .collect();
    let ticks = crate::process::start_time(tui)?;
    let chosen = match resumed(&cmdline(tui)) {
        Some(id) => id.to_string(),
        None => {
            let threads: Vec<(String, u64)> = held
                .iter()
                .filter_map(|p| {
                    let id = thread_of(p)?;
                    Some((id.to_string(), uuid_v7_ms(id)?))
                })
                .collect();
            pick(start_unix_ms(ticks)?, &threads, &other_tuis(&home, tui))?
        }
    };
    let rollout = held
        .into_iter()
        .find(|p| thread_of(p) == Some(chosen.as_str()))?;
    Some(Holder {
        pid: tui,
        start_time: ticks,
        rollout,
        cwd: std::fs::read_link(format!("/proc/{tui}/cwd")).ok(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_ids_carry_their_creation_time() {
        // Recorded: a thread Codex 0.169.0 created at 2026-12-04T07:28:40.121Z.
        assert_eq!(
            uuid_v7_ms("01a23ff4-88b9-7211-8be0-e7d49f47adc1"),
            Some(1_796_369_320_121)
        );
        assert_eq!(uuid_v7_ms("fe57dc90-994e-4e73-b09c-fac483d9f05b"), None);
        let p = Path::new(
            "/h/sessions/2026/12/04/rollout-2026-12-04T07-28-40-01a23ff4-88b9-7211-8be0-e7d49f47adc1.jsonl",
        );
        assert_eq!(thread_of(p), Some("01a23ff4-88b9-7211-8be0-e7d49f47adc1"));
        assert_eq!(thread_of(Path::new("/h/rollout-x.jsonl")), None);
        let args: Vec<String> = ["codex", "resume", "01a23ff4-88b9-7211-8be0-e7d49f47adc1"]
            .map(String::from)
            .into();
        assert_eq!(resumed(&args), Some("01a23ff4-88b9-7211-8be0-e7d49f47adc1"));
        assert_eq!(resumed(&["codex".to_string()]), None);
    }

    #[test]
    fn a_tui_takes_only_the_thread_it_alone_could_have_created() {
        let t = |id: &str, ms: u64| (id.to_string(), ms);
        // A closed TUI's thread (before), this TUI's (2.6 s after its start), a later /new.
        let threads = [t("old", 500), t("mine", 12_600), t("new", 90_000)];
        assert_eq!(pick(10_000, &threads, &[]), Some("mine".into()));
        // A second TUI started later: each takes its own.
        let threads = [t("a", 12_600), t("b", 32_600)];
        assert_eq!(pick(10_000, &threads, &[30_000]), Some("a".into()));
        assert_eq!(pick(30_000, &threads, &[10_000]), Some("b".into()));
        // Another TUI started between this one and the thread: not taken.
        assert_eq!(pick(10_000, &[t("x", 12_600)], &[11_000]), None);
        // Two candidates: ambiguous, nothing.
        assert_eq!(pick(10_000, &[t("a", 11_000), t("b", 12_000)], &[]), None);
        assert_eq!(pick(10_000, &[], &[]), None);
    }
}
