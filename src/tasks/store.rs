//! The task table: every MCP Task of this process, keyed by (principal, task ID).
//!
//! Invariant: a task is looked up only with the caller's principal, so one principal can
//! never see, wait on or cancel another's task; an ID alone finds nothing.
//! Invariant: a terminal status is final: later outcomes are stored (nothing is lost) but
//! never move the status again.

use crate::deadline::{Deadline, unix_ms};
use crate::jsonrpc::RpcError;
use crossbeam_channel::{Receiver, Sender, bounded, select};
use parking_lot::Mutex;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Default and largest retention of a task, from creation.
pub const DEFAULT_TTL_MS: u64 = 60 * 60 * 1000;
pub const MAX_TTL_MS: u64 = 24 * 60 * 60 * 1000;
/// Shortest retention granted, so a result outlives the poll that finds it.
pub const MIN_TTL_MS: u64 = 60 * 1000;
/// The status message of a cancelled task (also written by other processes).
pub const CANCELLED_MESSAGE: &str = "cancelled by the client; the work was interrupted";
/// Suggested polling interval.
pub const POLL_INTERVAL_MS: u64 = 1000;
/// Tasks kept per principal; the oldest finished ones make room.
pub const MAX_TASKS_PER_PRINCIPAL: usize = 1024;
/// Default for how many tasks work at once in this process (each holds one runner
/// thread); `WINX_MAX_TASKS` changes it.
pub const MAX_WORKING: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Working,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    pub fn terminal(self) -> bool {
        self != Status::Working
    }
}

/// What the wrapped request produced: exactly what it would have answered inline.
#[derive(Clone, Debug)]
pub enum Outcome {
    Result(Value),
    Error(RpcError),
}

#[derive(Clone, Debug)]
pub struct State {
    pub status: Status,
    pub message: Option<String>,
    pub updated_ms: i64,
    pub outcome: Option<Outcome>,
}

