//! Test handle for the real `winx-code-agent` binary over stdio: its own temp HOME,
//! state dir and workspace, a reader thread for stdout, hard timeouts, kill on Drop.
//! Set `WINX_TEST_KEEP_LOGS=1` to keep the temp dir (with stderr.log) for post-mortem.
#![allow(dead_code)]

pub mod codex;
pub mod codex_exec;
pub mod fake_anthropic;
pub mod fake_responses;
pub mod golden;
pub mod herdr;
pub mod history;
pub mod hosts;
pub mod http;
pub mod sandbox;
pub mod tasks;
pub mod wait;

use crossbeam_channel::{Receiver, RecvTimeoutError, unbounded};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// No single wait in a test may exceed this; a hang fails instead of blocking CI.
pub const HARD_TIMEOUT: Duration = Duration::from_secs(20);

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_winx-code-agent")
}

/// The binary in its `winxd` role (started under that name, as the adapter starts it).
pub fn winxd_command() -> std::process::Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(bin());
    cmd.arg0("winxd");
    cmd
}

pub struct Agent {
    /// Environment given to the adapter (and so to the winxd it starts), for operator runs.
    pub env: Vec<(String, String)>,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: i64,
    pub dir: tempfile::TempDir,
    pub home: PathBuf,
    pub state: PathBuf,
    pub workspace: PathBuf,
}

/// Options for starting the binary.
#[derive(Default)]
pub struct Opts<'a> {
    pub args: &'a [&'a str],
    pub env: &'a [(&'a str, &'a str)],
    /// Reuse another agent's state dir (simulates an adapter restart).
    pub state: Option<PathBuf>,
    pub workspace: Option<PathBuf>,
}

impl Agent {
    pub fn spawn() -> Agent {
        Agent::spawn_with(Opts::default())
    }

    /// Start with `env` added to the isolated environment (`WINX_RUNTIME`, limits, …).
    pub fn spawn_env(env: &[(&str, &str)]) -> Agent {
        Agent::spawn_with(Opts {
            env,
            ..Default::default()
        })
    }

