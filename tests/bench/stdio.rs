//! `cargo bench --bench stdio` (`make bench`): latency and memory of the real
//! `winx-code-agent` release binary over stdio, next to a raw pipe baseline (`cat`)
//! measured in the same run on the same machine.
//!
//! This is a report, not a gate: every figure is printed with its target and PASS/MISS,
//! followed by one JSON line for machines, and the process exits 0 even on a MISS. It
//! panics only when the server misbehaves (wrong or missing answer, non-JSON stdout),
//! because then the figures would be meaningless.
//!
//! Medians and percentiles throughout: shared CI machines are noisy and a mean would be
//! dominated by the occasional descheduled sample.

use crossbeam_channel::{Receiver, RecvTimeoutError, unbounded};
use serde_json::{Value, json};
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "report.rs"]
#[allow(dead_code)]
mod report;
use report::memory_mib;

const BIN: &str = env!("CARGO_BIN_EXE_winx-code-agent");

/// The server under test: `BIN`, or `WINX_BENCH_BIN` (another build, to compare two).
fn bin() -> String {
    std::env::var("WINX_BENCH_BIN").unwrap_or_else(|_| BIN.to_string())
}
/// No single wait may exceed this, so a hung server fails the run instead of blocking it.
const HARD_TIMEOUT: Duration = Duration::from_secs(20);
const STARTUP_RUNS: usize = 50;
const LIST_CALLS: usize = 200;
const TOOL_CALLS: usize = 1_000;
const PIPE_CALLS: usize = 1_000;
/// Unmeasured spawns/calls first, so page-cache and lazy-init effects of the very first
/// use do not land in the samples.
const WARMUP_SPAWNS: usize = 3;
const WARMUP_CALLS: usize = 20;

const STARTUP_TARGET_MS: f64 = 10.0;
/// Issue 18's cheap call: `Initialize` status p50 and p99.
const CALL_P50_TARGET_MS: f64 = 0.2;
const CALL_P99_TARGET_MS: f64 = 0.5;
const RSS_TARGET_MIB: f64 = 8.0;

/// A few files, so `first_call` builds a real (if small) workspace overview.
const WORKSPACE_FILES: [(&str, &str); 4] = [
    ("README.md", "# bench\n\nA tiny workspace.\n"),
    ("Cargo.toml", "[package]\nname = \"bench\"\n"),
    ("src/main.rs", "fn main() {}\n"),
    ("src/lib.rs", "pub fn one() -> i32 {\n    1\n}\n"),
];

/// One temp dir per bench run: HOME, state dir, a small workspace and the children's
/// stderr, so nothing from the developer's real state leaks into (or out of) the run.
struct Sandbox {
    dir: tempfile::TempDir,
    workspace: PathBuf,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = dir.path().join("project");
        std::fs::create_dir_all(ws.join("src")).expect("mkdir workspace");
        std::fs::create_dir_all(dir.path().join("home")).expect("mkdir home");
        // A private runtime dir: the winxd and guardians this run starts are its own and
        // are ended when the sandbox is dropped.
        let run = dir.path().join("run");
        std::fs::create_dir_all(&run).expect("mkdir run");
        std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .expect("chmod run");
        for (name, body) in WORKSPACE_FILES {
            std::fs::write(ws.join(name), body).expect("write workspace file");
        }
        // The server answers with the canonical path; /tmp may be a symlink.
        let workspace = ws.canonicalize().expect("canonicalize workspace");
        Sandbox { dir, workspace }
    }

    /// A command with a minimal, explicit environment (the same for the server and `cat`).
    fn command(&self, program: &str) -> Command {
        let stderr = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("stderr.log"))
            .expect("open stderr log");
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.dir.path().join("home"))
            .env("WINX_STATE_DIR", self.dir.path().join("state"))
            .env("XDG_RUNTIME_DIR", self.dir.path().join("run"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        cmd
    }
}

impl Drop for Sandbox {
    /// End every process whose command line mentions the sandbox (winxd, guardians, shells).
    fn drop(&mut self) {
        let needle = self.dir.path().to_string_lossy().into_owned();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
                continue;
            };
            if String::from_utf8_lossy(&cmdline).contains(&needle) {
                {
                    use nix::sys::signal::{Signal, kill};
                    let _ = kill(nix::unistd::Pid::from_raw(-pid), Signal::SIGKILL);
                    let _ = kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
                }
            }
        }
    }
}