/// One task. `done` closes when the runner has stored its outcome.
pub struct Task {
    pub id: String,
    pub principal: String,
    pub tool: String,
    pub created_ms: i64,
    pub ttl_ms: u64,
    /// Created by a 2025-11-25 `params.task` (its `isError` rule applies).
    pub legacy: bool,
    /// The process that runs the task (`crate::process` identity); (0, 0) when unknown.
    pub owner: (u32, u64),
    /// A read-only copy of a task another live process runs (never cached, never run).
    pub foreign: bool,
    state: Mutex<State>,
    /// What the runner follows (opaque to the store; persisted so another process can
    /// take over).
    follow: Mutex<Option<Value>>,
    /// A runner in this process owns the task.
    runner: std::sync::atomic::AtomicBool,
    done_tx: Mutex<Option<Sender<()>>>,
    done_rx: Receiver<()>,
    /// How to interrupt the work (for a shell command: Ctrl-C to its session).
    interrupt: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl Task {
    pub fn state(&self) -> State {
        self.state.lock().clone()
    }

    /// The status alone (no copy of the outcome).
    pub fn status(&self) -> Status {
        self.state.lock().status
    }

    pub fn has_outcome(&self) -> bool {
        self.state.lock().outcome.is_some()
    }

    pub fn follow(&self) -> Option<Value> {
        self.follow.lock().clone()
    }

    pub fn set_follow(&self, v: Value) {
        *self.follow.lock() = Some(v);
    }

    /// Claim the task for a runner in this process; false if one already has it.
    pub fn claim_runner(&self) -> bool {
        !self.runner.swap(true, Ordering::AcqRel)
    }

    pub fn release_runner(&self) {
        self.runner.store(false, Ordering::Release);
    }

    /// A task as stored by another process. A restored task has no runner yet; one that
    /// already has an outcome is finished.
    #[allow(clippy::too_many_arguments)]
    pub fn restored(
        id: String,
        principal: String,
        tool: String,
        created_ms: i64,
        ttl_ms: u64,
        legacy: bool,
        owner: (u32, u64),
        state: State,
        follow: Option<Value>,
    ) -> Task {
        let (done_tx, done_rx) = bounded(0);
        let finished = state.outcome.is_some();
        Task {
            id,
            principal,
            tool,
            created_ms,
            ttl_ms,
            legacy,
            owner,
            foreign: false,
            state: Mutex::new(state),
            follow: Mutex::new(follow),
            runner: Default::default(),
            done_tx: Mutex::new((!finished).then_some(done_tx)),
            done_rx,
            interrupt: Mutex::new(None),
        }
    }

    pub fn set_interrupt(&self, f: Box<dyn FnOnce() + Send>) {
        *self.interrupt.lock() = Some(f);
    }

    /// Cancel a working task: it turns `cancelled` at once and its work is interrupted.
    /// `Err(status)` when it had already ended.
    pub fn cancel(&self) -> Result<(), Status> {
        {
            let mut st = self.state.lock();
            if st.status.terminal() {
                return Err(st.status);
            }
            st.status = Status::Cancelled;
            st.message = Some(CANCELLED_MESSAGE.into());
            st.updated_ms = unix_ms();
        }
        if let Some(interrupt) = self.take_interrupt() {
            interrupt();
        }
        Ok(())
    }

    /// The interrupt, at most once (whoever takes it delivers it).
    pub fn take_interrupt(&self) -> Option<Box<dyn FnOnce() + Send>> {
        self.interrupt.lock().take()
    }

    /// Wait until the runner has stored the outcome, or `deadline`. True when finished.
    pub fn wait_finished(&self, deadline: Deadline) -> bool {
        select! {
            recv(self.done_rx) -> _ => true,
            recv(deadline.receiver()) -> _ => self.state.lock().outcome.is_some(),
        }
    }

    fn expired(&self, now_ms: i64) -> bool {
        now_ms.saturating_sub(self.created_ms) as u64 > self.ttl_ms
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum CreateError {
    /// The working-task limit is reached.
    Busy,
    /// The principal already keeps `MAX_TASKS_PER_PRINCIPAL` unfinished tasks.
    Full,
}

pub struct TaskStore {
    tasks: Mutex<HashMap<(String, String), Arc<Task>>>,
    working: Arc<AtomicUsize>,
    max_working: usize,
}

impl Default for TaskStore {
    fn default() -> TaskStore {
        TaskStore::new(MAX_WORKING)
    }
}

/// Held by a runner: the working count drops when the runner ends, however it ends.
pub struct RunnerSlot(Arc<AtomicUsize>);

impl Drop for RunnerSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl TaskStore {
    pub fn new(max_working: usize) -> TaskStore {
        TaskStore {
            tasks: Default::default(),
            working: Default::default(),
            max_working: max_working.max(1),
        }
    }

    /// Create a working task for `principal`, reserving a runner slot. `ttl_ms` is the
    /// caller's wish, clamped to `MIN_TTL_MS..=MAX_TTL_MS`.
    pub fn create(
        &self,
        principal: &str,
        tool: &str,
        ttl_ms: Option<u64>,
        legacy: bool,
    ) -> Result<(Arc<Task>, RunnerSlot), CreateError> {
        let slot = self.reserve().ok_or(CreateError::Busy)?;
        let now = unix_ms();
        let mut tasks = self.tasks.lock();
        tasks.retain(|_, t| !(t.expired(now) && t.state.lock().status.terminal()));
        let mine: Vec<(i64, String)> = tasks
            .values()
            .filter(|t| t.principal == principal)
            .map(|t| (t.created_ms, t.id.clone()))
            .collect();
        if mine.len() >= MAX_TASKS_PER_PRINCIPAL {
            let mut finished: Vec<(i64, String)> = mine
                .into_iter()
                .filter(|(_, id)| {
                    tasks[&(principal.to_string(), id.clone())]
                        .state
                        .lock()
                        .status
                        .terminal()
                })
                .collect();
            finished.sort();
            match finished.first() {
                Some((_, id)) => {
                    tasks.remove(&(principal.to_string(), id.clone()));
                }
                None => return Err(CreateError::Full),
            }
        }
        let task = Task::restored(
            new_task_id(),
            principal.to_string(),
            tool.to_string(),
            now,
            ttl_ms
                .unwrap_or(DEFAULT_TTL_MS)
                .clamp(MIN_TTL_MS, MAX_TTL_MS),
            legacy,
            crate::process::this_process(),
            State {
                status: Status::Working,
                message: Some(format!("{tool} is running")),
                updated_ms: now,
                outcome: None,
            },
            None,
        );
        task.claim_runner();
        let task = Arc::new(task);
        tasks.insert((principal.to_string(), task.id.clone()), task.clone());
        Ok((task, slot))
    }

    /// A runner slot, if fewer than the limit are working.
    pub fn reserve(&self) -> Option<RunnerSlot> {
        self.working
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_working).then_some(n + 1)
            })
            .ok()
            .map(|_| RunnerSlot(self.working.clone()))
    }

    /// Add a task loaded from the state store, unless this process already has it; the
    /// task in the table is returned either way.
    pub fn insert_restored(&self, task: Task) -> Arc<Task> {
        let key = (task.principal.clone(), task.id.clone());
        self.tasks
            .lock()
            .entry(key)
            .or_insert_with(|| Arc::new(task))
            .clone()
    }

    /// Whether this process holds the task (loaded or created here).
    pub fn contains(&self, principal: &str, id: &str) -> bool {
        self.tasks
            .lock()
            .contains_key(&(principal.to_string(), id.to_string()))
    }

    /// The caller's task `id`, if it exists and has not expired.
    pub fn get(&self, principal: &str, id: &str) -> Option<Arc<Task>> {
        let now = unix_ms();
        let tasks = self.tasks.lock();
        tasks
            .get(&(principal.to_string(), id.to_string()))
            .filter(|t| !(t.expired(now) && t.state.lock().status.terminal()))
            .cloned()
    }

