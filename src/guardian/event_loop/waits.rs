//! The loop's deferred answers: registering a command's wait, and answering every
//! `Waiter` whose condition holds or whose deadline passed.

use super::super::waiter::{WaitKind, Waiter};
use super::{EventLoop, READ_REPLY_MAX};
use crate::deadline::Deadline;
use crate::wire::guardian::{GuardianError, Response, SecretValues, Wait};
use std::time::Duration;

impl EventLoop {
    pub(super) fn wait_for(&mut self, client: u64, bg: Option<String>, wait: Wait) {
        let seen_total = self.session.output_total(bg.as_deref());
        self.waiters.push(Waiter {
            client,
            kind: WaitKind::Action { bg },
            deadline: Deadline::after("wait", Duration::from_millis(wait.timeout_ms)),
            settle: wait.settle_ms.map(Duration::from_millis),
            seen_total,
            settle_at: None,
        });
    }

    pub(super) fn answer_waiters(&mut self) {
        let mut done = Vec::new();
        for (i, w) in self.waiters.iter_mut().enumerate() {
            match &w.kind {
                WaitKind::Reset => {
                    if w.deadline.expired() {
                        done.push(i);
                    }
                }
                WaitKind::Read { offset } => {
                    if self.session.transcript.total() > *offset || w.deadline.expired() {
                        done.push(i);
                    }
                }
                WaitKind::Watch { after, .. } => {
                    if self.session.activity.seq > *after || w.deadline.expired() {
                        done.push(i);
                    }
                }
                WaitKind::Prompt { key, seen } => {
                    if seen.as_ref() != Some(&self.session.prompt_status(key))
                        || w.deadline.expired()
                    {
                        done.push(i);
                    }
                }
                WaitKind::Action { bg } => {
                    let total = self.session.output_total(bg.as_deref());
                    if let Some(settle) = w.settle
                        && total != w.seen_total
                    {
                        w.seen_total = total;
                        w.settle_at = Some(Deadline::after("output settle", settle));
                    }
                    if self.session.target_finished(bg.as_deref())
                        || w.deadline.expired()
                        || w.settle_at.is_some_and(|s| s.expired())
                    {
                        done.push(i);
                    }
                }
            }
        }
        // A command's own answer goes out before any watcher's facts: the caller is waiting
        // on it, and building facts (with a screen) is the dearer of the two.
        let mut ready: Vec<Waiter> = done
            .into_iter()
            .rev()
            .map(|i| self.waiters.remove(i))
            .collect();
        ready.sort_by_key(|w| !matches!(w.kind, WaitKind::Action { .. }));
        for w in ready {
            let resp = match w.kind {
                WaitKind::Action { bg } => self.session.deliver(bg.as_deref()),
                WaitKind::Read { offset } => {
                    let (text, next, skipped) =
                        self.session.transcript.read_from(offset, READ_REPLY_MAX);
                    Response::Output {
                        text,
                        next,
                        skipped,
                        secrets: SecretValues(self.session.secrets.values().to_vec()),
                    }
                }
                WaitKind::Watch { screen, known, .. } => {
                    Response::Facts(self.session.facts(screen, known))
                }
                WaitKind::Prompt { key, .. } => {
                    Response::PromptStatus(self.session.prompt_status(&key))
                }
                WaitKind::Reset => Response::Error(GuardianError::Io {
                    detail: "the new shell printed no prompt in time".into(),
                }),
            };
            self.respond(w.client, resp);
        }
    }
}
