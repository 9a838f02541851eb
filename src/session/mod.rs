//! Session bindings: attach-or-create by (principal, canonical workspace), verification of
//! the `thread_id` + `workspace_root` pair, mode changes and resets.
//!
//! The store is the source of truth for bindings; `live` is what this process has
//! attached since it started (the most recently used, bounded like the tools' session
//! state). A binding that exists in the store but is not live was left by an earlier
//! adapter, or forgotten here, and is recovered on first use.
//!
//! Invariant: no tool touches a shell or a file before `SessionService::verify` accepted
//! its pair.

pub mod error;
pub mod ids;
pub mod mode;
pub mod overview;

use crate::deadline::unix_ms;
use crate::fsutil::ensure_private_dir;
use crate::lru::Lru;
use crate::store::Store;
use crate::store::sessions::SessionRow;
pub use error::SessionError;
pub use mode::Mode;
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How a first call picks its logical session (seed 003, "Session affinity").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Affinity {
    /// (principal, canonical workspace): parallel conversations share one shell.
    #[default]
    Workspace,
    /// (principal, conversation identity, workspace); falls back to workspace affinity
    /// when the call carries no identity.
    Conversation,
    /// The caller's normalised thread ID is the durable key.
    Thread,
}

/// The logical session a first call asks for.
pub struct SessionChoice<'a> {
    pub affinity: Affinity,
    /// `Mcp-Session-Id` or `X-Winx-Conversation-Id`, when the transport has one.
    pub conversation: Option<&'a str>,
    /// The `thread_id` the first call supplied, if any.
    pub supplied_thread_id: Option<&'a str>,
}

/// A verified session binding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    pub thread_id: String,
    pub workspace_root: PathBuf,
    pub mode: Mode,
    pub created_at_ms: i64,
}

impl Binding {
    pub fn workspace_str(&self) -> String {
        self.workspace_root.to_string_lossy().into_owned()
    }
}

/// What attach-or-create did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attached {
    pub binding: Binding,
    /// A binding already existed (in this process or the store).
    pub existed: bool,
    /// The binding existed but this process had not attached it yet.
    pub recovered: bool,
    /// The requested mode differed and was applied.
    pub mode_changed: bool,
}

type Key = (String, String);

pub struct SessionService {
    state_dir: PathBuf,
    store: Mutex<Option<Arc<Store>>>,
    live: Mutex<Lru<Key, Binding>>,
    /// Bindings kept in `live` (`Config::session_states`).
    live_limit: usize,
}

fn private_dir(dir: PathBuf) -> Result<PathBuf, SessionError> {
    ensure_private_dir(&dir).map_err(|e| SessionError::StoreUnavailable {
        detail: format!("scratch workspace: {e}"),
    })?;
    dir.canonicalize()
        .map_err(|e| SessionError::StoreUnavailable {
            detail: format!("scratch workspace: {e}"),
        })
}

fn store_err(e: crate::store::StoreError) -> SessionError {
    SessionError::StoreUnavailable {
        detail: e.to_string(),
    }
}

impl SessionService {
    /// `live_limit`: bindings kept in memory; older ones are read from the store again.
    pub fn new(state_dir: PathBuf, live_limit: usize) -> SessionService {
        SessionService {
            state_dir,
            store: Mutex::new(None),
            live: Mutex::new(Lru::default()),
            live_limit: live_limit.max(1),
        }
    }

    fn make_live(&self, principal: &str, b: &Binding) {
        let mut live = self.live.lock();
        live.insert((principal.into(), b.thread_id.clone()), b.clone());
        live.evict(self.live_limit, |_| true);
    }

    /// The store, opened on first use so process start stays cheap. A failed open is
    /// retried on the next call.
    pub fn store(&self) -> Result<Arc<Store>, SessionError> {
        let mut slot = self.store.lock();
        if let Some(s) = slot.as_ref() {
            return Ok(s.clone());
        }
        let s = Arc::new(Store::open(&self.state_dir).map_err(store_err)?);
        *slot = Some(s.clone());
        Ok(s)
    }

    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// Where this principal's scratch workspaces live (canonical when it exists; it is
    /// created by the first scratch session).
    pub fn scratch_root(&self, principal: &str) -> PathBuf {
        let dir = self.state_dir.join("scratch").join(principal);
        dir.canonicalize().unwrap_or(dir)
    }

    /// The per-principal scratch workspace used by first calls without a workspace.
    pub fn scratch_workspace(&self, principal: &str) -> Result<PathBuf, SessionError> {
        private_dir(self.state_dir.join("scratch").join(principal))
    }

    /// The scratch directory of a resumed task whose project is gone (`id` is a validated
    /// task id: letters, digits, `-`, `_`, `.`, not starting with a dot).
    pub fn scratch_workspace_for_task(
        &self,
        principal: &str,
        id: &str,
    ) -> Result<PathBuf, SessionError> {
        private_dir(
            self.state_dir
                .join("scratch")
                .join(principal)
                .join(format!("task-{id}")),
        )
    }

