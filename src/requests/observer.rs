//! The request observer: a detached process (`winx-code-agent agent observe`) that owns
//! one return-final request from its admission until its terminal event. It follows the
//! target's rollout from the armed cursor (inotify), correlates the bound provider turn
//! (`codex::turns::Correlation`), and commits exactly one terminal event.
//!
//! Startup handshake: the admitter starts the observer, records it as the request's
//! owner together with the written receipt, then writes `go` on its stdin. End of input
//! without `go` means the admitter died in between: the request is settled (indeterminate
//! if it was left open), never followed.
//!
//! Invariant: the observer never writes to the agent; it only reads the rollout and
//! writes this request's row (conditionally: a request cancelled meanwhile stays
//! cancelled).

use super::follow::{Wake, Watcher};
use super::receipt::Receipt;
use crate::codex::turns::{Correlation, Lines, Verdict};
use crate::deadline::{Deadline, unix_ms};
use crate::store::Store;
use crate::store::agent_requests::{SUBMITTED, Terminal};
use std::io::{BufRead, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

/// A started observer, not yet told to go.
pub struct Spawned {
    child: Child,
    stdin: ChildStdin,
    identity: (u32, u64),
}

impl Spawned {
    /// `pid:start` as the request's owner.
    pub fn owner(&self) -> String {
        super::owner_key(self.identity)
    }

    /// Let it follow the request (its row is written). The child is reaped by a thread
    /// in long-lived admitters; a CLI exits and leaves it to init.
    pub fn go(self) {
        let Spawned {
            mut child,
            mut stdin,
            ..
        } = self;
        let _ = stdin.write_all(b"go\n");
        drop(stdin);
        let _ = std::thread::Builder::new()
            .name("observer-reaper".into())
            .spawn(move || child.wait());
    }
}

/// Start `exe agent observe` for the request, in its own process group (a terminal's
/// hang-up or Ctrl-C aimed at the admitter does not reach it).
pub fn spawn(exe: &Path, state_dir: &Path, principal: &str, id: &str) -> std::io::Result<Spawned> {
    let mut child = Command::new(exe)
        .args([
            "agent",
            "observe",
            "--principal",
            principal,
            "--request-id",
            id,
        ])
        .arg("--state-dir")
        .arg(state_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?;
    let pid = child.id();
    let start = crate::process::start_time(pid).unwrap_or(0);
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("no stdin pipe"))?;
    Ok(Spawned {
        child,
        stdin,
        identity: (pid, start),
    })
}

/// Commit one terminal event (conditional: a request already terminal is left as is).
pub(super) fn finish(
    store: &Store,
    principal: &str,
    id: &str,
    state: &str,
    msg: Option<&str>,
    reason: Option<&str>,
    turn: Option<&str>,
) {
    let t = Terminal {
        state,
        final_message: msg,
        reason,
        turn_id: turn,
        at_ms: unix_ms(),
    };
    if let Err(e) = store.request_finish(principal, id, &t) {
        log::error!("request {id}: could not record {state}: {e}");
    }
}

/// Follow request `id` of `principal` to its end. `input` is the handshake pipe.
pub fn run(
    store: &Store,
    state_dir: &Path,
    principal: &str,
    id: &str,
    input: impl Read,
) -> Result<(), String> {
    let mut line = String::new();
    let _ = std::io::BufReader::new(input).read_line(&mut line);
    let row = store
        .request_get(principal, id)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no request {id}"))?;
    if row.state != SUBMITTED || row.owner != super::this_owner() {
        // Not handed to us (the admitter died first, or someone else owns it).
        return super::reconcile::one(store, principal, id).map_err(|e| e.to_string());
    }
    let correlation = row
        .receipt
        .as_deref()
        .and_then(|r| serde_json::from_str::<Receipt>(r).ok())
        .and_then(|r| r.correlation);
    let (Some(c), Some(cursor)) = (correlation, row.armed_cursor) else {
        finish(
            store,
            &row.principal,
            &row.request_id,
            "indeterminate",
            None,
            Some("no correlation cursor was armed"),
            None,
        );
        return Ok(());
    };
    let deadline = match row.deadline_unix_ms {
        Some(at) => Deadline::after(
            "final timeout",
            Duration::from_millis((at - unix_ms()).max(0) as u64),
        ),
        None => Deadline::never("final timeout"),
    };
    let mut follower = Follower {
        file: None,
        ino: 0,
        pos: cursor as u64,
        lines: Lines::starting_at(cursor as u64),
        corr: Correlation::new(&row.prompt_sha256),
    };
    let mut watcher = Watcher::new().map_err(|e| e.to_string())?;
    let rollout = Path::new(&c.rollout);
    let _ = watcher.file(rollout);
    let _ = watcher.dir(state_dir);
    watcher.process(c.target_pid);
    loop {
        match store.request_get(principal, id) {
            Ok(Some(r)) if r.state != SUBMITTED => return Ok(()),
            Ok(None) => return Ok(()),
            _ => {}
        }
        let verdict = follower.look(rollout);
        let outcome = match verdict {
            Verdict::Pending if !crate::process::is_running(c.target_pid, c.target_start_time) => {
                Verdict::Indeterminate {
                    reason: "the Codex process exited before the bound provider turn completed"
                        .into(),
                }
            }
            v => v,
        };
        match outcome {
            Verdict::Pending => {}
            Verdict::Completed {
                turn_id,
                final_message,
            } => {
                finish(
                    store,
                    &row.principal,
                    &row.request_id,
                    "completed",
                    Some(final_message.as_deref().unwrap_or("")),
                    None,
                    Some(&turn_id),
                );
                return Ok(());
            }
            Verdict::Aborted { turn_id, reason } => {
                finish(
                    store,
                    &row.principal,
                    &row.request_id,
                    "aborted",
                    None,
                    Some(&reason),
                    Some(&turn_id),
                );
                return Ok(());
            }
            Verdict::Indeterminate { reason } => {
                let turn = follower.corr.bound.clone();
                finish(
                    store,
                    &row.principal,
                    &row.request_id,
                    "indeterminate",
                    None,
                    Some(&reason),
                    turn.as_deref(),
                );
                return Ok(());
            }
        }
        if watcher.wait(&deadline) == Wake::TimedOut {
            // A final written in the last instant still counts.
            if let Verdict::Completed {
                turn_id,
                final_message,
            } = follower.look(rollout)
            {
                finish(
                    store,
                    &row.principal,
                    &row.request_id,
                    "completed",
                    Some(final_message.as_deref().unwrap_or("")),
                    None,
                    Some(&turn_id),
                );
            } else {
                let reason = "the final did not arrive within final_timeout_ms";
                let turn = follower.corr.bound.clone();
                finish(
                    store,
                    &row.principal,
                    &row.request_id,
                    "timed_out",
                    None,
                    Some(reason),
                    turn.as_deref(),
                );
            }
            return Ok(());
        }
    }
}

/// The rollout from the armed cursor on.
struct Follower {
    file: Option<std::fs::File>,
    ino: u64,
    pos: u64,
    lines: Lines,
    corr: Correlation,
}

impl Follower {
    fn indeterminate(reason: &str) -> Verdict {
        Verdict::Indeterminate {
            reason: reason.to_string(),
        }
    }

    /// Read what was appended and correlate it; the file replaced or cut below the
    /// cursor is indeterminate.
    fn look(&mut self, path: &Path) -> Verdict {
        let Ok(meta) = std::fs::metadata(path) else {
            return Follower::indeterminate("the rollout file disappeared");
        };
        if self.file.is_none() {
            // Not blocking on a FIFO, not following a symlink, nothing but a regular file
            // (issue 36 item 8).
            match crate::codex::rollout_file::open(path) {
                Ok(f) => {
                    self.ino = f.metadata().map(|m| m.ino()).unwrap_or(0);
                    self.file = Some(f);
                }
                Err(_) => return Follower::indeterminate("the rollout file is unreadable"),
            }
        }
        if meta.ino() != self.ino {
            return Follower::indeterminate("the rollout file was replaced");
        }
        if meta.len() < self.pos {
            return Follower::indeterminate(
                "the rollout file was truncated below the armed cursor",
            );
        }
        let Some(f) = self.file.as_mut() else {
            return Verdict::Pending;
        };
        // One bounded chunk at a time, line by line (issue 36 item 7): growth of any
        // size costs one chunk plus at most one line of `rollout::MAX_LINE`.
        let (lines, corr) = (&mut self.lines, &mut self.corr);
        let mut verdict = Verdict::Pending;
        let read =
            crate::codex::rollout_file::read_chunks(f, self.pos, meta.len() - self.pos, |c| {
                for seen in lines.feed(c) {
                    match corr.on(&seen) {
                        Verdict::Pending => {}
                        v => {
                            verdict = v;
                            return false;
                        }
                    }
                }
                true
            });
        match read {
            Ok(n) => self.pos += n,
            Err(_) => return Follower::indeterminate("the rollout file could not be read"),
        }
        verdict
    }
}