    pub fn spawn_with(opts: Opts) -> Agent {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        let state = opts.state.unwrap_or_else(|| dir.path().join("state"));
        let workspace = opts.workspace.unwrap_or_else(|| {
            let ws = dir.path().join("project");
            std::fs::create_dir_all(&ws).unwrap();
            ws
        });
        let workspace = workspace.canonicalize().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        let stderr = std::fs::File::create(dir.path().join("stderr.log")).unwrap();
        let mut env = isolated_env(&home, &state, &run);
        for (k, v) in opts.env {
            env.retain(|(n, _)| n != k);
            env.push((k.to_string(), v.to_string()));
        }
        let mut cmd = command(&env);
        cmd.args(opts.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        let mut child = cmd.spawn().expect("spawn winx-code-agent");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = unbounded();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Agent {
            env,
            child,
            stdin,
            lines,
            next_id: 1,
            dir,
            home,
            state,
            workspace,
        }
    }

    pub fn ws(&self) -> String {
        self.workspace.to_string_lossy().into_owned()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL the adapter (a crash at whatever point it is) and reap it, so its pid is
    /// provably dead afterwards.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    pub fn send(&mut self, v: &Value) {
        let mut b = serde_json::to_vec(v).unwrap();
        b.push(b'\n');
        self.send_raw(&b);
    }

    /// Next line from stdout, parsed; panics after `HARD_TIMEOUT`.
    pub fn recv(&self) -> Value {
        self.recv_within(HARD_TIMEOUT)
            .expect("no message within the hard timeout")
    }

    pub fn recv_within(&self, d: Duration) -> Option<Value> {
        match self.lines.recv_timeout(d) {
            Ok(line) => Some(
                serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout carried a non-JSON line ({e}): {line:?}")),
            ),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    pub fn fresh_id(&mut self) -> i64 {
        self.next_id += 1;
        self.next_id
    }

    /// Send a request and wait for the answer with the same id.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.fresh_id();
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + HARD_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let msg = self
                .recv_within(left)
                .unwrap_or_else(|| panic!("no answer to {method}"));
            if msg["id"] == json!(id) {
                return msg;
            }
        }
    }

    /// `tools/call`, returning the `result` object (panics on a JSON-RPC error).
    pub fn call(&mut self, tool: &str, args: Value) -> Value {
        let resp = self.request("tools/call", json!({"name": tool, "arguments": args}));
        assert!(resp.get("error").is_none(), "JSON-RPC error: {resp}");
        resp["result"].clone()
    }

    /// `BashCommand` with the session pair from `first`, returning the result object.
    pub fn bash(&mut self, pair: &Value, action: Value) -> Value {
        self.bash_with(pair, action, json!({}))
    }

    /// Run `command` in the background and follow it with a `status_check` of up to 10 s:
    /// that answer (the command has ended unless it runs longer).
    pub fn background_to_end(&mut self, pair: &Value, command: &str) -> Value {
        let r = self.bash(pair, json!({"command": command, "is_background": true}));
        let bg = r["structuredContent"]["data"]["state"]["bg_command_id"].clone();
        assert!(bg.is_string(), "no background command: {r}");
        self.bash_with(
            pair,
            json!({"status_check": true, "bg_command_id": bg}),
            json!({"wait_for_seconds": 10}),
        )
    }

    /// `BashCommand` with extra top-level arguments (wait_for_seconds, wait_policy).
    pub fn bash_with(&mut self, pair: &Value, action: Value, extra: Value) -> Value {
        let mut args = json!({
            "thread_id": pair["data"]["thread_id"],
            "workspace_root": pair["data"]["workspace_root"],
            "action_json": action,
        });
        for (k, v) in extra.as_object().unwrap() {
            args[k] = v.clone();
        }
        self.call("BashCommand", args)
    }

    /// `Initialize first_call` on this agent's workspace; returns the structured envelope.
    pub fn first_call(&mut self) -> Value {
        let ws = self.ws();
        self.call(
            "Initialize",
            json!({"type": "first_call", "workspace_root": ws}),
        )["structuredContent"]
            .clone()
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Wait for the process to exit within `d`: synchronised on stdout closing (the
    /// process closes it only by exiting), then reaped. Lines still unread are dropped.
    pub fn wait_exit(&mut self, d: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + d;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(_) => continue,
                Err(RecvTimeoutError::Disconnected) => return Some(self.child.wait().unwrap()),
                Err(RecvTimeoutError::Timeout) => return None,
            }
        }
    }

    /// Collect every line until stdout closes (within `d`).
    pub fn drain_until_exit(&mut self, d: Duration) -> Vec<Value> {
        let deadline = Instant::now() + d;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => out.push(serde_json::from_str(&l).expect("JSON line")),
                Err(RecvTimeoutError::Disconnected) => return out,
                Err(RecvTimeoutError::Timeout) => panic!("process did not exit in time"),
            }
        }
    }

    /// Run an operator command (`list`, `kill`, …) with this agent's environment.
    pub fn op(&self, args: &[&str]) -> std::process::Output {
        self.op_command(args)
            .stdin(Stdio::null())
            .output()
            .expect("run operator command")
    }

    /// An operator command (`attach --follow`, …) with this agent's environment, to be
    /// started by the caller.
    pub fn op_command(&self, args: &[&str]) -> Command {
        let mut cmd = command(&self.env);
        cmd.args(args);
        cmd
    }

    /// An operator command that must succeed, its stdout parsed as JSON.
    pub fn op_json(&self, args: &[&str]) -> Value {
        let out = self.op(args);
        assert!(
            out.status.success(),
            "{args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e})"))
    }

    pub fn stderr_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr.log")).unwrap_or_default()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        kill_processes_mentioning(self.dir.path());
        if std::env::var_os("WINX_TEST_KEEP_LOGS").is_some() {
            let path = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap()).keep();
            eprintln!("kept test dir {}", path.display());
        }
    }
}

/// The whole environment of a binary a test starts: nothing of the caller's but `PATH`, so
/// a developer's own `WINX_*` settings or runtime directory never leak in.
pub fn isolated_env(home: &Path, state: &Path, run: &Path) -> Vec<(String, String)> {
    let path = |p: &Path| p.to_string_lossy().into_owned();
    vec![
        (
            "PATH".to_string(),
            std::env::var("PATH").unwrap_or_default(),
        ),
        ("HOME".to_string(), path(home)),
        ("WINX_STATE_DIR".to_string(), path(state)),
        ("XDG_RUNTIME_DIR".to_string(), path(run)),
    ]
}

/// The binary with exactly `env` as its environment.
pub fn command(env: &[(String, String)]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.env_clear().envs(env.iter().cloned());
    cmd
}

/// A second adapter on `old`'s state, workspace and runtime directories (so on its winxd
/// and guardians), with `WINX_RUNTIME=rt`: what a client restarting the server starts.
pub fn restart_adapter(old: &Agent, rt: &str) -> Agent {
    Agent::spawn_with(Opts {
        state: Some(old.state.clone()),
        workspace: Some(old.workspace.clone()),
        env: &[
            (
                "XDG_RUNTIME_DIR",
                old.dir.path().join("run").to_str().unwrap(),
            ),
            ("WINX_RUNTIME", rt),
        ],
        ..Default::default()
    })
}

/// The text of a tool result's first content block; panics, showing the result, when it
/// has none.
pub fn text(result: &Value) -> &str {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content in {result}"))
}

