//! The rig of the Herdr tests (`tests/agent_herdr*.rs`): a winx server whose
//! `WINX_HERDR_CONFIG` names `tests/fake/herdr`, the fake's world (a JSON file at the
//! configured socket path) and its log of every argument vector it was called with.
#![allow(dead_code)]

use crate::support::{Agent, Opts, manifest_dir, sc};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub fn fake() -> PathBuf {
    manifest_dir().join("tests/fake/herdr")
}

/// A config for `principal_key` in `workspace`: `writer` is pane `w1:p1`, `rev` the agent
/// named `reviewer`, `gone` a pane without an agent.
pub fn config(dir: &Path, principal_key: &str, workspace: &Path, deadline_ms: u64) -> Value {
    json!({
        "executable": fake(),
        "socket_path": dir.join("sock"),
        "deadline_ms": deadline_ms,
        "bindings": [{"principal_key": principal_key, "workspace_root": workspace,
                      "targets": {"writer": "w1:p1", "gone": "w5:p5", "rev": "reviewer"}}],
    })
}

/// The fake's world: two configured agents and one that is not configured (`w9:p9`).
pub fn world() -> Value {
    json!({"agents": [
        {"pane_id": "w1:p1", "terminal_id": "term_1", "agent": "claude", "agent_status": "idle",
         "screen": "first line\nsecond line\nlast line\n"},
        {"pane_id": "w1:p2", "terminal_id": "term_2", "name": "reviewer", "agent": "codex",
         "agent_status": "blocked", "screen": "Allow command? [y/n]\n"},
        {"pane_id": "w9:p9", "terminal_id": "term_9", "agent": "codex", "agent_status": "working",
         "screen": "secret\n"},
    ]})
}

pub fn write(path: &Path, v: &Value, mode: u32) {
    std::fs::write(path, serde_json::to_string_pretty(v).unwrap()).unwrap();
    std::fs::set_permissions(path, PermissionsExt::from_mode(mode)).unwrap();
}

pub struct Rig {
    pub a: Agent,
    pub s: Value,
    pub dir: tempfile::TempDir,
}

impl Rig {
    pub fn new() -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("herdr.json");
        let cfg = cfg.to_str().unwrap().to_string();
        let mut a = Agent::spawn_with(Opts {
            env: &[
                ("WINX_RUNTIME", "embedded"),
                ("WINX_HERDR_CONFIG", &cfg),
                ("HERDR_LEAK", "1"),
            ],
            ..Default::default()
        });
        let s = a.first_call();
        Rig { a, s, dir }
    }

    pub fn cfg_path(&self) -> PathBuf {
        self.dir.path().join("herdr.json")
    }

    /// Configure the binding and start the fake's world.
    pub fn configure(&self, deadline_ms: u64) {
        let v = config(self.dir.path(), "local", &self.a.workspace, deadline_ms);
        write(&self.cfg_path(), &v, 0o600);
        self.set_world(&world());
    }

    pub fn set_world(&self, v: &Value) {
        std::fs::write(self.dir.path().join("sock"), v.to_string()).unwrap();
    }

    pub fn world(&self) -> Value {
        serde_json::from_slice(&std::fs::read(self.dir.path().join("sock")).unwrap()).unwrap()
    }

    /// Change the fake's world: `f` edits it.
    pub fn edit(&self, f: impl FnOnce(&mut Value)) {
        let mut w = self.world();
        f(&mut w);
        self.set_world(&w);
    }

    pub fn fault(&self, fault: &str) {
        self.edit(|w| w["fault"] = json!(fault));
    }

    /// Every argument vector the fake was called with, and whether HERDR_LEAK reached it.
    pub fn calls(&self) -> Vec<(Vec<String>, bool)> {
        let log = std::fs::read_to_string(self.dir.path().join("sock.log")).unwrap_or_default();
        log.lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                let argv = serde_json::from_value(v["argv"].clone()).unwrap();
                (argv, v["leak"] == true)
            })
            .collect()
    }

    pub fn herdr(&mut self, action: Value) -> Value {
        let r = self.a.call(
            "Agent",
            json!({"thread_id": self.s["data"]["thread_id"],
                   "workspace_root": self.s["data"]["workspace_root"],
                   "backend": "herdr", "action": action}),
        );
        sc(&r).clone()
    }
}

pub fn argv(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Herdr was never asked for anything but its agent commands.
pub fn only_agent_commands(r: &Rig) {
    let calls = r.calls();
    assert!(!calls.is_empty());
    for (a, leak) in &calls {
        assert_eq!(a[0], "agent", "a non-agent Herdr command ran: {a:?}");
        assert!(!a.contains(&"pane".to_string()), "{a:?}");
        assert!(!leak, "an inherited HERDR_* reached Herdr: {a:?}");
    }
}
