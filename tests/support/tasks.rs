//! Helpers of the MCP Tasks suites (`tests/it/tasks.rs`, `tests/it/tasks_restart.rs`): stateless
//! requests declaring the tasks extension, FIFO gates that hold a command until the test
//! lets it go, and polling a task to its end.
#![allow(dead_code)]

use super::wait::{Deadline, eventually};
use super::{Agent, HARD_TIMEOUT};
#[allow(unused_imports)] // re-exported for the task suites; not every one uses both
pub use super::{restart_adapter, text};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

pub const EXT: &str = "io.modelcontextprotocol/tasks";

pub fn spawn(rt: &str) -> Agent {
    Agent::spawn_env(&[("WINX_RUNTIME", rt)])
}

/// `_meta` of a 2026-07-28 request, declaring the tasks extension or not.
pub fn meta(tasks: bool) -> Value {
    let caps = if tasks {
        json!({"extensions": {EXT: {}}})
    } else {
        json!({})
    };
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": caps})
}

pub fn modern(a: &mut Agent, method: &str, mut params: Value, tasks: bool) -> Value {
    params["_meta"] = meta(tasks);
    a.request(method, params)
}

/// A 2026-07-28 `BashCommand` call, declaring the tasks extension or not.
pub fn bash_call(a: &mut Agent, args: Value, tasks: bool) -> Value {
    modern(
        a,
        "tools/call",
        json!({"name": "BashCommand", "arguments": args}),
        tasks,
    )
}

pub fn bash_args(first: &Value, command: &str, extra: Value) -> Value {
    let mut args = json!({
        "thread_id": first["data"]["thread_id"],
        "workspace_root": first["data"]["workspace_root"],
        "action_json": {"command": command},
    });
    for (k, v) in extra.as_object().unwrap() {
        args[k] = v.clone();
    }
    args
}

/// A FIFO in the workspace: a command doing `read x < gate` blocks until `open`.
pub struct Gate(pub PathBuf);

impl Gate {
    pub fn new(a: &Agent) -> Gate {
        Gate::in_dir(&a.workspace)
    }

    /// A gate named `gate` in `dir` (a workspace of any kind of server).
    pub fn in_dir(dir: &Path) -> Gate {
        let p = dir.join("gate");
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        Gate(p)
    }

    /// Let the waiting command go on, reading `word`. Opening blocks until the command has
    /// the FIFO open, so a thread does it.
    pub fn open(&self, word: &str) {
        let (p, w) = (self.0.clone(), format!("{word}\n"));
        std::thread::spawn(move || {
            let _ = std::fs::write(p, w);
        });
    }
}

/// Poll `tasks/get` until the task leaves `working` (each poll is an event: the answer).
pub fn until_terminal(a: &mut Agent, id: &str) -> Value {
    eventually(
        Deadline::hard("task end"),
        &format!("task {id} leaves `working`"),
        || {
            let r = modern(a, "tasks/get", json!({"taskId": id}), true);
            assert!(r.get("error").is_none(), "{r}");
            r["result"].clone()
        },
        |res| res["status"] != "working",
    )
}

/// Single-quote a path for bash.
pub fn q(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

/// The whole output of a result: its text, or its spill file when truncated.
pub fn whole_output(result: &Value) -> String {
    match result["structuredContent"]["data"]["spill_path"].as_str() {
        Some(p) => std::fs::read_to_string(p).unwrap(),
        None => text(result).to_string(),
    }
}

/// Threads of `pid` named `name`.
pub fn threads_named(pid: u32, name: &str) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name))
        .count()
}

/// A FIFO the gated command writes to when it starts (`echo up > started`): `wait`
/// returns once it did, an event rather than a poll.
pub struct Started(pub PathBuf);

impl Started {
    pub fn in_dir(dir: &Path) -> Started {
        let p = dir.join("started");
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        Started(p)
    }

    /// Block until the command wrote its line (panics after the hard timeout).
    pub fn wait(&self) {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let p = self.0.clone();
        std::thread::spawn(move || {
            let _ = tx.send(std::fs::read_to_string(p));
        });
        rx.recv_timeout(HARD_TIMEOUT)
            .expect("the gated command never started")
            .unwrap();
    }
}
