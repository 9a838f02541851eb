//! Codex agents in this session (issue 15): an execution whose process tree holds a Codex
//! rollout open is a target; its rollout is followed incrementally (bytes appended since
//! the last look) so `CodexTargets` and `CodexAdmit` read only what is new.
//!
//! Invariants: a prompt is written only in the same loop turn as the checks that allow it
//! (same incarnation, rollout idle with no half-written line — or, for `agent send`'s
//! one-way steering, a busy rollout whose screen the Codex recognizer sees working, never
//! an approval prompt — the process still running), as one buffer; a
//! refusal writes nothing. A write the terminal took no byte of is `delivery_failed`
//! (nothing reached the agent); one that failed part-way is `indeterminate`. The guardian never opens SQLite: requests are
//! registered and completed by the admitting process and the request observer.

use super::reaper;
use super::session::Session;
use crate::codex::procfs::Holder;
use crate::codex::rollout_file;
use crate::codex::turns::{Phase, Tracker};
use crate::shell::turn::{self, Choice, RecognitionInput, TurnState};
use crate::shell::{pty, submit};
use crate::wire::codex::{AdmitOutcome, CodexAdmit, CodexAdmitReply, CodexTarget, PasteMode};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, RawFd};

/// Most rollout bytes read per look, in chunks of `rollout_file::READ_CHUNK` (the memory
/// a look holds): a long backlog is caught up over several looks, so one look is a
/// bounded turn of the poll loop (issue 36 item 7); the target reads `busy` meanwhile,
/// never a stale `idle`.
const READ_BUDGET: u64 = 16 * 1024 * 1024;

fn hex(data: &[&[u8]], n: usize) -> String {
    let mut h = Sha256::new();
    for d in data {
        h.update((d.len() as u64).to_be_bytes());
        h.update(d);
    }
    let digest = h.finalize();
    crate::hex::lower(&digest[..(n / 2).min(digest.len())])
}

/// One execution's rollout, followed from its start.
struct View {
    holder: Holder,
    tracker: Tracker,
    /// Bytes read so far (complete lines plus the pending partial line).
    read: u64,
    /// The last look stopped at its budget before the end of the file.
    behind: bool,
    unreadable: bool,
}

impl View {
    fn new(holder: Holder) -> View {
        View {
            holder,
            tracker: Tracker::default(),
            read: 0,
            behind: false,
            unreadable: false,
        }
    }

    /// Read what was appended since the last look; a file that shrank was replaced or
    /// truncated and is followed again from its start.
    fn refresh(&mut self) {
        // Not blocking on a FIFO named like a rollout, nothing but a regular file (issue
        // 36 item 8).
        let Ok(mut f) = rollout_file::open(&self.holder.rollout) else {
            self.unreadable = true;
            return;
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.read {
            *self = View::new(self.holder.clone());
        }
        let tracker = &mut self.tracker;
        match rollout_file::read_chunks(
            &mut f,
            self.read,
            (len - self.read).min(READ_BUDGET),
            |c| {
                tracker.feed(c);
                true
            },
        ) {
            Ok(n) => {
                self.read += n;
                self.behind = self.read < len;
                self.unreadable = false;
            }
            Err(_) => self.unreadable = true,
        }
    }
}

/// An execution that may host an agent: its id, the root of its process tree, its
/// terminal, and its command.
struct Candidate {
    id: String,
    foreground: bool,
    root: i32,
    master: RawFd,
    command: String,
}

fn candidates(s: &Session) -> Vec<Candidate> {
    let mut v = Vec::new();
    if let Some(e) = s.fg.as_ref().filter(|e| e.exit_code.is_none()) {
        v.push(Candidate {
            id: e.id.clone(),
            foreground: true,
            root: s.shell.pid,
            master: s.shell.master.as_raw_fd(),
            command: e.command.clone(),
        });
    }
    for b in s.bg.values().filter(|b| b.exec.exit_code.is_none()) {
        if let Some(m) = &b.master {
            v.push(Candidate {
                id: b.exec.id.clone(),
                foreground: false,
                root: b.pid,
                master: m.as_raw_fd(),
                command: b.exec.command.clone(),
            });
        }
    }
    v
}

/// Why a steered write must not go to execution `id` now, from its own screen: the
/// rollout says busy both while the model works and while Codex asks for approval, and a
/// steered Enter would answer that prompt (its selected option approves). Steering is
/// allowed only when the Codex recognizer sees the turn working (issue 37 item 11).
fn steer_refusal(s: &Session, id: &str) -> Option<String> {
    let Some((screen, quiet_ms)) = s.live_screen(id) else {
        return Some("the agent's screen cannot be read: steering is refused".into());
    };
    let input = RecognitionInput {
        screen: &screen,
        quiet_ms,
        running: true,
    };
    let choice = Choice::Named("codex".into());
    let state = turn::recognize(&choice, &input, None).map(|d| d.state);
    match state {
        Ok(TurnState::Busy) => None,
        Ok(TurnState::AwaitingApproval) => Some(
            "a provider turn is running and the agent's screen shows an approval prompt \
             (awaiting_approval): steering would answer it; answer it in the session, then \
             send again"
                .into(),
        ),
        _ => Some(
            "a provider turn is running and the agent's screen is not recognised as working \
             (it may be asking something): steering is refused; send again when the turn \
             is idle"
                .into(),
        ),
    }
}

#[derive(Default)]
pub struct CodexTargets {
    views: HashMap<String, View>,
}

impl CodexTargets {
    /// Every Codex agent running in `s` now, each rollout read up to its end.
    pub fn list(&mut self, s: &Session) -> Vec<CodexTarget> {
        self.scan(s).into_iter().map(|(t, _)| t).collect()
    }

