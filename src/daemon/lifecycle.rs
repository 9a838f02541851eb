//! Session lifecycle decisions: who is live, who is idle past its tier, who may be
//! reclaimed under quota pressure. The guardians' own clocks are the source of truth.
//!
//! Invariant: a session with a running foreground or background command is never removed
//! here, whatever its age; used sessions are never reclaimed for quota.

use crate::ipc::GuardianClient;
use crate::ipc::guardian_socket;
use crate::wire::daemon::{Lifecycle, SessionInfo};
use crate::wire::error::{PRUNE_HINT, RuntimeError};
use crate::wire::guardian::{Request, Response, Snapshot};
use std::fs;
use std::path::Path;
use std::time::Duration;

/// How long a guardian has to answer a liveness snapshot.
const PROBE_WAIT: Duration = Duration::from_secs(2);

/// Every guardian answering on a socket under `runtime_dir/g`; sockets nobody answers on
/// are stale and removed.
pub fn live_sessions(runtime_dir: &Path) -> Vec<SessionInfo> {
    let mut out = Vec::new();
    let Ok(dir) = fs::read_dir(runtime_dir.join("g")) else {
        return out;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(key) = name.strip_suffix(".sock") else {
            continue;
        };
        let socket = guardian_socket(runtime_dir, key);
        match GuardianClient::new(&socket).call(&Request::Snapshot, PROBE_WAIT) {
            Ok(Response::Snapshot(snapshot)) => out.push(SessionInfo {
                key: key.to_string(),
                snapshot,
            }),
            _ => {
                log::info!("removing stale guardian socket {}", socket.display());
                let _ = fs::remove_file(&socket);
            }
        }
    }
    out.sort_by_key(|s| s.snapshot.created_at_ms);
    out
}

pub fn is_active(s: &Snapshot) -> bool {
    s.running.is_some() || !s.background.is_empty()
}

fn idle_ms(s: &Snapshot, now: i64) -> i64 {
    now - s.last_activity_ms
}

/// Idle past its tier (a tier of 0 is disabled).
pub fn expired_by_tier(s: &Snapshot, l: &Lifecycle, now: i64) -> bool {
    let ttl = if s.ever_ran_command {
        l.used_ttl_secs
    } else {
        l.unused_ttl_secs
    };
    !is_active(s) && ttl > 0 && idle_ms(s, now) >= (ttl as i64).saturating_mul(1000)
}

/// Idle for at least `secs` (0: every idle session).
pub fn idle_for(s: &Snapshot, secs: u64, now: i64) -> bool {
    !is_active(s) && idle_ms(s, now) >= (secs as i64).saturating_mul(1000)
}

/// How long a guardian may take to end after acknowledging `Shutdown` (its 2 s SIGTERM
/// grace plus reaping).
const END_WAIT: Duration = Duration::from_secs(5);

/// Ask a guardian to end its session and wait until it has: when this returns `true`, its
/// processes are gone and their background slots released.
pub fn shut_down(runtime_dir: &Path, key: &str) -> bool {
    let socket = guardian_socket(runtime_dir, key);
    matches!(
        GuardianClient::new(&socket).shutdown_and_wait(END_WAIT),
        Ok(Response::Done)
    )
}

/// Remove every live session `pick` selects (given "now" in ms); returns their thread ids.
pub fn remove_where(
    runtime_dir: &Path,
    now: i64,
    pick: impl Fn(&Snapshot, i64) -> bool,
) -> Vec<String> {
    live_sessions(runtime_dir)
        .into_iter()
        .filter(|s| pick(&s.snapshot, now))
        .filter(|s| shut_down(runtime_dir, &s.key))
        .map(|s| s.snapshot.labels.thread_id)
        .collect()
}

/// Make room for one more guardian, or explain why there is none.
pub fn make_room(runtime_dir: &Path, l: &Lifecycle) -> Result<(), RuntimeError> {
    remove_where(runtime_dir, l.now_ms(), |s, now| expired_by_tier(s, l, now));
    // Each round either frees a slot or re-lists; a victim that vanished on its own between
    // listing and shutdown is simply gone. Bounded so a guardian refusing to stop cannot
    // loop us forever.
    for _ in 0..=l.max_guardians * 2 {
        let live = live_sessions(runtime_dir);
        if live.len() < l.max_guardians {
            return Ok(());
        }
        // The oldest inactive session that never ran a command is disposable.
        let victim = live
            .iter()
            .filter(|s| !s.snapshot.ever_ran_command && !is_active(&s.snapshot))
            .min_by_key(|s| s.snapshot.last_activity_ms);
        let Some(v) = victim else {
            return Err(RuntimeError::Quota {
                limit: l.max_guardians,
                prune: PRUNE_HINT.into(),
            });
        };
        log::info!(
            "quota: reclaiming never-used session {}",
            v.snapshot.labels.thread_id
        );
        shut_down(runtime_dir, &v.key);
    }
    Err(RuntimeError::unexpected("could not free a guardian slot"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::guardian::Labels;

    fn snap(ever_ran: bool, idle_s: i64, running: bool) -> Snapshot {
        Snapshot {
            labels: Labels::default(),
            guardian_pid: 1,
            shell_pid: 2,
            shell_alive: true,
            cwd: "/".into(),
            created_at_ms: 0,
            last_activity_ms: 1_000_000 - idle_s * 1000,
            last_command_ms: None,
            ever_ran_command: ever_ran,
            running: running.then(|| "x".into()),
            background: vec![],
            build: String::new(),
            capabilities: Vec::new(),
        }
    }

    #[test]
    fn tiers() {
        let l = Lifecycle {
            unused_ttl_secs: 10,
            used_ttl_secs: 100,
            max_guardians: 4,
            sweep_secs: 60,
            clock_skew_secs: 0,
        };
        let now = 1_000_000;
        assert!(expired_by_tier(&snap(false, 11, false), &l, now));
        assert!(!expired_by_tier(&snap(true, 11, false), &l, now));
        assert!(expired_by_tier(&snap(true, 101, false), &l, now));
        assert!(
            !expired_by_tier(&snap(true, 10_000, true), &l, now),
            "active is never expired"
        );
        let off = Lifecycle {
            unused_ttl_secs: 0,
            ..l
        };
        assert!(
            !expired_by_tier(&snap(false, 10_000, false), &off, now),
            "0 disables the tier"
        );
        assert!(idle_for(&snap(true, 0, false), 0, now));
        assert!(!idle_for(&snap(true, 0, true), 0, now));
    }
}
