//! `cargo bench --bench shell` (`make bench`): the `BashCommand` round trip of the real
//! release binaries in both runtimes (daemon: adapter → winxd → forked `winx-guardian`;
//! embedded: the shell lives in the adapter), next to the raw PTY round trip of bash
//! measured in the same run on the same machine, plus the idle memory of winxd and the
//! guardian.
//!
//! This is a report, not a gate: every figure is printed with its target and PASS/MISS,
//! followed by one JSON line for machines, and the process exits 0 even on a MISS. It
//! panics only when the server misbehaves (wrong or missing answer), because then the
//! figures would be meaningless. Medians and percentiles throughout, never means.

use crossbeam_channel::{Receiver, RecvTimeoutError, unbounded};
use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
use serde_json::{Value, json};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "report.rs"]
mod report;
use report::{Report, Samples, vm_rss_mib};

const BIN: &str = env!("CARGO_BIN_EXE_winx-code-agent");
/// No single wait may exceed this, so a hung server fails the run instead of blocking it.
const HARD_TIMEOUT: Duration = Duration::from_secs(20);
const CALLS: usize = 1_000;
/// Unmeasured calls first: the shell's first commands and lazy init stay out of the samples.
const WARMUP_CALLS: usize = 20;

const DAEMON_P50_MS: f64 = 2.0;
const EMBEDDED_P50_MS: f64 = 1.0;
const GUARDIAN_RSS_MIB: f64 = 4.0;
/// While `yes` floods the session's PTY: another call to that guardian (p99), and Ctrl-C
/// reaching the flooding command (issue "Reliability and interoperability", item 1).
const FLOOD_CALL_P99_MS: f64 = 10.0;
const FLOOD_CTRL_C_MS: f64 = 100.0;
/// Calls timed during the flood (each one a guardian `Snapshot` plus `Screen`).
const FLOOD_CALLS: usize = 300;
const WINXD_RSS_MIB: f64 = 4.0;

/// The raw driver's completion marker: the same OSC shape the server's shells print.
const RAW_MARKER: &[u8] = b"\x1b]6973;rawbench;";

/// One temp dir per bench run: HOME, state dirs, a private runtime dir (winxd's socket and
/// the guardians'), the workspace and the children's stderr. Dropping it kills every
/// process that mentions it, so neither a panic nor a detached daemon leaks anything.
struct Sandbox {
    dir: tempfile::TempDir,
    workspace: PathBuf,
}