    /// The binding of `principal`'s `thread_id`, if one exists; read-only (nothing is
    /// attached, persisted or made live). Another principal's ID is simply absent.
    pub fn lookup(
        &self,
        principal: &str,
        thread_id: &str,
    ) -> Result<Option<Binding>, SessionError> {
        self.load(principal, thread_id)
    }

    fn load(&self, principal: &str, thread_id: &str) -> Result<Option<Binding>, SessionError> {
        if let Some(b) = self.live.lock().get(&(principal.into(), thread_id.into())) {
            return Ok(Some(b.clone()));
        }
        let row = self
            .store()?
            .session_get(principal, thread_id)
            .map_err(store_err)?;
        Ok(row.map(|r| Binding {
            thread_id: r.thread_id,
            workspace_root: PathBuf::from(r.workspace_root),
            mode: Mode::from_json(&r.mode),
            created_at_ms: r.created_at_ms,
        }))
    }

    fn persist(&self, principal: &str, b: &Binding) -> Result<(), SessionError> {
        self.store()?
            .session_put(&SessionRow {
                principal: principal.into(),
                thread_id: b.thread_id.clone(),
                workspace_root: b.workspace_str(),
                mode: b.mode.to_json(),
                created_at_ms: b.created_at_ms,
                updated_at_ms: unix_ms(),
            })
            .map_err(store_err)?;
        self.make_live(principal, b);
        Ok(())
    }

    fn is_live(&self, principal: &str, thread_id: &str) -> bool {
        self.live
            .lock()
            .contains_key(&(principal.to_string(), thread_id.to_string()))
    }

    /// The external ID a first call maps to under `choice`.
    pub fn choose_thread_id(principal: &str, workspace: &Path, choice: &SessionChoice) -> String {
        let supplied = choice.supplied_thread_id.and_then(ids::normalize_thread_id);
        match choice.affinity {
            Affinity::Workspace => ids::workspace_thread_id(principal, workspace),
            Affinity::Conversation => match choice.conversation.map(str::to_string).or(supplied) {
                Some(identity) => ids::conversation_thread_id(principal, &identity, workspace),
                None => ids::workspace_thread_id(principal, workspace),
            },
            Affinity::Thread => supplied.unwrap_or_else(|| {
                let mut b = [0u8; 8];
                let _ = getrandom::fill(&mut b);
                let mut id = String::from("th_");
                crate::hex::push_lower(&mut id, &b);
                id
            }),
        }
    }

    /// Attach to the session `thread_id` of `principal` in `workspace`, creating it if
    /// needed. `mode: None` keeps an existing mode (new sessions start in `wcgw`). A
    /// caller-owned ID already bound to another workspace is refused, never repointed.
    pub fn attach_or_create(
        &self,
        principal: &str,
        workspace: &Path,
        thread_id: &str,
        mode: Option<Mode>,
    ) -> Result<Attached, SessionError> {
        let thread_id = thread_id.to_string();
        let was_live = self.is_live(principal, &thread_id);
        let existing = self.load(principal, &thread_id)?;
        if let Some(b) = existing.as_ref().filter(|b| b.workspace_root != workspace) {
            return Err(SessionError::WorkspaceAlreadyBound {
                thread_id: thread_id.clone(),
                bound_workspace: b.workspace_str(),
                requested_workspace: workspace.to_string_lossy().into_owned(),
            });
        }
        let existed = existing.is_some();
        let mut binding = existing.unwrap_or_else(|| Binding {
            thread_id: thread_id.clone(),
            workspace_root: workspace.to_path_buf(),
            mode: Mode::Wcgw,
            created_at_ms: unix_ms(),
        });
        let mode_changed = match mode {
            Some(m) if existed && m != binding.mode => {
                binding.mode = m;
                true
            }
            Some(m) => {
                binding.mode = m;
                false
            }
            None => false,
        };
        self.persist(principal, &binding)?;
        Ok(Attached {
            binding,
            existed,
            recovered: existed && !was_live,
            mode_changed,
        })
    }