    /// The caller's tasks, newest first.
    pub fn list(&self, principal: &str) -> Vec<Arc<Task>> {
        let now = unix_ms();
        let mut out: Vec<Arc<Task>> = self
            .tasks
            .lock()
            .values()
            .filter(|t| t.principal == principal)
            .filter(|t| !(t.expired(now) && t.state.lock().status.terminal()))
            .cloned()
            .collect();
        out.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then(a.id.cmp(&b.id)));
        out
    }

    /// Store the runner's outcome with `status`, unless the task already ended (cancelled):
    /// then only the outcome is kept.
    pub fn finish(&self, task: &Task, outcome: Outcome, status: Status, message: String) {
        self.finish_persisted(task, outcome, status, message, |_| {});
    }

    /// `finish`, with `persist` given the final state before anyone can see it: whoever
    /// observes the outcome here (or in another process) finds it durable already.
    pub fn finish_persisted(
        &self,
        task: &Task,
        outcome: Outcome,
        status: Status,
        message: String,
        persist: impl FnOnce(&State),
    ) {
        {
            let mut st = task.state.lock();
            let mut next = st.clone();
            if !next.status.terminal() {
                next.status = status;
                next.message = Some(message);
            }
            next.updated_ms = unix_ms();
            next.outcome = Some(outcome);
            persist(&next);
            *st = next;
        }
        task.done_tx.lock().take();
    }

    /// Tasks currently working (for tests and diagnostics).
    pub fn working(&self) -> usize {
        self.working.load(Ordering::Acquire)
    }
}

/// `task_` + 128 random bits in hex: unguessable, and never derived from a client value.
fn new_task_id() -> String {
    let mut b = [0u8; 16];
    if getrandom::fill(&mut b).is_err() {
        // Uniqueness still holds through the clock and a counter; only guessability drops,
        // and lookups are scoped by principal anyway.
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed) as u64;
        b[..8].copy_from_slice(&(unix_ms() as u64).to_be_bytes());
        b[8..].copy_from_slice(&n.to_be_bytes());
    }
    let mut id = String::from("task_");
    crate::hex::push_lower(&mut id, &b);
    id
}

/// How long `tasks/result` blocks before answering that the task is still working.
pub const RESULT_WAIT: Duration = Duration::from_secs(100);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tasks_are_scoped_by_principal() {
        let s = TaskStore::default();
        let (t, _slot) = s.create("alice", "BashCommand", None, false).unwrap();
        assert!(t.id.starts_with("task_") && t.id.len() == 37);
        assert!(s.get("alice", &t.id).is_some());
        assert!(s.get("bob", &t.id).is_none());
        assert!(s.list("bob").is_empty());
        assert_eq!(s.list("alice").len(), 1);
    }

    #[test]
    fn ttl_is_clamped() {
        let s = TaskStore::default();
        let (a, _x) = s.create("p", "t", Some(5), false).unwrap();
        let (b, _y) = s.create("p", "t", Some(u64::MAX), false).unwrap();
        let (c, _z) = s.create("p", "t", None, false).unwrap();
        assert_eq!(a.ttl_ms, MIN_TTL_MS);
        assert_eq!(b.ttl_ms, MAX_TTL_MS);
        assert_eq!(c.ttl_ms, DEFAULT_TTL_MS);
    }

    #[test]
    fn working_slots_are_bounded_and_released() {
        let s = TaskStore::default();
        let slots: Vec<_> = (0..MAX_WORKING)
            .map(|_| s.create("p", "t", None, false).unwrap().1)
            .collect();
        assert_eq!(
            s.create("p", "t", None, false).err(),
            Some(CreateError::Busy),
            "one more than MAX_WORKING is refused"
        );
        drop(slots);
        assert_eq!(s.working(), 0);
        assert!(s.create("p", "t", None, false).is_ok());
    }

    #[test]
    fn cancel_is_final_and_interrupts_once() {
        let s = TaskStore::default();
        let (t, _slot) = s.create("p", "t", None, false).unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        t.set_interrupt(Box::new(move || {
            h.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(t.cancel(), Ok(()));
        assert_eq!(t.cancel(), Err(Status::Cancelled));
        assert_eq!(hits.load(Ordering::SeqCst), 1);
        // The later outcome is kept, the status is not moved.
        s.finish(
            &t,
            Outcome::Result(json!({"x": 1})),
            Status::Completed,
            "done".into(),
        );
        let st = t.state();
        assert_eq!(st.status, Status::Cancelled);
        assert!(st.outcome.is_some());
        assert!(t.wait_finished(Deadline::after("test", Duration::from_millis(1))));
    }

    #[test]
    fn waiting_ends_when_the_outcome_is_stored() {
        let s = Arc::new(TaskStore::default());
        let (t, slot) = s.create("p", "t", None, false).unwrap();
        assert!(!t.wait_finished(Deadline::after("test", Duration::from_millis(5))));
        let (s2, t2) = (s.clone(), t.clone());
        let h = std::thread::spawn(move || {
            s2.finish(
                &t2,
                Outcome::Result(json!({})),
                Status::Completed,
                "ok".into(),
            );
            drop(slot);
        });
        assert!(t.wait_finished(Deadline::after("test", Duration::from_secs(10))));
        h.join().unwrap();
        assert_eq!(t.state().status, Status::Completed);
    }
}