impl Sandbox {
    fn new() -> Sandbox {
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
    fn server(&self, runtime: &str) -> Command {
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
    fn kill_leftovers(&self) {
        for (pid, _) in procs_mentioning(self.dir.path()) {
            unsafe {
                nix::libc::kill(-pid, nix::libc::SIGKILL);
                nix::libc::kill(pid, nix::libc::SIGKILL);
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
fn procs_mentioning(path: &Path) -> Vec<(i32, Vec<String>)> {
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

/// RSS of the live sandbox processes whose executable is `name` (basename of argv[0]),
/// and whose arguments contain `arg`.
fn rss_of(sb: &Sandbox, name: &str, arg: &str) -> Vec<f64> {
    let procs = procs_mentioning(sb.dir.path()).into_iter();
    let procs = procs.filter(|(_, argv)| {
        let exe = argv.first().map(|a| a.rsplit('/').next().unwrap_or(a));
        exe == Some(name) && argv.iter().any(|a| a.contains(arg))
    });
    let rss: Vec<f64> = procs.filter_map(|(pid, _)| vm_rss_mib(pid)).collect();
    assert!(!rss.is_empty(), "no live {name} mentioning {arg}");
    rss
}

/// A JSON-RPC client over one server process with a reader thread; kill on Drop.
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
}

impl Client {
    fn start(mut cmd: Command) -> Client {
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

    fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write to server");
    }

    /// One request, timed from the write to the answer line; serialization and parsing
    /// stay outside the timed span.
    fn timed(&mut self, method: &str, params: Value) -> (Duration, Value) {
        let (t, id) = self.begin(method, params);
        let v = self.answer(method, id);
        (t.elapsed(), v)
    }

    /// Send a request; its id and when it left.
    fn begin(&mut self, method: &str, params: Value) -> (Instant, u64) {
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
    fn answer(&mut self, method: &str, id: u64) -> Value {
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

    fn rss_mib(&self) -> f64 {
        vm_rss_mib(self.child.id() as i32).expect("adapter VmRSS")
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `Initialize first_call`, then `echo hello` through `BashCommand`: warm-up, then
/// `CALLS` timed calls. Every answer must be a completed `hello`.
fn bash_round_trips(client: &mut Client, ws: &str) -> Samples {
    let first = json!({"type": "first_call", "workspace_root": ws});
    let first = json!({"name": "Initialize", "arguments": first});
    let (_, v) = client.timed("tools/call", first);
    let data = &v["result"]["structuredContent"]["data"];
    assert!(data["thread_id"].is_string(), "no thread_id: {v}");
    let call = json!({"name": "BashCommand", "arguments": {
        "thread_id": data["thread_id"],
        "workspace_root": data["workspace_root"],
        "action_json": {"command": "echo hello"},
    }});
    let mut samples = Vec::with_capacity(CALLS);
    for i in 0..WARMUP_CALLS + CALLS {
        let (elapsed, v) = client.timed("tools/call", call.clone());
        let result = &v["result"];
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        let ok = result["structuredContent"]["status"] == "completed" && text.starts_with("hello");
        assert!(ok, "call {i}: not a completed hello: {v}");
        if i >= WARMUP_CALLS {
            samples.push(elapsed);
        }
    }
    Samples::new(samples)
}

/// What the flood case measured.
struct Flood {
    calls: Samples,
    ctrl_c_reach: Duration,
    ctrl_c_answer: Duration,
}

/// `yes` in the foreground of a fresh daemon session, then `FLOOD_CALLS` `screen` calls
/// to the same guardian, then Ctrl-C: timed until `yes` is gone (the interrupt reached
/// it) and until the call answered (which includes rendering the flood's output, up to
/// a 256 MiB spill file, in the adapter).
fn flood(client: &mut Client, ws: &Path) -> Flood {
    std::fs::create_dir_all(ws).expect("mkdir flood workspace");
    let first = json!({"type": "first_call", "workspace_root": ws});
    let (_, v) = client.timed(
        "tools/call",
        json!({"name": "Initialize", "arguments": first}),
    );
    let data = v["result"]["structuredContent"]["data"].clone();
    let shell = data["shell"]["pid"].as_i64().expect("shell pid") as i32;
    let call = |action: Value, wait: f64| {
        json!({"name": "BashCommand", "arguments": {
            "thread_id": data["thread_id"], "workspace_root": data["workspace_root"],
            "action_json": action, "wait_for_seconds": wait}})
    };
    let (_, v) = client.timed("tools/call", call(json!({"command": "yes"}), 0.3));
    let status = &v["result"]["structuredContent"]["status"];
    assert_eq!(status, "running", "yes did not keep running: {v}");
    let screen = call(json!({"screen": true, "lines": 2}), 0.0);
    let calls = (0..FLOOD_CALLS).map(|_| client.timed("tools/call", screen.clone()).0);
    let calls = Samples::new(calls.collect());
    let yes = child_named(shell, "yes").expect("yes runs under the shell");
    let (t, id) = client.begin(
        "tools/call",
        call(json!({"send_specials": ["Ctrl-c"]}), 10.0),
    );
    while alive(yes) {
        assert!(t.elapsed() < HARD_TIMEOUT, "Ctrl-C never reached yes");
        std::thread::yield_now();
    }
    let ctrl_c_reach = t.elapsed();
    let v = client.answer("tools/call", id);
    let ctrl_c_answer = t.elapsed();
    let code = &v["result"]["structuredContent"]["data"]["exit_code"];
    assert_eq!(code, 130, "Ctrl-C did not end yes: {v}");
    Flood {
        calls,
        ctrl_c_reach,
        ctrl_c_answer,
    }
}

/// (pid, state, ppid) from `/proc/<pid>/stat`, and the command name.
fn stat(pid: i32) -> Option<(String, String, i32)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (open, close) = (s.find('(')?, s.rfind(')')?);
    let mut rest = s[close + 1..].split_whitespace();
    let state = rest.next()?.to_string();
    let ppid = rest.next()?.parse().ok()?;
    Some((s[open + 1..close].to_string(), state, ppid))
}

fn alive(pid: i32) -> bool {
    stat(pid).is_some_and(|(_, state, _)| state != "Z")
}

fn child_named(parent: i32, name: &str) -> Option<i32> {
    let pids = std::fs::read_dir("/proc").into_iter().flatten().flatten();
    let mut pids = pids.filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok());
    pids.find(|&pid| {
        stat(pid).is_some_and(|(comm, s, pp)| comm == name && pp == parent && s != "Z")
    })
}

/// The floor: bash on a raw PTY (no echo, empty prompt, a `PROMPT_COMMAND` printing a
/// marker like the server's), driven directly. Dropping it kills bash and its group.
struct RawBash {
    child: Child,
    master: File,
    chunks: Receiver<Vec<u8>>,
    buf: Vec<u8>,
}

impl RawBash {
    fn start(sb: &Sandbox) -> RawBash {
        let pty = nix::pty::openpty(None, None).expect("openpty");
        // `stty -echo`: the command line must not come back as output.
        let mut tio = tcgetattr(&pty.slave).expect("tcgetattr");
        tio.local_flags.remove(LocalFlags::ECHO);
        tcsetattr(&pty.slave, SetArg::TCSANOW, &tio).expect("tcsetattr");
        for fd in [&pty.master, &pty.slave] {
            fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).expect("set FD_CLOEXEC");
        }
        let slave = || Stdio::from(pty.slave.try_clone().expect("dup slave"));
        let marker = String::from_utf8_lossy(&RAW_MARKER[1..]).into_owned();
        let prompt = format!("printf '\\033{marker}%s;%s\\007' \"$?\" \"$PWD\"");
        let mut cmd = Command::new("bash");
        cmd.args(["--noediting", "--noprofile", "--norc", "-i"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", sb.dir.path().join("home"))
            .env("TERM", "xterm-256color")
            .env("PS1", "")
            .env("PROMPT_COMMAND", prompt)
            .current_dir(&sb.workspace)
            .stdin(slave())
            .stdout(slave())
            .stderr(slave());
        // SAFETY: setsid and ioctl only, between fork and exec: a new session whose
        // controlling terminal is the PTY (stdin is already the slave).
        unsafe {
            cmd.pre_exec(|| {
                nix::libc::setsid();
                nix::libc::ioctl(0, nix::libc::TIOCSCTTY as _, 0);
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn bash");
        drop(cmd);
        drop(pty.slave);
        let mut reader = File::from(pty.master.try_clone().expect("dup master"));
        let (tx, chunks) = unbounded();
        // Ends by itself on EIO once bash (the last slave holder) is gone.
        std::thread::spawn(move || {
            let mut b = [0u8; 4096];
            while let Ok(n @ 1..) = reader.read(&mut b)
                && tx.send(b[..n].to_vec()).is_ok()
            {}
        });
        let mut raw = RawBash {
            child,
            master: File::from(pty.master),
            chunks,
            buf: Vec::new(),
        };
        raw.until_marker(); // the first prompt: bash is ready
        raw
    }

    /// Output before the next complete marker (which is consumed).
    fn until_marker(&mut self) -> Vec<u8> {
        let deadline = Instant::now() + HARD_TIMEOUT;
        loop {
            let start = (self.buf.windows(RAW_MARKER.len())).position(|w| w == RAW_MARKER);
            if let Some(start) = start
                && let Some(bel) = self.buf[start..].iter().position(|&b| b == 0x07)
            {
                let output = self.buf[..start].to_vec();
                self.buf.drain(..start + bel + 1);
                return output;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.chunks.recv_timeout(left) {
                Ok(chunk) => self.buf.extend_from_slice(&chunk),
                Err(e) => panic!("raw bash: no marker in {HARD_TIMEOUT:?} ({e})"),
            }
        }
    }

    fn round_trip(&mut self) -> Duration {
        let t = Instant::now();
        self.master
            .write_all(b"echo hello\n")
            .expect("write to PTY");
        let output = self.until_marker();
        let elapsed = t.elapsed();
        let text = String::from_utf8_lossy(&output);
        assert!(text.starts_with("hello"), "raw bash answered {text:?}");
        elapsed
    }
}

impl Drop for RawBash {
    fn drop(&mut self) {
        unsafe { nix::libc::kill(-(self.child.id() as i32), nix::libc::SIGKILL) };
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn raw_pty_round_trips(sb: &Sandbox) -> Samples {
    let mut bash = RawBash::start(sb);
    for _ in 0..WARMUP_CALLS {
        bash.round_trip();
    }
    Samples::new((0..CALLS).map(|_| bash.round_trip()).collect())
}

/// Sorted samples; nearest-rank percentiles, so every figure is a real sample (p0 is the
/// minimum, p100 the maximum).
fn main() {
    // Arguments from `cargo bench` (`--bench`, filters) are ignored: this is one program.
    let sb = Sandbox::new();
    let mut r = Report::new("shell");
    let dir = sb.dir.path().display();
    eprintln!("winx shell bench: {BIN} (sandbox {dir})");
    let ws = sb.workspace.to_string_lossy().into_owned();

    // 1. Daemon runtime; memory is read right after the run, the adapter still attached.
    let mut client = Client::start(sb.server("daemon"));
    let daemon = bash_round_trips(&mut client, &ws);
    let guardians = rss_of(&sb, "winx-guardian", "/run/winx/g/");
    let winxd = rss_of(&sb, "winxd", "/run/winx/winxd.sock");
    let daemon_adapter = client.rss_mib();
    drop(client);
    // winxd and its guardians outlive the adapter by design: stop them before the next run.
    sb.kill_leftovers();

    let mut client = Client::start(sb.server("embedded"));
    let embedded = bash_round_trips(&mut client, &ws);
    let embedded_adapter = client.rss_mib();
    drop(client);

    // 2. The floor, same machine, same run.
    let raw = raw_pty_round_trips(&sb);

    // 3. A flooding PTY (daemon runtime, a session of its own).
    let mut client = Client::start(sb.server("daemon"));
    let flooded = flood(&mut client, &sb.dir.path().join("flood"));
    drop(client);
    sb.kill_leftovers();

    r.latency("bash.daemon", &daemon, Some(DAEMON_P50_MS));
    r.latency("bash.embedded", &embedded, Some(EMBEDDED_P50_MS));
    r.latency("baseline.raw_pty", &raw, None);
    let ratio = |s: &Samples| s.pct(50.0) / raw.pct(50.0);
    r.add("bash.daemon.vs_raw.p50", ratio(&daemon), "x", None);
    r.add("bash.embedded.vs_raw.p50", ratio(&embedded), "x", None);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    r.add("flood.call.p50", flooded.calls.pct(50.0), "ms", None);
    let p99 = flooded.calls.pct(99.0);
    r.add("flood.call.p99", p99, "ms", Some(FLOOD_CALL_P99_MS));
    let reach = ms(flooded.ctrl_c_reach);
    r.add("flood.ctrl_c.reach", reach, "ms", Some(FLOOD_CTRL_C_MS));
    r.add("flood.ctrl_c.answer", ms(flooded.ctrl_c_answer), "ms", None);

    // 4. Idle memory (the largest guardian, should there be several).
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    r.add(
        "guardian.vm_rss",
        max(&guardians),
        "MiB",
        Some(GUARDIAN_RSS_MIB),
    );
    r.add("guardian.count", guardians.len() as f64, "", None);
    r.add("winxd.vm_rss", max(&winxd), "MiB", Some(WINXD_RSS_MIB));
    r.add("adapter.daemon.vm_rss", daemon_adapter, "MiB", None);
    r.add("adapter.embedded.vm_rss", embedded_adapter, "MiB", None);

    r.print();
    // `sb` drops here: every process still mentioning the sandbox is killed.
}