/// A child process with line-oriented stdio. Dropping it kills and reaps the child.
struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Proc {
    /// Spawn and write `first` before anything else, so the startup figure measures the
    /// child, not our own reader-thread setup.
    fn start(mut cmd: Command, first: &[u8]) -> Proc {
        let mut child = cmd.spawn().expect("spawn child");
        let mut stdin = child.stdin.take().expect("piped stdin");
        stdin.write_all(first).expect("write first line");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = unbounded();
        // Detached: it ends by itself when the child's stdout closes (kill or exit).
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = Some(stdin);
        Proc {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write to child");
    }

    fn recv(&self, what: &str) -> String {
        match self.lines.recv_timeout(HARD_TIMEOUT) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!("no answer to {what} in {HARD_TIMEOUT:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("stdout closed before {what}"),
        }
    }

    /// (VmRSS, VmHWM) in MiB, read while the process is still running.
    fn memory_mib(&self) -> (f64, f64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("read /proc/<pid>/status");
        let kib = |key: &str| -> f64 {
            let line = status.lines().find_map(|l| l.strip_prefix(key));
            let n = line.and_then(|rest| rest.split_whitespace().next());
            n.and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no {key} in /proc status"))
        };
        (kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn request_line(id: u64, method: &str, params: Value) -> Vec<u8> {
    let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut line = serde_json::to_vec(&req).expect("serialize request");
    line.push(b'\n');
    line
}

/// Parse an answer and insist it is the successful answer to `id`: timing error paths
/// would report flattering numbers for a broken server.
fn expect_answer(line: &str, id: u64, what: &str) -> Value {
    let v: Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("stdout carried a non-JSON line ({e}): {line:?}"));
    assert_eq!(v["id"], json!(id), "{what}: answer for another id: {line}");
    assert!(v.get("error").is_none(), "{what}: JSON-RPC error: {line}");
    assert_ne!(
        v["result"]["isError"],
        json!(true),
        "{what}: tool error: {line}"
    );
    v
}

/// A JSON-RPC client over one server process, timing each round trip.
struct Client {
    proc: Proc,
    next_id: u64,
}

impl Client {
    /// Start a server and complete the handshake-era lifecycle most clients still use.
    fn start(sb: &Sandbox) -> Client {
        let init = request_line(1, "initialize", initialize_params());
        let mut proc = Proc::start(sb.command(&bin()), &init);
        expect_answer(&proc.recv("initialize"), 1, "initialize");
        proc.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
        Client { proc, next_id: 1 }
    }

    /// One request, timed from the write to the answer line; serialization and parsing
    /// stay outside the timed span. Returns (elapsed, answer bytes, answer).
    fn timed(&mut self, method: &str, params: Value) -> (Duration, usize, Value) {
        self.next_id += 1;
        let id = self.next_id;
        let line = request_line(id, method, params);
        let t = Instant::now();
        self.proc.send(&line);
        let answer = self.proc.recv(method);
        let elapsed = t.elapsed();
        (elapsed, answer.len(), expect_answer(&answer, id, method))
    }
}

fn initialize_params() -> Value {
    json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "winx-bench", "version": "0"}
    })
}

/// The stateless 2026-07-28 revision carries its version in every request's `_meta`.
fn modern_meta() -> Value {
    json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    }})
}

/// Sorted samples; nearest-rank percentiles, so every figure is a real sample (p0 is the
/// minimum, p100 the maximum).
struct Samples(Vec<Duration>);

impl Samples {
    fn new(mut v: Vec<Duration>) -> Samples {
        assert!(!v.is_empty(), "no samples");
        v.sort();
        Samples(v)
    }

