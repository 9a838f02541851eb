//! Native prompts (issue 14): text and Enter are written to the running execution a
//! prompt names — the foreground program on the shell's terminal, or a background command
//! on its own PTY (issue 37 item 3: an orchestrator's several agents) — only while that
//! terminal's screen says it waits for input and its input box holds no draft, as one
//! buffer in the same event-loop turn as the checks, framed as `agent admit` frames it
//! (`submit`: a bracketed paste when the program turned that on, then Enter), so an agent
//! TUI submits it rather than keeping it as a draft (issue 35); afterwards the guardian
//! watches that execution's screen for activity against the baseline taken at the write.
//!
//! Invariants: nothing is written unless every check passed in this turn (a refusal
//! writes nothing). Activity is strict: a busy or approval state recognised from the
//! screen (a rule matched; output timing never counts), on a screen that differs from the
//! baseline, and never for a prompt whose own text looks like such a marker (its echo
//! could be what matched). Once observed, activity stays observed.

use super::prompt_watch::{MAX_WATCHES, PENDING_MS, Watch};
use super::session::Session;
use crate::deadline::unix_ms;
use crate::shell::turn::composer::{self, Composer};
use crate::shell::turn::{self, Choice, RecognitionInput, SOURCE_SCREEN, TurnState};
use crate::shell::{pty, submit};
use crate::wire::guardian::{
    PromptAsk, PromptDelivery, PromptRefusal, PromptReply, PromptStatus, guardian_identity,
};
use std::os::fd::{AsRawFd, RawFd};

/// A running execution a prompt can be written to: its terminal and where to write.
struct Target<'a> {
    screen: &'a vt100::Screen,
    quiet_ms: u64,
    master: RawFd,
    /// Output bytes its terminal printed so far.
    total: u64,
}

fn wire_state(s: TurnState) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

impl Session {
    /// The runtime generation: this guardian's identity and its current shell (a reset
    /// starts a new generation).
    pub fn generation(&self) -> String {
        let id = guardian_identity(std::process::id(), self.clocks.created_ms);
        format!("{id}/{}", self.shell.pid)
    }

    /// The screen of the running execution `id` (foreground or background) and how long
    /// it has been quiet.
    pub(super) fn live_screen(&self, id: &str) -> Option<(String, u64)> {
        if let Some(b) = self.bg.values().find(|b| b.exec.id == id) {
            let s = b.screen.as_ref().filter(|_| !b.exec.finished())?;
            return Some((super::exec::screen_text(s.vt.screen()), s.quiet_ms()));
        }
        // Rendered only for the running foreground `id` (a watch of an ended execution
        // stays cheap on every loop turn).
        self.fg.as_ref().filter(|e| e.id == id && !e.finished())?;
        let f = self.screen_fact()?;
        Some((f.text, f.quiet_ms))
    }