    /// Check the pair a session-bound call carries. Returns the binding and whether it had
    /// to be recovered from the store (or re-derived) because this process had not seen it.
    pub fn verify(
        &self,
        principal: &str,
        thread_id: Option<&str>,
        workspace_root: Option<&str>,
    ) -> Result<(Binding, bool), SessionError> {
        let ws_hint = workspace_root.map(str::to_string);
        let thread_id = match thread_id.map(str::trim) {
            Some(t) if !t.is_empty() => t,
            _ => {
                return Err(SessionError::NeedsInitialize {
                    reason: "thread_id is missing".into(),
                    workspace_root: ws_hint,
                });
            }
        };
        let Some(ws_arg) = workspace_root.filter(|w| !w.trim().is_empty()) else {
            return Err(SessionError::NeedsInitialize {
                reason: "workspace_root is missing".into(),
                workspace_root: None,
            });
        };
        let supplied =
            ids::canonical_workspace(ws_arg).map_err(|detail| SessionError::WorkspaceInvalid {
                path: ws_arg.into(),
                detail,
            })?;
        let was_live = self.is_live(principal, thread_id);
        let binding = match self.load(principal, thread_id)? {
            Some(b) => b,
            // The store lost the row but the pair is self-consistent: the ID is derived
            // from (principal, workspace), so it can only belong to this workspace.
            None if ids::workspace_thread_id(principal, &supplied) == thread_id => {
                let b = Binding {
                    thread_id: thread_id.into(),
                    workspace_root: supplied.clone(),
                    mode: Mode::Wcgw,
                    created_at_ms: unix_ms(),
                };
                self.persist(principal, &b)?;
                return Ok((b, true));
            }
            None => {
                return Err(SessionError::NeedsInitialize {
                    reason: format!("thread_id {thread_id:?} is not a known session"),
                    workspace_root: ws_hint,
                });
            }
        };
        if binding.workspace_root != supplied {
            return Err(SessionError::BindingConflict {
                thread_id: thread_id.into(),
                bound_workspace: binding.workspace_str(),
                supplied_workspace: supplied.to_string_lossy().into_owned(),
            });
        }
        if !was_live {
            self.make_live(principal, &binding);
        }
        Ok((binding, !was_live))
    }

    /// Apply a new mode to a verified binding.
    pub fn set_mode(
        &self,
        principal: &str,
        binding: &Binding,
        mode: Mode,
    ) -> Result<Binding, SessionError> {
        let mut b = binding.clone();
        b.mode = mode;
        self.persist(principal, &b)?;
        Ok(b)
    }

    /// Drop this process's live state for a verified binding and attach it afresh.
    pub fn reset(&self, principal: &str, binding: &Binding) -> Result<(), SessionError> {
        self.live
            .lock()
            .remove(&(principal.to_string(), binding.thread_id.clone()));
        self.persist(principal, binding)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, SessionService, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("proj");
        std::fs::create_dir(&ws).unwrap();
        let ws = ws.canonicalize().unwrap();
        let svc = SessionService::new(tmp.path().join("state"), 8);
        (tmp, svc, ws)
    }

    #[test]
    fn attach_or_create_is_idempotent() {
        let (_t, svc, ws) = setup();
        let tid = ids::workspace_thread_id("local", &ws);
        let a = svc.attach_or_create("local", &ws, &tid, None).unwrap();
        assert!(!a.existed);
        let b = svc.attach_or_create("local", &ws, &tid, None).unwrap();
        assert!(b.existed && !b.recovered);
        assert_eq!(a.binding.thread_id, b.binding.thread_id);
    }

    #[test]
    fn verify_missing_mixed_and_recovered() {
        let (t, svc, ws) = setup();
        let tid = ids::workspace_thread_id("local", &ws);
        let a = svc.attach_or_create("local", &ws, &tid, None).unwrap();
        let ws_s = ws.to_str().unwrap();
        let tid = a.binding.thread_id.as_str();
        assert!(matches!(
            svc.verify("local", None, Some(ws_s)),
            Err(SessionError::NeedsInitialize { .. })
        ));
        assert!(matches!(
            svc.verify("local", Some(tid), None),
            Err(SessionError::NeedsInitialize { .. })
        ));
        let other = t.path().join("other");
        std::fs::create_dir(&other).unwrap();
        assert!(matches!(
            svc.verify("local", Some(tid), other.to_str()),
            Err(SessionError::BindingConflict { .. })
        ));
        assert!(matches!(
            svc.verify("local", Some("ws_nope_000000000000"), Some(ws_s)),
            Err(SessionError::NeedsInitialize { .. })
        ));
        assert!(!svc.verify("local", Some(tid), Some(ws_s)).unwrap().1);
        // Another principal cannot use the pair.
        assert!(svc.verify("intruder", Some(tid), Some(ws_s)).is_err());
        // A fresh process (same state dir) recovers the binding from the store.
        let svc2 = SessionService::new(t.path().join("state"), 8);
        let (b, recovered) = svc2.verify("local", Some(tid), Some(ws_s)).unwrap();
        assert!(recovered);
        assert_eq!(b.workspace_root, ws);
    }

    #[test]
    fn live_bindings_are_bounded_and_forgotten_ones_are_recovered() {
        let (t, svc, ws) = setup();
        let ws_s = ws.to_str().unwrap();
        let first = ids::workspace_thread_id("local", &ws);
        svc.attach_or_create("local", &ws, &first, None).unwrap();
        for i in 0..20 {
            let d = t.path().join(format!("w{i}"));
            std::fs::create_dir(&d).unwrap();
            let d = d.canonicalize().unwrap();
            let tid = ids::workspace_thread_id("local", &d);
            svc.attach_or_create("local", &d, &tid, None).unwrap();
        }
        assert_eq!(svc.live.lock().len(), 8);
        // Forgotten here, still in the store: recovered, exactly as after a restart.
        let (b, recovered) = svc.verify("local", Some(&first), Some(ws_s)).unwrap();
        assert!(recovered);
        assert_eq!(b.workspace_root, ws);
        assert!(!svc.verify("local", Some(&first), Some(ws_s)).unwrap().1);
    }
}