    fn pct(&self, p: f64) -> f64 {
        let rank = ((p / 100.0) * self.0.len() as f64).ceil() as usize;
        ms(self.0[rank.clamp(1, self.0.len()) - 1])
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Spawn → write one request → first answer line, `STARTUP_RUNS` times. `id` checks the
/// answer for the server; `cat` just echoes.
fn startup(sb: &Sandbox, program: &str, line: &[u8], id: Option<u64>) -> Samples {
    let mut samples = Vec::with_capacity(STARTUP_RUNS);
    for i in 0..WARMUP_SPAWNS + STARTUP_RUNS {
        let cmd = sb.command(program);
        let t = Instant::now();
        let proc = Proc::start(cmd, line);
        let answer = proc.recv("the startup request");
        let elapsed = t.elapsed();
        if let Some(id) = id {
            expect_answer(&answer, id, "startup");
        }
        drop(proc);
        if i >= WARMUP_SPAWNS {
            samples.push(elapsed);
        }
    }
    Samples::new(samples)
}

/// The raw limit: one request-sized line through two pipes and a process that echoes it.
fn pipe_baseline(sb: &Sandbox) -> Samples {
    let mut cat = Proc::start(sb.command("cat"), b"warmup\n");
    cat.recv("cat warmup");
    let line = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
    let mut samples = Vec::with_capacity(PIPE_CALLS);
    for _ in 0..PIPE_CALLS {
        let t = Instant::now();
        cat.send(line);
        cat.recv("cat echo");
        samples.push(t.elapsed());
    }
    Samples::new(samples)
}

/// Figures in print order: (name, value, unit, target); `value <= target` passes.
#[derive(Default)]
struct Report(Vec<(&'static str, f64, &'static str, Option<f64>)>);

impl Report {
    fn add(&mut self, name: &'static str, value: f64, unit: &'static str, target: Option<f64>) {
        self.0.push((name, value, unit, target));
    }

    fn print(&self) {
        let verdict = |value: f64, target: Option<f64>| target.map(|t| value <= t);
        let rule = "-".repeat(62);
        let header = format!("{:<26} {:>14} {:>12}  result", "figure", "value", "target");
        println!("\n{header}\n{rule}");
        for &(name, value, unit, target) in &self.0 {
            // Counts and byte sizes are integers; times and MiB need the decimals.
            let digits = if matches!(unit, "B" | "") { 0 } else { 3 };
            let value_s = format!("{value:.digits$} {unit}");
            let target_s = target.map_or("-".into(), |t| format!("<= {t} {unit}"));
            let result = match verdict(value, target) {
                Some(true) => "PASS",
                Some(false) => "MISS",
                None => "info",
            };
            println!("{name:<26} {:>14} {target_s:>12}  {result}", value_s.trim());
        }
        let misses: Vec<&str> = (self.0.iter())
            .filter(|r| verdict(r.1, r.3) == Some(false))
            .map(|r| r.0)
            .collect();
        let with_target = self.0.iter().filter(|r| r.3.is_some()).count();
        println!(
            "{rule}\n{with_target} figures with targets, {} MISS",
            misses.len()
        );
        let metrics: serde_json::Map<String, Value> = (self.0.iter())
            .map(|&(name, value, unit, target)| {
                let pass = verdict(value, target);
                let v = json!({"value": value, "unit": unit, "target": target, "pass": pass});
                (name.to_string(), v)
            })
            .collect();
        let all_pass = misses.is_empty();
        let line =
            json!({"bench": "stdio", "metrics": metrics, "misses": misses, "all_pass": all_pass});
        println!("{line}");
    }
}

fn main() {
    // Arguments from `cargo bench` (`--bench`, filters) are ignored: this is one program.
    let sb = Sandbox::new();
    let mut r = Report::default();
    let bin = bin();
    eprintln!("winx stdio bench: {bin}");

    // 1. Cold path: what a client waits for before its first tool call.
    let startup_target = Some(STARTUP_TARGET_MS);
    let init = request_line(1, "initialize", initialize_params());
    let s = startup(&sb, &bin, &init, Some(1));
    r.add("startup.initialize.p50", s.pct(50.0), "ms", startup_target);
    r.add("startup.initialize.p90", s.pct(90.0), "ms", None);
    r.add("startup.initialize.min", s.pct(0.0), "ms", None);
    let discover = request_line(1, "server/discover", modern_meta());
    let s = startup(&sb, &bin, &discover, Some(1));
    r.add("startup.discover.p50", s.pct(50.0), "ms", startup_target);
    r.add("startup.discover.p90", s.pct(90.0), "ms", None);
    r.add("startup.discover.min", s.pct(0.0), "ms", None);
    // Floor for the figures above: fork/exec of a trivial program plus one echo.
    let s = startup(&sb, "cat", b"x\n", None);
    r.add("baseline.cat_startup.p50", s.pct(50.0), "ms", None);

    let mut client = Client::start(&sb);

    // 2. tools/list: its size is paid in every agent's context window.
    let (_, bytes, v) = client.timed("tools/list", json!({}));
    let tools = v["result"]["tools"].as_array().map_or(0, Vec::len);
    r.add("tools_list.bytes", bytes as f64, "B", None);
    r.add("tools_list.tools", tools as f64, "", None);
    let list = (0..LIST_CALLS).map(|_| client.timed("tools/list", json!({})).0);
    let s = Samples::new(list.collect());
    r.add("tools_list.p50", s.pct(50.0), "ms", None);

    // 3. Cheap tool call: the per-call floor of the whole request path (reader, pool,
    //    dispatch, session check, envelope, writer).
    let ws = sb.workspace.to_string_lossy();
    let first = json!({"type": "first_call", "workspace_root": ws});
    let first = json!({"name": "Initialize", "arguments": first});
    let (_, _, v) = client.timed("tools/call", first);
    let data = &v["result"]["structuredContent"]["data"];
    assert!(data["thread_id"].is_string(), "no thread_id: {v}");
    let status = json!({"name": "Initialize", "arguments": {
        "type": "status",
        "thread_id": data["thread_id"],
        "workspace_root": data["workspace_root"],
    }});
    for _ in 0..WARMUP_CALLS {
        client.timed("tools/call", status.clone());
    }
    let calls = (0..TOOL_CALLS).map(|_| client.timed("tools/call", status.clone()).0);
    let calls = Samples::new(calls.collect());
    let call_target = Some(CALL_P50_TARGET_MS);
    r.add("call.status.p50", calls.pct(50.0), "ms", call_target);
    r.add(
        "call.status.p99",
        calls.pct(99.0),
        "ms",
        Some(CALL_P99_TARGET_MS),
    );
    r.add("call.status.max", calls.pct(100.0), "ms", None);

    // 4. Memory after real use, read while the adapter is still alive. VmRSS counts the
    //    binary's shared code pages in full; PSS is the adapter's proportional share and
    //    private what its exit would free.
    let (rss, hwm) = client.proc.memory_mib();
    r.add("adapter.vm_rss", rss, "MiB", Some(RSS_TARGET_MIB));
    r.add("adapter.vm_hwm", hwm, "MiB", Some(RSS_TARGET_MIB));
    let m = memory_mib(client.proc.child.id() as i32).expect("adapter smaps_rollup");
    r.add("adapter.pss", m.pss, "MiB", None);
    r.add("adapter.private", m.private, "MiB", None);

    // 5. `BashCommand` `echo hello` in that session (daemon runtime): the request path of
    //    a shell call, its lane classification and action parse included.
    let echo = json!({"name": "BashCommand", "arguments": {
        "thread_id": data["thread_id"],
        "workspace_root": data["workspace_root"],
        "action_json": {"command": "echo hello"},
    }});
    for _ in 0..WARMUP_CALLS {
        client.timed("tools/call", echo.clone());
    }
    let echoes = (0..TOOL_CALLS).map(|_| {
        let (t, _, v) = client.timed("tools/call", echo.clone());
        let result = &v["result"];
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        let ok = result["structuredContent"]["status"] == "completed" && text.starts_with("hello");
        assert!(ok, "echo: not a completed hello: {v}");
        t
    });
    let echoes = Samples::new(echoes.collect());
    r.add("call.echo.p50", echoes.pct(50.0), "ms", None);
    r.add("call.echo.p99", echoes.pct(99.0), "ms", None);
    drop(client);

    // Same machine, same run: what any line-per-message peer costs at minimum, and how
    // much the server adds on top of it per call.
    let pipe = pipe_baseline(&sb);
    r.add("baseline.cat_pipe.p50", pipe.pct(50.0), "ms", None);
    let overhead = calls.pct(50.0) - pipe.pct(50.0);
    r.add("call.overhead_vs_pipe.p50", overhead, "ms", None);

    r.print();
}