    fn scan(&mut self, s: &Session) -> Vec<(CodexTarget, RawFd)> {
        let cands = candidates(s);
        self.views.retain(|id, _| cands.iter().any(|c| &c.id == id));
        let labels = &s.spec.labels;
        let mut out = Vec::new();
        for c in cands {
            let mut pids: Vec<u32> = reaper::session_processes(&[c.root], &[])
                .into_iter()
                .filter_map(|p| u32::try_from(p).ok())
                .collect();
            // Deepest first is not knowable from pids; the lowest pid is the oldest.
            pids.sort_unstable();
            let Some(holder) = crate::codex::daemon::holder(&pids) else {
                self.views.remove(&c.id);
                continue;
            };
            let view = self
                .views
                .entry(c.id.clone())
                .or_insert_with(|| View::new(holder.clone()));
            if view.holder != holder {
                *view = View::new(holder.clone());
            }
            view.refresh();
            let agent_id = format!(
                "codex-{}",
                hex(
                    &[
                        labels.thread_id.as_bytes(),
                        labels.workspace.as_bytes(),
                        c.id.as_bytes()
                    ],
                    16
                )
            );
            let conversation = view.tracker.session.clone();
            let observer = match (&conversation, &holder.cwd) {
                _ if view.unreadable => "unreadable",
                (Some((_, declared)), Some(cwd))
                    if !declared.is_empty() && std::path::Path::new(declared) != cwd =>
                {
                    "cwd_mismatch"
                }
                _ => "attached",
            };
            let phase = match (observer, view.tracker.lines.pending()) {
                ("attached", 0) if !view.behind => view.tracker.phase(),
                ("attached", _) => Phase::Busy,
                _ => Phase::Fresh,
            };
            let armed = view.tracker.armable();
            let conversation_id = conversation.map(|(id, _)| id);
            let incarnation = hex(
                &[
                    agent_id.as_bytes(),
                    &holder.pid.to_be_bytes(),
                    &holder.start_time.to_be_bytes(),
                    conversation_id.as_deref().unwrap_or("").as_bytes(),
                ],
                24,
            );
            out.push((
                CodexTarget {
                    agent_id,
                    execution_id: c.id,
                    foreground: c.foreground,
                    command: c.command,
                    pid: holder.pid,
                    start_time: holder.start_time,
                    incarnation,
                    rollout: holder.rollout.to_string_lossy().into_owned(),
                    conversation_id,
                    observer: observer.to_string(),
                    phase: if observer == "attached" {
                        phase.as_str()
                    } else {
                        "unknown"
                    }
                    .to_string(),
                    baseline_turn: armed.as_ref().map(|(_, t)| t.clone()),
                    cursor: armed.map(|(c, _)| c),
                },
                c.master,
            ));
        }
        out
    }

    /// Check, then write once (see the module invariants).
    pub fn admit(&mut self, s: &mut Session, ask: &CodexAdmit) -> CodexAdmitReply {
        let found = self
            .scan(s)
            .into_iter()
            .find(|(t, _)| t.agent_id == ask.agent_id);
        let refuse = |outcome, detail: &str, target: Option<CodexTarget>| CodexAdmitReply {
            outcome,
            detail: detail.to_string(),
            target,
        };
        let Some((t, master)) = found else {
            return refuse(
                AdmitOutcome::Unavailable,
                "no such Codex agent runs in this session",
                None,
            );
        };
        if t.incarnation != ask.incarnation {
            let d = "the agent now runs as another incarnation (process or conversation changed)";
            return refuse(AdmitOutcome::StaleIncarnation, d, Some(t));
        }
        if !crate::process::is_running(t.pid, t.start_time) {
            return refuse(
                AdmitOutcome::Unavailable,
                "the Codex process has exited",
                Some(t),
            );
        }
        match (t.observer.as_str(), t.phase.as_str(), ask.armable) {
            // `agent send` steers the running turn (seed 001), but only a turn its screen
            // shows working; `admit` never steers.
            ("attached", "busy", false) if ask.steer => {
                if let Some(d) = steer_refusal(s, &t.execution_id) {
                    return refuse(AdmitOutcome::Busy, &d, Some(t));
                }
            }
            ("attached", "busy", _) => {
                return refuse(AdmitOutcome::Busy, "a provider turn is running", Some(t));
            }
            ("attached", "idle", _) | ("attached", "fresh", false) => {}
            ("attached", _, true) => {
                let d = "no cursor for a completed baseline turn: return-final correlation is \
                         unavailable (a one-way admission is possible)";
                return refuse(AdmitOutcome::ObserverFailure, d, Some(t));
            }
            (why, _, _) => {
                let d = format!("the rollout observer is not attached ({why})");
                return refuse(AdmitOutcome::ObserverFailure, &d, Some(t));
            }
        }
        let bytes = submit::bytes(&ask.text, ask.paste == PasteMode::Bracketed);
        s.touch();
        s.activity.bump();
        let steered = t.phase == "busy";
        match pty::write_counted(master, &bytes) {
            (_, Ok(())) if steered => refuse(
                AdmitOutcome::Written,
                "written once, into the running turn (steering)",
                Some(t),
            ),
            (_, Ok(())) => refuse(AdmitOutcome::Written, "written once", Some(t)),
            (0, Err(e)) => refuse(
                AdmitOutcome::DeliveryFailed,
                &format!("the agent's terminal took none of the prompt: {e}"),
                Some(t),
            ),
            (n, Err(e)) => refuse(
                AdmitOutcome::Indeterminate,
                &format!(
                    "write failed part-way ({n} of {} bytes taken): {e}",
                    bytes.len()
                ),
                Some(t),
            ),
        }
    }
}
