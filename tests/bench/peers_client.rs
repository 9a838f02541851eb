//! For `tests/bench/peers.rs` (included with `#[path]`): an MCP stdio client that speaks to
//! any server program (winx, an older winx, wcgw), and the process family each one leaves
//! behind (its daemons, guardians and shells), measured and killed as a whole.
//!
//! The bench process is made a child subreaper, so a daemon that detaches from the server
//! (winxd, its guardians) is re-parented to the bench instead of init: every process a
//! program started stays a descendant of the bench, whatever its command line says.

use super::server::HARD_TIMEOUT;
use crossbeam_channel::{Receiver, RecvTimeoutError, unbounded};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command};
use std::time::{Duration, Instant};

/// The protocol revision offered to every program: the newest one all of them answer.
const PROTOCOL: &str = "2025-06-18";

/// Re-parent orphaned descendants to this process (see the module comment).
pub fn become_subreaper() {
    nix::sys::prctl::set_child_subreaper(true).expect("PR_SET_CHILD_SUBREAPER");
}

/// One line of `/proc/<pid>/stat`: command name, state letter, parent pid.
fn stat(pid: i32) -> Option<(String, char, i32)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (open, close) = (s.find('(')?, s.rfind(')')?);
    let mut rest = s[close + 1..].split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some((s[open + 1..close].to_string(), state, ppid))
}

/// (pid, command name) of every live (not zombie) descendant of this process.
pub fn descendants() -> Vec<(i32, String)> {
    let mut children: HashMap<i32, Vec<(i32, String)>> = HashMap::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Some((comm, state, ppid)) = stat(pid)
            && state != 'Z'
            && state != 'X'
        {
            children.entry(ppid).or_default().push((pid, comm));
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![std::process::id() as i32];
    while let Some(parent) = todo.pop() {
        for (pid, comm) in children.remove(&parent).unwrap_or_default() {
            todo.push(pid);
            out.push((pid, comm));
        }
    }
    out
}

/// VmHWM (peak resident set) in MiB; `None` once the process is gone.
pub fn vm_hwm_mib(pid: i32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().next()?.parse().ok()?;
    Some(kib / 1024.0)
}

/// The peak resident set of every live descendant, by command name (largest first).
pub fn family_hwm() -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = (descendants().into_iter())
        .filter_map(|(pid, comm)| Some((comm, vm_hwm_mib(pid)?)))
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1));
    v
}

/// SIGKILL every descendant and its process group until none is left alive, then reap
/// the zombies re-parented to this process. Call it only when no `Child` handle of the
/// bench is still alive (their owners wait for them on drop).
pub fn kill_family() {
    let deadline = Instant::now() + HARD_TIMEOUT;
    loop {
        let live = descendants();
        if live.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            eprintln!("processes survive SIGKILL: {live:?}");
            break;
        }
        for (pid, _) in live {
            // Descendants of this process: its group, then itself.
            {
                use nix::sys::signal::{Signal, kill};
                let _ = kill(nix::unistd::Pid::from_raw(-pid), Signal::SIGKILL);
                let _ = kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
        std::thread::yield_now();
    }
    // SAFETY: waitpid on our own (dead) children, without blocking.
    // SAFETY: waitpid(2) with a null status pointer writes nothing.
    while unsafe { nix::libc::waitpid(-1, std::ptr::null_mut(), nix::libc::WNOHANG) } > 0 {}
}

/// Kills the whole family when dropped, also when the bench unwinds from a panic.
pub struct FamilyGuard;

impl Drop for FamilyGuard {
    fn drop(&mut self) {
        kill_family();
    }
}

/// A JSON-RPC client over one server process (its own process group); kill on drop.
pub struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
    /// Size of the last answer line, in bytes.
    pub last_bytes: usize,
}

impl Mcp {
    /// Start `cmd` (stdin and stdout piped by the caller) in a process group of its own.
    pub fn spawn(mut cmd: Command) -> Result<Mcp, String> {
        cmd.process_group(0);
        let program = cmd.get_program().to_string_lossy().into_owned();
        let mut child = cmd.spawn().map_err(|e| format!("spawn {program}: {e}"))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = unbounded();
        // Detached: it ends by itself when the child's stdout closes (kill or exit).
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
            let _ = lines.try_for_each(|line| tx.send(line));
        });
        let stdin = child.stdin.take();
        Ok(Mcp {
            child,
            stdin,
            lines,
            next_id: 0,
            last_bytes: 0,
        })
    }

    /// `initialize` and `notifications/initialized`; the server's `serverInfo`.
    pub fn handshake(&mut self) -> Result<Value, String> {
        let info = json!({"name": "winx-bench-peers", "version": "0"});
        let init = json!({"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": info});
        let (_, v) = self.request("initialize", init)?;
        self.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")?;
        Ok(v["serverInfo"].clone())
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("stdin closed")?;
        stdin
            .write_all(bytes)
            .map_err(|e| format!("write to server: {e}"))
    }

    /// One request, timed from the write to its answer line; lines that answer nothing
    /// (notifications, logs) are skipped. Returns the `result`.
    pub fn request(&mut self, method: &str, params: Value) -> Result<(Duration, Value), String> {
        self.next_id += 1;
        let id = self.next_id;
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut line = serde_json::to_vec(&req).expect("serialize request");
        line.push(b'\n');
        let t = Instant::now();
        self.send(&line)?;
        loop {
            let left = HARD_TIMEOUT.saturating_sub(t.elapsed());
            let answer = match self.lines.recv_timeout(left) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!("no answer to {method} in {HARD_TIMEOUT:?}"));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(format!("stdout closed before {method} answered"));
                }
            };
            let elapsed = t.elapsed();
            let Ok(v) = serde_json::from_str::<Value>(&answer) else {
                return Err(format!("non-JSON line on stdout: {answer:.200}"));
            };
            if v["id"] != json!(id) {
                continue;
            }
            self.last_bytes = answer.len();
            if let Some(e) = v.get("error") {
                return Err(format!("{method}: error {e}"));
            }
            return Ok((elapsed, v["result"].clone()));
        }
    }

    /// A `tools/call`; a result marked `isError` is an `Err` with its text.
    pub fn call(&mut self, tool: &str, args: Value) -> Result<(Duration, Value), String> {
        let params = json!({"name": tool, "arguments": args});
        let (elapsed, result) = self.request("tools/call", params)?;
        if result["isError"] == json!(true) {
            return Err(format!("{tool}: isError: {:.300}", text(&result)));
        }
        Ok((elapsed, result))
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        self.stdin = None;
        // SAFETY: kill(2) of the server's own process group (it was made its leader).
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(-(self.child.id() as i32)),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every text block of a tool result, joined.
pub fn text(result: &Value) -> String {
    let blocks = result["content"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let texts = blocks.iter().filter_map(|b| b["text"].as_str());
    texts.collect::<Vec<_>>().join("\n")
}