/// A tool result's structured envelope (`status`, `errorCode`, `data`, …).
pub fn sc(result: &Value) -> &Value {
    &result["structuredContent"]
}

/// Tool arguments for the session pair of the envelope `first` (from `first_call`), with
/// `extra`'s fields added.
pub fn pair_args(first: &Value, extra: Value) -> Value {
    let mut args = json!({"thread_id": first["data"]["thread_id"],
                          "workspace_root": first["data"]["workspace_root"]});
    for (k, v) in extra.as_object().expect("extra arguments are an object") {
        args[k] = v.clone();
    }
    args
}

/// Run the binary to completion with arguments (for CLI tests).
pub fn run(args: &[&str]) -> std::process::Output {
    Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run winx-code-agent")
}

/// SIGKILL every process whose command line or environment mentions `path` (the winxd
/// and guardians a test started under its private directories), and their process
/// groups. The environment catches a child forked by a dying adapter but not yet exec'd
/// (its command line is still the adapter's: a winxd started in that instant outlived
/// the test once). Passes repeat until one finds nothing, so a process forked while a
/// pass ran is found by the next.
pub fn kill_processes_mentioning(path: &std::path::Path) {
    let needle = path.to_string_lossy().into_owned();
    let mentions = |proc_dir: &std::path::Path, file: &str| {
        std::fs::read(proc_dir.join(file))
            .is_ok_and(|b| String::from_utf8_lossy(&b).contains(&needle))
    };
    for _ in 0..100 {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return;
        };
        let mut found = false;
        for e in entries.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            if pid == std::process::id() as i32 {
                continue;
            }
            if mentions(&e.path(), "cmdline") || mentions(&e.path(), "environ") {
                found = true;
                {
                    use nix::sys::signal::{Signal, kill};
                    let _ = kill(nix::unistd::Pid::from_raw(-pid), Signal::SIGKILL);
                    let _ = kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
                }
            }
        }
        if !found {
            return;
        }
    }
}

/// Pids of live processes whose command line mentions `path`.
pub fn processes_mentioning(path: &std::path::Path) -> Vec<i32> {
    let needle = path.to_string_lossy().into_owned();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // Zombies are already dead; only count running processes.
        if stat
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
        {
            continue;
        }
        if std::fs::read(e.path().join("cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
        {
            out.push(pid);
        }
    }
    out
}

/// The repository root (for test scripts and the venv).
pub fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The venv interpreter with the pinned SDK; panics with instructions when it is missing.
pub fn python() -> PathBuf {
    let hint = "the MCP Python SDK interop tests need the project venv: run `make test` \
                (or `make venv`, then `cargo test`)";
    if let Some(p) = std::env::var_os("WINX_TEST_PYTHON") {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "WINX_TEST_PYTHON={} does not exist; {hint}",
            p.display()
        );
        return p;
    }
    let p = manifest_dir().join("target/venv/bin/python");
    assert!(
        p.is_file(),
        "no Python interpreter for the interop tests: WINX_TEST_PYTHON is unset and {} \
         does not exist; {hint}",
        p.display()
    );
    p
}

/// Each named test function (`fn name(rt: &str)`) runs as three tests: against the daemon
/// runtime (winxd + guardian processes), the embedded one (guardian threads in the
/// adapter), and with zsh as the shell (`"zsh"`; `make test` installs zsh if missing).
#[macro_export]
macro_rules! each_runtime {
    ($($name:ident),* $(,)?) => {
        mod daemon {
            $(#[test] fn $name() { super::$name("daemon") })*
        }
        mod embedded {
            $(#[test] fn $name() { super::$name("embedded") })*
        }
        mod zsh {
            $(#[test] fn $name() { super::$name("zsh") })*
        }
    };
}

/// Like `each_runtime!`, without the zsh variant: for tests where the shell does not
/// matter and each run is costly (the adapter process differs between the two runtimes).
#[macro_export]
macro_rules! both_runtimes {
    ($($name:ident),* $(,)?) => {
        mod daemon {
            $(#[test] fn $name() { super::$name("daemon") })*
        }
        mod embedded {
            $(#[test] fn $name() { super::$name("embedded") })*
        }
    };
}

/// The kernel's Landlock ABI version, or 0 without Landlock (the probe restricts nothing).
pub fn landlock_abi() -> i64 {
    // SAFETY: a null attribute, size 0 and the version flag: the call only returns a number.
    let v = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_landlock_create_ruleset,
            std::ptr::null::<nix::libc::c_void>(),
            0usize,
            1u32,
        )
    };
    v.max(0)
}

/// Whether this kernel has Landlock.
pub fn landlock_available() -> bool {
    landlock_abi() > 0
}