    /// The running execution `id` as a prompt's target, if it can take input now.
    fn target(&self, id: &str) -> Option<Target<'_>> {
        if let Some(b) = self.bg.values().find(|b| b.exec.id == id) {
            let s = b.screen.as_ref().filter(|_| !b.exec.finished())?;
            return Some(Target {
                screen: s.vt.screen(),
                quiet_ms: s.quiet_ms(),
                master: b.master.as_ref()?.as_raw_fd(),
                total: b.exec.log.total(),
            });
        }
        self.fg.as_ref().filter(|e| e.id == id && !e.finished())?;
        if !self.shell.alive {
            return None;
        }
        Some(Target {
            screen: self.vt.screen(),
            quiet_ms: (unix_ms() - self.clocks.last_activity_ms).max(0) as u64,
            master: self.shell.master.as_raw_fd(),
            total: self.transcript.total(),
        })
    }

    /// Why no prompt can go to `id` now.
    fn gone(&self, id: &str) -> PromptRefusal {
        let finished_bg = self.bg.values().any(|b| b.exec.id == id);
        match &self.fg {
            Some(e) if e.id == id => PromptRefusal::Exited,
            _ if finished_bg => PromptRefusal::Exited,
            _ => PromptRefusal::NotRunning,
        }
    }

    fn refuse(&self, refusal: PromptRefusal, state: Option<String>) -> PromptReply {
        PromptReply {
            delivery: PromptDelivery::Refused,
            refusal: Some(refusal),
            generation: self.generation(),
            baseline_seq: self.activity.seq,
            suppressed: false,
            state,
        }
    }

    /// Check readiness and write `text` + Enter once, or refuse and write nothing.
    pub fn prompt(&mut self, ask: &PromptAsk) -> PromptReply {
        if ask.runtime != guardian_identity(std::process::id(), self.clocks.created_ms) {
            return self.refuse(PromptRefusal::GenerationChanged, None);
        }
        let choice = match Choice::parse(&ask.recognizer) {
            Ok(Choice::Configurable) | Err(_) => {
                return self.refuse(PromptRefusal::UnsupportedRecognizer, None);
            }
            Ok(c) => c,
        };
        if self.prompts.watches.iter().any(|w| w.key == ask.key) {
            return self.refuse(PromptRefusal::AlreadySent, None);
        }
        let now = unix_ms();
        // Every check reads the target's terminal in this turn; the write follows at once.
        let (screen, master, total, state, bracketed) = {
            let Some(t) = self.target(&ask.execution_id) else {
                return self.refuse(self.gone(&ask.execution_id), None);
            };
            let screen = super::exec::screen_text(t.screen);
            let pending = self.prompts.watches.iter().any(|w| {
                w.execution_id == ask.execution_id
                    && !w.activity
                    && now - w.written_ms < PENDING_MS
                    && !(t.total > w.written_total && screen == w.baseline)
            });
            if pending {
                let state = Some("previous_prompt_pending".to_string());
                return self.refuse(PromptRefusal::NotReady, state);
            }
            let input = RecognitionInput {
                screen: &screen,
                quiet_ms: t.quiet_ms,
                running: true,
            };
            let detection = match turn::recognize(&choice, &input, None) {
                Ok(d) => d,
                Err(_) => return self.refuse(PromptRefusal::UnsupportedRecognizer, None),
            };
            let state = wire_state(detection.state);
            if !matches!(detection.state, TurnState::AwaitingInput | TurnState::Idle) {
                return self.refuse(PromptRefusal::NotReady, Some(state));
            }
            // A draft in the input box would be merged with the prompt and submitted with
            // it; an agent's input box that cannot be found cannot be checked.
            match composer::on_screen(t.screen, &detection.recognizer) {
                Composer::HoldsText => {
                    return self.refuse(
                        PromptRefusal::NotReady,
                        Some(Composer::HoldsText.as_str().into()),
                    );
                }
                Composer::NotFound if composer::depth(&detection.recognizer) > 0 => {
                    return self.refuse(
                        PromptRefusal::NotReady,
                        Some(Composer::NotFound.as_str().into()),
                    );
                }
                Composer::Empty | Composer::NotFound => {}
            }
            let bracketed = submit::bracketed(t.screen);
            (screen, t.master, t.total, state, bracketed)
        };
        if bracketed && ask.text.contains(submit::PASTE_END) {
            // It would end the paste early and type the rest (the tool refuses it first).
            return self.refuse(PromptRefusal::NotReady, Some("text_holds_paste_end".into()));
        }
        let baseline_seq = self.activity.seq;
        let bytes = submit::bytes(&ask.text, bracketed);
        self.touch();
        if let Some(s) = self
            .bg
            .values_mut()
            .find(|b| b.exec.id == ask.execution_id)
            .and_then(|b| b.screen.as_mut())
        {
            s.last_output_ms = now;
        }
        // One buffer: the kernel may take a long text in pieces, but Enter is never a
        // separate request made after another check.
        let written = pty::write_all(master, &bytes);
        let suppressed = turn::resembles_activity(&ask.text, usize::from(pty::DEFAULT_COLS));
        self.activity.bump();
        let delivery = match written {
            Ok(()) => PromptDelivery::Delivered,
            // Some bytes may have gone: the caller must not resend.
            Err(_) => PromptDelivery::Uncertain,
        };
        self.prompts.watches.push_back(Watch {
            key: ask.key.to_string(),
            execution_id: ask.execution_id.to_string(),
            generation: self.generation(),
            choice,
            baseline: screen,
            suppressed,
            activity: false,
            written_ms: now,
            written_total: total,
        });
        while self.prompts.watches.len() > MAX_WATCHES {
            self.prompts.watches.pop_front();
        }
        PromptReply {
            delivery,
            refusal: None,
            generation: self.generation(),
            baseline_seq,
            suppressed,
            state: Some(state),
        }
    }

    /// Recognise watched executions' screens now, so short busy phases are not missed
    /// between two status requests. Cheap when nothing is pending: one scan of the
    /// watches; each watched execution's screen is rendered once per call.
    pub fn observe_prompts(&mut self) {
        let pending = |w: &Watch| !w.activity && !w.suppressed;
        if !self.prompts.watches.iter().any(pending) {
            return;
        }
        let generation = self.generation();
        let mut screens: Vec<(String, Option<(String, u64)>)> = Vec::new();
        for i in 0..self.prompts.watches.len() {
            let w = &self.prompts.watches[i];
            if !pending(w) || w.generation != generation {
                continue;
            }
            let id = w.execution_id.clone();
            let view = match screens.iter().find(|(s, _)| *s == id) {
                Some((_, v)) => v.clone(),
                None => {
                    let v = self.live_screen(&id);
                    screens.push((id, v.clone()));
                    v
                }
            };
            let Some((text, quiet_ms)) = view else {
                continue;
            };
            let w = &mut self.prompts.watches[i];
            if text == w.baseline {
                continue;
            }
            let input = RecognitionInput {
                screen: &text,
                quiet_ms,
                running: true,
            };
            if let Ok(d) = turn::recognize(&w.choice, &input, None)
                && d.source == SOURCE_SCREEN
                && matches!(d.state, TurnState::Busy | TurnState::AwaitingApproval)
            {
                w.activity = true;
            }
        }
    }

    /// What is known now of the prompt `key` (after `observe_prompts`).
    pub fn prompt_status(&self, key: &str) -> PromptStatus {
        let generation = self.generation();
        let Some(w) = self.prompts.watches.iter().find(|w| w.key == key) else {
            return PromptStatus {
                known: false,
                generation,
                ..PromptStatus::default()
            };
        };
        let bg = self.bg.values().find(|b| b.exec.id == w.execution_id);
        let exit = match (&self.fg, bg) {
            (_, Some(b)) if b.exec.finished() => Some(b.exec.exit_code),
            (_, Some(_)) => None,
            (Some(e), _) if e.id == w.execution_id && e.finished() => Some(e.exit_code),
            (Some(e), _) if e.id == w.execution_id => None,
            // Replaced by a later command (or a background tombstone expired): it ended;
            // its code is in the history.
            _ => Some(None),
        };
        let state = match exit {
            Some(_) => None,
            None => self
                .live_screen(&w.execution_id)
                .and_then(|(screen, quiet_ms)| {
                    let input = RecognitionInput {
                        screen: &screen,
                        quiet_ms,
                        running: true,
                    };
                    turn::recognize(&w.choice, &input, None)
                        .ok()
                        .map(|d| wire_state(d.state))
                }),
        };
        PromptStatus {
            known: true,
            generation: w.generation.clone(),
            current_generation: generation,
            activity_observed: w.activity,
            suppressed: w.suppressed,
            state,
            exited: exit.is_some(),
            exit_code: exit.flatten(),
        }
    }
}
