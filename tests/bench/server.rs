//! Shared by the bench programs that drive the real server (included with `#[path]`): a
//! sandbox (HOME, state, private runtime dir, workspace; every process mentioning it is
//! killed on drop) and a JSON-RPC client over one server process.
#![allow(dead_code)]

use super::report::{Memory, memory_mib, vm_rss_mib};
use crossbeam_channel::{Receiver, RecvTimeoutError, unbounded};
use serde_json::{Value, json};
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_winx-code-agent");
/// No single wait may exceed this, so a hung server fails the run instead of blocking it.
pub const HARD_TIMEOUT: Duration = Duration::from_secs(20);

/// One temp dir per bench run: HOME, state dirs, a private runtime dir (winxd's socket and
/// the guardians'), the workspace and the children's stderr. Dropping it kills every
/// process that mentions it, so neither a panic nor a detached daemon leaks anything.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
    pub workspace: PathBuf,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = dir.path().join("project");
        std::fs::create_dir_all(&ws).expect("mkdir workspace");
        std::fs::write(ws.join("README.md"), "# bench\n").expect("write workspace file");
        std::fs::create_dir(dir.path().join("home")).expect("mkdir home");
        // XDG_RUNTIME_DIR is used only when ours and private (0700), as in tests/support.
        let run = dir.path().join("run");
        std::fs::create_dir(&run).expect("mkdir run");
        std::fs::set_permissions(&run, PermissionsExt::from_mode(0o700)).expect("chmod run");
        // The server answers with the canonical path; /tmp may be a symlink.
        let workspace = ws.canonicalize().expect("canonicalize workspace");
        Sandbox { dir, workspace }
    }

    /// The server with a minimal, explicit environment; `runtime` is "daemon" (the
    /// default: `WINX_RUNTIME` unset) or "embedded", each with its own state dir.
    pub fn server(&self, runtime: &str) -> Command {
        let stderr = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("stderr.log"))
            .expect("open stderr log");
        let state = self.dir.path().join(format!("state-{runtime}"));
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.dir.path().join("home"))
            .env("WINX_STATE_DIR", state)
            .env("XDG_RUNTIME_DIR", self.dir.path().join("run"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        if runtime == "embedded" {
            cmd.env("WINX_RUNTIME", "embedded");
        }
        cmd
    }

    /// SIGKILL every process whose command line mentions the sandbox (winxd, guardians),
    /// and its process group, like tests/support does.
    pub fn kill_leftovers(&self) {
        for (pid, _) in procs_mentioning(self.dir.path()) {
            {
                use nix::sys::signal::{Signal, kill};
                let _ = kill(nix::unistd::Pid::from_raw(-pid), Signal::SIGKILL);
                let _ = kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.kill_leftovers();
    }
}

/// (pid, argv) of every live process whose command line mentions `path`.
pub fn procs_mentioning(path: &Path) -> Vec<(i32, Vec<String>)> {
    let needle = path.to_string_lossy().into_owned();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let pid = e.file_name().to_string_lossy().parse::<i32>();
        let (Ok(pid), Ok(cmdline)) = (pid, std::fs::read(e.path().join("cmdline"))) else {
            continue;
        };
        let argv: Vec<String> = (cmdline.split(|&b| b == 0))
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if argv.iter().any(|a| a.contains(&needle)) {
            out.push((pid, argv));
        }
    }
    out
}

/// Memory of the live sandbox processes started as `name` (basename of argv[0]), and
/// whose arguments contain `arg`.
pub fn memory_of(sb: &Sandbox, name: &str, arg: &str) -> Vec<Memory> {
    let procs = procs_mentioning(sb.dir.path()).into_iter();
    let procs = procs.filter(|(_, argv)| {
        let exe = argv.first().map(|a| a.rsplit('/').next().unwrap_or(a));
        exe == Some(name) && argv.iter().any(|a| a.contains(arg))
    });
    let found: Vec<Memory> = procs.filter_map(|(pid, _)| memory_mib(pid)).collect();
    assert!(!found.is_empty(), "no live {name} mentioning {arg}");
    found
}

/// The memory of a process tree, summed over its processes (PSS adds up: a page shared by
/// n processes of the tree counts 1/n in each).
#[derive(Clone, Copy, Debug, Default)]
pub struct TreeMemory {
    pub pss: f64,
    pub private: f64,
    /// The PSS of its shells (`bash`), included in `pss`.
    pub shell_pss: f64,
    pub processes: usize,
}

/// The memory of `roots`, of every process mentioning the sandbox (winxd and the guardians,
/// which are not the adapter's descendants) and of all their descendants (the shells).
pub fn tree_memory(sb: &Sandbox, roots: &[i32]) -> TreeMemory {
    let mut tree: std::collections::BTreeSet<i32> = roots.iter().copied().collect();
    tree.extend(
        procs_mentioning(sb.dir.path())
            .into_iter()
            .map(|(pid, _)| pid),
    );
    let parents = parent_pids();
    loop {
        let children: Vec<i32> = (parents.iter())
            .filter(|(pid, ppid)| tree.contains(ppid) && !tree.contains(pid))
            .map(|&(pid, _)| pid)
            .collect();
        if children.is_empty() {
            break;
        }
        tree.extend(children);
    }
    let mut sum = TreeMemory::default();
    for pid in tree {
        let Some(m) = memory_mib(pid) else { continue };
        sum.pss += m.pss;
        sum.private += m.private;
        sum.processes += 1;
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() == "bash" {
            sum.shell_pss += m.pss;
        }
    }
    sum
}

/// (pid, parent pid) of every live process.
fn parent_pids() -> Vec<(i32, i32)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`: comm may hold spaces and parentheses.
        let after = stat.rfind(')').map_or("", |i| &stat[i + 1..]);
        if let Some(ppid) = after.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            out.push((pid, ppid));
        }
    }
    out
}

/// A JSON-RPC client over one server process with a reader thread; kill on Drop.
pub struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
}

impl Client {
    pub fn start(mut cmd: Command) -> Client {
        let mut child = cmd.spawn().expect("spawn winx-code-agent");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = unbounded();
        // Detached: it ends by itself when the child's stdout closes (kill or exit).
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
            let _ = lines.try_for_each(|line| tx.send(line));
        });
        let stdin = child.stdin.take();
        let mut c = Client {
            child,
            stdin,
            lines,
            next_id: 0,
        };
        let info = json!({"name": "winx-bench", "version": "0"});
        let init = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": info});
        c.timed("initialize", init);
        c.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
        c
    }

    pub fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write to server");
    }

    /// One request, timed from the write to the answer line; serialization and parsing
    /// stay outside the timed span.
    pub fn timed(&mut self, method: &str, params: Value) -> (Duration, Value) {
        let (t, id) = self.begin(method, params);
        let v = self.answer(method, id);
        (t.elapsed(), v)
    }

    /// Send a request; its id and when it left.
    pub fn begin(&mut self, method: &str, params: Value) -> (Instant, u64) {
        self.next_id += 1;
        let id = self.next_id;
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut line = serde_json::to_vec(&req).expect("serialize request");
        line.push(b'\n');
        let t = Instant::now();
        self.send(&line);
        (t, id)
    }

    /// The next answer line, which must answer `id` without error.
    pub fn answer(&mut self, method: &str, id: u64) -> Value {
        let answer = match self.lines.recv_timeout(HARD_TIMEOUT) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!("no answer to {method} in {HARD_TIMEOUT:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("stdout closed before {method}"),
        };
        let v: Value = serde_json::from_str(&answer)
            .unwrap_or_else(|e| panic!("stdout carried a non-JSON line ({e}): {answer:?}"));
        let ok = v["id"] == json!(id) && v.get("error").is_none();
        assert!(ok, "{method}: not the answer to {id}: {answer}");
        v
    }

    pub fn rss_mib(&self) -> f64 {
        vm_rss_mib(self.child.id() as i32).expect("adapter VmRSS")
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The adapter's own memory (smaps_rollup).
    pub fn memory(&self) -> Memory {
        memory_mib(self.pid()).expect("adapter smaps_rollup")
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
